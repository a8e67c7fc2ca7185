"""The store writer of POP's checkpoint and ACK records (processor.py, ack.py): each put goes to
the store as it is, and once the store answers that it is stored, every revive record in it
(a `ReviveMessage`) is handed with the revive-queue offset it got to ``written`` (the revive
task's `PopReviveService.written`), so the revive rounds need not read back and decode what
this broker wrote itself (revive.py, `ReviveCore.catch_up`). A put refused, or answered with
fewer results than messages, hands nothing: the rounds then read those offsets from the
store, as they read everything that other paths write.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.pop.revive_log import ReviveMessage
from rocketrio.actors.broker.store.messages import PutBatchBody, PutCallback, StoreWriter
from rocketrio.protocol.pop_checkpoint import AckMsg, PopCheckPoint
from rocketrio.storage.message_store import MessageToStore, PutResult

Written = Callable[[int, int, PopCheckPoint | AckMsg], None]  # (revive queue, offset, record)


class ReviveFeedWriter:
    """A `StoreWriter` over ``writer`` that tells ``written`` where its revive records went
    (module docstring)."""

    def __init__(self, writer: StoreWriter, written: Written) -> None:
        self.writer = writer
        self.written = written

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self.writer.put_nowait(messages, self._feeding(messages, on_done))

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        await self.writer.put(messages, self._feeding(messages, on_done))

    def put_batch_nowait(self, put: PutBatchBody) -> None:
        self.writer.put_batch_nowait(put)

    async def put_batch(self, put: PutBatchBody) -> None:
        await self.writer.put_batch(put)

    def _feeding(self, messages: list[MessageToStore], on_done: PutCallback) -> PutCallback:
        def done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
            if status.stored and len(results) == len(messages):
                for m, r in zip(messages, results, strict=True):
                    if type(m) is ReviveMessage:
                        self.written(m.queue_id, r.queue_offset, m.record)
            on_done(results, status, remark)

        return done
