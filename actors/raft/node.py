"""RaftNode: the Trio shell around one `RaftCore` — storage, network, ticks, apply, snapshots.

The node owns a `RaftCore` (the algorithm), a `RaftLog` (segments, term/vote, snapshot) and a
`StateMachine` (what committed entries mean). Everything that touches the core happens in one
task, `_loop`, so the core is never shared:

1. wait for an inbox message or the next tick (every `tick_ms` of Trio's clock);
2. drain the inbox without blocking: peer messages are stepped, proposals appended (a run of
   proposals goes to the core as one batch), read requests registered;
3. take the next `Ready` and handle it in the order the core documents. Hard state, snapshot
   and entries are persisted by ONE storage call with ONE fsync of the log (group commit:
   whatever arrived while the previous fsync ran lands in the same Ready). That call runs in a
   worker thread in the background; meanwhile the loop keeps stepping messages and ticks (the
   core allows stepping while a Ready is persisted; it hands out the next Ready only after
   `advance`), and a leader applies entries that became committed, i.e. durable on a majority,
   without waiting for its own disk. Once durable: messages are queued to the peers,
   committed entries applied in order and their proposers answered, read barriers released,
   the core's events logged, `advance`. A leader's messages go out before its own fsync (see
   `_start_ready`; Raft thesis §10.2.1);
4. when `snapshotThreshold` entries were applied since the last snapshot, snapshot the state
   machine, store it durably, drop covered log segments and compact the core.

Peers: every message is one oneway RAFT_MESSAGE request whose body is the binary codec of
`protocol/raft.py`. Each peer has a bounded send queue drained by its own task over one
connection (`PeerSender`, peer_sender.py); the node never waits on a peer — when the queue is
full the message is dropped (Raft re-sends what matters: heartbeats, probes, retries).

Proposers get the state machine's outcome for THEIR entry: `propose` resolves once the entry is
committed and applied on this node, or fails with `ProposalDropped` when another entry took its
index (leadership changed) or a snapshot replaced it, or `NotLeader` / `LeaderPendingFull`
straight away. `read_barrier` resolves once this node has confirmed its leadership with a
majority after the call and applied everything committed before it (Raft's ReadIndex).
Both kinds of waiter are kept, and told, by `Waiters` (waiters.py).

Storage calls go through an injectable `IoRunner` (a worker thread by default); simulations
pass `run_inline` or a seeded slow disk so Trio's MockClock never races a real thread, and an
`fs` (storage/fs.py) to keep the Raft store on a simulated disk.
"""

from __future__ import annotations

import functools
import os
import random
from collections.abc import Callable
from typing import Any, Protocol

import attrs
import structlog
import trio

