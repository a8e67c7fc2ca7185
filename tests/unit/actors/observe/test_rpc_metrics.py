"""rocketmq_rpc_latency's pure core (actors/observe/rpc_metrics.py): upstream's buckets, labels
and lower-case code names, one family per process.
"""

from __future__ import annotations

from rocketrio.actors.observe.rpc_metrics import (
    BUCKETS_MS,
    Outcome,
    RpcLatency,
    RpcLatencyCollector,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from tests.harness.metrics import collect, pick


def test_upstream_buckets_are_the_rpc_cost_time_buckets() -> None:
    assert BUCKETS_MS == (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)


def test_rpc_latency_buckets_truncate_to_whole_ms_and_bounds_are_inclusive() -> None:
    lat = RpcLatency()
    send, ok = int(RequestCode.SEND_MESSAGE), int(ResponseCode.SUCCESS)
    # 0.4 ms and 1.9 ms are 0 and 1 whole ms: both in le=1; 2 ms in le=3; 3 ms in le=3;
    # 150 ms in le=1000; 3.5 s above every bound
    for s in (0.0004, 0.0019, 0.002, 0.003, 0.150, 3.5):
        lat.observe(send, ok, Outcome.SUCCESS, s)
    (series,) = lat.series()
    assert series.buckets == (2, 2, 0, 0, 0, 0, 1, 0, 0, 1)
    assert series.sum_ms == 0 + 1 + 2 + 3 + 150 + 3500
    assert series.count == 6


def test_rpc_latency_family_has_upstream_labels_and_cumulative_buckets() -> None:
    lat = RpcLatency()
    lat.observe(RequestCode.SEND_MESSAGE, ResponseCode.SUCCESS, Outcome.SUCCESS, 0.002)
    lat.observe(RequestCode.SEND_MESSAGE, ResponseCode.SUCCESS, Outcome.SUCCESS, 0.050)
    lat.observe_all([(RequestCode.PULL_MESSAGE, ResponseCode.SUCCESS, Outcome.LONG_POLLING)], 2.5)
    lat.observe(RequestCode.SEND_MESSAGE, ResponseCode.SYSTEM_BUSY, Outcome.ONEWAY, 0)
    lat.observe(4242, 4343, Outcome.WRITE_CHANNEL_FAILED, 0)
    node = {"cluster": "c", "node_type": "broker", "node_id": "broker-a"}
    got = collect(RpcLatencyCollector([(node, lat)]))
    send = {
        **node,
        "protocol_type": "remoting",
        "request_code": "send_message",
        "response_code": "success",
        "is_long_polling": "false",
        "result": "success",
    }
    assert pick(got, "rocketmq_rpc_latency_bucket", **send, le="1.0") == 0
    assert pick(got, "rocketmq_rpc_latency_bucket", **send, le="3.0") == 1
    assert pick(got, "rocketmq_rpc_latency_bucket", **send, le="100.0") == 2
    assert pick(got, "rocketmq_rpc_latency_bucket", **send, le="+Inf") == 2
    assert pick(got, "rocketmq_rpc_latency_count", **send) == 2
    assert pick(got, "rocketmq_rpc_latency_sum", **send) == 52
    pull = {"request_code": "pull_message", "is_long_polling": "true", "result": "success"}
    assert pick(got, "rocketmq_rpc_latency_bucket", **pull, le="2000.0") == 0
    assert pick(got, "rocketmq_rpc_latency_bucket", **pull, le="3000.0") == 1
    assert pick(got, "rocketmq_rpc_latency_count", response_code="system_busy", result="oneway")
    unknown = {"request_code": "4242", "response_code": "4343", "result": "write_channel_failed"}
    assert pick(got, "rocketmq_rpc_latency_count", **unknown) == 1


def test_two_servers_of_one_process_share_one_family() -> None:
    ns, ctrl = RpcLatency(), RpcLatency()
    ns.observe(RequestCode.GET_ROUTEINFO_BY_TOPIC, ResponseCode.SUCCESS, Outcome.SUCCESS, 0)
    ctrl.observe(RequestCode.BROKER_HEARTBEAT, ResponseCode.SUCCESS, Outcome.SUCCESS, 0)
    sources = [
        ({"node_type": "nameserver", "node_id": "h:9876"}, ns),
        ({"node_type": "controller", "node_id": "h:9878"}, ctrl),
    ]
    got = collect(RpcLatencyCollector(sources))
    assert pick(got, "rocketmq_rpc_latency_count", node_type="nameserver") == 1
    assert pick(got, "rocketmq_rpc_latency_count", request_code="broker_heartbeat") == 1
