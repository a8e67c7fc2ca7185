"""A returning slave's pre-online steps (RIP-32 slave side, SPEC A4): isolated until it has its
group, its master's handshake or the acting slave's offsets."""

from __future__ import annotations

from rocketrio.actors.broker.failover.slave_pre_online import (
    FollowMaster,
    GoOnline,
    PullFrom,
    Wait,
    slave_step,
)

A0, A1, A2, A3 = "a0:10911", "a1:10911", "a2:10911", "a3:10911"
NONE: frozenset[str] = frozenset()


def test_without_a_member_list_the_slave_waits() -> None:
    assert slave_step(1, None, handshake_done=True, pulled=frozenset({A2})) == Wait()


def test_with_a_master_alive_the_slave_goes_online_only_after_the_handshake() -> None:
    assert slave_step(1, {0: A0, 2: A2}, handshake_done=False, pulled=NONE) == FollowMaster(A0)
    assert isinstance(slave_step(1, {0: A0, 2: A2}, handshake_done=True, pulled=NONE), GoOnline)
    # a master is followed, never pulled from, even when a slave's offsets were merged before
    assert slave_step(2, {0: A0, 1: A1}, handshake_done=False, pulled=frozenset({A1})) == (
        FollowMaster(A0)
    )


def test_without_a_master_the_acting_slave_is_pulled_from_first() -> None:
    # the smallest listed id acts, whether it is above or below ours
    assert slave_step(1, {2: A2, 3: A3}, handshake_done=False, pulled=NONE) == PullFrom(2, A2)
    assert slave_step(3, {1: A1, 2: A2}, handshake_done=False, pulled=NONE) == PullFrom(1, A1)
    done = slave_step(1, {2: A2, 3: A3}, handshake_done=False, pulled=frozenset({A2}))
    assert isinstance(done, GoOnline)
    # the acting slave changed (the one pulled from died): pull from the new one
    assert slave_step(1, {3: A3}, handshake_done=False, pulled=frozenset({A2})) == PullFrom(3, A3)


def test_alone_or_listed_only_by_its_own_old_registration_the_slave_goes_online() -> None:
    assert isinstance(slave_step(1, {}, handshake_done=False, pulled=NONE), GoOnline)
    assert isinstance(slave_step(1, {1: A1}, handshake_done=False, pulled=NONE), GoOnline)
    # its own stale entry is never taken for the acting slave
    assert slave_step(1, {1: A1, 2: A2}, handshake_done=False, pulled=NONE) == PullFrom(2, A2)
