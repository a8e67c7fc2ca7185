"""The controller state machine: BrokerId assignment (every failure case of the persistent
BrokerId seed), registration, elections, SyncStateSet changes, cleaning, snapshots, and
determinism under random event sequences."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.controller.commands import (
    AlterSyncStateSetCommand,
    ApplyBrokerIdCommand,
    CleanBrokerDataCommand,
    Command,
    ElectMasterCommand,
    UpdateBrokerAddressCommand,
    decode_commands,
    encode_commands,
)
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.heartbeat_manager import BrokerLiveInfo
from rocketrio.actors.controller.replicas_info import (
    ControllerResult,
    ReplicasInfoManager,
    SnapshotError,
)
from rocketrio.actors.raft.config import RaftConfigError
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.config import ConfigError, build_config, parse_properties

CLUSTER, NAME = "DefaultCluster", "broker-a"


def code(n: int) -> str:
    return f"10.0.0.{n}:10911;170000000{n}"


def addr(n: int) -> str:
    return f"10.0.0.{n}:10911"


class World:
    """A manager plus the liveness and heartbeat facts the actor would pass in."""

    def __init__(self, *, unclean: bool = False) -> None:
        self.m = ReplicasInfoManager(enable_elect_unclean_master=unclean)
        self.alive: set[tuple[str, int]] = set()
        self.infos: dict[tuple[str, int], BrokerLiveInfo] = {}

    def is_alive(self, _cluster: str, name: str, broker_id: int) -> bool:
        return (name, broker_id) in self.alive

    def live_info(self, _cluster: str, name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.infos.get((name, broker_id))

    def heartbeat(self, broker_id: int, epoch: int = 1, max_offset: int = 0, name: str = NAME):
        self.alive.add((name, broker_id))
        self.infos[(name, broker_id)] = BrokerLiveInfo(
            CLUSTER, name, broker_id, addr(broker_id), 0, 10_000, epoch, max_offset
        )

    def die(self, broker_id: int, name: str = NAME) -> None:
        self.alive.discard((name, broker_id))

    def commit(self, result: ControllerResult) -> ControllerResult:
        """What the leader does: replicate the events (through the log encoding), apply them,
        answer with the settled result."""
        events = decode_commands(encode_commands(result.commands)) if result.commands else ()
        return result.settle(self.m.apply_commands(events))

    def register(self, broker_id: int, address: str | None = None, name: str = NAME):
        return self.m.register_broker(
            CLUSTER, name, broker_id, address or addr(broker_id), self.is_alive, self.live_info
        )

    def join(self, n: int, name: str = NAME) -> int:
        """The whole first-start flow of the seed for broker n; returns its brokerId."""
        next_id = self.m.get_next_broker_id(CLUSTER, name).header.nextBrokerId
        assert self.commit(self.m.apply_broker_id(CLUSTER, name, next_id, code(n))).ok
        self.heartbeat(next_id, name=name)
        assert self.commit(self.register(next_id, addr(n), name)).ok
        return next_id

    def elect(self, broker_id: int | None = None, designate: bool = False, name: str = NAME):
        return self.m.elect_master(
            name, self.is_alive, self.live_info, broker_id=broker_id, designate_elect=designate
        )

    def alter(self, new_set: set[int], *, master: int, master_epoch=None, sss_epoch=None):
        sync = self.m.sync_state_info(NAME)
        assert sync is not None
        return self.m.alter_sync_state_set(
            NAME,
            master,
            sync.master_epoch if master_epoch is None else master_epoch,
            new_set,
            sync.sync_state_set_epoch if sss_epoch is None else sss_epoch,
            self.is_alive,
        )

    def state(self) -> dict:
        return self.m.describe()[NAME]


def three_broker_set(unclean: bool = False) -> World:
    """broker-a with ids 1 (master), 2, 3 all in the SyncStateSet, all alive."""
    w = World(unclean=unclean)
    for n in (1, 2, 3):
        assert w.join(n) == n
    assert w.commit(w.alter({1, 2, 3}, master=1)).ok
    return w


# --- persistent BrokerId (seed: persistent-unique-broker-id) ---------------------------------


def test_first_start_flow() -> None:
    w = World()
    r = w.m.get_next_broker_id(CLUSTER, NAME)
    assert r.ok and r.header.nextBrokerId == 1 and not r.commands
    r = w.m.apply_broker_id(CLUSTER, NAME, 1, code(1))
    assert [type(e) for e in r.commands] == [ApplyBrokerIdCommand]
    assert w.commit(r).ok
    assert w.m.get_next_broker_id(CLUSTER, NAME).header.nextBrokerId == 2
    w.heartbeat(1)
    r = w.commit(w.register(1))
    assert r.ok
    assert (r.header.masterBrokerId, r.header.masterAddress) == (1, addr(1))
    assert (r.header.masterEpoch, r.header.syncStateSetEpoch) == (1, 1)
    assert r.body.syncStateSet == [1]
    assert w.state()["syncStateSet"] == [1] and w.state()["masterBrokerId"] == 1


def test_apply_accepted_then_resent_gets_the_same_id() -> None:
    """Crash after ApplyBrokerId was applied but before broker.meta was written: the broker
    resends from its temp file and is told yes, with nothing new in the log."""
    w = World()
    assert w.commit(w.m.apply_broker_id(CLUSTER, NAME, 1, code(1))).ok
    before = w.m.snapshot()
    r = w.m.apply_broker_id(CLUSTER, NAME, 1, code(1))
    assert r.ok and r.commands == ()
    assert w.m.snapshot() == before
    # the answer was lost in flight and the same event is applied twice: still the same id
    assert w.m.apply_command(ApplyBrokerIdCommand(CLUSTER, NAME, addr(1), 1, code(1))).ok
    assert w.m.snapshot() == before


def test_another_broker_trying_the_same_id_is_refused() -> None:
    w = World()
    assert w.commit(w.m.apply_broker_id(CLUSTER, NAME, 1, code(1))).ok
    r = w.m.apply_broker_id(CLUSTER, NAME, 1, code(2))
    assert r.response_code == RC.CONTROLLER_BROKER_ID_INVALID and not r.commands
    assert "next brokerId is 2" in r.remark
    # the seed: delete the temp file, ask again, apply the new id
    next_id = w.m.get_next_broker_id(CLUSTER, NAME).header.nextBrokerId
    assert next_id == 2
    assert w.commit(w.m.apply_broker_id(CLUSTER, NAME, next_id, code(2))).ok


def test_two_brokers_racing_for_one_id_only_one_wins() -> None:
    """Both asked GetNextBrokerId (1), both sent ApplyBrokerId(1) before either committed."""
    w = World()
    first = w.m.apply_broker_id(CLUSTER, NAME, 1, code(1))
    second = w.m.apply_broker_id(CLUSTER, NAME, 1, code(2))
    assert first.commands and second.commands  # both looked fine against the same state
    assert w.commit(first).ok
    lost = w.commit(second)
    assert lost.response_code == RC.CONTROLLER_BROKER_ID_INVALID
    retry = w.m.apply_broker_id(CLUSTER, NAME, 1, code(2))  # the actor re-runs the handler
    assert retry.response_code == RC.CONTROLLER_BROKER_ID_INVALID
    info = w.m.replica_info(NAME)
    assert info is not None and info.broker_id_info[1].register_check_code == code(1)


@pytest.mark.parametrize(
    ("prepare", "applied_id", "expected"),
    [
        ([], 1, RC.SUCCESS),
        ([], 0, RC.CONTROLLER_BROKER_ID_INVALID),
        ([], 2, RC.CONTROLLER_BROKER_ID_INVALID),  # a new set starts at 1
        ([1], 2, RC.SUCCESS),
        ([1], 3, RC.CONTROLLER_BROKER_ID_INVALID),  # skipping ahead
        ([1, 2], 1, RC.CONTROLLER_BROKER_ID_INVALID),  # taken by broker 1
        ([1, 2], 3, RC.SUCCESS),
    ],
)
def test_apply_broker_id_cas(prepare: list[int], applied_id: int, expected: int) -> None:
    w = World()
    for n in prepare:
        assert w.commit(w.m.apply_broker_id(CLUSTER, NAME, n, code(n))).ok
    r = w.commit(w.m.apply_broker_id(CLUSTER, NAME, applied_id, code(9)))
    assert r.response_code == expected


def test_apply_broker_id_bad_requests() -> None:
    w = World()
    r = w.m.apply_broker_id(CLUSTER, NAME, 1, ";123")
    assert r.response_code == RC.CONTROLLER_INVALID_REQUEST and "registerCheckCode" in r.remark
    assert w.commit(w.m.apply_broker_id(CLUSTER, NAME, 1, code(1))).ok
    r = w.m.apply_broker_id("OtherCluster", NAME, 2, code(2))
    assert r.response_code == RC.CONTROLLER_INVALID_REQUEST and "DefaultCluster" in r.remark


def test_no_id_is_given_twice_even_after_cleaning() -> None:
    w = World()
    for n in (1, 2):
        w.join(n)
    w.die(2)
    assert w.commit(w.m.clean_broker_data(CLUSTER, NAME, "2", False, w.is_alive)).ok
    assert w.m.get_next_broker_id(CLUSTER, NAME).header.nextBrokerId == 3
    r = w.commit(w.m.apply_broker_id(CLUSTER, NAME, 2, code(7)))
    assert r.response_code == RC.CONTROLLER_BROKER_ID_INVALID
    # a resend of the cleaned broker's own temp file is refused too: it must start over
    r = w.commit(w.m.apply_broker_id(CLUSTER, NAME, 2, code(2)))
    assert r.response_code == RC.CONTROLLER_BROKER_ID_INVALID


def test_restart_on_a_new_address_keeps_identity_and_membership() -> None:
    w = three_broker_set()
    before = w.state()
    w.heartbeat(2)
    r = w.register(2, "10.9.9.9:20911")
    assert [type(e) for e in r.commands] == [UpdateBrokerAddressCommand]
    r = w.commit(r)
    assert r.ok and r.header.masterBrokerId == 1 and r.header.masterAddress == addr(1)
    after = w.state()
    assert after["brokers"]["2"] == "10.9.9.9:20911"
    assert after["syncStateSet"] == before["syncStateSet"] == [1, 2, 3]
    assert after["masterEpoch"] == before["masterEpoch"]
    assert not w.register(2, "10.9.9.9:20911").commands  # same address again: nothing to log


def test_master_restarting_elsewhere_answers_its_new_address() -> None:
    w = three_broker_set()
    r = w.commit(w.register(1, "10.1.1.1:30911"))
    assert (r.header.masterBrokerId, r.header.masterAddress) == (1, "10.1.1.1:30911")


# --- registration and first election ---------------------------------------------------------


def test_register_unknown_set_or_id() -> None:
    w = World()
    r = w.register(1)
    assert r.response_code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    w.join(1)
    r = w.register(5)
    assert r.response_code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert "brokerId 5" in r.remark


def test_second_broker_registers_as_slave() -> None:
    w = World()
    w.join(1)
    next_id = w.m.get_next_broker_id(CLUSTER, NAME).header.nextBrokerId
    assert w.commit(w.m.apply_broker_id(CLUSTER, NAME, next_id, code(2))).ok
    w.heartbeat(2)
    r = w.register(2)
    assert r.commands == ()
    assert (r.header.masterBrokerId, r.header.masterEpoch) == (1, 1)
    assert r.body.syncStateSet == [1]


def test_two_brokers_racing_for_the_first_election() -> None:
    w = World()
    for n in (1, 2):
        assert w.commit(w.m.apply_broker_id(CLUSTER, NAME, n, code(n))).ok
        w.heartbeat(n)
    r1, r2 = w.register(1), w.register(2)
    assert r1.header.masterBrokerId == 1 and r2.header.masterBrokerId == 2  # both hoped
    assert w.commit(r1).ok
    lost = w.commit(r2)
    assert lost.response_code == RC.CONTROLLER_FENCED_MASTER_EPOCH
    retry = w.commit(w.register(2))  # the actor re-runs the handler on the new state
    assert retry.ok and retry.header.masterBrokerId == 1 and retry.header.masterEpoch == 1
    assert w.state()["masterBrokerId"] == 1 and w.state()["masterEpoch"] == 1


def test_register_does_not_elect_a_dead_broker_first() -> None:
    w = World()
    assert w.commit(w.m.apply_broker_id(CLUSTER, NAME, 1, code(1))).ok
    r = w.register(1)  # no heartbeat seen
    assert r.commands == () and r.header.masterBrokerId is None


def test_register_with_a_silent_master_leaves_it_to_the_scan() -> None:
    w = three_broker_set()
    w.die(1)
    r = w.register(2)
    assert r.commands == () and r.header.masterBrokerId is None
    assert w.m.scan_need_reelect_broker_sets(w.is_alive) == [NAME]


def test_lone_broker_after_its_set_was_cleaned_becomes_master() -> None:
    """#6586: the SyncStateSet members were cleaned; the remaining broker must not stay a
    slave forever."""
    w = World()
    for n in (1, 2):
        w.join(n)
    w.die(1)
    assert w.commit(w.m.clean_broker_data(CLUSTER, NAME, "1", False, w.is_alive)).ok
    assert w.state()["syncStateSet"] == [] and w.state()["masterBrokerId"] is None
    r = w.commit(w.register(2))
    assert r.ok and r.header.masterBrokerId == 2
    assert w.state()["syncStateSet"] == [2]


def test_register_after_no_master_available() -> None:
    w = three_broker_set()
    w.commit(w.alter({1}, master=1))
    for b in (1, 2, 3):
        w.die(b)
    r = w.commit(w.elect())
    assert r.response_code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    assert w.state()["masterBrokerId"] is None
    w.heartbeat(2)
    r = w.commit(w.register(2))  # not in the SyncStateSet {1}: stays without master
    assert r.header.masterBrokerId is None and r.commands == ()
    w.heartbeat(1)
    r = w.commit(w.register(1))  # the last in-sync replica is back
    assert r.header.masterBrokerId == 1
    assert w.state()["masterEpoch"] == 3


def test_register_after_no_master_available_unclean() -> None:
    w = three_broker_set(unclean=True)
    w.commit(w.alter({1}, master=1))
    for b in (1, 2, 3):
        w.die(b)
    assert w.commit(w.elect()).response_code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    w.heartbeat(3)
    r = w.commit(w.register(3))
    assert r.ok and r.header.masterBrokerId == 3


def test_replica_info() -> None:
    w = three_broker_set()
    r = w.m.get_replica_info(NAME)
    assert (r.header.masterBrokerId, r.header.masterAddress, r.header.masterEpoch) == (
        1,
        addr(1),
        1,
    )
    assert r.body.syncStateSet == [1, 2, 3] and r.body.syncStateSetEpoch == 2
    assert w.m.get_replica_info("nope").response_code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST


def test_sync_state_data() -> None:
    w = three_broker_set()
    w.commit(w.alter({1, 2}, master=1))
    w.die(2)
    body = w.m.get_sync_state_data([NAME, "unknown"], w.is_alive).body
    assert list(body.replicasInfoTable) == [NAME]
    info = body.replicasInfoTable[NAME]
    assert [(r.brokerId, r.alive) for r in info.inSyncReplicas] == [(1, True), (2, False)]
    assert [(r.brokerId, r.alive) for r in info.notInSyncReplicas] == [(3, True)]
    assert (info.masterBrokerId, info.masterEpoch, info.syncStateSetEpoch) == (1, 1, 3)


# --- elections -------------------------------------------------------------------------------


def test_controller_trigger_with_a_live_master_changes_nothing() -> None:
    """A dead slave (or a spurious scan) must never move the master (#8380)."""
    w = three_broker_set()
    w.die(3)
    r = w.elect()
    assert r.response_code == RC.CONTROLLER_MASTER_STILL_EXIST and r.commands == ()
    assert (r.header.masterBrokerId, r.header.masterEpoch) == (1, 1)


def test_dead_master_is_replaced_by_the_most_advanced_in_sync_replica() -> None:
    w = three_broker_set()
    w.heartbeat(2, epoch=1, max_offset=900)
    w.heartbeat(3, epoch=1, max_offset=1000)
    w.die(1)
    assert w.m.scan_need_reelect_broker_sets(w.is_alive) == [NAME]
    r = w.elect()
    assert [type(e) for e in r.commands] == [ElectMasterCommand]
    r = w.commit(r)
    assert r.ok
    assert (r.header.masterBrokerId, r.header.masterEpoch, r.header.syncStateSetEpoch) == (3, 2, 3)
    assert r.body.syncStateSet == [3]
    assert r.body.brokerMemberGroup.brokerAddrs == {1: addr(1), 2: addr(2), 3: addr(3)}
    assert w.state()["masterBrokerId"] == 3 and w.state()["syncStateSet"] == [3]
    entry = w.m.role_change_entry(NAME)
    assert entry is not None and (entry.masterBrokerId, entry.masterEpoch) == (3, 2)
    assert w.m.scan_need_reelect_broker_sets(w.is_alive) == []


def test_nobody_to_elect_records_the_loss_once() -> None:
    w = three_broker_set()
    w.commit(w.alter({1, 2}, master=1))
    w.die(1)
    w.die(2)
    r = w.elect()
    assert r.response_code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    assert [e.new_master_broker_id for e in r.commands] == [None]
    w.commit(r)
    assert w.state()["masterBrokerId"] is None and w.state()["masterEpoch"] == 2
    assert w.state()["syncStateSet"] == [1, 2]  # kept: they hold the committed data
    again = w.elect()
    assert again.response_code == RC.CONTROLLER_MASTER_NOT_AVAILABLE and again.commands == ()
    assert w.m.scan_need_reelect_broker_sets(w.is_alive) == []  # only 3 alive, not in sync


def test_old_master_is_fenced_after_losing_its_role() -> None:
    w = three_broker_set()
    w.die(1)
    w.commit(w.elect())
    w.heartbeat(1)  # the old master comes back and still thinks it leads (epoch 1)
    r = w.alter({1, 2}, master=1, master_epoch=1)
    assert r.response_code == RC.CONTROLLER_INVALID_MASTER


@pytest.mark.parametrize(
    ("alive", "broker_id", "designate", "code", "new_master"),
    [
        ({1, 2, 3}, 2, True, RC.SUCCESS, 2),  # admin switch away from a living master
        ({1, 2, 3}, 1, True, RC.CONTROLLER_MASTER_STILL_EXIST, 1),
        ({1, 3}, 2, True, RC.CONTROLLER_ELECT_MASTER_FAILED, 1),  # designated is dead
        ({1, 2, 3}, 9, True, RC.CONTROLLER_ELECT_MASTER_FAILED, 1),  # unknown broker
        ({1, 2, 3}, 2, False, RC.CONTROLLER_MASTER_STILL_EXIST, 1),  # broker trigger
        ({2, 3}, 3, False, RC.SUCCESS, 2),  # broker trigger, master dead: best candidate
        # the master itself asks: it restarted; the most advanced live member wins a NEW epoch
        ({1, 2, 3}, 1, False, RC.SUCCESS, 2),
    ],
)
def test_admin_and_broker_triggers(alive, broker_id, designate, code, new_master) -> None:
    w = three_broker_set()
    w.heartbeat(2, max_offset=10)
    w.heartbeat(3, max_offset=5)
    w.alive = {(NAME, b) for b in alive}
    r = w.commit(w.elect(broker_id, designate))
    assert r.response_code == code
    assert w.state()["masterBrokerId"] == new_master


def test_a_restarted_master_gets_a_new_epoch_even_when_it_wins_again() -> None:
    w = three_broker_set()
    w.heartbeat(1, max_offset=50)  # it is the most advanced: elected again, but in epoch 2
    w.heartbeat(2, max_offset=10)
    w.heartbeat(3, max_offset=5)
    r = w.commit(w.elect(1, False))
    assert r.ok and r.header.masterBrokerId == 1 and r.header.masterEpoch == 2
    assert w.state()["masterEpoch"] == 2 and w.state()["syncStateSet"] == [1]


def test_designated_broker_outside_the_sync_state_set() -> None:
    w = three_broker_set()
    w.commit(w.alter({1, 2}, master=1))
    r = w.elect(3, designate=True)
    assert r.response_code == RC.CONTROLLER_ELECT_MASTER_FAILED and "SyncStateSet" in r.remark
    u = three_broker_set(unclean=True)
    u.commit(u.alter({1, 2}, master=1))
    u.die(1)
    u.die(2)
    assert u.commit(u.elect(3, designate=True)).ok
    assert u.state()["masterBrokerId"] == 3


def test_elect_unknown_set() -> None:
    w = World()
    assert w.elect().response_code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED


def test_two_elections_racing() -> None:
    w = three_broker_set()
    w.die(1)
    a, b = w.elect(), w.elect(3, designate=True)
    assert w.commit(a).ok
    assert w.commit(b).response_code == RC.CONTROLLER_FENCED_MASTER_EPOCH
    assert w.state()["masterEpoch"] == 2


@pytest.mark.parametrize(
    ("master_alive", "alive_others", "sss", "unclean", "listed"),
    [
        (True, {2, 3}, {1, 2, 3}, False, False),
        (False, {2}, {1, 2, 3}, False, True),
        (False, set(), {1, 2, 3}, False, False),  # nobody alive: nothing to do
        (False, {3}, {1, 2}, False, True),  # master dead, only an out-of-sync replica alive
    ],
)
def test_scan_need_reelect(master_alive, alive_others, sss, unclean, listed) -> None:
    w = three_broker_set(unclean=unclean)
    if sss != {1, 2, 3}:
        w.commit(w.alter(sss, master=1))
    w.alive = {(NAME, b) for b in alive_others | ({1} if master_alive else set())}
    assert (w.m.scan_need_reelect_broker_sets(w.is_alive) == [NAME]) is listed


# --- AlterSyncStateSet pre-checks ------------------------------------------------------------


@pytest.mark.parametrize(
    ("new_set", "kwargs", "dead", "code"),
    [
        ({1, 2}, {"master": 2}, set(), RC.CONTROLLER_INVALID_MASTER),
        ({1, 2}, {"master": 1, "master_epoch": 0}, set(), RC.CONTROLLER_FENCED_MASTER_EPOCH),
        ({1, 2}, {"master": 1, "sss_epoch": 1}, set(), RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        ({1, 2, 3}, {"master": 1}, set(), RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),  # no change
        ({1, 2, 7}, {"master": 1}, set(), RC.CONTROLLER_INVALID_REPLICAS),
        ({2, 3}, {"master": 1}, set(), RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),  # master out
        (set(), {"master": 1}, set(), RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED),
        ({1, 2}, {"master": 1}, set(), RC.SUCCESS),  # shrink
        ({1, 3}, {"master": 1}, {3}, RC.SUCCESS),  # keeping a member we think dead is allowed
    ],
)
def test_alter_sync_state_set_prechecks(new_set, kwargs, dead, code) -> None:
    w = three_broker_set()
    for b in dead:
        w.die(b)
    before = w.m.snapshot()
    r = w.alter(new_set, **kwargs)
    assert r.response_code == code, r.remark
    if code != RC.SUCCESS:
        assert r.commands == () and w.m.snapshot() == before
        return
    assert r.header.newSyncStateSetEpoch == 3 and r.body.syncStateSet == sorted(new_set)
    assert w.commit(r).ok
    assert w.state()["syncStateSet"] == sorted(new_set) and w.state()["syncStateSetEpoch"] == 3


def test_alter_expand_needs_the_new_member_alive() -> None:
    w = three_broker_set()
    w.commit(w.alter({1}, master=1))
    w.die(3)
    r = w.alter({1, 2, 3}, master=1)
    assert r.response_code == RC.CONTROLLER_BROKER_NOT_ALIVE and "[3]" in r.remark
    assert w.commit(w.alter({1, 2}, master=1)).ok


def test_alter_unknown_set() -> None:
    w = World()
    r = w.m.alter_sync_state_set("nope", 1, 1, {1}, 1, w.is_alive)
    assert r.response_code == RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED


def test_concurrent_alters_never_share_an_epoch() -> None:
    """#6342: two requests computed from the same syncStateSetEpoch must not both apply."""
    w = three_broker_set()
    a = w.alter({1, 2}, master=1)
    b = w.alter({1, 3}, master=1)
    assert a.header.newSyncStateSetEpoch == b.header.newSyncStateSetEpoch == 3
    assert w.commit(a).ok
    assert w.commit(b).response_code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    assert w.state()["syncStateSet"] == [1, 2] and w.state()["syncStateSetEpoch"] == 3


def test_alter_overtaken_by_an_election() -> None:
    w = three_broker_set()
    shrink = w.alter({1, 2}, master=1)
    w.die(1)
    assert w.commit(w.elect()).ok
    assert w.commit(shrink).response_code == RC.CONTROLLER_FENCED_MASTER_EPOCH


# --- clean broker data -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ids", "living", "dead", "code"),
    [
        (None, False, set(), RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA),  # all alive
        ("3", False, set(), RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA),  # 3 alive
        ("3", True, set(), RC.SUCCESS),
        ("3", False, {3}, RC.SUCCESS),
        (None, False, {1, 2, 3}, RC.SUCCESS),
        ("8", True, set(), RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA),  # unknown id
        ("1;x", True, set(), RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA),
    ],
)
def test_clean_prechecks(ids, living, dead, code) -> None:
    w = three_broker_set()
    for b in dead:
        w.die(b)
    r = w.commit(w.m.clean_broker_data(CLUSTER, NAME, ids, living, w.is_alive))
    assert r.response_code == code, r.remark


def test_clean_whole_set_forgets_it() -> None:
    w = three_broker_set()
    assert w.commit(w.m.clean_broker_data(None, NAME, None, True, w.is_alive)).ok
    assert w.m.broker_names() == []
    assert w.m.get_next_broker_id(CLUSTER, NAME).header.nextBrokerId == 1
    r = w.m.clean_broker_data(None, NAME, None, True, w.is_alive)
    assert r.response_code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA


def test_clean_wrong_cluster() -> None:
    w = three_broker_set()
    r = w.m.clean_broker_data("Other", NAME, "3", True, w.is_alive)
    assert r.response_code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA


def test_cleaning_the_master_fences_it_and_bumps_the_set_epoch() -> None:
    w = three_broker_set()
    w.die(1)
    assert w.commit(w.m.clean_broker_data(CLUSTER, NAME, "1", False, w.is_alive)).ok
    s = w.state()
    assert (s["masterBrokerId"], s["masterEpoch"]) == (None, 2)
    assert (s["syncStateSet"], s["syncStateSetEpoch"]) == ([2, 3], 3)
    assert w.m.scan_need_reelect_broker_sets(w.is_alive) == [NAME]
    assert w.commit(w.elect()).ok and w.state()["masterBrokerId"] == 2


# --- snapshots and determinism ---------------------------------------------------------------


def busy_world() -> World:
    w = three_broker_set()
    w.join(1, name="broker-b")
    w.commit(w.register(3, "10.3.3.3:1"))
    w.die(1)
    w.commit(w.elect())
    return w


def test_snapshot_restore_gives_equal_state() -> None:
    w = busy_world()
    data = w.m.snapshot()
    other = ReplicasInfoManager()
    other.restore(data)
    assert other.snapshot() == data
    assert other.describe() == w.m.describe()
    # the restored machine keeps working the same way
    event = AlterSyncStateSetCommand("broker-a", frozenset({2, 3}), 2, 3)
    assert w.m.apply_command(event) == other.apply_command(event)
    assert other.snapshot() == w.m.snapshot()


def test_snapshot_is_deterministic_json() -> None:
    data = busy_world().m.snapshot()
    assert data == busy_world().m.snapshot()
    doc = json.loads(data)
    assert doc["format"] == 1
    assert [s["brokerName"] for s in doc["brokerSets"]] == ["broker-a", "broker-b"]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"[]",
        b'{"format":2,"brokerSets":[]}',
        b'{"format":1}',
        b'{"format":1,"brokerSets":[{"brokerName":"a"}]}',
        b'{"format":1,"brokerSets":[1]}',
    ],
)
def test_bad_snapshot_is_refused_and_state_kept(data: bytes) -> None:
    w = busy_world()
    before = w.m.snapshot()
    with pytest.raises(SnapshotError):
        w.m.restore(data)
    assert w.m.snapshot() == before


