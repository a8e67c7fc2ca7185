"""GET_BROKER_HA_STATUS (907): the pure core that builds HARuntimeInfo, against upstream 5.2.0.

Golden bytes: remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/
HARuntimeInfo.java as AutoSwitchHAService#getRuntimeInfo fills it (ha_runtime_info_master,
ha_runtime_info_slave) and a live 5.2.0 standalone broker's answer (live_ha_runtime_info: a
master with no slaves). ``ByteRate`` is checked against a model of upstream's FlowMonitor.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.ha.status_body import (
    ByteRate,
    MasterView,
    SlaveLink,
    SlaveView,
    runtime_info,
)
from rocketrio.protocol import fastjson
from rocketrio.protocol.ha_bodies import HARuntimeInfo
from rocketrio.protocol.serde import from_json
from tests.harness.paths import GOLDEN_ADMIN_BODIES

GOLDEN = GOLDEN_ADMIN_BODIES
TS = 1795440000000  # the golden files' "now"
MB = 1048576


def golden(name: str) -> bytes:
    return (GOLDEN / f"{name}.json").read_bytes()


def build(view: MasterView | SlaveView, mono_now_ms: int = 50_000) -> HARuntimeInfo:
    return runtime_info(view, mono_now_ms=mono_now_ms, wall_now_ms=TS)


def test_master_body_is_upstreams_bytes() -> None:
    """One slave in the SyncStateSet, caught up: diff 0, inSync, transferFromWhere = its end;
    the zeroed haClientRuntimeInfo is written without masterAddr."""
    view = MasterView(
        max_offset=MB,
        self_id=1,
        sync_state_set=frozenset({1, 2}),
        links=(SlaveLink("127.0.0.1:53210", 2, MB, MB, 0),),
    )
    assert fastjson.encode(build(view)) == golden("ha_runtime_info_master")


def test_slave_body_is_upstreams_bytes() -> None:
    """Trio-clock read/write times become wall-clock epoch ms (TS - 1000 here)."""
    view = SlaveView(
        master_ha_addr="127.0.0.1:10912",
        max_offset=MB,
        connected=True,
        last_read_ms=49_000,
        last_write_ms=49_000,
        bytes_per_s=0,
        master_confirm_offset=MB,
    )
    assert fastjson.encode(build(view, mono_now_ms=50_000)) == golden("ha_runtime_info_slave")


def test_a_broker_without_slaves_answers_like_upstreams_standalone_broker() -> None:
    """A live 5.2.0 broker with no slave: master, its max offset, nothing else."""
    view = MasterView(max_offset=24524, self_id=0, sync_state_set=frozenset({0}))
    assert fastjson.encode(build(view)) == golden("live_ha_runtime_info")


def test_golden_and_live_bodies_decode() -> None:
    master = from_json(HARuntimeInfo, golden("ha_runtime_info_master"))
    assert master.master and master.masterCommitLogMaxOffset == MB and master.inSyncSlaveNums == 1
    (conn,) = master.haConnectionInfo
    assert (conn.addr, conn.slaveAckOffset, conn.diff, conn.inSync) == (
        "127.0.0.1:53210",
        MB,
        0,
        True,
    )
    assert conn.transferFromWhere == MB and master.haClientRuntimeInfo.masterAddr is None
    slave = from_json(HARuntimeInfo, golden("ha_runtime_info_slave"))
    c = slave.haClientRuntimeInfo
    assert not slave.master and c.masterAddr == "127.0.0.1:10912" and c.maxOffset == MB
    assert c.lastReadTimestamp == c.lastWriteTimestamp == TS - 1000 and c.masterFlushOffset == MB
    live = from_json(HARuntimeInfo, golden("live_ha_runtime_info"))
    assert live.master and live.masterCommitLogMaxOffset == 24524 and live.haConnectionInfo == []
    for name in ("ha_runtime_info_master", "ha_runtime_info_slave", "live_ha_runtime_info"):
        assert fastjson.encode(from_json(HARuntimeInfo, golden(name))) == golden(name)


def test_in_sync_is_set_membership_and_the_count_includes_disconnected_members() -> None:
    """Slave 2 acked everything but is not (yet) in the set: not in sync. Slave 3 lags and is
    in the set: in sync. Member 4 has no connection (it just dropped) but is still counted,
    as upstream counts localSyncStateSet.size() - 1. A connection before its handshake and
    first ack shows ack -1 and transferFromWhere -1."""
    view = MasterView(
        max_offset=1000,
        self_id=1,
        sync_state_set=frozenset({1, 3, 4}),
        links=(
            SlaveLink("10.0.0.2:1", 2, 1000, 1000, 10),
            SlaveLink("10.0.0.3:1", 3, 400, 700, 20),
            SlaveLink("10.0.0.5:1", None, -1, -1, 0),
        ),
    )
    info = build(view)
    assert info.inSyncSlaveNums == 2
    rows = [(c.addr, c.diff, c.inSync, c.transferFromWhere) for c in info.haConnectionInfo]
    assert rows == [
        ("10.0.0.2:1", 0, False, 1000),
        ("10.0.0.3:1", 600, True, 700),
        ("10.0.0.5:1", 1001, False, -1),
    ]
    assert [c.transferredByteInSecond for c in info.haConnectionInfo] == [10, 20, 0]


def test_a_disconnected_slave_reports_no_read_time_and_keeps_its_last_write() -> None:
    view = SlaveView("10.0.0.1:10912", 500, False, 30_000, 31_000, 0, 400)
    c = build(view, mono_now_ms=50_000).haClientRuntimeInfo
    assert c.lastReadTimestamp == 0 and c.lastWriteTimestamp == TS - 19_000
    never = SlaveView(None, 0, False, None, None, 0, -1)
    c = build(never).haClientRuntimeInfo
    assert (c.masterAddr, c.lastReadTimestamp, c.lastWriteTimestamp, c.masterFlushOffset) == (
        None,
        0,
        0,
        0,
    )
    assert b"masterAddr" not in fastjson.encode(build(never))


# ---------------------------------------------------------------------------- ByteRate

# (time step in ms, bytes added; None: a reading instead of an add)
ops = st.lists(
    st.tuples(st.integers(0, 1500), st.one_of(st.none(), st.integers(0, 10_000))),
    max_size=60,
)


@given(ops)
def test_rate_is_the_bytes_of_the_last_whole_second(steps: list[tuple[int, int | None]]) -> None:
    """Model: at time t the rate is the sum of what was added in [t//1000 - 1 s, t//1000 s)."""
    meter, now, added = ByteRate(), 0, []
    for step, n in steps:
        now += step
        if n is not None:
            meter.add(n, now)
            added.append((now, n))
        else:
            window = now // 1000 - 1
            expected = sum(k for t, k in added if t // 1000 == window)
            assert meter.per_second(now) == expected


def test_rate_drops_to_zero_after_a_quiet_second() -> None:
    meter = ByteRate()
    meter.add(4096, 100)
    meter.add(4096, 900)
    assert meter.per_second(999) == 0  # the second is not over yet
    assert meter.per_second(1500) == 8192
    assert meter.per_second(2001) == 0
