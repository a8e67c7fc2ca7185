"""The master's HA side (H1): the listener on haListenPort and one connection per slave.

The listener runs in every role (the port stays bound), but a connection is served only while
this broker is master (`activate` .. `deactivate`); otherwise it is closed at once, so a slave
can never replicate from a broker that is not master (upstream accepted them in every role).

Per connection, two tasks share a `MasterConnectionCore` (master_core.py):
- the reader (upstream ReadSocketService) decodes the slave's handshake and acks; a handshake
  registers the slave with the `GroupTransferService` (a second connection of the same slave
  replaces the first) and makes the writer answer with the epoch list; the first ack fixes
  where sending starts; every ack goes to the GroupTransferService;
- the writer (upstream WriteSocketService) sends the handshake answer, then batches planned by
  the core, read through the store view (whole written bytes, inline), each with the CURRENT
  confirmOffset; every batch is at most haTransferBatchSize, but all the batches ready at one
  wake-up (up to `BURST_BYTES`) go out in ONE socket write, read with one read: a slave then
  reads, stores and acks a master's turn once, not per 32 KiB. It sleeps on the store's
  `written` watermark, and sends heartbeats and closes an idle connection on the core's timers;
- shipping inline (`ship_inline`): the store's `written` watermark calls the service as it
  advances, in the store turn that appended, and each connection in TRANSFER whose writer is
  not writing plans the same burst and hands it to the socket with ONE non-blocking send: the
  turn's bytes are on the wire before the turn answers or dispatches, with no wait for the
  writer task to be scheduled (behind the client connections' readers, on a busy master: the
  round trip of every replicated send). Whatever the socket does not take at once is left to
  the writer, which sends it before anything else, so the byte stream keeps its order; a
  stream with no non-blocking send (`nowait_sender`, kernel/answer_flush.py) is served by the
  writer alone.
A protocol error, a closed socket or haHousekeepingInterval of silence closes the connection;
the slave is then reported disconnected (which shrinks the SyncStateSet) unless a newer
connection of the same slave took over.
"""

from __future__ import annotations

import itertools
from typing import Any

import structlog
import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.ha.group_transfer import GroupTransferService
from rocketrio.actors.broker.ha.master_core import (
    MasterConnectionCore,
    NoEpochForOffset,
    Phase,
    TransferBatch,
)
from rocketrio.actors.broker.ha.ports import MasterStorePort, first_leaf
from rocketrio.actors.broker.ha.status_body import ByteRate, MasterView, SlaveLink
from rocketrio.actors.broker.store.clean_policy import ReplicaLink, replica_floor
from rocketrio.actors.kernel.answer_flush import Buffers, nowait_sender
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.protocol.ha import (
    NEED_DATA,
    HaEpoch,
    MasterHandshake,
    RemoteProtocolError,
    SlaveAck,
    SlaveHandshake,
    SlaveStreamDecoder,
    encode_master_handshake,
    encode_transfer_header,
)

READ_SIZE = 64 * 1024
# bodies sent with one socket write per wake-up of a connection's writer (several transfer
# packets of at most haTransferBatchSize each): the slave's read buffer (1 MiB) takes it whole
BURST_BYTES = 1024 * 1024


# buffers per non-blocking send: a gathered write takes at most IOV_MAX (1024 on Linux) of them
GATHER_MAX = 512


class _Closing(Exception):
    """Close this HA connection; the message says why."""


_SOCKET_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
_CLOSE_REASONS = (_Closing, RemoteProtocolError, ValueError, NoEpochForOffset, *_SOCKET_ERRORS)


