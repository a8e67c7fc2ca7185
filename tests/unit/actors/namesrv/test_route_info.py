"""RouteInfoManager: registration, route assembly, expiry, topics, data versions (pure, no I/O)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.namesrv.route_info import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS,
    MinBrokerIdChange,
    RouteInfoManager,
)
from rocketrio.protocol.bodies import (
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
)

CLUSTER = "DefaultCluster"


def wrapper(
    *topics: tuple[str, int, int], state: int = 0, counter: int = 1
) -> TopicConfigSerializeWrapper:
    """Topic configs as (name, queues, perm), with a DataVersion."""
    return TopicConfigSerializeWrapper(
        topicConfigTable={
            name: TopicConfig(name, readQueueNums=q, writeQueueNums=q, perm=perm)
            for name, q, perm in topics
        },
        dataVersion=DataVersion(stateVersion=state, timestamp=1000, counter=counter),
    )


BASE = wrapper(("TopicA", 4, 6), ("TopicB", 8, 6))


def register(
    rim: RouteInfoManager,
    name: str,
    bid: int,
    addr: str,
    w: TopicConfigSerializeWrapper = BASE,
    *,
    now: int = 0,
    acting: bool | None = False,
    timeout: int | None = None,
    channel: object | None = None,
):
    return rim.register_broker(
        cluster_name=CLUSTER,
        broker_addr=addr,
        broker_name=name,
        broker_id=bid,
        ha_server_addr=addr.replace(":10911", ":10912"),
        topic_config_wrapper=w,
        now_ms=now,
        timeout_ms=timeout,
        enable_acting_master=acting,
        channel=channel,
    )


def addrs_of(rim: RouteInfoManager, topic: str) -> dict[str, dict[int, str]]:
    route = rim.get_route(topic)
    assert route is not None
    return {bd.brokerName: bd.brokerAddrs for bd in route.brokerDatas}


def perms_of(rim: RouteInfoManager, topic: str) -> dict[str, int]:
    route = rim.get_route(topic)
    assert route is not None
    return {qd.brokerName: qd.perm for qd in route.queueDatas}


# --- route assembly after a sequence of registrations: table-driven ----------------------------

# each step: (broker name, broker id, address, enableActingMaster)
ROUTE_CASES = {
    "master only": (
        [("a", 0, "h1:10911", False)],
        {"a": {0: "h1:10911"}},
        {"a": 6},
    ),
    "master then slave: slave listed, queue data from the master": (
        [("a", 0, "h1:10911", False), ("a", 1, "h2:10911", False)],
        {"a": {0: "h1:10911", 1: "h2:10911"}},
        {"a": 6},
    ),
    "lone slave of an old broker (no enableActingMaster) creates no queue data": (
        [("a", 1, "h2:10911", None)],
        None,
        None,
    ),
    "lone new-version slave is the prime slave: read-only queue data": (
        [("a", 1, "h2:10911", False)],
        {"a": {1: "h2:10911"}},
        {"a": 4},
    ),
    "second slave is not prime: no queue data from it": (
        [("a", 1, "h2:10911", None), ("a", 2, "h3:10911", False)],
        None,
        None,
    ),
    "two groups": (
        [("a", 0, "h1:10911", False), ("b", 0, "h4:10911", False)],
        {"a": {0: "h1:10911"}, "b": {0: "h4:10911"}},
        {"a": 6, "b": 6},
    ),
    "promoted slave re-registers as 0 from the same address": (
        [("a", 1, "h2:10911", False), ("a", 0, "h2:10911", False)],
        {"a": {0: "h2:10911"}},
        {"a": 6},
    ),
}


@pytest.mark.parametrize("steps,want_addrs,want_perms", ROUTE_CASES.values(), ids=ROUTE_CASES)
def test_route_after_registrations(
    steps: list[tuple[str, int, str, bool | None]],
    want_addrs: dict[str, dict[int, str]] | None,
    want_perms: dict[str, int] | None,
) -> None:
    rim = RouteInfoManager()
    for name, bid, addr, acting in steps:
        assert register(rim, name, bid, addr, acting=acting) is not None
    if want_addrs is None:
        assert rim.get_route("TopicA") is None
        return
    assert addrs_of(rim, "TopicA") == want_addrs
    assert perms_of(rim, "TopicA") == want_perms
    route = rim.get_route("TopicB")
    assert route is not None
    assert {qd.brokerName: qd.readQueueNums for qd in route.queueDatas} == {
        n: 8 for n in want_perms or {}
    }


def test_slave_learns_live_master_and_ha_address() -> None:
    rim = RouteInfoManager()
    first = register(rim, "a", 0, "h1:10911")
    assert first is not None and first.master_addr is None and first.new_broker
    slave = register(rim, "a", 1, "h2:10911")
    assert slave is not None
    assert (slave.master_addr, slave.ha_server_addr) == ("h1:10911", "h1:10912")
    again = register(rim, "a", 1, "h2:10911")
    assert again is not None and not again.new_broker


def test_slave_topic_configs_never_change_master_queue_data() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911")
    register(rim, "a", 1, "h2:10911", wrapper(("TopicA", 99, 2), ("TopicZ", 1, 6), counter=9))
    assert perms_of(rim, "TopicA") == {"a": 6}
    assert rim.get_route("TopicA").queueDatas[0].readQueueNums == 4  # type: ignore[union-attr]
    assert rim.get_route("TopicZ") is None


def test_queue_data_follows_data_version_changes() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911", wrapper(("T", 4, 6), ("U", 1, 6), counter=1))
    register(rim, "a", 0, "h1:10911", wrapper(("T", 16, 4), ("U", 1, 6), counter=2))
    route = rim.get_route("T")
    assert route is not None
    assert (route.queueDatas[0].writeQueueNums, route.queueDatas[0].perm) == (16, 4)


def test_same_version_does_not_overwrite_admin_perm_change() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911")
    assert rim.wipe_write_perm("a") == 2
    register(rim, "a", 0, "h1:10911")  # periodic re-register, same DataVersion
    assert perms_of(rim, "TopicA") == {"a": 4}
    assert rim.add_write_perm("a") == 2
    assert perms_of(rim, "TopicA") == {"a": 6}
    assert rim.wipe_write_perm("nobody") == 0


def test_stale_state_version_registration_is_ignored() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911", wrapper(("T", 4, 6), ("U", 1, 6), state=5))
    result = register(rim, "a", 0, "h2:10911", wrapper(("T", 4, 6), ("U", 1, 6), state=3))
    assert result is not None and result.ignored and "stateVersion 5" in result.ignored
    assert addrs_of(rim, "T") == {"a": {0: "h1:10911"}}
    assert rim.live_info(CLUSTER, "h2:10911") is None
    newer = register(rim, "a", 0, "h2:10911", wrapper(("T", 4, 6), ("U", 1, 6), state=6))
    assert newer is not None and newer.ignored is None and newer.new_broker
    assert addrs_of(rim, "T") == {"a": {0: "h2:10911"}}


def test_single_topic_registration_needs_a_prior_full_registration() -> None:
    rim = RouteInfoManager()
    assert register(rim, "a", 0, "h1:10911", wrapper(("OnlyOne", 4, 6))) is None
    assert rim.broker_addr_table == {} and rim.cluster_addr_table == {}
    register(rim, "a", 0, "h1:10911")
    assert register(rim, "a", 0, "h1:10911", wrapper(("OnlyOne", 4, 6), counter=2)) is not None
    assert rim.get_route("OnlyOne") is not None


# --- unregistration ----------------------------------------------------------------------------

UNREGISTER_CASES = {
    "master leaves, slave keeps the group, topic stays": (
        False,
        [("h1:10911", 0)],
        {"a": {1: "h2:10911"}},
        {"a": 6},
    ),
    "acting-master group that loses its master goes read-only": (
        True,
        [("h1:10911", 0)],
        {"a": {1: "h2:10911"}},
        {"a": 4},
    ),
    "slave leaves": (
        False,
        [("h2:10911", 1)],
        {"a": {0: "h1:10911"}},
        {"a": 6},
    ),
    "last member leaves: topic gone": (
        False,
        [("h1:10911", 0), ("h2:10911", 1)],
        None,
        None,
    ),
}


@pytest.mark.parametrize(
    "acting,leave,want_addrs,want_perms", UNREGISTER_CASES.values(), ids=UNREGISTER_CASES
)
def test_unregister(
    acting: bool,
    leave: list[tuple[str, int]],
    want_addrs: dict[str, dict[int, str]] | None,
    want_perms: dict[str, int] | None,
) -> None:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911", acting=acting)
    register(rim, "a", 1, "h2:10911", acting=acting)
    for addr, bid in leave:
        gone = rim.unregister_broker(CLUSTER, addr, "a", bid)
        assert gone.was_live
    if want_addrs is None:
        assert rim.get_route("TopicA") is None
        assert rim.all_topics().topicList == []
        assert rim.cluster_info().clusterAddrTable == {}
        return
    assert addrs_of(rim, "TopicA") == want_addrs
    assert perms_of(rim, "TopicA") == want_perms


def test_unregister_unknown_broker_is_harmless() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911")
    gone = rim.unregister_broker(CLUSTER, "h9:10911", "zzz", 0)
    assert not gone.was_live and not gone.group_removed
    assert addrs_of(rim, "TopicA") == {"a": {0: "h1:10911"}}


# --- liveness ----------------------------------------------------------------------------------

EXPIRY_CASES = {
    # (timeout sent by the broker, last heartbeat at, scan at, expired?)
    "default 120 s, just inside": (None, 0, DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS, False),
    "default 120 s, just past": (None, 0, DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS + 1, True),
    "10 s timeout, exactly at the limit is still alive": (10_000, 0, 10_000, False),
    "10 s timeout, 1 ms past": (10_000, 0, 10_001, True),
    "heartbeat at 9 s keeps it alive at 15 s": (10_000, 9_000, 15_000, False),
    "heartbeat at 9 s, silent until 19.001 s": (10_000, 9_000, 19_001, True),
}


@pytest.mark.parametrize("timeout,beat_at,scan_at,expired", EXPIRY_CASES.values(), ids=EXPIRY_CASES)
def test_scan_not_active(timeout: int | None, beat_at: int, scan_at: int, expired: bool) -> None:
    rim = RouteInfoManager()
    chan = object()
    register(rim, "a", 0, "h1:10911", timeout=timeout, channel=chan)
    if beat_at:
        assert rim.heartbeat(CLUSTER, "h1:10911", beat_at)
    out = rim.scan_not_active(scan_at)
    if not expired:
        assert out == [] and rim.get_route("TopicA") is not None
        return
    assert len(out) == 1
    e = out[0]
    assert (e.broker_name, e.broker_id, e.broker_addr, e.channel) == ("a", 0, "h1:10911", chan)
    assert e.silent_ms == scan_at - beat_at
    assert rim.get_route("TopicA") is None and rim.broker_live_table == {}


def test_heartbeat_for_unknown_broker_says_so() -> None:
    assert not RouteInfoManager().heartbeat(CLUSTER, "h1:10911", 5)


def test_channel_destroy_unregisters_only_that_channel() -> None:
    rim = RouteInfoManager()
    c1, c2 = object(), object()
    register(rim, "a", 0, "h1:10911", channel=c1)
    register(rim, "a", 1, "h2:10911", channel=c2)
    gone = rim.on_channel_destroy(c1)
    assert [(g.broker_name, g.broker_id, g.broker_addr) for g in gone] == [("a", 0, "h1:10911")]
    assert addrs_of(rim, "TopicA") == {"a": {1: "h2:10911"}}
    assert rim.on_channel_destroy(c1) == []


def test_reregistration_on_a_new_channel_outlives_the_old_channel() -> None:
    rim = RouteInfoManager()
    old, new = object(), object()
    register(rim, "a", 0, "h1:10911", channel=old)
    register(rim, "a", 0, "h1:10911", channel=new)
    assert rim.on_channel_destroy(old) == []
    assert rim.get_route("TopicA") is not None


# --- topics ------------------------------------------------------------------------------------


def two_clusters() -> RouteInfoManager:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911")
    rim.register_broker(
        cluster_name="Other",
        broker_addr="h5:10911",
        broker_name="x",
        broker_id=0,
        ha_server_addr="h5:10912",
        topic_config_wrapper=wrapper(("TopicA", 2, 6), ("OnlyX", 2, 6)),
        now_ms=0,
    )
    return rim


DELETE_CASES = {
    "everywhere": ("TopicA", None, True, None),
    "only in one cluster": ("TopicA", "Other", True, {"a"}),
    "cluster that does not host it": ("OnlyX", CLUSTER, False, {"x"}),
    "unknown cluster": ("TopicA", "Nope", False, {"a", "x"}),
    "unknown topic": ("Nope", None, False, None),
}


@pytest.mark.parametrize("topic,cluster,removed,left", DELETE_CASES.values(), ids=DELETE_CASES)
def test_delete_topic(
    topic: str, cluster: str | None, removed: bool, left: set[str] | None
) -> None:
    rim = two_clusters()
    assert rim.delete_topic(topic, cluster) is removed
    route = rim.get_route(topic)
    if left is None:
        assert route is None
    else:
        assert route is not None and {qd.brokerName for qd in route.queueDatas} == left


def test_topic_lists() -> None:
    rim = two_clusters()
    assert rim.all_topics().topicList == ["OnlyX", "TopicA", "TopicB"]
    assert rim.topics_by_cluster(CLUSTER).topicList == ["TopicA", "TopicB"]
    assert rim.topics_by_cluster("Other").topicList == ["OnlyX", "TopicA"]
    assert rim.topics_by_cluster("Nope").topicList == []
    system = rim.system_topics()
    assert system.topicList == [CLUSTER, "a", "Other", "x"]
    assert system.brokerAddr in ("h1:10911", "h5:10911")
    info = rim.cluster_info()
    assert info.clusterAddrTable == {CLUSTER: ["a"], "Other": ["x"]}
    assert info.brokerAddrTable["x"].brokerAddrs == {0: "h5:10911"}


def test_register_topic_only_new_and_on_known_brokers() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911")
    assert rim.register_topic("New", [QueueData("a", 2, 2, 6)])
    assert perms_of(rim, "New") == {"a": 6}
    assert not rim.register_topic("New", [QueueData("a", 8, 8, 6)])
    assert not rim.register_topic("Ghost", [QueueData("nobody", 2, 2, 6)])
    assert not rim.register_topic("Empty", [])
    assert rim.get_route("Ghost") is None


def test_routes_are_copies() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911")
    route = rim.get_route("TopicA")
    assert route is not None
    route.brokerDatas[0].brokerAddrs[7] = "evil"
    route.queueDatas[0].perm = 0
    assert addrs_of(rim, "TopicA") == {"a": {0: "h1:10911"}}
    assert perms_of(rim, "TopicA") == {"a": 6}


# --- data version, member group ----------------------------------------------------------------


def test_query_data_version() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 0, "h1:10911", timeout=10_000)
    same = attrs.evolve(BASE.dataVersion)
    assert rim.query_data_version(CLUSTER, "h1:10911", same, 9_000) == (False, BASE.dataVersion)
    newer = same.next_version(2000)
    changed, ours = rim.query_data_version(CLUSTER, "h1:10911", newer, 9_500)
    assert changed and ours == BASE.dataVersion
    # the query counts as a heartbeat
    assert rim.scan_not_active(19_000) == []
    assert rim.query_data_version(CLUSTER, "h9:1", same, 0) == (True, None)


def test_broker_member_group() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 2, "h3:10911")
    register(rim, "a", 0, "h1:10911")
    group = rim.broker_member_group(CLUSTER, "a")
    assert group.brokerAddrs == {0: "h1:10911", 2: "h3:10911"}
    assert list(group.brokerAddrs) == [0, 2]
    assert rim.broker_member_group(CLUSTER, "none").brokerAddrs == {}


# --- acting master (N4) and min-broker-id notifications (N3) ------------------------------------

ACTING_CASES = {
    # (supportActingMaster, broker enableActingMaster, expected addrs after the master leaves)
    "namesrv support on, broker on: smallest slave shown as 0": (
        True,
        True,
        {0: "h2:10911", 2: "h3:10911"},
    ),
    "namesrv support off": (False, True, {1: "h2:10911", 2: "h3:10911"}),
    "broker does not enable acting master": (True, False, {1: "h2:10911", 2: "h3:10911"}),
}


@pytest.mark.parametrize("support,acting,want", ACTING_CASES.values(), ids=ACTING_CASES)
def test_acting_master_route(support: bool, acting: bool, want: dict[int, str]) -> None:
    rim = RouteInfoManager(support_acting_master=support)
    register(rim, "a", 0, "h1:10911", acting=acting)
    register(rim, "a", 1, "h2:10911", acting=acting)
    register(rim, "a", 2, "h3:10911", acting=acting)
    rim.unregister_broker(CLUSTER, "h1:10911", "a", 0)
    assert addrs_of(rim, "TopicA") == {"a": want}
    # the table itself is untouched: only the published route changes
    assert rim.broker_addr_table["a"].brokerAddrs == {1: "h2:10911", 2: "h3:10911"}
    assert perms_of(rim, "TopicA") == {"a": 4 if acting else 6}


def test_acting_master_not_applied_to_member_group_sync_topic() -> None:
    rim = RouteInfoManager(support_acting_master=True)
    sync = "rmq_sys_SYNC_BROKER_MEMBER_a"
    w = wrapper((sync, 1, 6), ("TopicA", 4, 6))
    register(rim, "a", 0, "h1:10911", w, acting=True)
    register(rim, "a", 1, "h2:10911", w, acting=True)
    rim.unregister_broker(CLUSTER, "h1:10911", "a", 0)
    assert addrs_of(rim, sync) == {"a": {1: "h2:10911"}}
    assert addrs_of(rim, "TopicA") == {"a": {0: "h2:10911"}}


def test_min_broker_id_notifications() -> None:
    rim = RouteInfoManager(notify_min_broker_id_changed=True)
    register(rim, "a", 1, "h2:10911", acting=True)
    register(rim, "a", 2, "h3:10911", acting=True)
    assert rim.take_notifications() == []
    register(rim, "a", 0, "h1:10911", acting=True)
    assert rim.take_notifications() == [
        MinBrokerIdChange("a", 0, "h1:10911", None, "h1:10912", ("h2:10911", "h3:10911"))
    ]
    rim.unregister_broker(CLUSTER, "h1:10911", "a", 0)
    assert rim.take_notifications() == [
        MinBrokerIdChange("a", 1, "h2:10911", "h1:10911", None, ("h2:10911", "h3:10911"))
    ]
    rim.unregister_broker(CLUSTER, "h3:10911", "a", 2)  # not the minimum: nothing to say
    assert rim.take_notifications() == []


def test_no_notifications_unless_enabled() -> None:
    rim = RouteInfoManager()
    register(rim, "a", 1, "h2:10911", acting=True)
    register(rim, "a", 0, "h1:10911", acting=True)
    rim.unregister_broker(CLUSTER, "h1:10911", "a", 0)
    assert rim.take_notifications() == []


# --- invariant: whatever happens, the live table and the address table agree -------------------

NAMES = ["a", "b"]
# a broker process has one address: group "a" lives on a0..a2, group "b" on b0..b2
member = st.tuples(st.sampled_from(NAMES), st.integers(0, 2))
op = st.one_of(
    st.tuples(
        st.just("register"),
        member,
        st.integers(0, 2),
        st.integers(0, 3),
        st.sampled_from([None, False, True]),
    ),
    st.tuples(st.just("unregister"), member, st.integers(0, 2)),
    st.tuples(st.just("heartbeat"), member),
    st.tuples(st.just("scan"), st.integers(0, 30_000)),
    st.tuples(st.just("wipe"), st.sampled_from(NAMES)),
)


def check_invariants(rim: RouteInfoManager) -> None:
    live_addrs = {k.broker_addr for k in rim.broker_live_table}
    for name, bd in rim.broker_addr_table.items():
        assert bd.brokerAddrs, f"empty group {name} left behind"
        values = list(bd.brokerAddrs.values())
        assert len(values) == len(set(values)), f"one address holds two ids in {name}"
        assert set(values) <= live_addrs, "an address in a route has no liveness entry"
        assert name in rim.cluster_addr_table[bd.cluster]
    for topic, qmap in rim.topic_queue_table.items():
        assert qmap, f"topic {topic} with no queue data left behind"
        assert set(qmap) <= set(rim.broker_addr_table), f"{topic} names a gone broker"


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=40))
def test_tables_stay_consistent_and_expire_completely(ops: list[tuple]) -> None:
    rim = RouteInfoManager(support_acting_master=True, notify_min_broker_id_changed=True)
    now = 0
    for o in ops:
        now += 1000
        match o:
            case ("register", (name, host), bid, state, acting):
                w = wrapper(("T", 4, 6), ("U", 2, 6), state=state, counter=now)
                addr = f"{name}{host}:1"
                register(rim, name, bid, addr, w, now=now, acting=acting, timeout=10_000)
            case ("unregister", (name, host), bid):
                rim.unregister_broker(CLUSTER, f"{name}{host}:1", name, bid)
            case ("heartbeat", (name, host)):
                rim.heartbeat(CLUSTER, f"{name}{host}:1", now)
            case ("scan", dt):
                rim.scan_not_active(now + dt)
            case ("wipe", name):
                rim.wipe_write_perm(name)
        check_invariants(rim)
        rim.get_route("T")
        rim.take_notifications()
    rim.scan_not_active(now + 10_001)
    assert rim.broker_live_table == {}
    assert rim.broker_addr_table == {}
    assert rim.topic_queue_table == {}
    assert rim.cluster_addr_table == {}
