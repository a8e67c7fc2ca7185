"""The metadata journal's Trio shell: writes a master's table changes into its CommitLog and
replays them when a broker takes the master role (the records and the rules: meta_log.py; why:
docs/metadata-failover.md).

`MetaJournal.record` is the tables' ``journal`` hook. It runs synchronously inside the change
(before the caller puts the message that needed the change), so the record enters the store's
inbox ahead of that message: the CommitLog order is "config, then its messages". Only a broker
serving as master whose store writes in a recorded epoch writes (a slave's tables change only by
copying its master's; a record before the epoch would lie outside every epoch). A full inbox
cannot keep that order: the record is dropped and logged (meta_journal_failed); the promoted
slave then adopts that topic from its queues (`plan_adoption`), as before the journal existed.

`settled` lets an admin answer wait until its records are acknowledged like a sync send (on the
SyncStateSet with allAckInSyncStateSet), so an acknowledged create or delete survives a
failover. `replay` runs in the role change, between the store becoming master and the first
write: it reads the journal queue, folds it, applies it to the tables (without journaling
again) and adopts what only the queues know.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables import meta_log
from rocketrio.actors.broker.tables.meta_log import META_QUEUE, META_TOPIC, MetaChange, MetaState
from rocketrio.actors.broker.tables.tables import GroupTable, TopicTable
from rocketrio.actors.kernel.runtime import ActorStopped
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import TopicConfig
from rocketrio.protocol.message import decode_stored
from rocketrio.storage.store_types import GetMessageStatus, MessageToStore, PutResult

# stored and as safe as a replicated set allows: no replica to wait for (none can be elected
# without it being in the SyncStateSet), or only the local fsync was slow
_KEPT = (PutStatus.PUT_OK, PutStatus.SLAVE_NOT_AVAILABLE, PutStatus.FLUSH_DISK_TIMEOUT)
READ_BATCH = 256
READ_BYTES = 4 * 1024 * 1024


class JournalWriter(Protocol):
    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None: ...


class MetaJournal:
    """See module docstring."""

    def __init__(
        self,
        writer: JournalWriter,
        is_master: Callable[[], bool],
        now_ms: Callable[[], int],
        log: Any,
    ) -> None:
        self.writer = writer
        self.is_master = is_master
        self.now_ms = now_ms
        self.log = log
        self.pending = 0
        self.written = 0
        self.failed: str | None = None  # the first failure since the last `settled`
        self._idle = trio.Event()
        self._idle.set()
        self._replaying = False

    def record(self, change: MetaChange) -> None:
        if self._replaying or not self.is_master():
            return
        msg = MessageToStore(
            META_TOPIC, META_QUEUE, meta_log.encode(change), born_timestamp=self.now_ms()
        )
        try:
            self.writer.put_nowait([msg], self._done)
        except (trio.WouldBlock, ActorStopped) as e:
            self._fail(change, f"not written: {type(e).__name__}")
            return
        self.pending += 1
        if self._idle.is_set():
            self._idle = trio.Event()

    def _done(self, results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        self.pending -= 1
        if status in _KEPT:
            self.written += 1
        elif self.failed is None:
            self.failed = f"{status.value}{': ' + remark if remark else ''}"
        if self.pending == 0:
            self._idle.set()

    def _fail(self, change: MetaChange, why: str) -> None:
        if self.failed is None:
            self.failed = why
        events.emit(self.log, events.MetaJournalFailed(change=type(change).__name__, error=why))

    async def settled(self) -> str | None:
        """Wait until every record written so far is answered; the first failure (None: all
        acknowledged) since the last call."""
        await self._idle.wait()
        failed, self.failed = self.failed, None
        return failed

    # ------------------------------------------------------------------ replay

    def replay(
        self,
        view: StoreView,
        topics: TopicTable,
        groups: GroupTable,
        queues_with_records: dict[str, int],
    ) -> MetaState:
        """Make the tables what the journal says, then adopt queues nobody configured."""
        state = meta_log.fold(self._read(view))
        self._replaying = True
        try:
            for name, tc in state.topics.items():
                if tc is None:
                    topics.delete(name)
                else:
                    topics.update(tc)
            for name, sgc in state.groups.items():
                if sgc is None:
                    groups.delete(name)
                else:
                    groups.update(sgc)
            for step in meta_log.plan_adoption(topics.table, queues_with_records, state):
                topics.update(TopicConfig(step.topic, step.queues, step.queues))
                events.emit(
                    self.log,
                    events.TopicAdoptedFromQueues(topic=step.topic, queue_count=step.queues),
                )
        finally:
            self._replaying = False
        events.emit(
            self.log,
            events.MetaJournalReplayed(
                journal_topics=len(state.topics),
                journal_deleted_topics=len(state.deleted_topics()),
                journal_groups=len(state.groups),
            ),
        )
        return state

    def _read(self, view: StoreView) -> Iterator[MetaChange]:
        """The journal's records in log order: those in its ConsumeQueue, then those above
        confirmOffset (a promoted slave's tail: the creation of a topic whose first message is
        there too)."""
        offset = view.get_min_offset(META_TOPIC, META_QUEUE)
        end = view.get_max_offset(META_TOPIC, META_QUEUE)
        while offset < end:
            got = view.get_messages(META_TOPIC, META_QUEUE, offset, READ_BATCH, READ_BYTES)
            if got.status is not GetMessageStatus.FOUND or not got.buffers:
                break
            yield from self._decode(got.buffers)
            offset = got.next_begin_offset
        yield from self._decode(view.undispatched_records(META_TOPIC))

    def _decode(self, records: list[bytes]) -> Iterator[MetaChange]:
        for raw in records:
            change = meta_log.decode(decode_stored(raw)[0].body)
            if change is None:
                events.emit(
                    self.log, events.MetaJournalFailed(change="unreadable", error="record skipped")
                )
                continue
            yield change
