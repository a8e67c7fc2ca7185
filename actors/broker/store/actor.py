"""The store actor: the one writer of the MessageStore, with group commit.

Puts arrive as `PutMessages` carrying a callback. Each turn the actor drains its inbox (bounded:
`ReplicationState.drain`), calls ``put_messages`` ONCE for every put of the turn, and then:

- ASYNC_FLUSH: answers every put at once (the answers written as the last is given, ack_log.py).
- SYNC_FLUSH: fsyncs the CommitLog ONCE in a worker thread, then answers every put of the turn.
  Puts that arrive during that fsync form the next turn's batch (group commit).

In both modes `run` keeps a task that fully flushes (CommitLog, ConsumeQueues, index and the
dispatch checkpoint) every flush interval in a worker thread, concurrently with later appends
(the store's threading contract allows a flush beside appends and reads, not beside another
flush, so flushes take the `Flusher`'s lock, flusher.py).

A put is answered, with a `PutStatus`, only after its bytes are written (and, with SYNC_FLUSH,
fsynced). A flush that took longer than syncFlushTimeout is answered FLUSH_DISK_TIMEOUT (the
message is stored; upstream does the same). A request the store refuses is MESSAGE_ILLEGAL, any
other store failure UNKNOWN_ERROR. Mapping statuses to wire codes is the protocol adapter's
job, not this module's.

A full disk is a clean refusal, never a crash nor an acknowledgement of data that is not
durable: the rule for each write path and role is disk_faults.py's (`FaultState`).

Readers use the read-only `StoreView` (store_view.py): inline on the Trio thread, or, for big
pulls, in a worker thread behind the `ReadGate`. Mutations other than puts (delete topic, a
slave's truncation, role changes) go through `call` / `delete_topic`: they run between puts, never
beside a flush (the store forbids flush beside truncation or deletion) and inside
``ReadGate.exclusive()`` so no off-loop read runs meanwhile. Appends run beside off-loop reads.

Other tasks see this actor through the `StoreWriter` protocol (the send path: single puts of a
read share an inbox slot, put_stage.py) or `call` / `delete_topic` / `commitlog_max_offset`.

Statistics (`PutStats`, stats.py): each stored request counted for its topic, each turn's put
time once (write to answer), each refused put; `queued` / `queue_head_wait_ms` /
`write_held_ms` are the runtime-info figures of the send queue and current write.

Replication (H1-H6). The actor's `StoreRole` says what may be written: STANDALONE (no replicas:
puts, dispatched at put time), FENCED (a replicated broker whose role is not known yet, or that
stepped down: nothing), MASTER (puts), SLAVE (only `ReplicaAppend`s from the HA client). Role
changes are actor calls, ordered with the puts around them: a put queued before
`become_slave` is stored as master, one queued after is refused SERVICE_NOT_AVAILABLE. A
master's stored turn is handed to the `GroupTransferService` (one entry per turn: group commit
extends to replication) and answered when the ack policy holds; a master refuses puts with
IN_SYNC_REPLICAS_NOT_ENOUGH before storing when its SyncStateSet is below minInSyncReplicas.
Replicated appends are drained like puts: one fsync covers every append of a turn with
SYNC_FLUSH, and only then are they acknowledged to the HA client (which acks the master).
confirmOffset requests (`request_confirm`, from the gate or the HA client) are coalesced and
applied at the end of a turn: ConsumeQueues are dispatched up to it and long-polling pulls
woken. The actor implements both HA store ports (ha/ports.py).

A classic master/slave broker with SYNC_FLUSH (no controller: the restarted master is never
replaced, so nothing can cut a slave or a reader back to what it kept) neither dispatches nor
ships a turn before its fsync (`MessageStore.dispatch_after_flush`): the HA port's log end is
the fsynced end and `written` moves after the fsync. A power cut then takes back nothing a
consumer read or a slave holds (sim seeds 303252, 304415). A controller-mode master ships as it
syncs (replication_state.py): a failover cuts what it lost from every replica.
"""

