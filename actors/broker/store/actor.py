"""The store actor: the one writer of the MessageStore, with group commit.

Puts arrive as `PutMessages` carrying a callback. Each turn the actor drains its inbox (up to
`MAX_DRAIN` messages), calls ``put_messages`` ONCE for every put of the turn, and then:

- ASYNC_FLUSH: answers every put at once.
- SYNC_FLUSH: fsyncs the CommitLog ONCE in a worker thread and only then answers every put of
  the turn. Puts that arrive during that fsync wait in the inbox and form the next turn's
  batch: this is the group commit that keeps SYNC_FLUSH within a small factor of ASYNC_FLUSH.

In both modes `run` keeps a task that fully flushes (CommitLog, ConsumeQueues, index and the
dispatch checkpoint) every flush interval in a worker thread, concurrently with later appends
(the store's threading contract allows a flush beside appends and reads, not beside another
flush, so flushes take `_flush_lock`).

A put is answered, with a `PutStatus`, only after its bytes are written (and, with SYNC_FLUSH,
fsynced). A flush that took longer than syncFlushTimeout is answered FLUSH_DISK_TIMEOUT (the
message is stored; upstream does the same). A request the store refuses is MESSAGE_ILLEGAL, any
other store failure UNKNOWN_ERROR. Mapping statuses to wire codes is the protocol adapter's
job, not this module's.

A full disk (store_faults.py: ENOSPC or EDQUOT from a write or an fsync, or the store's
`WritesFenced`) is a clean refusal, never a crash nor an acknowledgement of data that is not
durable. The actor enters its refusing state (`fault`), tells the broker (``on_write_fault``:
the disk guard then refuses sends before they reach the store and logs disk_full), and answers
every put SERVICE_NOT_AVAILABLE with upstream's "the broker's disk is full [..]" remark until a
probe succeeds. Per write path (the storage rules are store_repair.py's and commitlog.py's):
- a put whose CommitLog or ConsumeQueue/index write fails was cut back whole by the store:
  refused, nothing of it stored; the turn's later puts are refused without a write;
- SYNC_FLUSH fsync fails: the turn's puts are refused (not acknowledged: their durability is
  unknown). The store fenced its CommitLog from the last durable offset, since Linux may
  have dropped the pages it could not write and report the next fsync as a success;
- the periodic flush fails (ASYNC_FLUSH acknowledged without fsync, as always): nothing is
  answered differently; the CommitLog is fenced the same way, the ConsumeQueues and index are
  dispatched again from the dispatch checkpoint;
- a slave's replicated append or its fsync fails: the HA client's append fails (OSError), so
  it reconnects and fetches again from where the log ends;
- a dispatch up to confirmOffset fails: the records stay and are dispatched by the repair.
Every cleanResourceInterval (``probe_interval_ms``) the actor probes, between turns: the store
repairs (the fenced CommitLog range is checked record by record, written again and fsynced, so
nothing acknowledged is lost, not even ASYNC_FLUSH data; a record that fails its check because
its page was lost is cut on a STANDALONE broker or a SLAVE, which loses exactly what a crash
would have lost, and keeps a MASTER refusing writes until it restarts, because its slaves may
hold those bytes and cutting them under one epoch would make the replicas diverge; the restart
recovers the log as after a power cut: when valid records follow the lost one in its segment
(the usual case) start-up refuses with a CorruptionError naming its offset, for an operator to
re-sync that store from a replica, else the lost record is cut as a torn tail), then writes a
scratch block; writes go in again once both work (and the disk guard's usage ratio allows).
Any other fsync error (EIO: a broken disk, not a full one) still answers UNKNOWN_ERROR and
crashes the actor, so the process restarts and recovers.

Readers use the read-only `StoreView` (store_view.py): inline on the Trio thread, or, for big
pulls, in a worker thread behind the `ReadGate`. Mutations other than puts (delete topic, a
slave's truncation, role changes) go through `call` / `delete_topic`: they run between puts, never
beside a flush (the store forbids flush beside truncation or deletion) and inside
``ReadGate.exclusive()`` so no off-loop read runs meanwhile. Appends run beside off-loop reads.

Other tasks see this actor through the `StoreWriter` protocol (the send path) or its `call` /
`delete_topic` / `commitlog_max_offset` entry points.

Statistics (`PutStats`, stats.py): each stored request is counted for its topic, each turn's
put time once (from the start of its write to its answer), each put the store refused; and
`queued` / `queue_head_wait_ms` / `write_held_ms` give the runtime-info figures of the send
path's queue and of the current write (runtime_info.py).

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
"""

