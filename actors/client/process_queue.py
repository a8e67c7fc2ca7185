"""Per-queue consumption state (pure): which pulled offsets are still being consumed, and the
consumer-offset table.

`ProcessQueue` is upstream's ProcessQueue without the locks: messages pulled from one queue
are ``put`` in offset order; when consumption of some of them ends, ``remove`` returns the
offset that may be committed: the smallest offset still in flight, or one past the largest
pulled offset when nothing is in flight. So a committed offset never passes a message that has
not been consumed, whatever order consumption finishes in. Offsets live in a deque (ascending,
because pulls of one queue are sequential) with lazy cleanup at both ends, so put and remove
are O(1) amortized.

`OffsetTable` is the in-memory side of upstream's OffsetStore: ``update`` with
``increase_only`` ignores an offset lower than the one held, so a late, slow consumer of an old
batch cannot move the committed offset backwards.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import repeat

from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt


class ProcessQueue:
    __slots__ = (
        "_inflight",
        "_order",
        "dropped",
        "last_consume_at",
        "last_pull_at",
        "msg_size",
        "queue_offset_max",
    )

    def __init__(self) -> None:
        self._order: deque[int] = deque()
        self._inflight: dict[int, int] = {}  # offset -> body size
        self.queue_offset_max = -1
        self.msg_size = 0
        self.dropped = False
        self.last_pull_at = 0  # wall-clock ms of the last pull / consumption (running info)
        self.last_consume_at = 0

    @property
    def msg_count(self) -> int:
        return len(self._inflight)

    def put(self, msgs: Iterable[MessageExt]) -> int:
        """Track newly pulled messages; offsets at or below the highest seen are ignored."""
        added = 0
        inflight, order = self._inflight, self._order
        top = self.queue_offset_max
        for m in msgs:
            off = m.queue_offset
            if off <= top:
                continue
            top = off
            size = len(m.body)
            inflight[off] = size
            order.append(off)
            self.msg_size += size
            added += 1
        self.queue_offset_max = top
        return added

    def remove(self, msgs: Iterable[MessageExt]) -> int:
        """Forget consumed messages; returns the offset to commit, or -1 when none was tracked."""
        inflight = self._inflight
        if not inflight:
            return -1
        # dict.pop(offset, 0) for every message without a Python-level loop body
        offsets = [m.queue_offset for m in msgs]
        self.msg_size -= sum(map(inflight.pop, offsets, repeat(0, len(offsets))))
        order = self._order
        if not inflight:
            order.clear()
            return self.queue_offset_max + 1
        while order and order[0] not in inflight:
            order.popleft()
        while order and order[-1] not in inflight:
            order.pop()
        if order:
            return order[0]
        return self.queue_offset_max + 1

    def consumed_untracked(self, last_offset: int) -> int:
        """A pulled chunk, ending at ``last_offset``, that was consumed before it was ever
        tracked (a listener called in the pull loop): only the highest pulled offset moves.
        Returns the offset to commit: the oldest message still in flight, else one past the
        highest pulled. A pull result is in offset order, so its last message has the highest
        offset (upstream's putMessage assumes the same)."""
        if last_offset > self.queue_offset_max:
            self.queue_offset_max = last_offset
        order = self._order
        return order[0] if order else self.queue_offset_max + 1

    def max_span(self) -> int:
        """Distance between the oldest and newest offsets in flight (flow control)."""
        return self._order[-1] - self._order[0] if self._order else 0

    def min_inflight(self) -> int | None:
        return self._order[0] if self._order else None

    def max_inflight(self) -> int | None:
        return self._order[-1] if self._order else None

    def clear(self) -> None:
        """Forget everything (seek, or a queue taken away)."""
        self._order.clear()
        self._inflight.clear()
        self.queue_offset_max = -1
        self.msg_size = 0


class OffsetTable:
    """Consumer offsets held in memory until they are persisted."""

    __slots__ = ("_table",)

    def __init__(self) -> None:
        self._table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool) -> None:
        if offset < 0:
            return
        old = self._table.get(mq)
        if old is None or not increase_only or offset > old:
            self._table[mq] = offset

    def read(self, mq: MessageQueue) -> int:
        """The held offset, or -1 when there is none."""
        return self._table.get(mq, -1)

    def remove(self, mq: MessageQueue) -> None:
        self._table.pop(mq, None)

    def items(self) -> list[tuple[MessageQueue, int]]:
        return list(self._table.items())

    def __contains__(self, mq: object) -> bool:
        return mq in self._table
