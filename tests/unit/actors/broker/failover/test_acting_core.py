"""Who acts as master in a classic group (RIP-32): the smallest live id, from polls and notifies;
and where escape writes (never the own group, only a real writable master, stable per key)."""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.failover.acting_core import ActingCore
from rocketrio.actors.broker.failover.escape import LocalEscape, choose_target
from rocketrio.actors.broker.failover.member_group import members_of_route
from rocketrio.protocol.bodies import BrokerData, QueueData, TopicRouteData
from rocketrio.storage.store_types import MessageToStore

A0, A1, A2 = "a0:10911", "a1:10911", "a2:10911"


def test_the_smallest_live_slave_acts_and_stops_when_the_master_returns() -> None:
    core = ActingCore(1, enabled=True)
    first = core.on_members({0: A0, 1: A1, 2: A2})
    assert first is not None and first.master_online and not first.acting_now
    assert core.master_addr() == A0 and core.alive_replicas == 3
    assert core.on_members({0: A0, 1: A1, 2: A2}) is None  # nothing moved
    gone = core.on_members({1: A1, 2: A2})
    assert gone is not None and gone.acting_now and not gone.acting_before
    assert gone.offline_broker_addr == A0 and core.master_addr() is None
    back = core.on_members({0: A0, 1: A1})
    assert back is not None and back.master_online and back.acting_before and not back.acting_now


def test_only_the_smallest_slave_acts() -> None:
    core = ActingCore(2, enabled=True)
    core.on_members({0: A0, 1: A1, 2: A2})
    core.on_members({1: A1, 2: A2})
    assert not core.acting
    core.on_members({2: A2})
    assert core.acting


def test_a_member_list_without_us_follows_the_namesrv_and_an_empty_one_changes_nothing() -> None:
    core = ActingCore(1, enabled=True)
    core.on_members({0: A0, 1: A1})
    # our registration expired with the master: the route names broker 2, so 2 acts, not us
    change = core.on_members({2: A2})
    assert change is not None and change.min_broker_id == 2 and not core.acting
    assert core.alive_replicas == 2
    core.on_members({1: A1, 2: A2})
    assert core.acting
    assert core.on_members({}) is None and core.acting  # NameServer knows nobody: no evidence


def test_disabled_or_master_never_acts() -> None:
    off = ActingCore(1, enabled=False)
    assert off.on_members({1: A1}) is None and not off.acting
    master = ActingCore(0, enabled=True)
    assert master.on_members({1: A1}) is None and not master.acting


def test_notify_moves_the_minimum_and_carries_the_ha_address() -> None:
    core = ActingCore(1, enabled=True)
    core.on_members({0: A0, 1: A1})
    off = core.on_notify(1, A1, A0, None)
    assert off is not None and off.acting_now and off.offline_broker_addr == A0
    assert core.on_notify(1, A1, A0, None) is None  # repeated push
    on = core.on_notify(0, A0, None, "a0:10912")
    assert on is not None and on.master_online and on.master_ha_addr == "a0:10912"
    assert not core.acting
    assert core.on_notify(None, None, None, None) is None


def route(*groups: tuple[str, dict[int, str], int]) -> TopicRouteData:
    return TopicRouteData(
        queueDatas=[QueueData(name, 4, 4, perm, 0) for name, _, perm in groups],
        brokerDatas=[BrokerData("C", name, addrs) for name, addrs, _ in groups],
    )


def test_escape_never_targets_its_own_group_even_on_a_stale_route() -> None:
    stale = route(("broker-a", {0: A0, 1: A1}, 6), ("broker-b", {0: "b0"}, 6))
    for key in ("k1", "k2", "k3", "k4", "k5"):
        target = choose_target(stale, "broker-a", key, 5)
        assert target is not None and target.broker_name == "broker-b" and target.queue_id == 1


def test_escape_takes_only_real_writable_masters() -> None:
    acting_elsewhere = route(("broker-b", {0: "b1"}, 4), ("broker-c", {1: "c1"}, 6))
    assert choose_target(acting_elsewhere, "broker-a", "k", 0) is None
    r = route(("broker-b", {0: "b0"}, 4), ("broker-c", {0: "c0"}, 6))
    target = choose_target(r, "broker-a", "k", 0)
    assert target is not None and target.addr == "c0"


@pytest.mark.parametrize("key", ["UNIQ1", "UNIQ2", "UNIQ3"])
def test_escape_is_stable_per_key_and_avoids_a_failed_master(key: str) -> None:
    r = route(("broker-b", {0: "b0"}, 6), ("broker-c", {0: "c0"}, 6), ("broker-d", {0: "d0"}, 6))
    first = choose_target(r, "broker-a", key, 0)
    assert first is not None
    assert all(choose_target(r, "broker-a", key, 0) == first for _ in range(5))
    other = choose_target(r, "broker-a", key, 0, frozenset({first.broker_name}))
    assert other is not None and other.broker_name != first.broker_name
    everyone = frozenset({"broker-b", "broker-c", "broker-d"})
    assert choose_target(r, "broker-a", key, 0, everyone) is not None  # still tries


def test_compat_members_come_from_the_sync_topic_route() -> None:
    r = route(("broker-a", {0: A0, 1: A1}, 1), ("broker-b", {0: "b0"}, 1))
    assert members_of_route(r, "C", "broker-a") == {0: A0, 1: A1}
    assert members_of_route(r, "C", "broker-x") == {}


class FakeTarget:
    def __init__(self, name: str, error: str | None = None) -> None:
        self.broker_name, self.error, self.got = name, error, 0

    async def put(self, msgs: list[MessageToStore]) -> str | None:
        self.got += len(msgs) if self.error is None else 0
        return self.error


class FakeRemote:
    def __init__(self) -> None:
        self.got = 0

    async def put_to_live_master(self, msgs: list[MessageToStore]) -> str | None:
        self.got += len(msgs)
        return None


async def test_local_escape_skips_its_own_group_then_falls_back_to_remote() -> None:
    msg = [MessageToStore(topic="T", queue_id=0, body=b"x")]
    own, full, other = FakeTarget("broker-a"), FakeTarget("broker-b", "no topic"), FakeTarget("c")
    bridge = LocalEscape("broker-a", lambda: [own, full, other])  # type: ignore[list-item]
    assert await bridge.put_to_live_master(msg) is None
    assert (own.got, other.got) == (0, 1)  # the own group's master never takes it (#7923)
    remote = FakeRemote()
    alone = LocalEscape("broker-a", lambda: [own, full], remote)  # type: ignore[list-item]
    assert await alone.put_to_live_master(msg) is None and remote.got == 1 and own.got == 0
    nowhere = LocalEscape("broker-a", lambda: [own])  # type: ignore[list-item]
    assert await nowhere.put_to_live_master(msg) is not None and own.got == 0
