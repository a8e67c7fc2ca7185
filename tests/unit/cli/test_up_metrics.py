"""`rocketrio up`'s metrics plan (cli/up_metrics.py): every NameServer, controller and broker of
every mode gets upstream's exporter keys on its own port, the configs still load as the roles
load them (with the exporter on), ports are never shared, and the targets file lists them."""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path
from typing import Any

import pytest

from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.embedded import load_namesrv_configs
from rocketrio.actors.observe.metrics_exporter import MetricsExporterType
from rocketrio.cli.main import broker_config, build_parser
from rocketrio.cli.up_metrics import (
    METRICS_PORT_FIRST,
    PORT_KEY,
    ephemeral_low,
    exporting,
    free_ports,
    metrics_lines,
    targets_json,
    with_metrics,
    write_prometheus_files,
)
from rocketrio.cli.up_plan import MODES, Layout, PlanError, plan, proxy_spec
from rocketrio.protocol.config import load_config


def _load(role: str, path: str) -> Any:
    """The config a role's process loads from ``path`` (`rocketrio <role> -c path`)."""
    if role == "namesrv":
        return load_namesrv_configs(path)[0]
    if role == "broker":
        return broker_config(build_parser().parse_args(["broker", "-c", path]))
    return load_config(ControllerConfig, path)


def _ports(n: int, first: int = 31000) -> list[int]:
    return list(range(first, first + n))


@pytest.mark.parametrize("mode", MODES)
def test_every_exporting_process_gets_its_own_port_and_loads_with_the_exporter_on(
    mode: str, tmp_path: Path
) -> None:
    specs = plan(mode, Layout(str(tmp_path), namesrv_port=21000, broker_port=21100))
    specs.append(proxy_spec(specs, "127.0.0.1", 21300, str(tmp_path)))
    n = len(exporting(specs))
    assert n == sum(s.role in ("namesrv", "controller", "broker") for s in specs) >= 2
    out = with_metrics(specs, "127.0.0.1", _ports(n))
    ports = [int(s.config[PORT_KEY]) for s in exporting(out)]
    assert sorted(ports) == _ports(n)
    all_listens = [u.port for s in out for u in s.listens]
    assert len(all_listens) == len(set(all_listens))
    proxy = next(s for s in out if s.role == "proxy")
    assert PORT_KEY not in proxy.config  # the proxy has no exporter
    for s in out:
        if s.role == "proxy" or s.role == "container":
            continue
        path = tmp_path / f"{s.name}.conf"
        path.write_text(s.text)
        config = _load(s.role, str(path))
        assert config.metricsExporterType is MetricsExporterType.PROM
        assert config.metricsPromExporterPort == int(s.config[PORT_KEY])


def test_a_port_of_the_plan_or_too_few_ports_is_refused(tmp_path: Path) -> None:
    specs = plan("single", Layout(str(tmp_path), namesrv_port=21000, broker_port=21100))
    with pytest.raises(PlanError, match="metrics port 21100 is already broker-a's listenPort"):
        with_metrics(specs, "127.0.0.1", [31000, 21100])
    with pytest.raises(PlanError, match="not enough free ports"):
        with_metrics(specs, "127.0.0.1", [31000])
    with pytest.raises(PlanError, match="metrics port 31000 is already namesrv's"):
        with_metrics(specs, "127.0.0.1", [31000, 31000])


def test_targets_file_and_lines_list_every_exporter(tmp_path: Path) -> None:
    specs = plan("controller", Layout(str(tmp_path)))
    out = with_metrics(specs, "127.0.0.1", _ports(len(exporting(specs))))
    groups = json.loads(targets_json(out))
    got = {g["labels"]["rocketrio_process"]: g["targets"] for g in groups}
    assert got == {s.name: [f"127.0.0.1:{s.config[PORT_KEY]}"] for s in exporting(out)}
    config = write_prometheus_files(out, str(tmp_path))
    assert "prometheus-targets.json" in Path(config).read_text()
    assert json.loads((tmp_path / "prometheus-targets.json").read_text()) == groups
    lines = metrics_lines(out, config)
    assert lines[0] == "  metrics http://127.0.0.1:31000/metrics  (namesrv)"
    assert lines[-1] == f"  prometheus --config.file {config}  (scrapes all of them)"
    assert metrics_lines(specs, config) == []  # --no-metrics: nothing to print


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low = ephemeral_low()
    ports = free_ports(8, taken=[20001])
    assert len(set(ports)) == 8 and 20001 not in ports
    assert all(METRICS_PORT_FIRST <= p < max(low, METRICS_PORT_FIRST + 1) for p in ports)
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_busy_and_taken_ports_are_skipped_and_too_few_is_a_plan_error() -> None:
    busy = set(range(METRICS_PORT_FIRST, METRICS_PORT_FIRST + 5000))

    def is_busy(host: str, port: int) -> str | None:
        return "already in use" if port in busy else None

    ports = free_ports(3, taken=[25000], rng=random.Random(7), is_busy=is_busy)
    assert len(set(ports)) == 3 and not (set(ports) & (busy | {25000}))
    with pytest.raises(PlanError, match="only 0 of 2 free ports"):
        free_ports(2, is_busy=lambda host, port: "already in use")
