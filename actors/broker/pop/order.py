"""Ordered POP's state (upstream ConsumerOrderInfoManager): which batch of each (topic, group,
queue) is in flight, and consumerOrderInfo.json's shape. Pure: time comes in as ``now_ms``.

A POP with order=true hands out a queue's next messages only when the group has no batch of
that queue in flight: every message of the last batch acknowledged, or the invisible time of
every unacknowledged one over. The group's consumer offset stays at the first unacknowledged
message of the batch (the pop does not move it, `commit_and_next` does on ACK), so a batch whose
invisible time ended is read again from there: the same messages, in the same order, each
counted once more in ``consumed`` (a message's delivery count, which the response's
orderCountInfo carries and the client turns into reconsumeTimes).

- `check_block`: may the group pop this queue now? A pop carrying the attemptId of the batch in
  flight is let through (the client retrying a receive whose answer it lost gets the same
  batch again, its counts unchanged).
- `update`: a pop handed out ``offsets``; returns the per-message delivery counts.
- `commit_and_next`: an ACK of one message; the offset to commit (the batch's first
  unacknowledged message, or the one after the batch), or NO_COMMIT / ILLEGAL.
- `update_next_visible_time`: CHANGE_MESSAGE_INVISIBLETIME of one message; the block lasts
  until its new time (longer or shorter).
- `blocked_until`: when the block of a queue ends (the shell wakes held pops then).

The file (`ConsumerOrderInfoWrapper`) is upstream's: ``{"table": {"topic@group": {queueId:
{"popTime", "i" invisibleTime, "o" offsetList (first offset, then each one's distance from it),
"ot" offset -> next visible time, "oc" offset -> consumed count, "l" lastConsumeTimestamp, "cm"
commitOffsetBit, "a" attemptId}}}}``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs

from rocketrio.actors.broker.tables.consumer_offset import offset_key, split_key

ILLEGAL = -1  # the offset is not one of the batch in flight: refused (MESSAGE_ILLEGAL)
NO_COMMIT = -2  # a stale receipt (another pop time) or nothing known: nothing to commit
CLEAN_AFTER_MS = 24 * 3600 * 1000  # order info of a queue nobody popped for a day is dropped


@attrs.define
class OrderInfo:
    """The batch of one queue handed out last (``offsets`` ascending)."""

    pop_time: int
    invisible_time: int
    offsets: tuple[int, ...]
    attempt_id: str | None = None
    commit_bits: int = 0  # bit i: offsets[i] acknowledged
    next_visible: dict[int, int] = attrs.field(factory=dict)  # offset -> ms (changed ones)
    consumed: dict[int, int] = attrs.field(factory=dict)  # offset -> deliveries before this
    last_consume_ms: int = 0

    def acked(self, index: int) -> bool:
        return bool(self.commit_bits >> index & 1)

    def visible_at(self, index: int, default_invisible: int = 0) -> int:
        """When offsets[index] becomes visible again (ms)."""
        invisible = self.invisible_time if self.invisible_time > 0 else default_invisible
        return self.next_visible.get(self.offsets[index], self.pop_time + invisible)

    def unacked(self) -> list[int]:
        return [i for i in range(len(self.offsets)) if not self.acked(i)]

    def blocks(self, attempt_id: str | None, invisible_time: int, now_ms: int) -> bool:
        if not self.offsets:
            return False
        if self.attempt_id is not None and self.attempt_id == attempt_id:
            return False
        return any(now_ms < self.visible_at(i, invisible_time) for i in self.unacked())

    def blocked_until(self, now_ms: int) -> int | None:
        """The end of the block, None when there is none now."""
        end = max((self.visible_at(i) for i in self.unacked()), default=None)
        return end if end is not None and end > now_ms else None

    def next_offset(self) -> int:
        """The first unacknowledged offset, or the one after the batch when all are."""
        for i, offset in enumerate(self.offsets):
            if not self.acked(i):
                return offset
        return self.offsets[-1] + 1


@attrs.frozen
class OrderCounts:
    """A pop's delivery counts: ``by_offset`` the messages delivered before (count > 0),
    ``min_count`` the least over the batch (0 when any message is new): upstream's
    orderCountInfo, per offset and per queue (for older clients)."""

    by_offset: dict[int, int]
    min_count: int


# ------------------------------------------------------------------ the file (upstream shape)


@attrs.define
class OrderInfoRecord:
    """One OrderInfo as upstream's fastjson writes it (field names are upstream's)."""

    popTime: int = 0
    i: int | None = None  # invisibleTime
    o: list[int] = attrs.field(factory=list)  # offsetList: first offset, then distances
    ot: dict[int, int] | None = None  # offsetNextVisibleTime
    oc: dict[int, int] | None = None  # offsetConsumedCount
    l: int = 0  # noqa: E741  lastConsumeTimestamp (upstream's name)
    cm: int = 0  # commitOffsetBit
    a: str | None = None  # attemptId

    @classmethod
    def of(cls, info: OrderInfo) -> OrderInfoRecord:
        first = info.offsets[0] if info.offsets else 0
        diffs = [first] + [o - first for o in info.offsets[1:]] if info.offsets else []
        return cls(
            popTime=info.pop_time,
            i=info.invisible_time,
            o=diffs,
            ot=dict(info.next_visible) or None,
            oc=dict(info.consumed),
            l=info.last_consume_ms,
            cm=info.commit_bits,
            a=info.attempt_id,
        )

    def info(self) -> OrderInfo:
        first = self.o[0] if self.o else 0
        offsets = tuple([first] + [first + d for d in self.o[1:]]) if self.o else ()
        return OrderInfo(
            pop_time=self.popTime,
            invisible_time=self.i or 0,
            offsets=offsets,
            attempt_id=self.a,
            commit_bits=self.cm,
            next_visible=dict(self.ot or {}),
            consumed=dict(self.oc or {}),
            last_consume_ms=self.l,
        )


@attrs.define
class ConsumerOrderInfoWrapper:
    """consumerOrderInfo.json: ``topic@group`` -> queueId -> record."""

    table: dict[str, dict[int, OrderInfoRecord]] = attrs.field(factory=dict)


# ------------------------------------------------------------------ the manager


class ConsumerOrderInfoManager:
    def __init__(self) -> None:
        self.table: dict[str, dict[int, OrderInfo]] = {}  # topic@group -> queueId -> info
        self.dirty = False

    def get(self, topic: str, group: str, queue_id: int) -> OrderInfo | None:
        return self.table.get(offset_key(topic, group), {}).get(queue_id)

    def check_block(
        self,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        invisible_time: int,
        now_ms: int,
    ) -> bool:
        """True when the group may not pop the queue now (a batch of it is in flight)."""
        info = self.get(topic, group, queue_id)
        return info is not None and info.blocks(attempt_id, invisible_time, now_ms)

    def update(
        self,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        offsets: Iterable[int],
        now_ms: int,
    ) -> OrderCounts:
        """A pop handed out ``offsets`` of the queue: they are the batch in flight now."""
        new = OrderInfo(
            pop_time, invisible_time, tuple(offsets), attempt_id, last_consume_ms=now_ms
        )
        old = self.get(topic, group, queue_id)
        if old is not None:
            if old.attempt_id is not None and old.attempt_id == attempt_id:
                new.consumed = dict(old.consumed)  # the same attempt again: not counted twice
            else:
                before = set(old.offsets)
                new.consumed = {o: old.consumed.get(o, 0) + 1 for o in new.offsets if o in before}
        self.table.setdefault(offset_key(topic, group), {})[queue_id] = new
        self.dirty = True
        counts = {o: c for o, c in new.consumed.items() if c > 0}
        least = min(counts.values()) if len(counts) == len(new.offsets) and counts else 0
        return OrderCounts(counts, least)

    def commit_and_next(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int, committed: int
    ) -> int:
        """An ACK of ``offset`` popped at ``pop_time``: the offset to commit, or NO_COMMIT /
        ILLEGAL. With no order info for the queue (lost in a crash, cleaned) only the ACK of
        the committed offset itself moves it (upstream commits offset + 1 for any ACK, which
        could skip an unacknowledged message)."""
        info = self.get(topic, group, queue_id)
        if info is None or not info.offsets:
            return offset + 1 if offset == committed else NO_COMMIT
        if pop_time != info.pop_time:
            return NO_COMMIT
        try:
            index = info.offsets.index(offset)
        except ValueError:
            return ILLEGAL
        info.commit_bits |= 1 << index
        self.dirty = True
        return info.next_offset()

    def update_next_visible_time(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int, next_ms: int
    ) -> bool:
        """The message stays invisible (the queue blocked) until ``next_ms``; False when the
        receipt is stale (another pop time) or the queue has no order info."""
        info = self.get(topic, group, queue_id)
        if info is None or pop_time != info.pop_time or offset not in info.offsets:
            return False
        info.next_visible[offset] = next_ms
        self.dirty = True
        return True

    def blocked_until(self, topic: str, group: str, queue_id: int, now_ms: int) -> int | None:
        info = self.get(topic, group, queue_id)
        return None if info is None else info.blocked_until(now_ms)

    def clear_block(self, topic: str, group: str, queue_id: int) -> None:
        """Forget the batch in flight (the group's offset was reset)."""
        queues = self.table.get(offset_key(topic, group))
        if queues is not None and queues.pop(queue_id, None) is not None:
            self.dirty = True

    def clean(
        self,
        read_queue_nums: Callable[[str], int | None],
        group_exists: Callable[[str], bool],
        now_ms: int,
    ) -> int:
        """Drop the info of deleted topics, groups and queues, and of queues not popped for
        CLEAN_AFTER_MS (upstream's autoClean); the number of queues dropped."""
        dropped = 0
        for key in list(self.table):
            topic, group = split_key(key)
            nums = read_queue_nums(topic)
            queues = self.table[key]
            if nums is None or not group_exists(group):
                dropped += len(queues)
                del self.table[key]
                continue
            for qid in list(queues):
                if qid >= nums or now_ms - queues[qid].last_consume_ms > CLEAN_AFTER_MS:
                    del queues[qid]
                    dropped += 1
            if not queues:
                del self.table[key]
        self.dirty = self.dirty or dropped > 0
        return dropped

    # -- the file
    def load(self, wrapper: ConsumerOrderInfoWrapper) -> None:
        self.table = {
            key: {qid: rec.info() for qid, rec in queues.items()}
            for key, queues in wrapper.table.items()
        }
        self.dirty = False

    def snapshot(self) -> ConsumerOrderInfoWrapper:
        return ConsumerOrderInfoWrapper(
            {
                key: {qid: OrderInfoRecord.of(info) for qid, info in queues.items()}
                for key, queues in self.table.items()
            }
        )

    def snapshot_for_persist(self) -> ConsumerOrderInfoWrapper | None:
        """What to write, None when nothing changed since the last snapshot."""
        if not self.dirty:
            return None
        self.dirty = False
        return self.snapshot()
