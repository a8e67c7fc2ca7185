"""`rocketrio up`'s Prometheus endpoints: on for every process it starts, unless ``--no-metrics``.

Every NameServer, controller and broker of the plan (a container's brokers too: each serves its
own) gets upstream's keys ``metricsExporterType=PROM``, ``metricsPromExporterHost`` and
``metricsPromExporterPort``, a port the system had free when `up` started (`free_ports`: below
the ephemeral range, none of the plan's own), so two clusters on one machine never fight over
upstream's default 5557. A NameServer with an embedded controller serves both from its one port.
The proxy has no exporter.

`up` then writes ``<dir>/prometheus.yml`` (deploy/monitoring/prometheus.yml, which scrapes the
targets of the file next to it) and ``<dir>/prometheus-targets.json`` (Prometheus' file_sd
format: one target per process, labelled with its process name and role), and prints each URL.
`with_metrics` and `targets_json` are pure; `free_ports` and `write_prometheus_files` do the I/O.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterable

import attrs

from rocketrio.cli.up_checks import port_busy
from rocketrio.cli.up_plan import PlanError, PortUse, ProcSpec, templates_root

EXPORTING_ROLES = frozenset({"namesrv", "controller", "broker"})
PORT_KEY = "metricsPromExporterPort"
PROMETHEUS_CONFIG = "prometheus.yml"
TARGETS_FILE = "prometheus-targets.json"
METRICS_PORT_FIRST = 20000  # free ports for /metrics are drawn from here to the ephemeral range


def exporting(specs: Iterable[ProcSpec]) -> list[ProcSpec]:
    """The specs that serve /metrics under `up` (brokers inside a container included)."""
    return [s for s in specs if s.role in EXPORTING_ROLES]


def with_metrics(specs: list[ProcSpec], host: str, ports: Iterable[int]) -> list[ProcSpec]:
    """``specs`` with the exporter on, the i-th exporting spec on the i-th of ``ports``;
    PlanError when there are fewer ports than exporters or a port is already in the plan."""
    taken = {u.port: u for s in specs for u in s.listens}
    free = iter(ports)
    out: list[ProcSpec] = []
    for s in specs:
        if s.role not in EXPORTING_ROLES:
            out.append(s)
            continue
        port = next(free, None)
        if port is None:
            raise PlanError("not enough free ports for every process's /metrics")
        if (other := taken.get(port)) is not None:
            raise PlanError(f"metrics port {port} is already {other.owner}'s {other.what}")
        extra = {
            "metricsExporterType": "PROM",
            "metricsPromExporterHost": host,
            PORT_KEY: str(port),
        }
        text = s.text + "# up: Prometheus metrics at /metrics (up --no-metrics turns this off)\n"
        text += "".join(f"{k}={v}\n" for k, v in extra.items())
        use = PortUse(port, s.name, PORT_KEY)
        taken[port] = use
        out.append(
            attrs.evolve(s, config={**s.config, **extra}, text=text, listens=(*s.listens, use))
        )
    return out


def metrics_url(spec: ProcSpec) -> str:
    return f"http://{spec.config['metricsPromExporterHost']}:{spec.config[PORT_KEY]}/metrics"


def targets_json(specs: Iterable[ProcSpec]) -> str:
    """Prometheus file_sd targets of every exporting spec of ``specs`` (after `with_metrics`)."""
    groups = [
        {
            "targets": [f"{s.config['metricsPromExporterHost']}:{s.config[PORT_KEY]}"],
            "labels": {"rocketrio_process": s.name, "rocketrio_role": s.role},
        }
        for s in exporting(specs)
        if PORT_KEY in s.config
    ]
    return json.dumps(groups, indent=2) + "\n"


def ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The first port the system hands out for bind(0) and outgoing connections (32768 if it
    cannot be read)."""
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(
    n: int,
    host: str = "127.0.0.1",
    *,
    taken: Iterable[int] = (),
    rng: random.Random | None = None,
    is_busy: Callable[[str, int], str | None] = port_busy,
) -> list[int]:
    """``n`` distinct ports free on ``host`` now, none of ``taken``, drawn from
    `METRICS_PORT_FIRST` up to the system's ephemeral range: a port there is not handed to an
    outgoing connection in the moments before the process that gets it listens. PlanError if
    not enough are free."""
    rng = rng or random.Random()
    candidates = list(range(METRICS_PORT_FIRST, max(METRICS_PORT_FIRST + 1, ephemeral_low())))
    rng.shuffle(candidates)
    skip = set(taken)
    out: list[int] = []
    for port in candidates:
        if len(out) == n:
            break
        if port not in skip and is_busy(host, port) is None:
            out.append(port)
            skip.add(port)
    if len(out) < n:
        raise PlanError(f"only {len(out)} of {n} free ports for /metrics on {host}")
    return out


def write_prometheus_files(specs: Iterable[ProcSpec], base_dir: str) -> str:
    """``<dir>/prometheus.yml`` and its targets file; returns the config's path."""
    template = (templates_root() / "monitoring" / PROMETHEUS_CONFIG).read_text("utf-8")
    path = os.path.join(base_dir, PROMETHEUS_CONFIG)
    with open(path, "w", encoding="utf-8") as f:
        f.write(template)
    with open(os.path.join(base_dir, TARGETS_FILE), "w", encoding="utf-8") as f:
        f.write(targets_json(specs))
    return path


def metrics_lines(specs: Iterable[ProcSpec], prometheus_config: str) -> list[str]:
    """What `up` prints under the console's URL."""
    lines = [
        f"  metrics {metrics_url(s)}  ({s.name})" for s in exporting(specs) if PORT_KEY in s.config
    ]
    if lines:
        lines.append(f"  prometheus --config.file {prometheus_config}  (scrapes all of them)")
    return lines