class HAMasterService:
    """See module docstring. Run with ``bound = await nursery.start(service.run)``."""

    @classmethod
    def of(cls, io: BrokerIO, store: MasterStorePort) -> HAMasterService:
        """The broker's HA listener, on haListenPort, with the broker's HA settings."""
        c = io.config
        return cls(
            io.transport,
            c.ha_addr,
            store,
            segment_size=c.mappedFileSizeCommitLog,
            batch_size=c.haTransferBatchSize,
            heartbeat_interval_ms=c.haSendHeartbeatInterval,
            housekeeping_interval_ms=c.haHousekeepingInterval,
        )

    def __init__(
        self,
        transport: Transport,
        listen_addr: str,
        store: MasterStorePort,
        *,
        segment_size: int,
        batch_size: int,
        heartbeat_interval_ms: int,
        housekeeping_interval_ms: int,
        log: Any = None,
    ) -> None:
        self.transport = transport
        self.listen_addr = listen_addr
        self.store = store
        self.segment_size = segment_size
        self.batch_size = batch_size
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.housekeeping_interval_ms = housekeeping_interval_ms
        self.log = log or structlog.get_logger("ha").bind(actor="ha_master")
        self.gate: GroupTransferService | None = None
        self.self_id = -1
        self._scopes: dict[int, trio.CancelScope] = {}
        self._conns: dict[int, _Connection] = {}  # connection number -> connection
        self._by_slave: dict[int, int] = {}  # slave brokerId -> connection number
        self._numbers = itertools.count(1)

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        stop = self.store.written.listen(self._on_written)
        try:
            await self.transport.serve(self.listen_addr, self._serve, task_status=task_status)
        finally:
            stop()

    def _on_written(self, _value: int) -> None:
        """The store turn that appended calls this (module doc: shipping inline)."""
        for conn in self._conns.values():
            conn.ship_inline()

    def activate(self, gate: GroupTransferService, self_id: int) -> None:
        """Serve slaves for this mastership (`gate` belongs to one masterEpoch)."""
        self.deactivate()
        self.gate = gate
        self.self_id = self_id

    def deactivate(self) -> None:
        """Not master any more: drop every slave connection."""
        self.gate = None
        for scope in self._scopes.values():
            scope.cancel()
        self.store.written.kick()

    @property
    def connection_count(self) -> int:
        return len(self._scopes)

    def view(self) -> MasterView:
        """The master side for GET_BROKER_HA_STATUS (runtime_info.py): every open slave
        connection, in the order they were accepted, and the SyncStateSet the controller
        confirmed (empty while not master)."""
        now = monotonic_ms()
        links = tuple(
            SlaveLink(
                addr=conn.peer,
                slave_id=conn.core.slave_id,
                ack_offset=conn.core.ack_offset,
                transfer_from=-1 if conn.core.next_offset is None else conn.core.next_offset,
                bytes_per_s=conn.sent_bytes.per_second(now),
            )
            for conn in self._conns.values()
        )
        gate = self.gate
        members = frozenset() if gate is None else gate.applied_members()
        return MasterView(self.store.log_end_offset(), self.self_id, members, links)

    def replica_floor(self, in_sync_only: bool) -> int | None:
        """What the connected slaves still need of this master's log (store/clean_policy.py
        `replica_floor`), for retention."""
        view = self.view()
        links = [ReplicaLink(x.slave_id, x.ack_offset, x.transfer_from) for x in view.links]
        return replica_floor(links, view.sync_state_set, in_sync_only=in_sync_only)

    def slaves_caught_up_ms(self) -> dict[int, int]:
        """When each slave was last caught up (Trio ms), for the replication-lag metric."""
        return {} if self.gate is None else self.gate.caught_up_ms()

    # ------------------------------------------------------------------ one connection

    async def _serve(self, stream: trio.abc.Stream) -> None:
        gate = self.gate
        peer = getattr(stream, "remote_host", None) or _peer(stream)
        if gate is None:
            events.emit(
                self.log, events.HaConnectionClosed(side="master", peer=peer, reason="not master")
            )
            await stream.aclose()
            return
        number = next(self._numbers)
        conn = _Connection(self, gate, stream, number, peer)
        with trio.CancelScope() as scope:
            self._scopes[number] = scope
            self._conns[number] = conn
            try:
                await conn.run()
            finally:
                del self._scopes[number]
                del self._conns[number]
                conn.finish()
        with trio.CancelScope(shield=True):
            await stream.aclose()


def _peer(stream: trio.abc.Stream) -> str:
    try:
        host, port = stream.socket.getpeername()[:2]  # type: ignore[attr-defined]
        return f"{host}:{port}"
    except (AttributeError, OSError):
        return "?"