from __future__ import annotations

import errno
import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.ha.group_transfer import AckOutcome, GroupTransferService
from rocketrio.actors.broker.ha.truncation import TruncationPlan
from rocketrio.actors.broker.store.ack_log import AckLog
from rocketrio.actors.broker.store.appender import Appender
from rocketrio.actors.broker.store.disk_faults import (
    FaultState,
    WriteFault,
    WriteFaultListener,
    disk_full,
)
from rocketrio.actors.broker.store.flusher import Flusher
from rocketrio.actors.broker.store.messages import (
    ActorCall,
    AnyPut,
    ArrivalListener,
    ConfirmPoke,
    DiskProbe,
    PutBatchBody,
    PutCallback,
    PutMessages,
    PutStats,
    ReplicaAppend,
    StagedPuts,
    StoreCall,
    Stored,
    StoreMsg,
    StoreRole,
    fail_put,
)
from rocketrio.actors.broker.store.put_stage import STAGE_MAX, PutStage
from rocketrio.actors.broker.store.replication_state import ReplicationState
from rocketrio.actors.broker.store.view import ReadGate, RunBlocking
from rocketrio.actors.kernel.runtime import Actor, ActorStopped
from rocketrio.actors.observe import events
from rocketrio.storage.epoch_file import EpochRecord
from rocketrio.storage.message_store import MessageStore, MessageToStore

T = TypeVar("T")

MAX_DRAIN = 2048

_WRITABLE = (StoreRole.STANDALONE, StoreRole.MASTER)


