"""deploy/monitoring's Grafana dashboard and Prometheus config against what the processes export.

A controller-mode cluster (a controller, a NameServer, a master and its slave) runs on the
simulated network under MockClock with metricsExporterType=PROM everywhere; after some sends and
a consumer taking them, each process's /metrics is scraped. Every PromQL query of the dashboard
(panels and template variables) must name at least one metric, every metric it names must be one a
process exported, and every label it groups or filters by or shows in its legend must be one its
metrics carry (where the run gave them samples): a renamed or removed metric or label, or a typo
in the dashboard, fails here.
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

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.observe.metrics_exporter import MetricsExporterType
from rocketrio.cli.up_metrics import PROMETHEUS_CONFIG, TARGETS_FILE
from rocketrio.protocol.message import MessageExt
from tests.harness.metrics import CLIENT, GET
from tests.harness.paths import REPO
from tests.harness.replication import NS_HOST, TOPIC, Acked, Cluster, cluster, pair, send_many
from tests.harness.sim_network import SimNetwork

MONITORING = REPO / "deploy" / "monitoring"
DASHBOARD = MONITORING / "grafana-dashboard.json"
PROM = MetricsExporterType.PROM
NS_METRICS_PORT = 5560
CONSUMER_HOST = "10.0.9.2"
PROMETHEUS_LABELS = frozenset({"instance", "job"})  # added by Prometheus to every series

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


def label_names(expr: str, legend: str = "") -> set[str]:
    """The labels a query groups or filters by, and those its legend shows."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    names = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
    for group in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", text):
        names.update(n.strip() for n in group.split(",") if n.strip())
    for matchers in re.findall(r"\{([^}]*)\}", text):
        names.update(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers))
    return names


def dashboard_queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(where, PromQL, legend) for every panel target and every query template variable."""
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            where = f"panel {panel['title']!r} {target['refId']}"
            yield where, target["expr"], target.get("legendFormat", "")
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]
            text = query["query"] if isinstance(query, dict) else query
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", text.strip())
            yield f"variable {var['name']!r}", inner.group(1) if inner else text, ""


def exported_labels(exposition: str) -> dict[str, set[str]]:
    """Series name -> the label names its samples carry (series with samples only)."""
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


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


async def consume(c: Cluster, count: int) -> None:
    """A push consumer of group G takes ``count`` messages of the topic and commits them."""
    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    config = ClientConfig(clientIP=CONSUMER_HOST, instanceName="dash")
    consumer = PushConsumer(
        "G", c.namesrv_addr, transport=c.net.transport(CONSUMER_HOST), client_config=config,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )  # fmt: skip
    consumer.subscribe(TOPIC)
    consumer.register_listener(listener)
    async with consumer:
        with trio.fail_after(60):
            while len(got) < count:
                await trio.sleep(0.1)
        await trio.sleep(6)  # offsets committed to the broker


def test_metric_names_of_a_query() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, node_type) (rate(rocketmq_rpc_latency_bucket"
        '{cluster=~"$cluster", x="a{b}"}[$__rate_interval]))) / on (x) group_left count(role == 3)'
    )
    assert metric_names(expr) == {"rocketmq_rpc_latency_bucket", "role"}
    assert metric_names("sum(rate(request_total[5m])) or vector(0)") == {"request_total"}
    assert label_names(expr, "{{node_type}} {{ q }}") == {"le", "node_type", "cluster", "x", "q"}


async def test_every_dashboard_query_names_an_exported_metric(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    queries = list(dashboard_queries(dashboard))
    assert len(queries) >= 15
    exported: set[str] = set()
    labels: dict[str, set[str]] = {}
    async with cluster(
        tmp_path,
        29,
        controller_overrides={"metricsExporterType": PROM},
        namesrv_overrides={"metricsExporterType": PROM, "metricsPromExporterPort": NS_METRICS_PORT},
    ) as c:
        a, b = await pair(c, metricsExporterType=PROM)
        acked: Acked = {}
        assert await send_many(c, a, 10, "m", acked) == 10
        await consume(c, 10)  # messages out, and a group with committed offsets (its lag)
        controller = c.controllers["n0"]
        addrs = [a.b.stats.metrics_addr, b.b.stats.metrics_addr, controller.metrics_addr]
        addrs.append(f"{NS_HOST}:{NS_METRICS_PORT}")
        for addr in addrs:
            assert addr
            text = await scrape_text(c.net, addr)
            exported |= exported_names(text)
            for name, found in exported_labels(text).items():
                labels.setdefault(name, set()).update(found)
    missing: dict[str, list[str]] = {}
    unknown_labels: dict[str, list[str]] = {}
    for where, expr, legend in queries:
        names = metric_names(expr)
        assert names, f"{where} names no metric: {expr}"
        if names - exported:
            missing[where] = sorted(names - exported)
        # a label the query groups, filters or names in its legend must be one of its metrics'
        # (checked where the run gave the metric samples: no election ran, say)
        seen = [labels[n] for n in names if n in labels]
        if seen:
            known = set().union(*seen) | PROMETHEUS_LABELS
            if bad := label_names(expr, legend) - known:
                unknown_labels[where] = sorted(bad)
    assert not missing, f"queries naming metrics no process exports: {missing}"
    assert not unknown_labels, f"labels none of the query's metrics carry: {unknown_labels}"
    checked = {n for _, e, _ in queries for n in metric_names(e) if n in labels}
    assert {"rocketmq_consumer_lag_messages", "rocketmq_messages_out_total"} <= checked
    # what the issue asks the dashboard to show
    everything = set().union(*(metric_names(e) for _, e, _ in queries))
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
