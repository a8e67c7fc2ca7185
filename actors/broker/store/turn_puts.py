"""One store put per scheduler turn for what many requests queued at the same moment.

The shape shared by the POP ACK batcher (pop/ack_batch.py) and the transaction op batcher
(transaction/op_batch.py): requests `submit` an item (no await, no write); the task `run` wakes
once per turn, takes a batch from the head of the queue (``take`` says how many; the rest waits
for the next put), turns it into messages (``to_messages``) and hands them to the store writer as
ONE put; ``answer`` then tells every item of the batch the outcome: None once the put is stored
(in the CommitLog, flushed and replicated by the store's own rule), else the refusal. Items left
when the task stops are refused ("stopping"), never dropped silently.

`submit` refuses (False: the caller writes its item alone) while the task is not running or
``max_queued`` items wait, so the queue is bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus, Refusal
from rocketrio.actors.broker.store.messages import StoreWriter
from rocketrio.actors.kernel.runtime import ActorStopped
from rocketrio.storage.message_store import MessageToStore, PutResult

Q = TypeVar("Q")
NotStored = Callable[[PutStatus, str | None], Refusal]


class TurnPuts(Generic[Q]):
    """The queue and its task (module docstring)."""

    def __init__(
        self,
        writer: StoreWriter,
        to_messages: Callable[[list[Q]], list[MessageToStore]],
        answer: Callable[[list[Q], Refusal | None], None],
        not_stored: NotStored,
        *,
        take: Callable[[list[Q]], int],
        max_queued: int,
    ) -> None:
        self.writer = writer
        self.to_messages = to_messages
        self.answer = answer
        self.not_stored = not_stored
        self.take = take
        self.max_queued = max_queued
        self._queued: list[Q] = []
        self._wake = trio.Event()
        self.running = False
        self.puts = 0  # store puts made (figures and tests)

    def submit(self, item: Q) -> bool:
        queued = self._queued
        if not self.running or len(queued) >= self.max_queued:
            return False
        queued.append(item)
        if len(queued) == 1:  # else the task is woken already, or takes it before it waits
            self._wake.set()
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.running = True
        task_status.started()
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                while self._queued:
                    n = max(1, self.take(self._queued))
                    batch = self._queued[:n]
                    del self._queued[:n]
                    await self.put(batch)
        finally:
            self.running = False
            left, self._queued = self._queued, []
            if left:
                self.answer(left, self.not_stored(PutStatus.SERVICE_NOT_AVAILABLE, "stopping"))

    async def put(self, batch: list[Q]) -> None:
        """``batch`` as one put, answered through ``answer`` (also used for an item written
        alone when `submit` refused it)."""

        def done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
            stored = bool(results) and status.stored
            self.answer(batch, None if stored else self.not_stored(status, remark))

        msgs = self.to_messages(batch)
        self.puts += 1
        try:
            await self.writer.put(msgs, done)
        except ActorStopped:
            done([], PutStatus.SERVICE_NOT_AVAILABLE, "the store is stopped")
        except trio.Cancelled:  # not handed to the store: nothing of the batch was written
            done([], PutStatus.SERVICE_NOT_AVAILABLE, "stopping")
            raise