class StoreActor(Actor[StoreMsg]):
    inbox_capacity = 4096

    def __init__(
        self,
        store: MessageStore,
        *,
        sync_flush: bool,
        flush_interval_ms: int,
        sync_flush_timeout_ms: int,
        now_ms: Callable[[], int],
        on_arrival: ArrivalListener | None = None,
        stats: PutStats | None = None,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        read_gate: ReadGate | None = None,
        role: StoreRole = StoreRole.STANDALONE,
        probe_interval_ms: int = 10_000,
        on_write_fault: WriteFaultListener | None = None,
    ) -> None:
        super().__init__("store")
        if store.dispatch_after_flush and not sync_flush:
            raise ValueError("a store that dispatches after the fsync needs SYNC_FLUSH")
        self.store = store
        self.sync_flush = sync_flush
        self.now_ms = now_ms
        self.on_arrival = on_arrival
        self.stats = stats
        self.acks = AckLog(self.log, stats)
        self.run_blocking = run_blocking
        self.read_gate = read_gate or ReadGate(run_blocking)
        self.flusher = Flusher(
            store,
            run_blocking,
            self.log,
            flush_interval_ms=flush_interval_ms,
            sync_flush_timeout_ms=sync_flush_timeout_ms,
        )
        self.put_turns = 0
        self.replication = ReplicationState(store, role, self.log)
        # the HA master's port waits on it (ha/ports.py)
        self.written = self.replication.written
        self.segment_size = store.config.mappedFileSizeCommitLog  # the slave's port reads it
        self._poked = False
        # a turn is running: it applies the confirm target when it ends, so a request made
        # meanwhile (a lone master's own puts move it at once) needs no extra turn
        self._in_turn = False
        # runtime figures (GET_BROKER_RUNTIME_INFO): when the current write (append, and the
        # fsync with SYNC_FLUSH) began, None when no write runs; when the last turn ended
        self._writing_since: float | None = None
        self._idle_since = trio.current_time()
        # a full disk (module docstring): why writes are refused, None while they are not
        self.faults = FaultState(on_write_fault)
        self.appender = Appender(store, self.faults, stats, now_ms, self.log)
        self.probe_interval_s = probe_interval_ms / 1000
        self.stage = PutStage(STAGE_MAX, self.inbox_capacity)  # `put_nowait`

    # -- entry points for other tasks

    def set_limits(
        self, *, flush_interval_ms: int, sync_flush_timeout_ms: int, max_message_size: int
    ) -> None:
        """A live config change (UPDATE_BROKER_CONFIG): the flush period from the next periodic
        flush, the sync-flush wait and the largest body a put takes, from the next put."""
        self.flusher.set_limits(flush_interval_ms, sync_flush_timeout_ms)
        config = self.store.config
        if config.maxMessageSize != max_message_size:
            self.store.reconfigure(attrs.evolve(config, maxMessageSize=max_message_size))

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        """Enqueue a put; raises trio.WouldBlock when the inbox is full (caller awaits `put`).
        Puts that arrive back to back share one inbox slot (put_stage.py)."""
        if not self.stage.join(put := PutMessages(messages, on_done)):
            token = StagedPuts([put])
            super().tell_nowait(token)
            self.stage.opened(token)

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        await self.tell(PutMessages(messages, on_done))

    def tell_nowait(self, msg: StoreMsg) -> None:
        self.stage.seal()  # what comes after this message cannot join a put before it
        super().tell_nowait(msg)

    async def tell(self, msg: StoreMsg) -> None:
        self.stage.seal()  # (ask comes through here too)
        await super().tell(msg)

    def put_batch_nowait(self, put: PutBatchBody) -> None:
        """Enqueue a batch body; raises trio.WouldBlock when the inbox is full."""
        self.tell_nowait(put)

    async def put_batch(self, put: PutBatchBody) -> None:
        await self.tell(put)

    async def call(
        self, fn: Callable[[MessageStore], T], timeout: float = 30.0, *, exclusive: bool = True
    ) -> T:
        """Run ``fn(store)`` after every put queued before; a mutation unless told otherwise."""
        return await self.ask(lambda r: StoreCall(fn, r, exclusive), timeout)

    async def delete_topic(self, topic: str) -> int:
        """Drop the topic's ConsumeQueues (MessageStore.delete_topic); returns how many."""
        return await self.call(lambda store: store.delete_topic(topic))

    async def commitlog_max_offset(self) -> int:
        """The CommitLog end once every put queued before this call is written."""
        return await self.call(lambda store: store.get_commitlog_max_offset(), exclusive=False)

    async def flush(self) -> None:
        """Full flush now (serialized with other flushes): periodic task and shutdown."""
        await self.flusher.full()

    async def actor_call(self, fn: Callable[[StoreActor], T], timeout: float = 30.0) -> T:
        return await self.ask(lambda r: ActorCall(fn, r), timeout)

    async def probe_disk(self, timeout: float = math.inf) -> bool:
        """Between turns, try to end the refusing state (module docstring); True when the
        store takes writes again (or never stopped)."""
        return await self.ask(DiskProbe, timeout)

    # -- roles (ReplicasManager / classic role service)
    async def become_master(self, epoch: int, gate: GroupTransferService) -> int:
        """Take writes as master of ``epoch`` (recorded in the epoch file before any write of
        it; queue offsets past every record in the log); returns the epoch's start offset."""
        return await self.actor_call(lambda a: a._become_master(epoch, gate))

    def _become_master(self, epoch: int, gate: GroupTransferService) -> int:
        start = self.replication.become_master(epoch, gate)
        self._apply_confirm()
        return start

    async def become_slave(self) -> None:
        """Stop taking puts; what waits for replicas is answered as not acknowledged."""
        await self.actor_call(lambda a: a.replication.set_role(StoreRole.SLAVE))

    async def fence(self) -> None:
        """Take nothing (a deposed master waiting for an election)."""
        await self.actor_call(lambda a: a.replication.set_role(StoreRole.FENCED))

    def writes_as_master(self) -> bool:
        """The store takes puts as the master of a recorded epoch (not STANDALONE: a classic
        master's store is standalone until its role service records its epoch)."""
        return self.replication.role is StoreRole.MASTER

    def master_epoch(self) -> int | None:
        """The epoch of the mastership the store writes in; None when it is not master
        (confirmed_put.py's port)."""
        r = self.replication
        return r.epoch if r.role is StoreRole.MASTER else None

    # -- the master's HA port (reads, inline)
    def log_min_offset(self) -> int:
        return self.store.get_commitlog_min_offset()

    def log_end_offset(self) -> int:
        """What the master may ship: its log's end; a classic SYNC_FLUSH master's fsynced end
        (module docstring)."""
        store = self.store
        if store.dispatch_after_flush:
            return store.flushed_offset
        return store.get_commitlog_max_offset()

    def read_commitlog(self, offset: int, size: int) -> bytes:
        return self.store.commitlog.read(offset, size)

    def epoch_records(self) -> Sequence[EpochRecord]:
        return self.store.epoch_records()

    def confirm_offset(self) -> int:
        return self.store.confirm_offset

    # -- the slave's HA port (mutations through the inbox)
    async def truncate(self, plan: TruncationPlan) -> tuple[int, int, EpochRecord | None]:
        return await self.actor_call(lambda a: a.replication.truncate(plan))

    async def reset_log_at(self, offset: int, reason: str) -> None:
        await self.actor_call(lambda a: a.replication.reset_log_at(offset))

    async def record_epoch(self, epoch: int, start_offset: int) -> None:
        await self.actor_call(lambda a: a.replication.record_epoch(epoch, start_offset))

    async def append_replicated(self, offset: int, data: bytes, confirm: int = -1) -> int:
        return await self.ask(lambda r: ReplicaAppend(offset, data, r, confirm), 30.0)

    def request_confirm(self, offset: int) -> None:
        """confirmOffset may move to ``offset``: applied at the end of the next turn."""
        r = self.replication
        if offset <= r.confirm_target:
            return
        r.confirm_target = offset
        if not self._poked and not self._in_turn:
            self._poked = True
            try:
                self.tell_nowait(ConfirmPoke())
            except trio.WouldBlock:
                pass  # the inbox is busy: a turn is coming anyway
            except Exception:
                self._poked = False

    # -- the actor
    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.flusher.periodically, self._periodic_flush_failed)
            nursery.start_soon(self._probe_periodically)
            task_status.started(self)
            await self.serve_inbox()
            nursery.cancel_scope.cancel()

    async def serve_inbox(self) -> None:
        recv = self._recv
        async with recv:
            while True:
                try:
                    first = await recv.receive()
                except trio.EndOfChannel:
                    return
                batch = self.replication.drain(first, recv, MAX_DRAIN)
                self.stage.seal()  # taken (or behind the taken ones): no more joins
                await self._turn(batch)

    async def handle(self, msg: StoreMsg) -> None:
        await self._turn([msg])

    async def _turn(self, batch: list[StoreMsg]) -> None:
        self._in_turn = True
        try:
            await self._turn_body(batch)
            if self.replication.ship_first:
                await self.replication.let_replicas_ship()
        finally:
            self._in_turn = False
            self._idle_since = trio.current_time()
        self._apply_confirm()

    # -- runtime figures
    def queued(self) -> int:
        """Messages waiting in the inbox (puts, mostly; staged ones each count): the send
        path's queue."""
        return self._send.statistics().current_buffer_used + self.stage.extra

    def queue_head_wait_ms(self) -> int:
        """An upper bound of how long the oldest queued message has waited: the time since
        the actor last took a batch (the current turn's start, or the last turn's end); 0 when
        the inbox is empty."""
        if not self.queued():
            return 0
        since = self._writing_since if self._in_turn and self._writing_since else None
        return round((trio.current_time() - (since or self._idle_since)) * 1000)

    def write_held_ms(self) -> int:
        """How long the current CommitLog write (append, and with SYNC_FLUSH its fsync) has
        held the store: upstream's pageCacheLockTimeMills; 0 when no write runs."""
        since = self._writing_since
        return 0 if since is None else round((trio.current_time() - since) * 1000)

    async def _turn_body(self, batch: list[StoreMsg]) -> None:
        puts: list[AnyPut] = []
        appends: list[ReplicaAppend] = []
        for msg in batch:
            match msg:
                case StagedPuts() | PutMessages() | PutBatchBody():
                    if appends:
                        await self._commit_replica(appends)
                        appends = []
                    if isinstance(msg, StagedPuts):
                        puts += msg.puts
                        self.stage.taken(msg)
                    else:
                        puts.append(msg)
                case ReplicaAppend():
                    if puts:
                        await self._commit(puts)
                        puts = []
                    appends.append(msg)
                case StoreCall() | ActorCall() | DiskProbe():
                    # keep order: what was queued before a call is committed before it runs
                    if puts:
                        await self._commit(puts)
                        puts = []
                    if appends:
                        await self._commit_replica(appends)
                        appends = []
                    if isinstance(msg, DiskProbe):
                        msg.reply.set(await self._probe())
                    else:
                        await self._run_call(msg)
                case ConfirmPoke():
                    self._poked = False
        if puts:
            await self._commit(puts)
        if appends:
            await self._commit_replica(appends)

    async def _run_call(self, msg: StoreCall | ActorCall) -> None:
        async with self.flusher.lock:
            if isinstance(msg, StoreCall) and not msg.exclusive:
                self._call(msg)
                return
            async with self.read_gate.exclusive():
                self._call(msg)

    def _call(self, msg: StoreCall | ActorCall) -> None:
        try:
            if isinstance(msg, ActorCall):
                msg.reply.set(msg.fn(self))
            else:
                msg.reply.set(msg.fn(self.store))
        except Exception as e:
            msg.reply.fail(e)

    async def _commit(self, puts: list[AnyPut]) -> None:
        self.put_turns += 1
        r = self.replication
        if r.role not in _WRITABLE:
            remark = (
                f"this broker is {r.role.value}, not master: it takes no writes now "
                "(the client refreshes its route and retries)"
            )
            for put in puts:
                fail_put(put, PutStatus.SERVICE_NOT_AVAILABLE, remark)
            return
        gate = r.gate
        if gate is not None and not gate.admit_put():
            remark = gate.not_enough_remark()
            for put in puts:
                fail_put(put, PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, remark)
            return
        if self.faults.fault is not None:
            self.appender.refuse(puts)
            return
        started = self._writing_since = trio.current_time()
        try:
            done = self.appender.append(puts)
            if not done:
                return
            store = self.store
            after_flush = store.dispatch_after_flush
            if not after_flush:
                self.written.advance(store.get_commitlog_max_offset())  # shipped as it syncs
            status, remark = PutStatus.PUT_OK, None
            if self.sync_flush:
                flushed = await self._sync_flush(done)
                if flushed is None:
                    return  # refused: a full disk (module docstring)
                status, remark = flushed
                if after_flush:  # a classic SYNC_FLUSH master (module docstring)
                    store.release_flushed()
                    self.written.advance(store.flushed_offset)
        finally:
            self._writing_since = None
        end = self.store.get_commitlog_max_offset()
        if gate is not None:  # a master's write is answered through its completion
            r.note_write(end, gate.has_replicas())
            complete = self.acks.completion(
                done, status, remark, started, lambda: self.replication.epoch
            )
            if gate.stored(end):  # every copy it needs holds it already: no pending entry
                complete(AckOutcome.ACKED)
            else:
                gate.submit(end, complete)
            return
        self.acks.answer(done, status, remark, started)

    async def _commit_replica(self, appends: list[ReplicaAppend]) -> None:
        role = self.replication.role
        if role is not StoreRole.SLAVE:
            for a in appends:
                a.reply.fail(ValueError(f"the store is {role.value}, not SLAVE"))
            return
        ok: list[tuple[ReplicaAppend, int]] = []
        for a in appends:
            if self.faults.fault is not None:  # the HA client reconnects and fetches this again
                a.reply.fail(OSError(errno.ENOSPC, self.faults.fault.remark()))
                continue
            try:
                ok.append((a, self.store.append_replicated(a.offset, a.data)))
            except ValueError as e:
                a.reply.fail(e)
            except Exception as e:
                if not disk_full(e):
                    raise
                a.reply.fail(OSError(errno.ENOSPC, self.faults.enter(e).remark()))
        if not ok:
            return
        if self.sync_flush:
            try:
                await self.flusher.commitlog(group_commit=False)
            except OSError as e:
                for a, _ in ok:
                    a.reply.fail(e)
                if not disk_full(e):
                    raise
                self.faults.enter(e)
                return
        self.written.advance(self.store.get_commitlog_max_offset())
        for a, end in ok:
            if a.confirm >= 0:
                self.request_confirm(a.confirm)  # in the turn: applied as it ends
            a.reply.set(end)

    def _apply_confirm(self) -> None:
        target = self.replication.confirm_target
        store = self.store
        if target > store.confirm_offset and self.replication.role is not StoreRole.FENCED:
            try:
                store.advance_confirm(target)
            except Exception as e:
                if not disk_full(e):
                    raise
                self.faults.enter(e)  # the records stay; the repair dispatches them
        arrived = store.take_arrivals()
        if arrived and self.on_arrival is not None:
            self.on_arrival(arrived)

    async def _sync_flush(
        self, done: list[tuple[AnyPut, Stored]]
    ) -> tuple[PutStatus, str | None] | None:
        """fsync the turn (group commit); its status, or None when a full disk refused it."""
        try:
            took = await self.flusher.commitlog(group_commit=True)
        except OSError as e:
            if disk_full(e):  # not acknowledged: their durability is unknown
                self.faults.enter(e)
                self.appender.refuse([put for put, _ in done])
                return None
            remark = f"flush to disk failed, data durability unknown: {e}"
            for put, _ in done:
                fail_put(put, PutStatus.UNKNOWN_ERROR, remark)
            raise
        if took > self.flusher.sync_timeout_s:
            return PutStatus.FLUSH_DISK_TIMEOUT, f"flush took {took * 1000:.0f} ms"
        return PutStatus.PUT_OK, None

    def _periodic_flush_failed(self, e: OSError) -> None:
        if not disk_full(e):
            raise e
        self.faults.enter(e)

    # -- a full disk (module docstring)
    async def _probe_periodically(self) -> None:
        while True:
            await trio.sleep(self.probe_interval_s)
            fault = self.faults.fault
            if fault is not None and not fault.until_restart:
                try:
                    await self.probe_disk()
                except ActorStopped:
                    return  # shutting down

    async def _probe(self) -> bool:
        """Repair the store and write a scratch block (module docstring); True when writes
        go in again. Runs between turns, beside no flush and no off-loop read."""
        fault = self.faults.fault
        if fault is None:
            return True
        if fault.until_restart:
            return False
        cut_log = WriteFault.may_cut_log(self.replication.role is StoreRole.MASTER)
        store = self.store

        def repair() -> int | None:
            remaining = store.repair(cut_log=cut_log)
            if remaining is not None:
                return remaining.offset
            store.probe_space()
            return None

        async with self.flusher.lock, self.read_gate.exclusive():
            try:
                kept_from = await self.run_blocking(repair)
            except OSError as e:
                if not disk_full(e):
                    raise
                return False  # still full: the next probe tries again
        self.replication.after_cut(store.get_commitlog_max_offset())  # a cut may have lowered it
        if kept_from is not None:
            self.faults.fence_until_restart(kept_from)
            events.emit(
                self.log,
                events.StoreFencedUntilRestart(offset=kept_from, reason=fault.cause),
            )
            return False
        self.faults.end()
        return True
