"""Ordered consumption decisions (pure): the orderly process queue, its lock state, and what a
listener's answer means (upstream ProcessQueue's orderly half and ConsumeMessageOrderlyService's
processConsumeResult / checkReconsumeTimes). No I/O, no Trio: time comes in as ``now_s``.

`OrderlyProcessQueue` keeps the pulled messages of one queue in offset order. ``take_messages``
moves the oldest ones into the consuming set (one batch at a time: the shell holds one consume
task per queue), ``commit`` forgets them and returns the offset after the batch,
``make_message_to_consume_again`` puts a batch back in front, ``rollback`` puts back everything
taken since the last commit. The committed offset therefore never passes a message that has not
been consumed, and a message is never handed out before an older one of its queue.

Queue locks: a queue may be consumed only while this client holds its broker lock
(LOCK_BATCH_MQ). The client renews every `REBALANCE_LOCK_INTERVAL_S` (20 s); a lock not renewed
for `REBALANCE_LOCK_MAX_LIVE_TIME_S` (30 s) counts as lost on the client, well before the
broker's own expiry (rebalanceLockMaxLiveTime, 60 s), so two clients never both believe they
hold a queue. `consume_gate` says whether the next batch may start.

A listener answers with `ConsumeOrderlyStatus`. SUSPEND_CURRENT_QUEUE_A_MOMENT puts the batch
back and retries it after the context's suspend time (default suspendCurrentQueueTimeMillis, 1 s,
clamped to 10 ms .. 30 s), each message's reconsumeTimes incremented; a message already
reconsumed maxReconsumeTimes times goes to the DLQ instead (`check_reconsume_times`). Like
upstream, a batch with any message still to retry is put back whole.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from typing import assert_never

import attrs

from rocketrio.actors.client.process_queue import ProcessQueue
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt

# upstream ProcessQueue REBALANCE_LOCK_MAX_LIVE_TIME / REBALANCE_LOCK_INTERVAL
REBALANCE_LOCK_MAX_LIVE_TIME_S = 30.0
REBALANCE_LOCK_INTERVAL_S = 20.0
LOCK_ALL_FIRST_DELAY_S = 1.0  # ConsumeMessageOrderlyService.start: first lockAll after 1 s
TRY_LOCK_LATER_S = 3.0  # a queue whose lock could not be taken is tried again this much later
SUSPEND_MIN_MS = 10
SUSPEND_MAX_MS = 30_000
ORDERLY_MAX_RECONSUME_TIMES = 2**31 - 1  # Integer.MAX_VALUE: maxReconsumeTimes -1, orderly


class ConsumeOrderlyStatus(enum.Enum):
    """What an orderly listener returns (upstream ConsumeOrderlyStatus). COMMIT and ROLLBACK
    matter only with ``auto_commit=False`` in the context."""

    SUCCESS = "SUCCESS"
    ROLLBACK = "ROLLBACK"
    COMMIT = "COMMIT"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@attrs.define
class ConsumeOrderlyContext:
    """Passed to each listener call (upstream ConsumeOrderlyContext): the queue, and what the
    listener may change for this batch."""

    message_queue: MessageQueue
    auto_commit: bool = True
    # -1: the consumer's suspendCurrentQueueTimeMillis
    suspend_current_queue_time_millis: int = -1


class Gate(enum.Enum):
    """May the next batch of a queue start?"""

    OK = "ok"
    DROPPED = "dropped"  # the queue left this client: stop
    NOT_LOCKED = "not_locked"  # the broker did not grant (or took back) the lock
    LOCK_EXPIRED = "lock_expired"  # not renewed for REBALANCE_LOCK_MAX_LIVE_TIME_S


class ResultAction(enum.Enum):
    """What to do with a batch after the listener answered (before the DLQ check)."""

    COMMIT = "commit"  # forget the batch, commit the offset after it
    KEEP = "keep"  # manual commit mode, SUCCESS: consumed, not committed yet
    SUSPEND = "suspend"  # put the batch back, retry after the suspend time
    ROLLBACK = "rollback"  # manual mode: put back all taken since the last commit, retry later


class OrderlyProcessQueue(ProcessQueue):
    """A `ProcessQueue` that also holds the messages, in offset order, for one-batch-at-a-time
    consumption, and the queue's lock state."""

    __slots__ = (
        "_consuming",
        "_tree",
        "last_lock_at_s",
        "last_lock_timestamp",
        "locked",
    )

    def __init__(self) -> None:
        super().__init__()
        self._tree: dict[int, MessageExt] = {}  # offset -> message, ascending insertion order
        self._consuming: dict[int, MessageExt] = {}  # taken, not yet committed
        self.locked = False
        self.last_lock_at_s = 0.0  # trio time of the last granted lock (expiry)
        self.last_lock_timestamp = 0  # wall-clock ms of the same (running info)

    # -- messages
    def put(self, msgs: Iterable[MessageExt]) -> int:
        """Track newly pulled messages (offsets above every one seen so far)."""
        added = 0
        for m in msgs:
            if m.queue_offset <= self.queue_offset_max:
                continue
            super().put((m,))
            self._tree[m.queue_offset] = m
            added += 1
        return added

    def has_temp_message(self) -> bool:
        """Messages pulled and not yet handed to the listener."""
        return bool(self._tree)

    def consuming_count(self) -> int:
        return len(self._consuming)

    def take_messages(self, n: int) -> list[MessageExt]:
        """Hand out the ``n`` oldest waiting messages (they stay uncommitted)."""
        taken: list[MessageExt] = []
        tree = self._tree
        while tree and len(taken) < n:
            off = next(iter(tree))
            m = tree.pop(off)
            self._consuming[off] = m
            taken.append(m)
        return taken

    def commit(self) -> int:
        """Forget what was taken since the last commit; returns the offset to commit (one past
        the newest of them), or -1 when nothing was taken."""
        if not self._consuming:
            return -1
        offset = max(self._consuming) + 1
        self.remove(list(self._consuming.values()))
        self._consuming.clear()
        return offset

    def make_message_to_consume_again(self, msgs: Sequence[MessageExt]) -> None:
        """Put a taken batch back in front: it is handed out again before anything newer."""
        back = {}
        for m in msgs:
            if self._consuming.pop(m.queue_offset, None) is not None:
                back[m.queue_offset] = m
        self._tree = dict(sorted({**back, **self._tree}.items()))

    def rollback(self) -> None:
        """Put back everything taken since the last commit (manual commit mode)."""
        self.make_message_to_consume_again(list(self._consuming.values()))

    def clear(self) -> None:
        super().clear()
        self._tree.clear()
        self._consuming.clear()

    # -- lock
    def on_lock_granted(self, now_s: float, wall_ms: int) -> None:
        self.locked = True
        self.last_lock_at_s = now_s
        self.last_lock_timestamp = wall_ms

    def on_lock_refused(self) -> None:
        self.locked = False

    def is_lock_expired(self, now_s: float) -> bool:
        return now_s - self.last_lock_at_s > REBALANCE_LOCK_MAX_LIVE_TIME_S


