"""deploy/monitoring's Grafana dashboard and Prometheus config against what the processes export.

A controller-mode cluster (a controller, a NameServer, a master and its slave) runs on the
simulated network under MockClock with metricsExporterType=PROM everywhere; after some sends,
each process's /metrics is scraped. Every PromQL query of the dashboard (panels and template
variables) must name at least one metric, and every metric it names must be one a process
exported: a renamed or removed metric, or a typo in the dashboard, fails here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio
import trio.testing
from prometheus_client.parser import text_string_to_metric_families

from rocketrio.actors.observe.metrics_exporter import MetricsExporterType
from rocketrio.cli.up_metrics import PROMETHEUS_CONFIG, TARGETS_FILE
from tests.harness.metrics import CLIENT, GET
from tests.harness.paths import REPO
from tests.harness.replication import NS_HOST, Acked, cluster, pair, send_many
from tests.harness.sim_network import SimNetwork

MONITORING = REPO / "deploy" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
PROM = MetricsExporterType.PROM
NS_METRICS_PORT = 5560

# PromQL words that are not metric names (aggregations and functions are followed by "(")
_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "and",
                       "or", "unless", "bool", "offset", "inf", "nan"})  # fmt: skip
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
             "summary": ("_sum", "_count")}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (Grafana's $variables taken as literals)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, regexes)
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"\$\w+", " ", text)  # Grafana variables ($__rate_interval, $cluster)
    names = set()
    for m in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)(\s*\()?", text):
        name, call = m.group(1), m.group(2)
        if not call and name.lower() not in _KEYWORDS:
            names.add(name)
    return names


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query template variable."""
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]
            text = query["query"] if isinstance(query, dict) else query
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", text.strip())
            yield f"variable {var['name']!r}", inner.group(1) if inner else text


def exported_names(exposition: str) -> set[str]:
    """Every series name an exposition text offers, including families with no sample yet
    (an election counter before the first election)."""
    names = set()
    for family in text_string_to_metric_families(exposition):
        names.add(family.name)
        names.update(family.name + s for s in _SUFFIXES.get(family.type, ()))
        names.update(sample.name for sample in family.samples)
    return names


async def scrape_text(net: SimNetwork, addr: str) -> str:
    stream = await net.transport(CLIENT).connect(addr)
    async with stream:
        await stream.send_all(GET)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), (addr, head)
    return body.decode()


def test_metric_names_of_a_query() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, node_type) (rate(rocketmq_rpc_latency_bucket"
        '{cluster=~"$cluster", x="a{b}"}[$__rate_interval]))) / on (x) group_left count(role == 3)'
    )
    assert metric_names(expr) == {"rocketmq_rpc_latency_bucket", "role"}
    assert metric_names("sum(rate(request_total[5m])) or vector(0)") == {"request_total"}


async def test_every_dashboard_query_names_an_exported_metric(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = list(dashboard_queries(dashboard))
    assert len(queries) >= 15
    exported: set[str] = set()
    async with cluster(
        tmp_path,
        29,
        controller_overrides={"metricsExporterType": PROM},
        namesrv_overrides={"metricsExporterType": PROM, "metricsPromExporterPort": NS_METRICS_PORT},
    ) as c:
        a, b = await pair(c, metricsExporterType=PROM)
        acked: Acked = {}
        assert await send_many(c, a, 10, "m", acked) == 10
        await trio.sleep(1)  # the slave's ack and the confirmOffset push
        controller = c.controllers["n0"]
        addrs = [a.b.stats.metrics_addr, b.b.stats.metrics_addr, controller.metrics_addr]
        addrs.append(f"{NS_HOST}:{NS_METRICS_PORT}")
        for addr in addrs:
            assert addr
            exported |= exported_names(await scrape_text(c.net, addr))
    missing = {}
    for where, expr in queries:
        names = metric_names(expr)
        assert names, f"{where} names no metric: {expr}"
        if names - exported:
            missing[where] = sorted(names - exported)
    assert not missing, f"queries naming metrics no process exports: {missing}"
    # what the issue asks the dashboard to show
    everything = set().union(*(metric_names(e) for _, e in queries))
    for metric in (
        "rocketmq_messages_in_total",
        "rocketmq_consumer_lag_messages",
        "rocketmq_replication_lag_bytes",
        "rocketmq_confirm_offset",
        "rocketmq_rpc_latency_bucket",
        "role",
        "election_total",
    ):
        assert metric in everything, metric


def test_the_prometheus_config_scrapes_the_targets_file_up_writes() -> None:
    text = (MONITORING / PROMETHEUS_CONFIG).read_text()
    assert re.search(r"^\s*metrics_path: /metrics$", text, re.M)
    assert re.search(rf"^\s*- {re.escape(TARGETS_FILE)}$", text, re.M)
