"""SyncStateSet, confirmOffset and ack policy core (actors/broker/ha/sync_state.py).

Rule tests, then a model check of the invariant behind #5663: at every step, every member of
the CONTROLLER's SyncStateSet holds every write the master acknowledged (and everything below
confirmOffset), while proposals are answered, refused, delayed, applied with the answer lost,
and fenced by syncStateSetEpoch as the real controller does.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.ha.sync_state import AckPolicy, Proposal, SyncStateCore

ALL = AckPolicy(all_ack_in_sync_state_set=True)


def core(
    policy: AckPolicy = ALL,
    sss: tuple[int, ...] = (0,),
    epoch: int = 1,
    local_max: int = 0,
    not_catchup_ms: int = 15_000,
) -> SyncStateCore[str]:
    return SyncStateCore(
        0,
        policy,
        max_time_not_catchup_ms=not_catchup_ms,
        sync_state_set=sss,
        sync_state_set_epoch=epoch,
        epoch_start_offset=0,
        local_max=local_max,
        confirm_offset=local_max,
        now_ms=0,
    )


def connect(c: SyncStateCore[str], *ids: int, learner: bool = False) -> None:
    for i in ids:
        c.on_connected(i, learner=learner, now_ms=0)


def test_a_lone_master_acks_at_once_and_confirms_its_own_end() -> None:
    c = core()
    c.on_local_max(100)
    c.add_pending(100, 5000, "w1")
    assert c.take_done(0) == (["w1"], [])
    assert c.confirm_offset == 100


def test_ack_now_only_when_nothing_waits_and_every_needed_copy_holds_it() -> None:
    c = core()
    c.on_local_max(100)
    assert c.ack_now(100)  # a lone master: no pending entry at all
    c = core(sss=(0, 1))
    connect(c, 1)
    c.on_local_max(100)
    assert not c.ack_now(100)  # the slave lacks it
    c.add_pending(100, 5000, "w1")
    c.on_ack(1, 100, 1)
    c.on_local_max(150)
    c.on_ack(1, 150, 2)
    assert not c.ack_now(150)  # covered, but an earlier write still waits: answers keep order
    assert c.take_done(2) == (["w1"], [])
    c.on_local_max(200)
    c.on_ack(1, 200, 3)
    assert c.ack_now(200)
    # inSyncReplicas 1 counts the master alone, but only under a valid lease
    c = core(AckPolicy(all_ack_in_sync_state_set=False, in_sync_replicas=1), sss=(0, 1))
    connect(c, 1)
    c.on_local_max(100)
    assert c.ack_now(100, lease_valid=True)
    c.on_local_max(200)
    assert not c.ack_now(200, lease_valid=False)


def test_all_ack_waits_for_every_member_and_confirm_is_their_minimum() -> None:
    c = core(sss=(0, 1, 2))
    connect(c, 1, 2)
    c.on_local_max(300)
    c.add_pending(300, 5000, "w")
    c.on_ack(1, 300, 10)
    assert c.take_done(10) == ([], [])
    c.on_ack(2, 200, 10)
    assert c.confirm_offset == 200
    assert c.take_done(10) == ([], [])
    c.on_ack(2, 300, 11)
    assert c.take_done(11) == (["w"], [])
    assert c.confirm_offset == 300


def test_pending_writes_time_out_in_order() -> None:
    c = core(sss=(0, 1))
    connect(c, 1)
    c.on_local_max(200)
    c.add_pending(100, 50, "a")
    c.add_pending(200, 60, "b")
    assert c.take_done(55) == ([], ["a"])
    c.on_ack(1, 200, 56)
    assert c.take_done(56) == (["b"], [])


def test_in_sync_replicas_counts_members_only_and_needs_the_lease() -> None:
    policy = AckPolicy(all_ack_in_sync_state_set=False, in_sync_replicas=2)
    c = core(policy, sss=(0, 1, 2))
    connect(c, 1, 2)
    connect(c, 3, learner=True)
    c.on_local_max(100)
    c.on_ack(3, 100, 1)  # a learner's copy never counts
    assert c.ack_bound(lease_valid=True) == 0
    c.on_ack(1, 100, 1)
    assert c.ack_bound(lease_valid=True) == 100
    # without a lease the master may not count fewer than every member (role_core explains)
    assert c.ack_bound(lease_valid=False) == 0


def test_a_learner_master_does_not_count_its_own_copy() -> None:
    """Cluster simulation seed 300440: an asyncLearner that a cold start made master (upstream's
    flag only keeps a slave out of the set), inSyncReplicas=2 of its two voting slaves. Counting
    its own copy it acknowledged a write one slave held, the controller later elected the other,
    and the write's queue offset went to another message. Its copy does not count: both slaves
    must hold the write (every member that may be elected), as for a voting master with k=3."""
    policy = AckPolicy(all_ack_in_sync_state_set=False, in_sync_replicas=2, learner=True)
    c = core(policy, sss=(0, 1, 2))
    connect(c, 1, 2)
    c.on_local_max(100)
    c.on_ack(1, 100, 1)
    assert c.ack_bound(lease_valid=True) == 0  # the master and one slave: not enough
    c.on_ack(2, 60, 1)
    assert c.ack_bound(lease_valid=True) == 60
    c.on_ack(2, 100, 1)
    assert c.ack_bound(lease_valid=True) == 100
    voting = core(AckPolicy(all_ack_in_sync_state_set=False, in_sync_replicas=2), sss=(0, 1, 2))
    connect(voting, 1, 2)
    voting.on_local_max(100)
    voting.on_ack(1, 100, 1)
    assert voting.ack_bound(lease_valid=True) == 100  # a voting master's copy counts
    lone = core(policy, sss=(0,), local_max=100)
    assert lone.ack_bound(lease_valid=True) == 0  # k=2 and nobody else: as a voting master


def test_min_in_sync_replicas_refuses_puts() -> None:
    c = core(AckPolicy(min_in_sync_replicas=2), sss=(0,))
    assert not c.admit_put()
    c = core(AckPolicy(min_in_sync_replicas=2), sss=(0, 1))
    assert c.admit_put()


def test_shrink_on_disconnect_applies_only_after_the_controller_accepts() -> None:
    c = core(sss=(0, 1), local_max=100)
    connect(c, 1)
    c.on_ack(1, 100, 0)
    c.on_local_max(150)
    c.add_pending(150, 5000, "w")
    c.on_disconnected(1)
    p = c.take_proposal()
    assert p == Proposal(frozenset({0}), 1)
    assert c.take_proposal() is None  # one in flight at a time
    assert c.take_done(1) == ([], [])  # 1 may still be in the controller's set: keep waiting
    c.on_proposal_accepted({0}, 2)
    assert c.take_done(2) == (["w"], [])
    assert c.possible == {0}


def test_an_unanswered_proposal_keeps_its_members_until_a_newer_epoch_is_seen() -> None:
    c = core(sss=(0,), local_max=100)
    connect(c, 1)
    c.on_ack(1, 100, 0)
    p = c.take_proposal()
    assert p is not None and p.members == {0, 1}
    c.on_proposal_unknown()  # e.g. the answer was lost: the controller may have applied it
    c.on_disconnected(1)
    c.on_local_max(200)
    c.add_pending(200, 9999, "w")
    assert c.take_done(1) == ([], [])  # 1 may be in the set: the write needs it
    # an authoritative read at the SAME epoch does not resolve it (it may still apply)
    c.on_authoritative({0}, 1)
    assert 1 in c.possible
    # a newer epoch does: whatever the controller holds now is all that is possible
    c.on_authoritative({0}, 2)
    assert c.possible == {0}
    assert c.take_done(2) == (["w"], [])


def test_two_quick_removals_do_not_resurrect_the_first() -> None:
    c = core(sss=(0, 1, 2))
    connect(c, 1, 2)
    c.on_disconnected(1)
    p1 = c.take_proposal()
    assert p1 is not None and p1.members == {0, 2}
    c.on_disconnected(2)  # upstream built the next proposal from the applied set: {0, 1}
    c.on_proposal_accepted({0, 2}, 2)
    p2 = c.take_proposal()
    assert p2 is not None and p2.members == {0}


def test_a_member_that_stops_catching_up_is_dropped_after_the_limit() -> None:
    c = core(sss=(0, 1), not_catchup_ms=1000)
    connect(c, 1)
    c.on_local_max(100)
    c.on_ack(1, 100, 0)
    c.on_local_max(200)
    c.on_sent(1, 10)
    c.tick(900)
    assert c.take_proposal() is None
    c.tick(1001)  # acks stayed below what was sent: it has not caught up for 1001 ms
    p = c.take_proposal()
    assert p is not None and p.members == {0}


def test_a_slave_that_keeps_acking_what_was_sent_stays() -> None:
    c = core(sss=(0, 1), not_catchup_ms=1000)
    connect(c, 1)
    for t in range(0, 5000, 100):
        c.on_local_max(t + 100)
        c.on_sent(1, t)
        c.on_ack(1, t + 100, t + 5)
        c.tick(t + 10)
    assert c.take_proposal() is None


@pytest.mark.parametrize(
    ("ack", "learner", "expanded"),
    [(100, False, True), (90, False, False), (100, True, False)],
)
def test_expand_needs_a_caught_up_non_learner(ack: int, learner: bool, expanded: bool) -> None:
    c = core(sss=(0,), local_max=100)
    connect(c, 1, learner=learner)
    c.on_sent(1, 0)
    c.on_ack(1, ack, 1)
    p = c.take_proposal()
    assert (p is not None and 1 in p.members) == expanded


def test_expand_needs_every_acknowledged_write() -> None:
    c = core(AckPolicy(all_ack_in_sync_state_set=False, in_sync_replicas=1), sss=(0,))
    c.on_local_max(500)
    c.add_pending(500, 9999, "w")
    assert c.take_done(0) == (["w"], [])
    connect(c, 1)
    c.on_ack(1, 400, 1)
    assert c.take_proposal() is None


def test_confirm_never_goes_back_when_a_member_reconnects_lower() -> None:
    c = core(sss=(0, 1), local_max=100)
    connect(c, 1)
    c.on_ack(1, 100, 0)
    assert c.confirm_offset == 100
    c.on_disconnected(1)
    connect(c, 1)
    c.on_ack(1, 50, 1)
    assert c.confirm_offset == 100


# --------------------------------------------------------------------------- model check


class ModelController:
    """The controller's SyncStateSet with AlterSyncStateSet fenced by syncStateSetEpoch."""

    def __init__(self, members: set[int], epoch: int) -> None:
        self.members = set(members)
        self.epoch = epoch
        self.queue: list[Proposal] = []  # received, not yet applied

    def process(self, p: Proposal) -> bool:
        if p.base_epoch != self.epoch or 0 not in p.members:
            return False
        self.members = set(p.members)
        self.epoch += 1
        return True


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32), st.integers(20, 200))
def test_every_controller_member_holds_every_acknowledged_write(seed: int, n_steps: int) -> None:
    rng = random.Random(seed)
    c = core(sss=(0,))
    ctrl = ModelController({0}, 1)
    data = {1: 0, 2: 0}  # each slave's log end (never shrinks here)
    connected: set[int] = set()
    acked_end = 0
    in_flight: Proposal | None = None
    t = 0
    for _ in range(n_steps):
        t += rng.randint(1, 50)
        r = rng.random()
        if r < 0.25:
            end = c.local_max + rng.randint(1, 100)
            c.on_local_max(end)
            if c.ack_now(end):  # the store actor's fast path: acknowledged without waiting
                acked_end = max(acked_end, end)
            else:
                c.add_pending(end, t + 10_000, f"w{end}")
        elif r < 0.45 and connected:
            m = rng.choice(sorted(connected))
            data[m] = rng.randint(data[m], c.local_max)
            c.on_sent(m, t)
            c.on_ack(m, data[m], t)
        elif r < 0.52:
            m = rng.choice([1, 2])
            if m in connected:
                connected.discard(m)
                c.on_disconnected(m)
            else:
                connected.add(m)
                c.on_connected(m, learner=False, now_ms=t)
        elif r < 0.58:
            c.tick(t)
        elif r < 0.72 and in_flight is None:
            in_flight = c.take_proposal()
            if in_flight is not None:
                ctrl.queue.append(in_flight)
        elif r < 0.86 and in_flight is not None:
            # the controller handles a request (maybe an older one) and the answer for the one
            # in flight arrives, is refused, or is lost
            p = ctrl.queue.pop(rng.randrange(len(ctrl.queue))) if ctrl.queue else None
            applied = p is not None and ctrl.process(p)
            fate = rng.random()
            if p is in_flight and applied and fate < 0.7:
                c.on_proposal_accepted(ctrl.members, ctrl.epoch)
            elif p is in_flight and not applied and fate < 0.7:
                c.on_proposal_refused()
            else:
                c.on_proposal_unknown()
            in_flight = None
        elif r < 0.93:
            c.on_authoritative(ctrl.members, ctrl.epoch)
        acked, _ = c.take_done(t)
        for token in acked:
            acked_end = max(acked_end, int(token[1:]))
        for m in ctrl.members - {0}:
            assert data[m] >= acked_end, (seed, m, ctrl.members, acked_end)
            assert data[m] >= c.confirm_offset, (seed, m, ctrl.members, c.confirm_offset)
