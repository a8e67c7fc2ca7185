"""The pure parts of the Prometheus exporters, without sockets: rocketmq_rpc_latency's counts and
family (upstream's buckets, labels and lower-case code names), the controller's election and
request counts and collector, and the broker's replication-lag arithmetic and store collector."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from rocketrio.actors.broker.ha.status_body import MasterView, SlaveLink
from rocketrio.actors.broker.stats.metrics import SlaveLag, StoreCollector, slave_lags
from rocketrio.actors.controller.metrics import ControllerCollector, ElectionCounts
from rocketrio.actors.observe.rpc_metrics import (
    BUCKETS_MS,
    Outcome,
    RpcLatency,
    RpcLatencyCollector,
)
from rocketrio.actors.raft.state import Role
from rocketrio.protocol.codes import RequestCode, ResponseCode

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(*collectors: Collector) -> Samples:
    registry = CollectorRegistry(auto_describe=False)
    for c in collectors:
        registry.register(c)
    out: Samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def pick(got: Samples, name: str, **labels: str) -> float:
    hits = [v for (n, ls), v in got.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(hits) == 1, (name, labels, hits)
    return hits[0]


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
    got = scrape(RpcLatencyCollector([(node, lat)]))
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
    got = scrape(RpcLatencyCollector(sources))
    assert pick(got, "rocketmq_rpc_latency_count", node_type="nameserver") == 1
    assert pick(got, "rocketmq_rpc_latency_count", request_code="broker_heartbeat") == 1


def test_controller_collector_role_elections_brokers_and_requests() -> None:
    role: list[Role | None] = [None]
    elections = ElectionCounts()
    lat = RpcLatency()
    brokers = {"DefaultCluster": {"broker-a": 2, "broker-b": 1}}
    collector = ControllerCollector(
        address="10.0.0.1:9878",
        group="g",
        peer_id="n0",
        role=lambda: role[0],
        elections=elections,
        active_brokers=lambda: brokers,
        rpc_latency=lat,
    )
    got = scrape(collector)
    node = {"address": "10.0.0.1:9878", "group": "g", "peer_id": "n0"}
    assert pick(got, "role", **node) == 0
    assert not [k for k in got if k[0] == "election_total"]
    role[0] = Role.LEADER
    elections.record("DefaultCluster", "broker-a", ResponseCode.SUCCESS)
    elections.record("DefaultCluster", "broker-a", ResponseCode.SUCCESS)
    elections.record("DefaultCluster", "broker-a", ResponseCode.CONTROLLER_MASTER_STILL_EXIST)
    elections.record("DefaultCluster", "broker-b", ResponseCode.CONTROLLER_ELECT_MASTER_FAILED)
    elections.record("DefaultCluster", "broker-b", ResponseCode.CONTROLLER_NOT_LEADER)  # not one
    elect, heartbeat = RequestCode.CONTROLLER_ELECT_MASTER, RequestCode.BROKER_HEARTBEAT
    lat.observe(elect, ResponseCode.SUCCESS, Outcome.SUCCESS, 0.01)
    lat.observe(elect, ResponseCode.SYSTEM_ERROR, Outcome.SUCCESS, 3.0)
    lat.observe(heartbeat, ResponseCode.SUCCESS, Outcome.SUCCESS, 0)
    lat.observe(RequestCode.RAFT_MESSAGE, ResponseCode.SUCCESS, Outcome.ONEWAY, 0)
    got = scrape(collector)
    assert pick(got, "role", **node) == 3
    a = {**node, "cluster": "DefaultCluster", "broker_set": "broker-a"}
    assert pick(got, "election_total", **a, election_result="new_master_elected") == 2
    assert pick(got, "election_total", **a, election_result="keep_current_master") == 1
    b = {"broker_set": "broker-b"}
    assert pick(got, "election_total", **b, election_result="no_master_elected") == 1
    assert len([k for k in got if k[0] == "election_total"]) == 3
    assert pick(got, "active_broker_num", **a) == 2
    assert pick(got, "active_broker_num", broker_set="broker-b") == 1
    em = {"request_type": "CONTROLLER_ELECT_MASTER"}
    assert pick(got, "request_total", **em, request_handle_status="success") == 1
    assert pick(got, "request_total", **em, request_handle_status="failed") == 1
    hb = {"request_type": "CONTROLLER_BROKER_HEARTBEAT", "request_handle_status": "success"}
    assert pick(got, "request_total", **hb) == 1
    assert len([k for k in got if k[0] == "request_total"]) == 3  # RAFT_MESSAGE is no type


def _view(max_offset: int, *links: SlaveLink) -> MasterView:
    return MasterView(
        max_offset=max_offset, self_id=1, sync_state_set=frozenset({1, 2}), links=links
    )


def test_slave_lags_bytes_and_time_since_caught_up() -> None:
    view = _view(
        1000,
        SlaveLink("s2", 2, ack_offset=1000, transfer_from=1000, bytes_per_s=0),
        SlaveLink("s3", 3, ack_offset=400, transfer_from=1000, bytes_per_s=0),
        SlaveLink("s4", 4, ack_offset=900, transfer_from=1000, bytes_per_s=0),
        SlaveLink("new", None, ack_offset=-1, transfer_from=-1, bytes_per_s=0),
        SlaveLink("shaken", 5, ack_offset=-1, transfer_from=-1, bytes_per_s=0),
    )
    lags = slave_lags(view, {2: 9_000, 3: 7_500}, now_ms=10_000)
    assert lags == [
        SlaveLag(2, "s2", 0, 0),  # caught up: no lag whenever it last acked
        SlaveLag(3, "s3", 600, 2_500),
        SlaveLag(4, "s4", 100, None),  # behind, but when it last caught up is not known
    ]


def test_store_collector_storage_confirm_offset_and_replication() -> None:
    state = {"end": 4096, "confirm": 1024, "master": True}
    view = _view(4096, SlaveLink("10.0.0.3:10912", 2, 1024, 1024, 0))
    collector = StoreCollector(
        cluster="c",
        broker_name="broker-a",
        store_bytes=lambda: state["end"],
        flush_behind_bytes=lambda: 10,
        confirm_offset=lambda: state["confirm"],
        master_view=lambda: view if state["master"] else None,
        caught_up_ms=lambda: {2: 100},
        now_ms=lambda: 350,
    )
    got = scrape(collector)
    disk = {"node_id": "broker-a", "storage_type": "local", "storage_medium": "disk"}
    assert pick(got, "rocketmq_storage_size", **disk) == 4096
    assert pick(got, "rocketmq_storage_flush_behind_bytes", **disk) == 10
    assert pick(got, "rocketmq_confirm_offset", node_type="broker") == 1024
    slave = {"slave_id": "2", "slave_addr": "10.0.0.3:10912"}
    assert pick(got, "rocketmq_replication_lag_bytes", **slave) == 3072
    assert pick(got, "rocketmq_replication_lag_latency", **slave) == 250
    state["master"] = False  # a slave reports its confirmOffset, no per-slave lag
    got = scrape(collector)
    assert pick(got, "rocketmq_confirm_offset", node_id="broker-a") == 1024
    assert not [k for k in got if k[0].startswith("rocketmq_replication_lag")]
