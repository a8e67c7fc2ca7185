"""A replicated broker set's Prometheus figures (metricsExporterType=PROM), with a real controller,
NameServer and two brokers on the simulated network under MockClock: the master reports each
slave's lag in bytes and time and its confirmOffset, which advances with sends; the slave reports
the confirmOffset it was told; a slow link shows as lag while a send waits for the slave."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.observe.metrics_exporter import MetricsExporterType
from tests.harness.metrics import Samples, scrape
from tests.harness.replication import Acked, Node, cluster, pair, send, send_many


def gauge(got: Samples, name: str, **labels: str) -> float:
    hits = [v for (n, ls), v in got.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


def has(got: Samples, name: str) -> bool:
    return any(n == name for n, _ in got)


async def metrics(node: Node) -> Samples:
    return await scrape(node.cluster.net, node.b.stats.metrics_addr)


async def test_master_and_slave_report_lag_and_confirm_offset(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 41) as c:
        a, b = await pair(c, metricsExporterType=MetricsExporterType.PROM)
        slave = {"node_id": "broker-a", "slave_id": "2"}
        first = await metrics(a)
        confirm_before = gauge(first, "rocketmq_confirm_offset")
        size_before = gauge(first, "rocketmq_storage_size")
        acked: Acked = {}
        assert await send_many(c, a, 20, "m", acked) == 20
        await trio.sleep(1)  # the slave's ack and the confirmOffset push
        end = a.b.store.message_store.get_commitlog_max_offset()
        got = await metrics(a)
        assert gauge(got, "rocketmq_confirm_offset") == end > confirm_before
        assert gauge(got, "rocketmq_storage_size", storage_type="local") == end
        assert gauge(got, "rocketmq_storage_size") > size_before
        assert gauge(got, "rocketmq_replication_lag_bytes", **slave) == 0
        assert gauge(got, "rocketmq_replication_lag_latency", **slave) == 0
        on_slave = await metrics(b)
        assert gauge(on_slave, "rocketmq_confirm_offset") == end
        assert not has(on_slave, "rocketmq_replication_lag_bytes")
        # a slow link to the slave: while a send waits for it, the master sees it behind
        c.net.set_delay(a.host, b.host, 0.5)
        async with trio.open_nursery() as n:
            n.start_soon(send, c, a, b"slow" * 100, 0)
            await trio.sleep(0.3)
            got = await metrics(a)
        assert gauge(got, "rocketmq_replication_lag_bytes", **slave) > 400
        assert gauge(got, "rocketmq_replication_lag_latency", **slave) >= 250
        c.net.set_delay(a.host, b.host, 0.0)
        await trio.sleep(2)
        got = await metrics(a)
        assert gauge(got, "rocketmq_replication_lag_bytes", **slave) == 0
        assert (
            gauge(got, "rocketmq_confirm_offset")
            == a.b.store.message_store.get_commitlog_max_offset()
        )