from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.remoting import RemotingClient, RequestContext
from rocketrio.actors.kernel.runtime import IoRunner, Reply
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.actors.raft.config import RaftConfig
from rocketrio.actors.raft.core import (
    LeaderPendingFull,
    NotLeader,
    RaftCore,
    Ready,
    Role,
)
from rocketrio.actors.raft.peer_sender import PEER_QUEUE_CAPACITY, PeerSender
from rocketrio.actors.raft.waiters import NodeStopped, ProposalDropped, Waiters
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.raft import (
    Entry,
    RaftCodecError,
    RaftMessage,
    Snapshot,
    decode_message,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.raft_log import DEFAULT_SEGMENT_SIZE, RaftLog

__all__ = [
    "IoRunner",
    "LeaderPendingFull",
    "NodeStopped",
    "NotLeader",
    "ProposalDropped",
    "RaftNode",
    "Role",
    "StateMachine",
    "run_inline",
    "store_dir",
]

DEFAULT_TICK_MS = 10
INBOX_CAPACITY = 8192


class StateMachine(Protocol):
    """What the replicated log drives. `apply` must be deterministic: same data, same state."""

    def apply(self, data: bytes) -> Any:
        """Apply one committed entry; the return value is handed to its proposer."""

    def snapshot(self) -> bytes:
        """The whole state, as `restore` reads it back."""

    def restore(self, data: bytes) -> None:
        """Replace the whole state by a `snapshot()`."""


@attrs.frozen(slots=True)
class _Step:
    msg: RaftMessage


@attrs.frozen(slots=True)
class _Propose:
    data: bytes
    reply: Reply[Any]


@attrs.frozen(slots=True)
class _ReadIndex:
    reply: Reply[None]


@attrs.frozen(slots=True)
class _Unreachable:
    """A vote or heartbeat request to `to_id` could not be delivered."""

    to_id: str
    msg: RaftMessage


@attrs.frozen(slots=True)
class _Persisted:
    """The background fsync of `ready` finished."""

    ready: Ready


_Inbox = _Step | _Propose | _ReadIndex | _Unreachable | _Persisted


async def run_inline(fn: Callable[..., Any], *args: Any) -> Any:
    """An `IoRunner` that blocks the event loop (deterministic, for simulations)."""
    return fn(*args)


class RaftNode:
    """One controller replica's Raft member. Start with `await nursery.start(node.run)`."""

    def __init__(
        self,
        config: RaftConfig,
        store_path: str,
        state_machine: StateMachine,
        transport: Transport,
        *,
        rng: random.Random | None = None,
        tick_ms: int = DEFAULT_TICK_MS,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        peer_queue_capacity: int = PEER_QUEUE_CAPACITY,
        io_runner: IoRunner | None = None,
        fs: FileSystem = OS_FS,
    ) -> None:
        self.config = config
        self.self_id = config.selfId
        self.fs = fs
        self.peers = config.peer_map()
        self.store_path = store_path
        self.sm = state_machine
        self.transport = transport
        self.tick_ms = tick_ms
        self._rng = rng or random.Random()
        self._segment_size = segment_size
        self._io: IoRunner = io_runner or trio.to_thread.run_sync
        self._send, self._recv = trio.open_memory_channel[_Inbox](INBOX_CAPACITY)
        self._core: RaftCore | None = None
        self._log: RaftLog | None = None
        self._applied = 0
        self._inflight: Ready | None = None  # being persisted in the background
        self._inflight_sent = False  # its messages already went out (leader, see _start_ready)
        self._persisted: Ready | None = None  # persisted, to finish on the node task
        self.waiters = Waiters()  # proposers and readers (waiters.py)
        self._ready_term = -1  # term whose leader no-op this node applied as leader
        self._ready_event = trio.Event()
        self._seen = (Role.CANDIDATE, 0, None)
        self.dropped_messages = 0  # inbox overflow (a peer queue's: peer_sender.dropped)
        # owner hook, called from the node task (must not block): (role, term, leader id)
        self.on_role_change: Callable[[Role, int, str | None], None] | None = None
        self.log = structlog.get_logger("raft").bind(actor="raft", raft_id=self.self_id)
        self.peer_sender = PeerSender(
            self.self_id, self.peers, peer_queue_capacity, self._on_unreachable, self.log
        )

    # ------------------------------------------------------------------ views

    @property
    def core(self) -> RaftCore:
        assert self._core is not None, "RaftNode.run has not started"
        return self._core

    @property
    def started(self) -> bool:
        return self._core is not None

    @property
    def role(self) -> Role:
        return self._core.role if self._core else Role.CANDIDATE

    @property
    def term(self) -> int:
        return self._core.term if self._core else 0

    @property
    def leader_id(self) -> str | None:
        return self._core.leader_id if self._core else None

    @property
    def leader_addr(self) -> str | None:
        return self._core.leader_addr if self._core else None

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def is_ready_leader(self) -> bool:
        """Leader that applied its own term's first entry: its state machine is up to date."""
        return self.is_leader and self._ready_term == self.term

    @property
    def applied_index(self) -> int:
        return self._applied

    @property
    def commit_index(self) -> int:
        return self._core.commit_index if self._core else 0

    async def wait_leader_ready(self, timeout_s: float) -> bool:
        """Wait (bounded) until this node is a ready leader; False if it is not by then."""
        with trio.move_on_after(timeout_s):
            while self.is_leader and not self.is_ready_leader:
                await self._ready_event.wait()
        return self.is_ready_leader

    # ------------------------------------------------------------------ API

    async def propose(self, data: bytes, timeout_s: float = float("inf")) -> Any:
        """Replicate `data`; returns `StateMachine.apply`'s outcome on this node.

        Raises NotLeader, LeaderPendingFull, ProposalDropped, or trio.TooSlowError on timeout
        (then the entry may still commit later: the outcome is unknown).
        """
        reply: Reply[Any] = Reply()
        with trio.fail_after(timeout_s):
            await self._send.send(_Propose(data, reply))
            return await reply.wait()

    def propose_nowait(self, data: bytes, reply: Reply[Any]) -> bool:
        """Queue a proposal whose `reply` (usually a callback Reply) gets the outcome.

        False when the inbox is full; the caller should answer "busy".
        """
        try:
            self._send.send_nowait(_Propose(data, reply))
        except trio.WouldBlock:
            return False
        return True

    async def read_barrier(self, timeout_s: float = float("inf")) -> None:
        """Return once a read of the state machine here is linearizable (leader only)."""
        reply: Reply[None] = Reply()
        with trio.fail_after(timeout_s):
            await self._send.send(_ReadIndex(reply))
            await reply.wait()

    def deliver(self, body: bytes) -> None:
        """A RAFT_MESSAGE body from the network; malformed or overflowing input is dropped."""
        try:
            msg = decode_message(body)
        except RaftCodecError as e:
            events.emit(self.log, events.RaftMessageMalformed(error=str(e)))
            return
        try:
            self._send.send_nowait(_Step(msg))
        except trio.WouldBlock:
            self.dropped_messages += 1

    async def processor(self, ctx: RequestContext) -> RemotingCommand | None:
        """Remoting processor for the Raft RPCs (oneway: nothing to answer)."""
        if ctx.cmd.code == RequestCode.RAFT_MESSAGE:
            self.deliver(ctx.cmd.body)
            return None
        return ctx.cmd.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            f"request code {ctx.cmd.code} is not a Raft RPC",
        )

    # ------------------------------------------------------------------ lifecycle

    async def run(
        self, *, task_status: trio.TaskStatus[RaftNode] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the store, restore the state machine, then serve until cancelled."""
        log = await self._io(
            functools.partial(RaftLog.open, self.store_path, self._segment_size, fs=self.fs)
        )
        self._log = log
        try:
            await self._start_core(log)
            async with RemotingClient(self.transport) as client, trio.open_nursery() as nursery:
                self.peer_sender.start(nursery, client)
                task_status.started(self)
                await self._loop(nursery)
        finally:
            self._fail_everything(NodeStopped(f"raft node {self.self_id} stopped"))
            self._core = None
            with trio.CancelScope(shield=True):
                await self._io(log.close)

    async def _start_core(self, log: RaftLog) -> None:
        report = log.recovery_report
        if not report.clean:
            events.emit(
                self.log,
                events.RaftLogRecovered(
                    torn_tail=None if report.torn_tail is None else attrs.asdict(report.torn_tail),
                    removed_files=list(report.removed_files),
                    log_discarded_for_snapshot=report.log_discarded_for_snapshot,
                ),
            )
        loaded = await self._io(log.load_snapshot)
        entries = await self._io(log.all_entries)
        snapshot = None
        if loaded is not None:
            meta, data = loaded
            self.sm.restore(data)
            snapshot = Snapshot(meta, data)
            self._applied = meta.index
        self._core = RaftCore(
            self.self_id,
            self.peers,
            self.config,
            self._rng,
            log.hard_state,
            entries,
            snapshot,
            monotonic_ms(),
        )
        events.emit(
            self.log,
            events.RaftNodeStarted(
                term=log.hard_state.term,
                voted_for=log.hard_state.voted_for,
                snapshot_index=self._applied,
                last_index=self._core.last_index,
            ),
        )

    # ------------------------------------------------------------------ the node task

    async def _loop(self, nursery: trio.Nursery) -> None:
        core = self.core
        tick_s = self.tick_ms / 1000
        next_tick = trio.current_time() + tick_s
        while True:
            with trio.move_on_at(next_tick):
                first = await self._recv.receive()
                self._take_inputs(first)
            now = trio.current_time()
            if now >= next_tick:
                core.tick(monotonic_ms())
                next_tick = now + tick_s
            if self._persisted is not None:
                rd, self._persisted, self._inflight = self._persisted, None, None
                self._finish_ready(rd)
            if self._inflight is not None:
                self._apply_committed()  # what a majority holds need not wait for our disk
                continue
            while self._inflight is None and (rd := core.ready()) is not None:
                self._start_ready(rd, nursery)
            if (
                self._inflight is None
                and core.snapshot_due
                and core.applied_index == self._applied
                and core.applied_index > core.snapshot_index
            ):
                await self._take_snapshot()

    def _take_inputs(self, first: _Inbox) -> None:
        """Step everything queued now; consecutive proposals go to the core as one batch."""
        core = self.core
        now = monotonic_ms()
        batch: list[_Propose] = []
        msg: _Inbox | None = first
        while msg is not None:
            if isinstance(msg, _Propose):
                batch.append(msg)
            else:
                if batch:
                    self._propose_batch(batch, now)
                    batch = []
                if isinstance(msg, _Step):
                    core.step(msg.msg, now)
                elif isinstance(msg, _ReadIndex):
                    self._read_index(msg.reply, now)
                elif isinstance(msg, _Unreachable):
                    core.report_unreachable(msg.to_id, msg.msg, now)
                else:
                    self._persisted = msg.ready
            try:
                msg = self._recv.receive_nowait()
            except trio.WouldBlock:
                msg = None
        if batch:
            self._propose_batch(batch, now)

    def _propose_batch(self, batch: list[_Propose], now: int) -> None:
        core = self.core
        try:
            last = core.propose([p.data for p in batch], now)
        except (NotLeader, LeaderPendingFull, ValueError) as e:
            for p in batch:
                p.reply.fail(e)
            return
        self.waiters.add_proposals(last, core.term, [p.reply for p in batch])

    def _read_index(self, reply: Reply[None], now: int) -> None:
        ctx = self.waiters.next_read_ctx()
        try:
            self.core.read_index(ctx, now)
        except NotLeader as e:
            reply.fail(e)
            return
        self.waiters.add_read(ctx, reply)

    def _start_ready(self, rd: Ready, nursery: trio.Nursery) -> None:
        """Steps 1-4 of the core's order; the fsync runs in the background (see `_loop`).

        One exception to "persist before sending", as the Raft thesis (§10.2.1) and etcd's
        server allow: a leader's Ready without hard state or snapshot is sent BEFORE its
        entries are fsynced, so the followers write in parallel with the leader. Nothing a
        leader sends claims its own durability (the core counts the leader's match only from
        its stable index, i.e. after `advance`), and with no hard state no vote is granted.
        """
        early = rd.hard_state is None and rd.snapshot is None and self.core.role is Role.LEADER
        if early:
            self._send_messages(rd)
        if rd.hard_state is None and rd.snapshot is None and not rd.entries:
            self._finish_ready(rd, sent=early)
            return
        self._inflight = rd
        self._inflight_sent = early
        nursery.start_soon(self._persist_in_background, rd)

    async def _persist_in_background(self, rd: Ready) -> None:
        await self._io(self._persist, rd)
        await self._send.send(_Persisted(rd))

    def _finish_ready(self, rd: Ready, sent: bool | None = None) -> None:
        """Steps 2 and 4-7 once the Ready is durable, then `advance`."""
        if sent is None:
            sent = self._inflight_sent
        if rd.snapshot is not None:
            self._install_snapshot(rd.snapshot)
        if not sent:
            self._send_messages(rd)
        if rd.committed_entries:
            self._apply(rd.committed_entries)
        waiters = self.waiters
        for rs in rd.read_states:
            waiters.read_state(rs.ctx, rs.index)
        for ctx in rd.dropped_reads:
            waiters.drop_read(ctx, NotLeader(self.leader_id, self.leader_addr))
        waiters.release_reads(self._applied)
        for record in rd.log_records:
            events.emit(self.log, record)
        self.core.advance(rd)
        self._notice_role_change()

    def _send_messages(self, rd: Ready) -> None:
        send = self.peer_sender.send
        for to, msg in rd.messages:
            send(to, msg)

    def _apply_committed(self) -> None:
        """While a Ready is being persisted, a leader applies entries that became committed
        (durable on a majority) and answers their proposers at once; the next Ready hands the
        same entries again and `_apply` skips them."""
        core = self.core
        if (
            core.role is not Role.LEADER
            or core.commit_index <= self._applied
            or self._applied < core.snapshot_index  # a snapshot install is still to come
        ):
            return
        self._apply(core.entries(self._applied + 1, core.commit_index))
        self.waiters.release_reads(self._applied)

    def _persist(self, rd: Ready) -> None:
        """Worker thread: every durable write of one Ready, one log fsync at the end."""
        log = self._log
        assert log is not None
        if rd.hard_state is not None:
            log.save_hard_state(rd.hard_state.term, rd.hard_state.voted_for)
        if rd.snapshot is not None:
            meta = rd.snapshot.meta
            log.save_snapshot(meta.index, meta.term, rd.snapshot.data)
        if rd.entries:
            log.append(rd.entries)
        if rd.must_sync:
            log.sync()

    def _install_snapshot(self, snap: Snapshot) -> None:
        self.sm.restore(snap.data)
        index = snap.meta.index
        self._applied = max(self._applied, index)
        self.waiters.superseded_by_snapshot(index)

    def _apply(self, entries: list[Entry]) -> None:
        core = self.core
        applied = self.waiters.applied
        for e in entries:
            if e.index <= self._applied:
                continue  # covered by a snapshot installed in this Ready
            outcome = None if not e.data else self.sm.apply(e.data)
            self._applied = e.index
            applied(e.index, e.term, outcome)
            if not e.data and e.term == core.term and core.role is Role.LEADER:
                self._ready_term = e.term
                self._ready_event.set()
                events.emit(self.log, events.RaftLeaderReady(term=e.term, index=e.index))

    def _notice_role_change(self) -> None:
        core = self.core
        seen = (core.role, core.term, core.leader_id)
        if seen == self._seen:
            return
        was_leader, old_term = self._seen[0] is Role.LEADER, self._seen[1]
        self._seen = seen
        if was_leader and (core.role is not Role.LEADER or core.term != old_term):
            self._ready_event.set()  # wake waiters: they re-check against the new state
            self._ready_event = trio.Event()
            self.waiters.fail_waiting_reads(lambda: NotLeader(core.leader_id, core.leader_addr))
        if self.on_role_change is not None:
            self.on_role_change(core.role, core.term, core.leader_id)

    async def _take_snapshot(self) -> None:
        core, log = self.core, self._log
        assert log is not None
        index = core.applied_index
        term = core.term_at(index)
        assert term is not None
        data = self.sm.snapshot()

        def store() -> None:
            log.save_snapshot(index, term, data)
            log.compact(index)

        await self._io(store)
        core.compact(index, term, data)
        events.emit(self.log, events.RaftSnapshotTaken(index=index, term=term, size=len(data)))

    def _fail_everything(self, exc: ProposalDropped) -> None:
        self.waiters.fail_all(exc)
        self._ready_event.set()

    def _on_unreachable(self, peer: str, msg: RaftMessage) -> bool:
        """A vote or heartbeat request `peer_sender` could not deliver goes back to the core
        (`report_unreachable`) through the inbox; False when the inbox is full."""
        try:
            self._send.send_nowait(_Unreachable(peer, msg))
        except trio.WouldBlock:
            return False
        return True


def store_dir(base: str, self_id: str) -> str:
    """Where a replica keeps its Raft store under a (possibly shared) base directory."""
    return os.path.join(base, self_id)
