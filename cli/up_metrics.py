"""`rocketrio up`'s Prometheus endpoints: on for every process it starts, unless ``--no-metrics``.

Every NameServer, controller and broker of the plan (a container's brokers too: each serves its
own) gets upstream's keys ``metricsExporterType=PROM``, ``metricsPromExporterHost`` and
``metricsPromExporterPort``, the port one the system had free when `up` started (`free_ports`),
so two clusters on one machine never fight over upstream's default 5557. A NameServer with an
embedded controller serves both from its one port. The proxy has no exporter.

`up` then writes ``<dir>/prometheus.yml`` (deploy/monitoring/prometheus.yml, which scrapes the
targets of the file next to it) and ``<dir>/prometheus-targets.json`` (Prometheus' file_sd
format: one target per process, labelled with its process name and role), and prints each URL.
`with_metrics` and `targets_json` are pure; `free_ports` and `write_prometheus_files` do the I/O.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterable

import attrs

from rocketrio.cli.up_plan import PlanError, PortUse, ProcSpec, templates_root

EXPORTING_ROLES = frozenset({"namesrv", "controller", "broker"})
PORT_KEY = "metricsPromExporterPort"
PROMETHEUS_CONFIG = "prometheus.yml"
TARGETS_FILE = "prometheus-targets.json"


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


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports the system has free on ``host`` now (all bound at once, then closed,
    so no two are the same)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


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