def test_apply_rejects_non_events() -> None:
    with pytest.raises(TypeError):
        ReplicasInfoManager().apply_command("not an event")  # type: ignore[arg-type]


def test_settle_needs_one_outcome_per_event() -> None:
    r = ReplicasInfoManager().apply_broker_id(CLUSTER, NAME, 1, code(1))
    with pytest.raises(ValueError, match="outcomes"):
        r.settle([])


small_names = st.sampled_from(["a", "b"])
small_ids = st.integers(0, 4)
small_sets = st.frozensets(st.integers(0, 4), max_size=4)
epochs = st.integers(0, 4)
random_events: st.SearchStrategy[Command] = st.one_of(
    st.builds(
        ApplyBrokerIdCommand,
        st.sampled_from(["c1", "c2"]),
        small_names,
        st.sampled_from(["h:1", "h:2"]),
        small_ids,
        st.sampled_from(["x", "y", "z"]),
    ),
    st.builds(
        UpdateBrokerAddressCommand,
        st.just("c1"),
        small_names,
        st.sampled_from(["h:1", "h:3"]),
        small_ids,
    ),
    st.builds(ElectMasterCommand, small_names, st.none() | small_ids, epochs),
    st.builds(AlterSyncStateSetCommand, small_names, small_sets, epochs, epochs),
    st.builds(CleanBrokerDataCommand, small_names, st.none() | small_sets),
)


