"""The broker's replication-lag arithmetic and store collector (actors/broker/stats/metrics.py)."""

from __future__ import annotations

from rocketrio.actors.broker.ha.status_body import MasterView, SlaveLink
from rocketrio.actors.broker.stats.metrics import SlaveLag, StoreCollector, slave_lags
from tests.harness.metrics import collect, pick


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
    got = collect(collector)
    disk = {"node_id": "broker-a", "storage_type": "local", "storage_medium": "disk"}
    assert pick(got, "rocketmq_storage_size", **disk) == 4096
    assert pick(got, "rocketmq_storage_flush_behind_bytes", **disk) == 10
    assert pick(got, "rocketmq_confirm_offset", node_type="broker") == 1024
    slave = {"slave_id": "2", "slave_addr": "10.0.0.3:10912"}
    assert pick(got, "rocketmq_replication_lag_bytes", **slave) == 3072
    assert pick(got, "rocketmq_replication_lag_latency", **slave) == 250
    state["master"] = False  # a slave reports its confirmOffset, no per-slave lag
    got = collect(collector)
    assert pick(got, "rocketmq_confirm_offset", node_id="broker-a") == 1024
    assert not [k for k in got if k[0].startswith("rocketmq_replication_lag")]
