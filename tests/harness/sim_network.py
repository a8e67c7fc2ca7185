"""The simulated network: the tests' twin of `TcpTransport` (rocketrio.actors.kernel.transport).

`SimNetwork` is a whole network inside one Trio run: every host gets a `SimTransport`; links
between hosts can be delayed (ordered, seeded jitter), partitioned (bytes are held, as TCP would
retransmit them after the partition heals, and new connections time out) or cut (every stream
between the hosts breaks), and a host can crash (all its streams break). Byte loss inside a
stream is not modelled because TCP never delivers a stream with holes: loss shows up as delay or
a reset, and both are here. With ``window_bytes`` set, each direction holds at most that many
unread bytes (plus the chunk being sent) and ``send_all`` waits for the reader, as a full TCP
socket buffer would; by default a sender never waits.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import structlog
import trio

from rocketrio.actors.kernel.transport import Handler, Transport, split_addr


class _Pipe:
    """One direction of a simulated connection: ordered chunks with delivery times."""

    def __init__(self) -> None:
        self.chunks: deque[tuple[float, bytes]] = deque()
        self.lot = trio.lowlevel.ParkingLot()
        self.closed = False  # writer closed: EOF after the queued chunks
        self.broken = False  # connection reset
        self.last_at = 0.0
        self.queued = 0  # bytes sent and not yet received
        self.reader_gone = False  # the receiving end closed (a windowed sender then fails)
        self.space = trio.lowlevel.ParkingLot()  # senders waiting for the window


class SimStream(trio.abc.Stream):
    def __init__(self, net: SimNetwork, local: str, remote: str, rx: _Pipe, tx: _Pipe) -> None:
        self._net, self.local_host, self.remote_host = net, local, remote
        self._rx, self._tx = rx, tx
        self._closed = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        if self._closed:
            raise trio.ClosedResourceError("stream closed")
        if self._tx.broken or self._tx.closed:
            raise trio.BrokenResourceError("connection reset (simulated)")
        if not data:
            return
        window = self._net.window_bytes
        while window is not None and self._tx.queued >= window:
            if self._tx.reader_gone:
                raise trio.BrokenResourceError("connection reset by peer (simulated)")
            await self._tx.space.park()
            if self._closed:
                raise trio.ClosedResourceError("stream closed")
            if self._tx.broken or self._tx.closed:
                raise trio.BrokenResourceError("connection reset (simulated)")
        self._queue(bytes(data))

    def _queue(self, data: bytes) -> None:
        at = max(
            trio.current_time() + self._net.delay(self.local_host, self.remote_host),
            self._tx.last_at,
        )
        self._tx.last_at = at
        self._tx.chunks.append((at, data))
        self._tx.queued += len(data)
        self._tx.lot.unpark_all()

    def send_nowait(self, buffers: list[bytes | memoryview]) -> int:
        """A non-blocking gathered send, as the HA master's inline shipping makes on a TCP
        socket (`master_service.nowait_sender`): the bytes the window has room for (all of
        them on a network without a window), 0 when it is full; OSError on a closed or reset
        connection."""
        if self._closed or self._tx.broken or self._tx.closed:
            raise BrokenPipeError("connection closed or reset (simulated)")
        data = b"".join(buffers)
        window = self._net.window_bytes
        if window is not None:
            data = data[: max(0, window - self._tx.queued)]
        if data:
            self._queue(data)
        return len(data)

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        while True:
            if self._closed:
                raise trio.ClosedResourceError("stream closed")
            rx = self._rx
            if rx.broken:
                raise trio.BrokenResourceError("connection reset (simulated)")
            if rx.chunks and not self._net.blocked(self.remote_host, self.local_host):
                at, chunk = rx.chunks[0]
                now = trio.current_time()
                if at <= now:
                    if max_bytes is not None and len(chunk) > max_bytes:
                        rx.chunks[0] = (at, chunk[max_bytes:])
                        chunk = chunk[:max_bytes]
                    else:
                        rx.chunks.popleft()
                    rx.queued -= len(chunk)
                    rx.space.unpark_all()
                    await trio.lowlevel.checkpoint()
                    return chunk
                with trio.move_on_at(at):
                    await rx.lot.park()
                continue
            if rx.closed and not rx.chunks:
                await trio.lowlevel.checkpoint()
                return b""
            await rx.lot.park()

    async def send_eof(self) -> None:
        await trio.lowlevel.checkpoint()
        self._tx.closed = True
        self._tx.lot.unpark_all()

    async def aclose(self) -> None:
        self.close_now()
        await trio.lowlevel.checkpoint()

    def close_now(self) -> None:
        if not self._closed:
            self._closed = True
            self._tx.closed = True
            self._rx.reader_gone = True
            for p in (self._tx, self._rx):
                p.lot.unpark_all()
                p.space.unpark_all()
            self._net._streams.discard(self)

    def reset(self) -> None:
        for p in (self._rx, self._tx):
            p.broken = True
            p.lot.unpark_all()
            p.space.unpark_all()


class SimNetwork:
    """All hosts of a simulated cluster; faults are set per host pair (both directions)."""

    def __init__(
        self,
        seed: int = 0,
        *,
        base_delay_s: float = 0.0002,
        jitter_s: float = 0.0003,
        window_bytes: int | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.window_bytes = window_bytes
        self.base_delay_s = base_delay_s
        self.jitter_s = jitter_s
        self._listeners: dict[str, tuple[trio.Nursery, Handler]] = {}
        # the structlog context of each listener: its connections' handlers log as the
        # listening process, not as the connecting one (whose task starts them here)
        self._listener_log_context: dict[str, dict[str, Any]] = {}
        self._partitioned: set[frozenset[str]] = set()
        self._extra_delay: dict[frozenset[str], float] = {}
        self._down: set[str] = set()
        self._streams: set[SimStream] = set()
        self.connect_timeout_s = 3.0

    def transport(self, host: str) -> SimTransport:
        return SimTransport(self, host)

    # -- fault controls
    def delay(self, a: str, b: str) -> float:
        extra = self._extra_delay.get(frozenset((a, b)), 0.0)
        return self.base_delay_s + extra + self.rng.random() * self.jitter_s

    def blocked(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self._partitioned or a in self._down or b in self._down

    def set_delay(self, a: str, b: str, extra_s: float) -> None:
        self._extra_delay[frozenset((a, b))] = extra_s

    def partition(self, group_a: list[str], group_b: list[str]) -> None:
        """Hold all bytes between the two groups until `heal` (like a silent network split)."""
        for a in group_a:
            for b in group_b:
                if a != b:
                    self._partitioned.add(frozenset((a, b)))

    def isolate(self, host: str, others: list[str]) -> None:
        self.partition([host], others)

    def cut(self, a: str, b: str) -> None:
        """Reset every open connection between two hosts (like an RST)."""
        for s in list(self._streams):
            if {s.local_host, s.remote_host} == {a, b}:
                s.reset()

    def heal_between(self, group_a: list[str], group_b: list[str]) -> None:
        """Undo `partition` between two groups only (other partitions stay)."""
        for a in group_a:
            for b in group_b:
                self._partitioned.discard(frozenset((a, b)))
        for s in list(self._streams):
            s._rx.lot.unpark_all()

    def heal(self) -> None:
        self._partitioned.clear()
        self._extra_delay.clear()
        for s in list(self._streams):
            s._rx.lot.unpark_all()

    def crash(self, host: str) -> None:
        """The host's connections reset; its listeners must be cancelled by the test."""
        for s in list(self._streams):
            if host in (s.local_host, s.remote_host):
                s.reset()
                self._streams.discard(s)
        for addr in [a for a in self._listeners if split_addr(a)[0] == host]:
            del self._listeners[addr]

    # -- used by SimTransport
    def _listen(self, addr: str, nursery: trio.Nursery, handler: Handler) -> None:
        if addr in self._listeners:
            raise OSError(f"address already in use: {addr}")
        self._listeners[addr] = (nursery, handler)
        self._listener_log_context[addr] = structlog.contextvars.get_contextvars()

    def _unlisten(self, addr: str, nursery: trio.Nursery) -> None:
        if self._listeners.get(addr, (None,))[0] is nursery:
            del self._listeners[addr]

    async def _connect(self, local: str, addr: str) -> SimStream:
        remote, _ = split_addr(addr)
        await trio.sleep(self.delay(local, remote))
        if self.blocked(local, remote):
            await trio.sleep(self.connect_timeout_s)
            raise OSError(f"connect to {addr} timed out (simulated partition)")
        entry = self._listeners.get(addr)
        if entry is None:
            raise ConnectionRefusedError(f"connection refused: {addr}")
        nursery, handler = entry
        a_to_b, b_to_a = _Pipe(), _Pipe()
        client = SimStream(self, local, remote, rx=b_to_a, tx=a_to_b)
        server = SimStream(self, remote, local, rx=a_to_b, tx=b_to_a)
        self._streams.update((client, server))
        context = self._listener_log_context.get(addr, {})
        nursery.start_soon(_run_handler, handler, server, context)
        return client


async def _run_handler(handler: Handler, stream: SimStream, context: dict[str, Any]) -> None:
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(**context)
    try:
        await handler(stream)
    finally:
        stream.close_now()


class SimTransport(Transport):
    def __init__(self, net: SimNetwork, host: str) -> None:
        self.net, self.host = net, host

    async def serve(
        self,
        addr: str,
        handler: Handler,
        *,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        host, _ = split_addr(addr)
        if host != self.host:
            raise OSError(f"host {self.host} cannot listen on {addr}")
        async with trio.open_nursery() as nursery:
            self.net._listen(addr, nursery, handler)
            try:
                task_status.started(addr)
                await trio.sleep_forever()
            finally:
                self.net._unlisten(addr, nursery)
                nursery.cancel_scope.cancel()

    async def connect(self, addr: str) -> trio.abc.Stream:
        return await self.net._connect(self.host, addr)
