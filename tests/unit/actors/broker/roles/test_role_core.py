"""Broker role decisions in controller mode (actors/broker/roles/role_core.py), table-tested."""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.roles.role_core import (
    AdoptSyncStateSet,
    BecomeMaster,
    BecomeSlave,
    ControllerView,
    FollowNewAddress,
    HoldFence,
    Ignore,
    LiftFence,
    RequestElection,
    Role,
    RoleCore,
)
from rocketrio.storage.catch_up_fence import CatchUpFence

ME = 2


def view(master: int | None, epoch: int, sss: tuple[int, ...] | None = None, sse: int | None = None,
         addr: str | None = "10.0.0.1:10911") -> ControllerView:  # fmt: skip
    return ControllerView(master, addr, epoch, None if sss is None else frozenset(sss), sse)


def fresh(boot_last_epoch: int = -1, *, needs_lease: bool = False) -> RoleCore:
    return RoleCore(ME, boot_last_epoch=boot_last_epoch, lease_ms=1000, needs_lease=needs_lease)


def test_first_master_and_slave() -> None:
    r = fresh()
    assert r.on_view(view(ME, 1, (ME,), 1), 0) == BecomeMaster(1, frozenset({ME}), 1, False)
    assert r.role is Role.MASTER
    r2 = RoleCore(3, boot_last_epoch=-1, lease_ms=1000, needs_lease=False)
    assert r2.on_view(view(ME, 1), 0) == BecomeSlave(ME, "10.0.0.1:10911", 1, False)


@pytest.mark.parametrize(
    ("boot_last", "v", "expected_type"),
    [
        # named master at an epoch our epoch file already holds: never resume writing in it
        (3, view(ME, 3), RequestElection),
        (5, view(ME, 3), RequestElection),
        # a newer epoch: fine, this process appends it before writing
        (3, view(ME, 4), BecomeMaster),
        # a slave of an epoch older than our file: stale controller view
        (5, view(1, 4), Ignore),
        (5, view(1, 5), BecomeSlave),
        # no master in a newer epoch: offer ourselves
        (-1, view(None, 2), RequestElection),
    ],
)
def test_restart_rules(boot_last: int, v: ControllerView, expected_type: type) -> None:
    assert isinstance(fresh(boot_last).on_view(v, 0), expected_type)


def test_epochs_only_move_forward_and_one_master_per_epoch() -> None:
    r = fresh()
    r.on_view(view(1, 4), 0)
    assert isinstance(r.on_view(view(1, 3), 1), Ignore)
    assert isinstance(r.on_view(view(3, 4), 1), Ignore)  # another master in the same epoch
    assert r.master_id == 1
    assert r.on_view(view(ME, 5, (ME,), 7), 2) == BecomeMaster(5, frozenset({ME}), 7, False)
    # re-elected while master (#9689 path): keep connections
    assert r.on_view(view(ME, 6, (ME,), 8), 3) == BecomeMaster(6, frozenset({ME}), 8, True)
    assert r.on_view(view(1, 7), 4) == BecomeSlave(1, "10.0.0.1:10911", 7, True)


def test_same_epoch_updates() -> None:
    r = fresh()
    r.on_view(view(ME, 1, (ME,), 1), 0)
    assert r.on_view(view(ME, 1, (ME, 3), 2), 1) == AdoptSyncStateSet(frozenset({ME, 3}), 2)
    assert isinstance(r.on_view(view(ME, 1, (ME,), 1), 1), Ignore)  # an older set
    s = fresh()
    s.on_view(view(1, 1, addr="a:1"), 0)
    assert s.on_view(view(1, 1, addr="b:1"), 1) == FollowNewAddress("b:1")
    assert isinstance(s.on_view(view(None, 1), 2), Ignore)  # master not alive yet: wait


def test_a_master_deposed_without_a_successor_stops_and_asks() -> None:
    r = fresh()
    r.on_view(view(ME, 1, (ME,), 1), 0)
    d = r.on_view(view(None, 2), 1)
    assert d == RequestElection("the set has no master at masterEpoch 2", True)
    assert r.role is None
    assert isinstance(r.on_view(view(ME, 3, (ME,), 3), 2), BecomeMaster)


def test_lease_only_in_in_sync_replicas_mode_and_only_after_the_predecessors_expired() -> None:
    assert not fresh().lease_valid(0)
    r = fresh(needs_lease=True)
    r.on_view(view(ME, 1, (ME,), 1), 100)
    assert not r.lease_valid(150)  # no linearizable confirmation yet
    r.on_lease_confirmed(view(ME, 1), sent_at_ms=200)
    assert not r.lease_valid(900)  # a predecessor's lease may still run until 100 + 1000
    assert r.lease_valid(1100)
    assert not r.lease_valid(1200)  # ours ran out: 200 + 1000
    r.on_lease_confirmed(view(1, 2), sent_at_ms=1150)  # names someone else: no renewal
    assert not r.lease_valid(1200)


# --- the catch-up fence (store/lost_page.py) -------------------------------------------------


def fenced_core(boot_last_epoch: int = 3) -> RoleCore:
    fence = CatchUpFence(lost_offset=4096, old_end=9000, epoch=3, quarantine="/q")
    return RoleCore(
        ME, boot_last_epoch=boot_last_epoch, lease_ms=1000, needs_lease=False, fence=fence
    )


@pytest.mark.parametrize("v", [view(ME, 3, (1, ME), 4), view(ME, 4, (ME,), 5), view(None, 4)])
def test_a_fenced_broker_never_becomes_master_nor_asks_for_an_election(v: ControllerView) -> None:
    r = fenced_core()
    d = r.on_view(v, 0)
    assert isinstance(d, HoldFence) and r.role is None and r.fence is not None


def test_a_fenced_broker_follows_a_new_master_then_lifts_the_fence_once_listed() -> None:
    r = fenced_core()
    assert r.on_view(view(1, 4, (1,), 5), 0) == BecomeSlave(1, "10.0.0.1:10911", 4, False)
    assert r.on_view(view(1, 4, (1,), 5), 0) == Ignore("nothing new")
    d = r.on_view(view(1, 4, (1, ME), 6), 0)
    assert isinstance(d, LiftFence) and d.then == Ignore("nothing new")
    assert (d.master_id, d.epoch, d.fence.lost_offset) == (1, 4, 4096) and r.fence is None
    # from now on an ordinary member: elected later, it takes the role
    assert isinstance(r.on_view(view(ME, 5, (ME,), 7), 0), BecomeMaster)


def test_the_fence_is_not_lifted_by_the_set_of_its_own_epoch() -> None:
    r = fenced_core()
    assert isinstance(r.on_view(view(1, 3, (1, ME), 4), 0), BecomeSlave)
    assert r.fence is not None


def test_a_fenced_slave_whose_master_vanished_holds() -> None:
    r = fenced_core()
    r.on_view(view(1, 4, (1,), 5), 0)
    assert isinstance(r.on_view(view(None, 5), 0), HoldFence) and r.role is None
    assert isinstance(r.on_view(view(3, 6, (3,), 7), 0), BecomeSlave)