def check_invariants(m: ReplicasInfoManager, owners: dict[tuple[str, int], str]) -> None:
    for name in m.broker_names():
        replica, sync = m.replica_info(name), m.sync_state_info(name)
        assert replica is not None and sync is not None
        assert sync.sync_state_set <= set(replica.broker_id_info)
        assert sync.master_broker_id is None or sync.master_broker_id in sync.sync_state_set
        assert all(i < replica.next_assign_broker_id for i in replica.broker_id_info)
        for broker_id, info in replica.broker_id_info.items():
            owner = owners.setdefault((name, broker_id), info.register_check_code)
            assert owner == info.register_check_code, "a brokerId was given twice"


@settings(max_examples=150, deadline=None)
@given(st.lists(random_events, max_size=40), st.integers(0, 40))
def test_random_event_sequences_are_deterministic(events: list[Command], cut: int) -> None:
    """Two replicas applying the same log agree; a replica restored from a snapshot taken
    part-way and fed the rest agrees too; the invariants hold after every step."""
    a, b, c = ReplicasInfoManager(), ReplicasInfoManager(), ReplicasInfoManager()
    owners: dict[tuple[str, int], str] = {}
    outcomes_a, outcomes_b = [], []
    for i, event in enumerate(events):
        if i == cut:
            c.restore(a.snapshot())
        if isinstance(event, CleanBrokerDataCommand) and event.broker_ids is None:
            owners = {k: v for k, v in owners.items() if k[0] != event.broker_name}
        outcomes_a.append(a.apply_command(event))
        (logged,) = decode_commands(encode_commands([event]))
        outcomes_b.append(b.apply_command(logged))
        if i >= cut:
            c.apply_command(event)
        check_invariants(a, owners)
    if cut >= len(events):
        c.restore(a.snapshot())
    assert outcomes_a == outcomes_b
    assert a.snapshot() == b.snapshot() == c.snapshot()


