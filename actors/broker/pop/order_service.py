"""The shell of ordered POP (upstream ConsumerOrderInfoManager's broker side, AckMessageProcessor
.ackOrderly, ChangeInvisibleTimeProcessor's order branch): owns the `ConsumerOrderInfoManager`
(pop_order.py), its file consumerOrderInfo.json, and the timer that wakes held pops when a
queue's block ends.

- The POP processor asks `blocked` before reading a queue for an ordered pop and reports what it
  handed out with `popped` (which returns the delivery counts for orderCountInfo).
- `ack` (a receipt with reviveQid 999): no revive record is written; the group's consumer offset
  moves to the batch's first unacknowledged message, only when the receipt's pop time is the
  batch's (an older receipt is answered SUCCESS and changes nothing, like upstream), and never
  backwards. An ACK of an offset below the committed one is a repeat: SUCCESS, nothing
  changes. An offset that is not in the batch is refused MESSAGE_ILLEGAL. When the ACK ends the
  block, held pops of the topic are woken at once.
- A group offset moved past the batch in flight (an admin's reset or UPDATE_CONSUMER_OFFSET)
  ends the batch's block at the next pop (upstream clears it in its POP offset reset).
- `change_invisible_time`: the message (and so its queue) stays invisible until now +
  invisibleTime; the new receipt keeps the batch's pop time, its invisible time is counted from
  it (upstream's answer).
- A block that ends because its invisible time is over wakes the held pops of the topic at that
  moment (`run`), so a long-polling ordered receive gets the batch again without waiting for its
  poll time (at most MAX_WAKEUPS pending; past that a held pop waits for its poll time).

The file is written with the consumer offsets (every flushConsumerOffsetInterval, and at
shutdown), so a graceful restart keeps every block; a crash may lose the blocks of the last
interval (the batch is then handed out again at once, from the committed offset). Slaves do not
copy it (upstream's neither): after a failover a batch in flight may be delivered again early.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from typing import Any

import structlog
import trio

from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.pop.hold import PopLongPollingService
from rocketrio.actors.broker.pop.order import (
    ILLEGAL,
    ConsumerOrderInfoManager,
    ConsumerOrderInfoWrapper,
    OrderCounts,
)
from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.broker.tables.config_file import ConfigFile
from rocketrio.actors.broker.tables.json_table import JsonFileTable, config_path
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import ResponseCode
from rocketrio.storage.fs import OS_FS, FileSystem

ORDER_INFO_FILE = "consumerOrderInfo.json"
MAX_WAKEUPS = 100_000  # pending block ends at most (one per distinct ms and topic)


class PopOrderService(JsonFileTable):
    def __init__(
        self,
        store_root: str,
        *,
        offsets: OffsetTable,
        topics: TopicTable,
        groups: GroupTable,
        hold: PopLongPollingService,
        now_ms: Callable[[], int],
        persist_interval_s: float,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        fs: FileSystem = OS_FS,
        log: Any = None,
    ) -> None:
        self.manager = ConsumerOrderInfoManager()
        self.offsets = offsets
        self.topics = topics
        self.groups = groups
        self.hold = hold
        self.also_wake: PopLongPollingService | None = None  # held NOTIFICATIONs (probe.py)
        self.now_ms = now_ms
        self.persist_interval_s = persist_interval_s
        self.log = log or structlog.get_logger("broker").bind(actor="pop_order")
        self.file = ConfigFile(
            config_path(store_root, ORDER_INFO_FILE),
            ConsumerOrderInfoWrapper,
            self._snapshot_for_persist,
            run_blocking,
            fs=fs,
        )
        self._wakeups: list[tuple[int, str]] = []  # (ms a block ends, topic), a heap
        self._pending: set[tuple[int, str]] = set()  # the heap's entries
        self._changed = trio.Event()

    # -- the file
    def files(self) -> tuple[ConfigFile[Any], ...]:
        return (self.file,)

    def _adopt_files(self, values: tuple[Any, ...]) -> None:
        """consumerOrderInfo.json's blocks, each still blocked one waking its topic's pops."""
        self.manager.load(values[0] or ConsumerOrderInfoWrapper())
        now = self.now_ms()
        for key, queues in self.manager.table.items():
            for info in queues.values():
                end = info.blocked_until(now)
                if end is not None:
                    self._wake_at(end, key.partition("@")[0])

    def _snapshot_for_persist(self) -> ConsumerOrderInfoWrapper | None:
        def read_queue_nums(topic: str) -> int | None:
            tc = self.topics.select(topic)
            return None if tc is None else tc.readQueueNums

        self.manager.clean(
            read_queue_nums, lambda g: self.groups.find_group(g) is not None, self.now_ms()
        )
        return self.manager.snapshot_for_persist()

    # -- the POP processor's side
    def blocked(
        self, attempt_id: str | None, topic: str, group: str, queue_id: int, invisible_time: int
    ) -> bool:
        info = self.manager.get(topic, group, queue_id)
        if info is not None and info.offsets:
            if self.offsets.query(group, topic, queue_id) > info.offsets[-1] + 1:
                # the group's offset was reset past the batch: it is no longer in flight
                self.manager.clear_block(topic, group, queue_id)
        return self.manager.check_block(
            attempt_id, topic, group, queue_id, invisible_time, self.now_ms()
        )

    def popped(
        self,
        attempt_id: str | None,
        topic: str,
        group: str,
        queue_id: int,
        pop_time: int,
        invisible_time: int,
        offsets: Iterable[int],
    ) -> OrderCounts:
        now = self.now_ms()
        counts = self.manager.update(
            attempt_id, topic, group, queue_id, pop_time, invisible_time, offsets, now
        )
        self._wake_at_block_end(topic, group, queue_id, now)
        return counts

    # -- ACK and CHANGE_MESSAGE_INVISIBLETIME of an ordered receipt
    def ack(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int
    ) -> Refusal | None:
        """ACK of one ordered message (see module docstring); a refusal or None (SUCCESS)."""
        committed = self.offsets.query(group, topic, queue_id)
        if offset < committed:
            return None  # acknowledged before
        next_offset = self.manager.commit_and_next(
            topic, group, queue_id, offset, pop_time, committed
        )
        if next_offset == ILLEGAL:
            events.emit(
                self.log,
                events.PopOrderAckIllegal(
                    topic=topic, group=group, queue_id=queue_id, offset=offset
                ),
            )
            return Refusal(
                ResponseCode.MESSAGE_ILLEGAL,
                f"offset is illegal, key:{topic}@{group}@{queue_id}, old:{committed}, "
                f"commit:{offset}: not a message of the batch in flight",
            )
        if next_offset >= committed:  # never back: a reset may have moved the offset on
            self.offsets.commit(group, topic, queue_id, next_offset)
            if self.manager.blocked_until(topic, group, queue_id, self.now_ms()) is None:
                self._wake(topic, queue_id)
        return None

    def change_invisible_time(
        self, topic: str, group: str, queue_id: int, offset: int, pop_time: int, invisible_ms: int
    ) -> int:
        """The message stays invisible for ``invisible_ms`` from now; the new receipt's
        invisible time (counted from ``pop_time``, which it keeps)."""
        now = self.now_ms()
        if offset < self.offsets.query(group, topic, queue_id):
            return invisible_ms + now - pop_time  # acknowledged before: nothing to extend
        next_ms = now + invisible_ms
        if self.manager.update_next_visible_time(topic, group, queue_id, offset, pop_time, next_ms):
            self._wake_at_block_end(topic, group, queue_id, now)
        return next_ms - pop_time

    # -- waking held pops when a block ends
    def _wake(self, topic: str, queue_id: int) -> None:
        """A block of ``topic`` ended: held pops, and held NOTIFICATIONs (``also_wake``, set by
        the POP feature: upstream's lock manager wakes its notifications too), look again."""
        self.hold.notify_message_arriving(topic, queue_id, -1)
        if self.also_wake is not None:
            self.also_wake.notify_message_arriving(topic, queue_id, -1)

    def _wake_at_block_end(self, topic: str, group: str, queue_id: int, now: int) -> None:
        end = self.manager.blocked_until(topic, group, queue_id, now)
        if end is None:
            self._wake(topic, queue_id)
        else:
            self._wake_at(end, topic)

    def _wake_at(self, at_ms: int, topic: str) -> None:
        entry = (at_ms, topic)
        if entry in self._pending or len(self._wakeups) >= MAX_WAKEUPS:
            return  # already due then, or full: a held pop then waits for its poll time
        self._pending.add(entry)
        heapq.heappush(self._wakeups, entry)
        if self._wakeups[0] == entry:
            self._changed.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The wake timer and the periodic write of consumerOrderInfo.json."""
        async with trio.open_nursery() as n:
            n.start_soon(self.file.run_periodic, self.persist_interval_s)
            task_status.started()
            while True:
                self._changed = trio.Event()
                delay = (self._wakeups[0][0] - self.now_ms()) / 1000 if self._wakeups else math.inf
                with trio.move_on_after(max(0.0, delay)):
                    await self._changed.wait()
                now = self.now_ms()
                due: set[str] = set()
                while self._wakeups and self._wakeups[0][0] <= now:
                    entry = heapq.heappop(self._wakeups)
                    self._pending.discard(entry)
                    due.add(entry[1])
                for topic in sorted(due):
                    self._wake(topic, -1)
