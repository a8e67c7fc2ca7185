"""Per-group queue locks for ordered consumption (upstream RebalanceLockManager), no I/O.

An orderly consumer locks its queues on the broker (LOCK_BATCH_MQ) before consuming and
renews the lock every 20 s; a lock not renewed for REBALANCE_LOCK_MAX_LIVE_TIME_S (60 s,
upstream rocketmq.broker.rebalance.lockMaxLiveTime) expires and another client may take it.
Time (``now_s``) is passed in.
"""

from __future__ import annotations

import attrs

from rocketrio.protocol.bodies import MessageQueue

REBALANCE_LOCK_MAX_LIVE_TIME_S = 60.0


@attrs.define(slots=True)
class LockEntry:
    client_id: str
    last_update_s: float


class RebalanceLockManager:
    def __init__(self, max_live_s: float = REBALANCE_LOCK_MAX_LIVE_TIME_S) -> None:
        self.max_live_s = max_live_s
        self.table: dict[str, dict[MessageQueue, LockEntry]] = {}

    def _expired(self, entry: LockEntry, now_s: float) -> bool:
        return now_s - entry.last_update_s > self.max_live_s

    def try_lock_batch(
        self, group: str, mqs: list[MessageQueue], client_id: str, now_s: float
    ) -> list[MessageQueue]:
        """Lock (or renew) every queue free or already held by client_id; returns those."""
        locks = self.table.setdefault(group, {})
        got: list[MessageQueue] = []
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None or entry.client_id == client_id or self._expired(entry, now_s):
                locks[mq] = LockEntry(client_id, now_s)
                got.append(mq)
        return got

    def unlock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> None:
        locks = self.table.get(group)
        if locks is None:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is not None and entry.client_id == client_id:
                del locks[mq]
        if not locks:
            del self.table[group]

    def is_locked(self, group: str, mq: MessageQueue, client_id: str, now_s: float) -> bool:
        entry = self.table.get(group, {}).get(mq)
        return (
            entry is not None and entry.client_id == client_id and not self._expired(entry, now_s)
        )

    def all_expired(self, group: str, now_s: float) -> bool:
        """True when the group holds no live lock (upstream isLockAllExpired)."""
        return all(self._expired(e, now_s) for e in self.table.get(group, {}).values())