from __future__ import annotations

import enum
import errno
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import attrs
import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.ha.group_transfer import AckOutcome, Completion, GroupTransferService
from rocketrio.actors.broker.ha.ports import Watermark
from rocketrio.actors.broker.ha.truncation import DiscardAll, TruncateTo, TruncationPlan
from rocketrio.actors.broker.store.disk_faults import WriteFault, describe, disk_full
from rocketrio.actors.broker.store.view import ReadGate, RunBlocking
from rocketrio.actors.kernel.runtime import Actor, ActorStopped, Reply
from rocketrio.actors.observe import events
from rocketrio.storage.epoch_file import EpochRecord
from rocketrio.storage.message_store import (
    BatchPutResult,
    MessageStore,
    MessageToStore,
    PutResult,
)

T = TypeVar("T")

MAX_DRAIN = 2048
# events.SendAcked.NAME is sampled: at most one line per interval, never one per message
ACK_LOG_INTERVAL_S = 1.0

# on_done(results, status, remark): results is empty unless status.stored
PutCallback = Callable[[list[PutResult], PutStatus, str | None], None]
# arrived(topic, queue_id, new max offset): called after every successful put
ArrivalListener = Callable[[str, int, int], None]


class PutStats(Protocol):
    """Where the actor counts its puts (stats.py `BrokerStats`; store_stats.py says what each
    figure means): per stored request, per turn, per failed put."""

    def on_topic_put(self, topic: str, msgs: int, nbytes: int) -> None: ...

    def on_put_turn(self, elapsed_ms: int, msgs: int) -> None: ...

    def on_put_failed(self, n: int) -> None: ...


@attrs.define(slots=True)  # not frozen: one per single send, and a frozen init costs 3x
class PutMessages:
    messages: list[MessageToStore]
    on_done: PutCallback


# on_done(result, status, remark): result is None unless status.stored
BatchPutCallback = Callable[[BatchPutResult | None, PutStatus, str | None], None]


@attrs.frozen
class PutBatchBody:
    """A client's SEND_BATCH_MESSAGE body, stored as is (`MessageStore.put_batch_body`)."""

    topic: str
    queue_id: int
    body: bytes
    options: dict[str, Any]  # put_batch_body keyword arguments (properties, sys_flag ...)
    on_done: BatchPutCallback


AnyPut = PutMessages | PutBatchBody
# what a put turned into: PutResults for PutMessages, a BatchPutResult for PutBatchBody
Stored = list[PutResult] | BatchPutResult


@attrs.frozen
class StoreCall:
    """Run ``fn(store)`` between puts and never beside a flush; the result goes to reply.

    ``exclusive``: ``fn`` mutates the store, so it also runs inside ``ReadGate.exclusive()``
    (no off-loop read beside it). A read-only call (a barrier after the queued puts) is not.
    """

    fn: Callable[[MessageStore], Any]
    reply: Reply[Any]
    exclusive: bool = True


@attrs.frozen
class ActorCall:
    """Run ``fn(actor)`` between turns, inside ``ReadGate.exclusive()`` and never beside a
    flush: role changes and the slave's truncations (they touch the actor's own state)."""

    fn: Callable[[StoreActor], Any]
    reply: Reply[Any]


@attrs.frozen
class ReplicaAppend:
    """Whole records a slave received from its master (SLAVE role only)."""

    offset: int
    data: bytes
    reply: Reply[int]


@attrs.frozen
class ConfirmPoke:
    """Wake an idle actor to apply a new confirmOffset (`request_confirm`)."""


@attrs.frozen
class DiskProbe:
    """Between turns: try to end the refusing state (`StoreActor.probe_disk`)."""

    reply: Reply[bool]


StoreMsg = (
    PutMessages | PutBatchBody | StoreCall | ActorCall | ReplicaAppend | ConfirmPoke | DiskProbe
)
# on_write_fault(cause): the store refuses writes because of cause; None: it takes them again
WriteFaultListener = Callable[[str | None], None]


class StoreRole(enum.Enum):
    STANDALONE = "STANDALONE"
    FENCED = "FENCED"
    MASTER = "MASTER"
    SLAVE = "SLAVE"


