"""Strict queue locks (RIP-32 A5): the quorum of a group and what one request keeps."""

from __future__ import annotations

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.failover.lock_quorum import quorum_of, settle, strict
from rocketrio.protocol.bodies import MessageQueue

Q0, Q1, Q2 = (MessageQueue("T", "broker-a", i) for i in range(3))


def test_quorum_is_upstreams_majority_so_two_replicas_need_both() -> None:
    assert [quorum_of(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]


def test_strict_only_when_asked_and_a_quorum_above_one_exists() -> None:
    on = BrokerConfig(lockInStrictMode=True, totalReplicas=2)
    assert strict(on, only_this_broker=False)
    assert not strict(on, only_this_broker=True)  # a member asked on a peer's behalf
    assert not strict(BrokerConfig(lockInStrictMode=True, totalReplicas=1), False)
    assert not strict(BrokerConfig(lockInStrictMode=False, totalReplicas=3), False)


def test_settle_keeps_the_quorum_and_releases_the_rest() -> None:
    kept, release = settle([Q0, Q1, Q2], [[Q0, Q1], [Q0]], quorum=3)
    assert kept == [Q0] and release == [Q1, Q2]
    kept, release = settle([Q0, Q1], [[Q1, Q2]], quorum=2)  # Q2 was not ours to count
    assert kept == [Q1] and release == [Q0]
    assert settle([Q0], [], quorum=2) == ([], [Q0])  # alone: nothing counts
    assert settle([Q0], [[Q0, Q0]], quorum=3) == ([], [Q0])  # one member counts once