class _Connection:
    def __init__(
        self,
        service: HAMasterService,
        gate: GroupTransferService,
        stream: trio.abc.Stream,
        number: int,
        peer: str,
    ) -> None:
        self.s = service
        self.gate = gate
        self.stream = stream
        self.number = number
        self.peer = peer
        self.core = MasterConnectionCore(
            segment_size=service.segment_size,
            batch_size=service.batch_size,
            heartbeat_interval_ms=service.heartbeat_interval_ms,
            housekeeping_interval_ms=service.housekeeping_interval_ms,
            now_ms=monotonic_ms(),
        )
        self.decoder = SlaveStreamDecoder()
        self.reply_handshake = False
        self.reason = "cancelled"
        self.sent_bytes = ByteRate()  # bytes written to the slave per second
        self.send_nowait, self.release_sender = nowait_sender(stream)
        self.writing = False  # a write of the writer task is under way: no inline send now
        self.unsent: memoryview | None = None  # what an inline send left for the writer
        self.inline_bursts = 0  # bursts shipped from the store turn (tests, figures)

    async def run(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._reader)
                nursery.start_soon(self._writer)
        except BaseException as e:
            leaf = first_leaf(e, _CLOSE_REASONS)
            if leaf is None:
                raise
            socket_error = isinstance(leaf, _SOCKET_ERRORS)
            self.reason = f"socket: {leaf}" if socket_error else str(leaf)

    def finish(self) -> None:
        self.release_sender()
        slave = self.core.slave_id
        if slave is not None and self.s._by_slave.get(slave) == self.number:
            del self.s._by_slave[slave]
            if not self.gate.closed:
                self.gate.on_disconnected(slave)
        events.emit(
            self.s.log,
            events.HaConnectionClosed(
                side="master", peer=self.peer, slave_id=slave, reason=self.reason
            ),
        )

    # ------------------------------------------------------------------ reader

    async def _reader(self) -> None:
        while True:
            data = await self.stream.receive_some(READ_SIZE)
            if not data:
                raise _Closing("the slave closed the connection")
            self.decoder.receive_data(data)
            while (ev := self.decoder.next_event()) is not NEED_DATA:
                self._on_event(ev)

    def _on_event(self, ev: SlaveHandshake | SlaveAck) -> None:
        core, gate, store = self.core, self.gate, self.s.store
        match core.on_event(ev, monotonic_ms()):
            case SlaveHandshake() as h:
                if h.broker_id == self.s.self_id:
                    raise _Closing(
                        f"a slave handshook with the master's own brokerId {h.broker_id}"
                    )
                previous = self.s._by_slave.get(h.broker_id)
                if previous is not None and previous != self.number:
                    scope = self.s._scopes.get(previous)
                    if scope is not None:
                        scope.cancel()  # a reconnect replaces the old connection
                self.s._by_slave[h.broker_id] = self.number
                gate.on_connected(h.broker_id, learner=h.async_learner)
                self.reply_handshake = True
                store.written.kick()
                events.emit(
                    self.s.log,
                    events.HaConnected(
                        side="master",
                        peer=self.peer,
                        slave_id=h.broker_id,
                        async_learner=h.async_learner,
                        sync_from_last_file=h.sync_from_last_file,
                    ),
                )
            case SlaveAck() as a:
                if core.phase is Phase.WAIT_FIRST_ACK and not self.reply_handshake:
                    start = core.begin_transfer(
                        master_min=store.log_min_offset(),
                        master_max=store.log_end_offset(),
                    )
                    events.emit(
                        self.s.log,
                        events.HaHandshake(
                            side="master",
                            slave_id=core.slave_id,
                            slave_offset=a.max_offset,
                            start_offset=start,
                        ),
                    )
                    store.written.kick()
                assert core.slave_id is not None
                gate.on_ack(core.slave_id, a.max_offset)
            case None:
                pass

    # ------------------------------------------------------------------ writer

    def ship_inline(self) -> None:
        """Ship what the store just wrote, from the store turn, with one non-blocking send
        (module doc); anything it cannot do now is left to the writer task."""
        send, core = self.send_nowait, self.core
        if send is None or self.writing or self.reply_handshake or self.s.gate is not self.gate:
            return
        if core.phase is not Phase.TRANSFER or core.next_offset is None:
            return
        store, now = self.s.store, monotonic_ms()
        confirm = store.confirm_offset()
        try:
            burst = core.plan_burst(
                store.log_end_offset(), store.epoch_records(), now, confirm, BURST_BYTES
            )
            if not burst:
                return
            parts = self._packet_parts(burst, confirm)
            if len(parts) > GATHER_MAX:
                parts = [b"".join(parts)]
            taken = send(parts)
        except (_Closing, NoEpochForOffset, OSError):
            return  # the writer task meets the same and closes the connection
        if taken <= 0:
            return  # the socket's buffer is full: the writer waits for room
        size = sum(len(p) for p in parts)
        if taken < size:
            self.unsent = memoryview(b"".join(parts))[taken:]
            self.writing = True  # until the writer has sent the rest, nothing else goes out
            store.written.kick()
        self.inline_bursts += 1
        self._sent(burst, size, confirm)

    def _sent(self, burst: list[TransferBatch], size: int, confirm: int) -> None:
        now = monotonic_ms()
        self.sent_bytes.add(size, now)
        self.core.sent_burst(burst, now, confirm)
        if self.core.slave_id is not None:
            self.gate.on_sent(self.core.slave_id)

    async def _send_all(self, data: bytes | memoryview) -> None:
        self.writing = True
        try:
            await self.stream.send_all(data)
        finally:
            self.writing = False

    async def _writer(self) -> None:
        core, store = self.core, self.s.store
        while True:
            if self.unsent is not None:  # the rest of an inline send goes first
                rest, self.unsent = self.unsent, None
                await self._send_all(rest)
                continue
            now = monotonic_ms()
            if core.expired(now):
                raise _Closing(
                    f"nothing from the slave for {now - core.last_read_ms} ms "
                    f"(haHousekeepingInterval {self.s.housekeeping_interval_ms})"
                )
            if self.reply_handshake:
                self.reply_handshake = False
                await self._send_handshake(now)
                continue
            confirm = store.confirm_offset()
            burst = core.plan_burst(
                store.log_end_offset(), store.epoch_records(), now, confirm, BURST_BYTES
            )
            if not burst:
                with trio.move_on_at(core.next_timer_ms() / 1000):
                    if core.phase is Phase.TRANSFER and core.next_offset is not None:
                        # not woken for a turn the store shipped inline (ports.py)
                        await store.written.wait_past(self._sent_up_to)
                    else:
                        await store.written.wait_kick()
                continue
            data = self._packets(burst, confirm)
            await self._send_all(data)
            self._sent(burst, len(data), confirm)

    def _sent_up_to(self) -> int:
        """How far this writer has sent (what `Watermark.wait_past` compares with): -1 once
        the connection left TRANSFER, so that any change wakes it to re-check."""
        offset = self.core.next_offset
        return -1 if offset is None or self.core.phase is not Phase.TRANSFER else offset

    def _packets(self, burst: list[TransferBatch], confirm: int) -> bytes:
        """The burst's transfer packets as one buffer (the writer task's one write)."""
        parts = self._packet_parts(burst, confirm)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _packet_parts(self, burst: list[TransferBatch], confirm: int) -> Buffers:
        """The burst's transfer packets, header then body each, in order, for a gathered
        write: the bodies are contiguous, so they are read with one read and sliced, and not
        copied again to join them."""
        first, last = burst[0], burst[-1]
        size = last.offset + last.size - first.offset
        body = self.s.store.read_commitlog(first.offset, size) if size else b""
        if len(body) != size:
            raise _Closing(f"read {len(body)} of {size} bytes at {first.offset}")
        view = memoryview(body)
        parts: Buffers = []
        for b in burst:
            at = b.offset - first.offset
            parts.append(
                encode_transfer_header(b.offset, b.epoch, b.epoch_start_offset, confirm, b.size)
            )
            if b.size:
                parts.append(view[at : at + b.size])
        return parts

    async def _send_handshake(self, now: int) -> None:
        store = self.s.store
        epochs = tuple(HaEpoch(r.epoch, r.start_offset) for r in store.epoch_records())
        last = epochs[-1].epoch if epochs else -1
        mh = MasterHandshake(store.log_end_offset(), last, epochs)
        data = encode_master_handshake(mh)
        await self._send_all(data)
        self.sent_bytes.add(len(data), monotonic_ms())
        self.core.handshake_sent(now)