_WRITABLE = (StoreRole.STANDALONE, StoreRole.MASTER)
_ACK_STATUS = {
    AckOutcome.FLUSH_SLAVE_TIMEOUT: PutStatus.FLUSH_SLAVE_TIMEOUT,
    AckOutcome.SLAVE_NOT_AVAILABLE: PutStatus.SLAVE_NOT_AVAILABLE,
}


class StoreWriter(Protocol):
    """The store actor as the send path sees it: puts answered through callbacks.

    Every method raises `ActorStopped` once the actor stopped; the ``_nowait`` ones raise
    ``trio.WouldBlock`` when the inbox is full (the caller then awaits the other one, so the
    backpressure reaches the producer's connection).
    """

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None: ...

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None: ...

    def put_batch_nowait(self, put: PutBatchBody) -> None: ...

    async def put_batch(self, put: PutBatchBody) -> None: ...


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
        self.store = store
        self.sync_flush = sync_flush
        self.flush_interval_s = flush_interval_ms / 1000
        self.sync_flush_timeout_s = sync_flush_timeout_ms / 1000
        self.now_ms = now_ms
        self.on_arrival = on_arrival
        self.stats = stats
        self.run_blocking = run_blocking
        self.read_gate = read_gate or ReadGate(run_blocking)
        self._flush_lock = trio.Lock()
        self.flush_count = 0  # every flush, periodic or group commit
        self.sync_flush_count = 0  # group-commit flushes only (SYNC_FLUSH)
        self.put_turns = 0
        self._acked_since_log = 0
        self._next_ack_log = 0.0
        # replication
        self.role = role
        self.gate: GroupTransferService | None = None
        self.written = Watermark(store.get_commitlog_max_offset())
        self.segment_size = store.config.mappedFileSizeCommitLog
        self._confirm_target = 0
        self._poked = False
        # a turn is running: it applies the confirm target when it ends, so a request made
        # meanwhile (a lone master's own puts move it at once) needs no extra turn
        self._in_turn = False
        # runtime figures (GET_BROKER_RUNTIME_INFO): when the current write (append, and the
        # fsync with SYNC_FLUSH) began, None when no write runs; when the last turn ended
        self._writing_since: float | None = None
        self._commit_started = 0.0
        self._idle_since = trio.current_time()
        self.first_write_epoch: int | None = None  # log the first write of each mastership
        self._not_acked: dict[str, int] = {}
        self._next_not_acked_log = 0.0
        self._epoch = -1
        # a full disk (module docstring): why writes are refused, None while they are not
        self.fault: WriteFault | None = None
        self.probe_interval_s = probe_interval_ms / 1000
        self.on_write_fault = on_write_fault

    # -- entry points for other tasks

    def set_limits(
        self, *, flush_interval_ms: int, sync_flush_timeout_ms: int, max_message_size: int
    ) -> None:
        """A live config change (UPDATE_BROKER_CONFIG): the flush period from the next periodic
        flush, the sync-flush wait and the largest body a put takes, from the next put."""
        self.flush_interval_s = flush_interval_ms / 1000
        self.sync_flush_timeout_s = sync_flush_timeout_ms / 1000
        if self.store.config.maxMessageSize != max_message_size:
            self.store.config = attrs.evolve(self.store.config, maxMessageSize=max_message_size)

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        """Enqueue a put; raises trio.WouldBlock when the inbox is full (caller awaits `put`)."""
        self.tell_nowait(PutMessages(messages, on_done))

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        await self.tell(PutMessages(messages, on_done))

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
        async with self._flush_lock:
            await self._flush_in_thread(self.store.flush)

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

    async def become_slave(self) -> None:
        """Stop taking puts; what waits for replicas is answered as not acknowledged."""
        await self.actor_call(lambda a: a._set_role(StoreRole.SLAVE))

    async def fence(self) -> None:
        """Take nothing (a deposed master waiting for an election)."""
        await self.actor_call(lambda a: a._set_role(StoreRole.FENCED))

    def _become_master(self, epoch: int, gate: GroupTransferService) -> int:
        if self.gate is not None and self.gate is not gate:
            self.gate.close()
        self.role = StoreRole.MASTER
        self.gate = gate
        self._epoch = epoch
        start = self.store.begin_epoch(epoch)
        events.emit(
            self.log, events.EpochRecorded(epoch=epoch, start_offset=start, source="master")
        )
        gate.on_new_epoch(start)
        gate.on_local_max(self.store.get_commitlog_max_offset())
        self._apply_confirm()
        self.written.kick()
        return start

    def _set_role(self, role: StoreRole) -> None:
        self.role = role
        if self.gate is not None:
            self.gate.close()
            self.gate = None
        self._confirm_target = 0
        self._epoch = -1
        self.written.kick()

    # -- the master's HA port (reads, inline)
    def log_min_offset(self) -> int:
        return self.store.get_commitlog_min_offset()

    def log_end_offset(self) -> int:
        return self.store.get_commitlog_max_offset()

    def read_commitlog(self, offset: int, size: int) -> bytes:
        return self.store.commitlog.read(offset, size)

    def epoch_records(self) -> Sequence[EpochRecord]:
        return self.store.epoch_records()

    def confirm_offset(self) -> int:
        return self.store.confirm_offset

    # -- the slave's HA port (mutations through the inbox)
    async def truncate(self, plan: TruncationPlan) -> tuple[int, int, EpochRecord | None]:
        return await self.actor_call(lambda a: a._truncate(plan))

    def _truncate(self, plan: TruncationPlan) -> tuple[int, int, EpochRecord | None]:
        self._require(StoreRole.SLAVE)
        store = self.store
        match plan:
            case TruncateTo():
                if plan.offset < store.confirm_offset:
                    events.emit(
                        self.log,
                        events.TruncatingBelowConfirmOffset(
                            offset=plan.offset,
                            confirm_offset=store.confirm_offset,
                            reason="only an unclean election can make a slave cut confirmed data",
                        ),
                    )
                store.truncate_to(plan.offset)
            case DiscardAll():
                store.reset_to(store.get_commitlog_min_offset())
        self._confirm_target = min(self._confirm_target, store.get_commitlog_max_offset())
        self.written.reset(store.get_commitlog_max_offset())
        records = store.epoch_records()
        return (
            store.get_commitlog_min_offset(),
            store.get_commitlog_max_offset(),
            records[-1] if records else None,
        )

    async def reset_log_at(self, offset: int, reason: str) -> None:
        def reset(a: StoreActor) -> None:
            a._require(StoreRole.SLAVE)
            if offset % a.segment_size:
                raise ValueError(f"the master starts at {offset}, not a segment boundary")
            a.store.reset_to(offset)
            a._confirm_target = offset
            a.written.reset(offset)

        await self.actor_call(reset)

    async def record_epoch(self, epoch: int, start_offset: int) -> None:
        def record(a: StoreActor) -> None:
            a._require(StoreRole.SLAVE)
            a.store.record_epoch(epoch, start_offset)

        await self.actor_call(record)

    async def append_replicated(self, offset: int, data: bytes) -> int:
        return await self.ask(lambda r: ReplicaAppend(offset, data, r), 30.0)

    def advance_confirm(self, offset: int) -> None:
        self.request_confirm(offset)

    def request_confirm(self, offset: int) -> None:
        """confirmOffset may move to ``offset``: applied at the end of the next turn."""
        if offset <= self._confirm_target:
            return
        self._confirm_target = offset
        if not self._poked and not self._in_turn:
            self._poked = True
            try:
                self.tell_nowait(ConfirmPoke())
            except trio.WouldBlock:
                pass  # the inbox is busy: a turn is coming anyway
            except Exception:
                self._poked = False

    def _require(self, role: StoreRole) -> None:
        if self.role is not role:
            raise ValueError(f"the store is {self.role.value}, not {role.value}")

    # -- the actor
    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._flush_periodically)
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
                batch = [first]
                while len(batch) < MAX_DRAIN:
                    try:
                        batch.append(recv.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await self._turn(batch)

    async def handle(self, msg: StoreMsg) -> None:
        await self._turn([msg])

    async def _turn(self, batch: list[StoreMsg]) -> None:
        self._in_turn = True
        try:
            await self._turn_body(batch)
        finally:
            self._in_turn = False
            self._idle_since = trio.current_time()
        self._apply_confirm()

    # -- runtime figures
    def queued(self) -> int:
        """Messages waiting in the inbox (puts, mostly): the send path's queue."""
        return self._send.statistics().current_buffer_used

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
                case PutMessages() | PutBatchBody():
                    if appends:
                        await self._commit_replica(appends)
                        appends = []
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
        async with self._flush_lock:
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
        if self.role not in _WRITABLE:
            remark = (
                f"this broker is {self.role.value}, not master: it takes no writes now "
                "(the client refreshes its route and retries)"
            )
            for put in puts:
                _fail(put, PutStatus.SERVICE_NOT_AVAILABLE, remark)
            return
        gate = self.gate
        if gate is not None and not gate.admit_put():
            remark = gate.not_enough_remark()
            for put in puts:
                _fail(put, PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH, remark)
            return
        if self.fault is not None:
            self._refuse(puts)
            return
        started = self._writing_since = self._commit_started = trio.current_time()
        try:
            done = self._append(puts)
            if not done:
                return
            status, remark = PutStatus.PUT_OK, None
            if self.sync_flush:
                flushed = await self._sync_flush(done)
                if flushed is None:
                    return  # refused: a full disk (module docstring)
                status, remark = flushed
        finally:
            self._writing_since = None
        end = self.store.get_commitlog_max_offset()
        self.written.advance(end)
        if gate is None:
            for put, stored in done:
                put.on_done(stored, status, remark)  # type: ignore[arg-type]
            self._log_acked(done, started)
            return
        if self.first_write_epoch != self._epoch:
            self.first_write_epoch = self._epoch
            events.emit(self.log, events.MasterFirstWrite(epoch=self._epoch, offset=end))
        gate.on_local_max(end)
        gate.submit(end, self._completion(done, status, remark))

    def _completion(
        self, done: list[tuple[AnyPut, Stored]], status: PutStatus, remark: str | None
    ) -> Completion:
        started = self._commit_started  # the turn being handed over began then

        def complete(outcome: AckOutcome) -> None:
            if outcome is AckOutcome.ACKED:
                for put, stored in done:
                    put.on_done(stored, status, remark)  # type: ignore[arg-type]
                self._log_acked(done, started)
                return
            if outcome is AckOutcome.NOT_MASTER:
                why = "the broker stopped being master before its replicas had the message"
                for put, _ in done:
                    _fail(put, PutStatus.SERVICE_NOT_AVAILABLE, why)
            else:
                why = f"{outcome.value}: stored on the master, not acknowledged by its replicas"
                for put, stored in done:
                    put.on_done(stored, _ACK_STATUS[outcome], why)  # type: ignore[arg-type]
            self._log_not_acked(outcome, len(done))

        return complete

    def _log_not_acked(self, outcome: AckOutcome, count: int) -> None:
        """events.SendNotAcked.NAME, sampled like SEND_ACKED: one line per interval and reason."""
        key = outcome.value
        self._not_acked[key] = self._not_acked.get(key, 0) + count
        now = trio.current_time()
        if now < self._next_not_acked_log:
            return
        self._next_not_acked_log = now + ACK_LOG_INTERVAL_S
        for reason, n in self._not_acked.items():
            events.emit(self.log, events.SendNotAcked(reason=reason, count=n, epoch=self._epoch))
        self._not_acked.clear()

    async def _commit_replica(self, appends: list[ReplicaAppend]) -> None:
        if self.role is not StoreRole.SLAVE:
            for a in appends:
                a.reply.fail(ValueError(f"the store is {self.role.value}, not SLAVE"))
            return
        ok: list[tuple[ReplicaAppend, int]] = []
        for a in appends:
            if self.fault is not None:  # the HA client reconnects and fetches this again
                a.reply.fail(OSError(errno.ENOSPC, self.fault.remark()))
                continue
            try:
                ok.append((a, self.store.append_replicated(a.offset, a.data)))
            except ValueError as e:
                a.reply.fail(e)
            except Exception as e:
                if not disk_full(e):
                    raise
                a.reply.fail(OSError(errno.ENOSPC, self._enter_fault(e).remark()))
        if not ok:
            return
        if self.sync_flush:
            try:
                async with self._flush_lock:
                    await self._flush_in_thread(self.store.flush_commitlog)
            except OSError as e:
                for a, _ in ok:
                    a.reply.fail(e)
                if not disk_full(e):
                    raise
                self._enter_fault(e)
                return
        self.written.advance(self.store.get_commitlog_max_offset())
        for a, end in ok:
            a.reply.set(end)

    def _apply_confirm(self) -> None:
        target = self._confirm_target
        store = self.store
        if target > store.confirm_offset and self.role is not StoreRole.FENCED:
            try:
                store.advance_confirm(target)
            except Exception as e:
                if not disk_full(e):
                    raise
                self._enter_fault(e)  # the records stay; the repair dispatches them
        arrived = store.take_arrivals()
        if arrived and self.on_arrival is not None:
            for (topic, queue_id), max_offset in arrived.items():
                self.on_arrival(topic, queue_id, max_offset)

    def _log_acked(self, done: list[tuple[AnyPut, Stored]], started: float) -> None:
        """The turn's puts were answered: count their time (once per turn), log sampled."""
        count = sum(_count(stored) for _, stored in done)
        self._acked_since_log += count
        now = trio.current_time()
        if self.stats is not None:
            self.stats.on_put_turn(int((now - started) * 1000), count)
        if now < self._next_ack_log:
            return
        self._next_ack_log = now + ACK_LOG_INTERVAL_S
        _put, stored = done[-1]
        if isinstance(stored, BatchPutResult):
            topic, queue_id = stored.topic, stored.queue_id
            offset, cl_offset = stored.next_queue_offset - 1, stored.commitlog_offsets[-1]
        else:
            topic, queue_id = _put.messages[-1].topic, _put.messages[-1].queue_id  # type: ignore[union-attr]
            offset, cl_offset = stored[-1].queue_offset, stored[-1].commitlog_offset
        events.emit(
            self.log,
            events.SendAcked(
                topic=topic,
                queue_id=queue_id,
                offset=offset,
                commitlog_offset=cl_offset,
                count=self._acked_since_log,
            ),
        )
        self._acked_since_log = 0

    def _append(self, puts: list[AnyPut]) -> list[tuple[AnyPut, Stored]]:
        """Store the turn's puts in arrival order: each run of PutMessages with ONE
        put_messages call, each batch body with put_batch_body. A failing put wrote nothing
        (the store validates before writing and undoes a partial append), so only the faulty
        request is answered with an error."""
        out: list[tuple[AnyPut, Stored]] = []
        run: list[PutMessages] = []
        for put in puts:
            if isinstance(put, PutMessages):
                run.append(put)
                continue
            if run:
                out.extend(self._append_messages(run))
                run = []
            if self.fault is not None:  # an earlier put of the turn found the disk full
                self._refuse([put])
                continue
            try:
                stored = self.store.put_batch_body(
                    put.topic, put.queue_id, put.body, self.now_ms(), **put.options
                )
            except Exception as e:
                self._answer_error(put, e)
                continue
            if self.stats is not None:
                self.stats.on_topic_put(put.topic, stored.count, stored.total_size)
            out.append((put, stored))
        if run:
            out.extend(self._append_messages(run))
        return out

    def _append_messages(self, puts: list[PutMessages]) -> list[tuple[AnyPut, Stored]]:
        if self.fault is not None:  # an earlier put of the turn found the disk full
            self._refuse(puts)
            return []
        msgs = puts[0].messages if len(puts) == 1 else [m for p in puts for m in p.messages]
        try:
            results = self.store.put_messages(msgs, self.now_ms())
        except Exception as e:
            if len(puts) == 1 or disk_full(e):
                for put in puts:  # a full disk: the store cut the whole batch back
                    self._answer_error(put, e)
                return []
            out: list[tuple[AnyPut, Stored]] = []
            for put in puts:
                out.extend(self._append_messages([put]))
            return out
        stats = self.stats
        out = []
        i = 0
        for put in puts:  # one request each: counted once (a send's messages share a topic)
            n = len(put.messages)
            chunk = results[i : i + n]
            out.append((put, chunk))
            i += n
            if stats is not None:
                size = chunk[0].size if n == 1 else sum(r.size for r in chunk)
                stats.on_topic_put(put.messages[0].topic, n, size)
        return out

    def _answer_error(self, put: AnyPut, exc: Exception) -> None:
        if disk_full(exc):
            self._enter_fault(exc)
            self._refuse([put])
            return
        if self.stats is not None:
            self.stats.on_put_failed(1)
        if isinstance(exc, ValueError):
            # MessageTooLarge and fields out of range: the request's fault, not the store's
            _fail(put, PutStatus.MESSAGE_ILLEGAL, f"the message is illegal: {exc}")
            return
        topic = put.topic if isinstance(put, PutBatchBody) else put.messages[0].topic
        events.emit(self.log, events.PutFailed(topic=topic), exc_info=exc)
        _fail(put, PutStatus.UNKNOWN_ERROR, f"store put failed: {type(exc).__name__}: {exc}")

    async def _sync_flush(
        self, done: list[tuple[AnyPut, Stored]]
    ) -> tuple[PutStatus, str | None] | None:
        """fsync the turn (group commit); its status, or None when a full disk refused it."""
        started = trio.current_time()
        try:
            async with self._flush_lock:
                await self._flush_in_thread(self.store.flush_commitlog)
                self.sync_flush_count += 1
        except OSError as e:
            if disk_full(e):  # not acknowledged: their durability is unknown
                self._enter_fault(e)
                self._refuse([put for put, _ in done])
                return None
            remark = f"flush to disk failed, data durability unknown: {e}"
            for put, _ in done:
                _fail(put, PutStatus.UNKNOWN_ERROR, remark)
            raise
        took = trio.current_time() - started
        if took > self.sync_flush_timeout_s:
            return PutStatus.FLUSH_DISK_TIMEOUT, f"flush took {took * 1000:.0f} ms"
        return PutStatus.PUT_OK, None

    async def _flush_in_thread(self, flush: Callable[[], int]) -> None:
        started = trio.current_time()
        await self.run_blocking(flush)
        self.flush_count += 1
        took_ms = (trio.current_time() - started) * 1000
        if took_ms > 1000:
            events.emit(self.log, events.FlushSlow(duration_ms=round(took_ms)))

    async def _flush_periodically(self) -> None:
        while True:
            await trio.sleep(self.flush_interval_s)
            try:
                await self.flush()
            except OSError as e:
                if not disk_full(e):
                    raise
                self._enter_fault(e)

    # -- a full disk (module docstring)
    def _enter_fault(self, exc: BaseException) -> WriteFault:
        """Refuse writes from now on (the first cause is the one reported)."""
        if self.fault is not None:
            return self.fault
        fault = self.fault = WriteFault(describe(exc))
        if self.on_write_fault is not None:
            self.on_write_fault(fault.cause)
        return fault

    def _refuse(self, puts: Sequence[AnyPut]) -> None:
        if self.stats is not None:
            self.stats.on_put_failed(len(puts))
        remark = self.fault.remark() if self.fault is not None else None
        for put in puts:
            _fail(put, PutStatus.SERVICE_NOT_AVAILABLE, remark)

    async def _probe_periodically(self) -> None:
        while True:
            await trio.sleep(self.probe_interval_s)
            if self.fault is not None and not self.fault.until_restart:
                try:
                    await self.probe_disk()
                except ActorStopped:
                    return  # shutting down

    async def _probe(self) -> bool:
        """Repair the store and write a scratch block (module docstring); True when writes
        go in again. Runs between turns, beside no flush and no off-loop read."""
        fault = self.fault
        if fault is None:
            return True
        if fault.until_restart:
            return False
        cut_log = WriteFault.may_cut_log(self.role is StoreRole.MASTER)
        store = self.store

        def repair() -> int | None:
            remaining = store.repair(cut_log=cut_log)
            if remaining is not None:
                return remaining.offset
            store.probe_space()
            return None

        async with self._flush_lock, self.read_gate.exclusive():
            try:
                kept_from = await self.run_blocking(repair)
            except OSError as e:
                if not disk_full(e):
                    raise
                return False  # still full: the next probe tries again
        end = store.get_commitlog_max_offset()
        self._confirm_target = min(self._confirm_target, end)
        self.written.reset(end)  # a cut may have lowered it
        if kept_from is not None:
            self.fault = WriteFault(fault.cause, until_restart=True, offset=kept_from)
            events.emit(
                self.log,
                events.StoreFencedUntilRestart(offset=kept_from, reason=fault.cause),
            )
            return False
        self.fault = None
        if self.on_write_fault is not None:
            self.on_write_fault(None)
        return True


def _count(stored: Stored) -> int:
    return stored.count if isinstance(stored, BatchPutResult) else len(stored)


def _fail(put: AnyPut, status: PutStatus, remark: str | None) -> None:
    if isinstance(put, PutBatchBody):
        put.on_done(None, status, remark)
    else:
        put.on_done([], status, remark)