def consume_gate(pq: OrderlyProcessQueue, now_s: float, *, clustering: bool) -> Gate:
    """Upstream ConsumeRequest.run's checks. Broadcasting consumers take no locks."""
    if pq.dropped:
        return Gate.DROPPED
    if not clustering:
        return Gate.OK
    if not pq.locked:
        return Gate.NOT_LOCKED
    if pq.is_lock_expired(now_s):
        return Gate.LOCK_EXPIRED
    return Gate.OK


def result_action(status: ConsumeOrderlyStatus, *, auto_commit: bool) -> ResultAction:
    """Upstream processConsumeResult, before checkReconsumeTimes. With auto commit, COMMIT and
    ROLLBACK are taken as SUCCESS (upstream warns the same)."""
    match status:
        case ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT:
            return ResultAction.SUSPEND
        case ConsumeOrderlyStatus.SUCCESS:
            return ResultAction.COMMIT if auto_commit else ResultAction.KEEP
        case ConsumeOrderlyStatus.COMMIT:
            return ResultAction.COMMIT
        case ConsumeOrderlyStatus.ROLLBACK:
            return ResultAction.COMMIT if auto_commit else ResultAction.ROLLBACK
        case _:
            assert_never(status)


def effective_max_reconsume_times(configured: int) -> int:
    """maxReconsumeTimes -1 means unbounded for an orderly consumer (Integer.MAX_VALUE)."""
    return ORDERLY_MAX_RECONSUME_TIMES if configured < 0 else configured


def to_dlq(reconsume_times: Sequence[int], max_times: int) -> list[bool]:
    """Per message of a suspended batch: reconsumed max_times already, so it goes to the DLQ."""
    return [t >= max_times for t in reconsume_times]


@attrs.frozen
class ReconsumeCheck:
    """Outcome of upstream checkReconsumeTimes for a suspended batch."""

    suspend: bool  # put the batch back and retry it later; False: commit it (all in the DLQ)
    bump: tuple[bool, ...]  # per message: its reconsumeTimes grows by one


def check_reconsume_times(dlq: Sequence[bool], sent: Sequence[bool]) -> ReconsumeCheck:
    """``dlq`` from `to_dlq`; ``sent[i]``: message i reached the DLQ (meaningful where
    ``dlq[i]``). A message that stays (not due for the DLQ, or its send failed) is retried."""
    stays = tuple(not d or not s for d, s in zip(dlq, sent, strict=True))
    return ReconsumeCheck(suspend=any(stays), bump=stays)


def suspend_delay_s(context_ms: int, default_ms: int) -> float:
    """Upstream submitConsumeRequestLater: -1 takes the default; clamped to 10 ms .. 30 s."""
    ms = default_ms if context_ms == -1 else context_ms
    return min(max(ms, SUSPEND_MIN_MS), SUSPEND_MAX_MS) / 1000


def group_by_broker(
    mqs: Iterable[MessageQueue], broker_of: Callable[[MessageQueue], str] | None = None
) -> dict[str, list[MessageQueue]]:
    """Queues per broker name, each list sorted: one LOCK_BATCH_MQ per broker (upstream
    buildProcessQueueTableByBrokerName). ``broker_of``: the broker serving a queue (a static
    topic's logic queue is served by its leader, upstream getBrokerNameFromMessageQueue)."""
    out: dict[str, list[MessageQueue]] = {}
    for mq in sorted(mqs, key=lambda q: (q.topic, q.brokerName, q.queueId)):
        out.setdefault(broker_of(mq) if broker_of else mq.brokerName, []).append(mq)
    return out


def apply_lock_result(
    pqs: dict[MessageQueue, OrderlyProcessQueue],
    granted: Iterable[MessageQueue],
    now_s: float,
    wall_ms: int,
) -> list[MessageQueue]:
    """A LOCK_BATCH_MQ answer for ``pqs`` (the queues asked): granted ones are (re)locked,
    the rest lose the lock. Returns the queues that lost it."""
    got = set(granted)
    lost = []
    for mq, pq in pqs.items():
        if mq in got:
            pq.on_lock_granted(now_s, wall_ms)
        else:
            if pq.locked:
                lost.append(mq)
            pq.on_lock_refused()
    return lost