# --- ControllerConfig (the manager's enableElectUncleanMaster comes from it) -----------------


def test_controller_config_defaults_are_upstream() -> None:
    cfg = ControllerConfig()
    assert (cfg.scanNotActiveBrokerInterval, cfg.scanInactiveMasterInterval) == (5000, 5000)
    assert (cfg.electMasterMaxRetryCount, cfg.controllerType) == (3, "DLedger")
    assert (cfg.enableElectUncleanMaster, cfg.notifyBrokerRoleChanged) == (False, True)
    assert cfg.store_path().endswith("DLedgerController")
    assert cfg.config_black_list() == frozenset({"configBlackList", "configStorePath"})


def test_controller_config_from_properties() -> None:
    text = (
        "controllerDLegerGroup = group1\n"
        "controllerDLegerPeers = n0-127.0.0.1:9877;n1-127.0.0.1:9878;n2-127.0.0.1:9879\n"
        "controllerDLegerSelfId = n1\n"
        "controllerStorePath = /tmp/ctl\n"
        "enableElectUncleanMaster = true\n"
    )
    cfg = build_config(ControllerConfig, parse_properties(text, "controller.conf"))
    assert cfg.enableElectUncleanMaster is True and cfg.store_path() == "/tmp/ctl"
    assert cfg.self_address() == "127.0.0.1:9878"
    raft = cfg.to_raft_config()
    assert (raft.group, raft.selfId) == ("group1", "n1")
    assert list(cfg.peer_map()) == ["n0", "n1", "n2"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"controllerType": "jRaft"}, "not supported"),
        ({"controllerType": "zk"}, "controllerType"),
        ({"scanNotActiveBrokerInterval": "0"}, "scanNotActiveBrokerInterval"),
        ({"controllerdlegerpeers": "x"}, "did you mean controllerDLegerPeers"),
    ],
)
def test_controller_config_errors_name_the_key(values: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        build_config(ControllerConfig, values, "controller.conf")


def test_controller_config_raft_keys_checked_when_raft_is_built() -> None:
    cfg = ControllerConfig(controllerDLegerGroup="g", controllerDLegerPeers="n0-h:1")
    with pytest.raises(RaftConfigError, match="controllerDLegerSelfId"):
        cfg.to_raft_config()


# --- the catch-up fence (a broker that cut its log after a lost page, docs/hardening.md) ----


def fenced(w: World, broker_id: int, max_offset: int = 5000) -> None:
    """A heartbeat saying notElectable (the most advanced offset: it must not matter)."""
    w.heartbeat(broker_id, epoch=9, max_offset=max_offset)
    info = w.infos[(NAME, broker_id)]
    w.infos[(NAME, broker_id)] = attrs.evolve(info, electable=False)


def test_a_fenced_broker_is_never_elected_however_advanced() -> None:
    w = three_broker_set()
    w.heartbeat(2, epoch=1, max_offset=100)
    fenced(w, 3)
    w.die(1)
    r = w.commit(w.elect())
    assert r.ok and r.header.masterBrokerId == 2
    w2 = three_broker_set()
    fenced(w2, 2)
    fenced(w2, 3)
    w2.die(1)
    r = w2.commit(w2.elect())
    assert r.response_code == RC.CONTROLLER_MASTER_NOT_AVAILABLE
    assert w2.state()["masterBrokerId"] is None
    # nobody electable is alive: the scan stops asking
    assert w2.m.scan_need_reelect_broker_sets(w2.is_alive, w2.live_info) == []
    assert w2.commit(w2.elect(broker_id=3)).response_code == RC.CONTROLLER_ELECT_MASTER_FAILED


def test_a_restarted_master_that_says_it_is_fenced_is_replaced() -> None:
    """The master restarted before its silence was noticed: alive, but not electable."""
    w = three_broker_set()
    fenced(w, 1)
    assert w.m.scan_need_reelect_broker_sets(w.is_alive) == []  # liveness alone: keep it
    assert w.m.scan_need_reelect_broker_sets(w.is_alive, w.live_info) == [NAME]
    r = w.commit(w.elect())
    assert r.ok and r.header.masterBrokerId in (2, 3) and r.header.masterEpoch == 2


def test_a_fenced_broker_is_not_the_first_master_of_an_empty_set() -> None:
    w = World()
    next_id = w.m.get_next_broker_id(CLUSTER, NAME).header.nextBrokerId
    assert w.commit(w.m.apply_broker_id(CLUSTER, NAME, next_id, code(1))).ok
    fenced(w, next_id)
    r = w.commit(w.register(next_id))
    assert r.ok and r.header.masterBrokerId is None
