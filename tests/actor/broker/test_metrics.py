"""The broker's Prometheus endpoint (metricsExporterType=PROM): GET /metrics returns exposition
text with upstream's metric names and labels, and the counters move with traffic; anything
but GET /metrics is refused with its status; the exporter is off by default."""

from __future__ import annotations

from typing import Any

import pytest
import structlog
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import MetricsExporterType
from rocketrio.actors.observe.metrics_http import response_for
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUBSCRIPTION
from tests.harness.broker import BROKER_HOST, CLIENT_HOST, harness, messages
from tests.harness.metrics import one, samples
from tests.harness.sim_network import SimNetwork

PROM = {"metricsExporterType": MetricsExporterType.PROM}


async def http_get(net: SimNetwork, addr: str, request: bytes) -> tuple[int, bytes]:
    stream = await net.transport(CLIENT_HOST).connect(addr)
    async with stream:
        await stream.send_all(request)
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def test_metrics_have_upstream_names_and_move_with_traffic(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, **PROM) as h:
        assert h.broker is not None
        addr = h.broker.stats.metrics_addr
        assert addr == f"{BROKER_HOST}:5557"
        get = b"GET /metrics HTTP/1.1\r\nHost: broker\r\n\r\n"
        status, body = await http_get(h.net, addr, get)
        assert status == 200
        before = samples(body.decode())
        node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
        assert one(before, "rocketmq_topic_number", **node) >= 1
        for _ in range(3):
            assert (await h.send("Orders", b"x" * 100, queue_id=0)).code == ResponseCode.SUCCESS
        resp = await h.pull("Orders", 0, 0, group="billing")
        assert len(messages(resp)) == 3
        # the group commits offset 1 of queue 0: two messages behind
        await h.pull(
            "Orders", 0, 3, group="billing",
            flags=PULL_FLAG_SUBSCRIPTION | PULL_FLAG_COMMIT_OFFSET, commit_offset=1,
        )  # fmt: skip
        status, body = await http_get(h.net, addr, get)
        after = samples(body.decode())
        topic = {**node, "topic": "Orders", "is_system": "false"}
        assert one(after, "rocketmq_messages_in_total", **topic, message_type="normal") == 3
        assert one(after, "rocketmq_throughput_in_total", **topic) > 300  # bodies + headers
        out = {**topic, "consumer_group": "billing", "is_retry": "false"}
        assert one(after, "rocketmq_messages_out_total", **out) == 3
        assert one(after, "rocketmq_throughput_out_total", **out) > 300
        assert one(after, "rocketmq_consumer_lag_messages", **out) == 2
        assert one(after, "rocketmq_consumer_group_number", **node) >= 1
        # the store and the remoting layer
        disk = {**node, "storage_type": "local", "storage_medium": "disk"}
        grown = one(after, "rocketmq_storage_size", **disk) - one(
            before, "rocketmq_storage_size", **disk
        )
        assert grown > 300  # three stored messages of 100-byte bodies
        assert one(after, "rocketmq_confirm_offset", **node) > 0  # a standalone master's end

        def answered(got: dict[tuple[str, tuple[tuple[str, str], ...]], float], code: str) -> float:
            return sum(
                v
                for (n, ls), v in got.items()
                if n == "rocketmq_rpc_latency_count"
                and dict(ls).get("request_code") == code
                and dict(ls).get("node_id") == "broker-a"
            )

        sends = [c for (n, ls), _ in after.items() for k, c in ls if k == "request_code"]
        send_code = next(c for c in sends if c.startswith("send_message"))
        assert answered(after, send_code) - answered(before, send_code) == 3
        assert answered(after, "pull_message") - answered(before, "pull_message") == 2
        # only GET/HEAD /metrics
        status, _ = await http_get(h.net, addr, b"GET / HTTP/1.1\r\nHost: b\r\n\r\n")
        assert status == 404
        status, _ = await http_get(h.net, addr, b"POST /metrics HTTP/1.1\r\nHost: b\r\n\r\n")
        assert status == 405
        status, _ = await http_get(h.net, addr, b"NOT HTTP AT ALL\r\n\r\n")
        assert status == 400


async def test_no_metrics_endpoint_by_default(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        assert h.broker is not None and h.broker.stats.metrics_addr == ""
        with pytest.raises(OSError):
            await h.net.transport(CLIENT_HOST).connect(f"{BROKER_HOST}:5557")


def test_only_get_metrics_is_served() -> None:
    def render() -> bytes:
        return b"x 1\n"

    assert response_for(b"GET", b"/metrics", render) == (200, b"x 1\n")
    assert response_for(b"GET", b"/metrics?name[]=x", render) == (200, b"x 1\n")
    assert response_for(b"DELETE", b"/metrics", render)[0] == 405
    assert response_for(b"GET", b"/metrics/../x", render)[0] == 404


def test_a_collector_that_raises_fails_the_scrape_not_the_server() -> None:
    def broken() -> bytes:
        raise KeyError("gone")

    with structlog.testing.capture_logs() as logs:
        status, body = response_for(b"GET", b"/metrics", broken)
    assert status == 500 and b"KeyError" in body
    assert [e["event"] for e in logs] == ["metrics_collect_failed"]
