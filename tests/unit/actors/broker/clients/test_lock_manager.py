"""Queue locks of orderly consumers (actors/broker/clients/lock_manager.py)."""

from __future__ import annotations

from rocketrio.actors.broker.clients.lock_manager import RebalanceLockManager
from rocketrio.protocol.bodies import MessageQueue


def test_locks_expire() -> None:
    locks = RebalanceLockManager(max_live_s=60)
    q = [MessageQueue("T", "b", 0)]
    assert locks.try_lock_batch("G", q, "A", now_s=0) == q
    assert locks.try_lock_batch("G", q, "B", now_s=59) == []
    assert not locks.all_expired("G", now_s=59)
    assert locks.try_lock_batch("G", q, "B", now_s=61) == q
    assert locks.is_locked("G", q[0], "B", now_s=61)
