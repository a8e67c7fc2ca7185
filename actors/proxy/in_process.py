"""The local-mode proxy's way to its own broker: `InProcessTransport` hands a connection to the
co-located broker's remoting address to that broker's connection handler as one end of an
in-memory stream pair (`in_process_stream_pair`), so the proxy and the broker of one process
speak the remoting protocol without a socket; every other address (NameServers, other brokers)
goes through the inner transport (TCP in production, the simulated network in tests).

The pair is bounded: each direction holds at most ``capacity`` unread chunks, and a writer
waits for its reader as it would on a full socket buffer. Closing one end is EOF for the other
end's reads and a broken stream for its writes.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Collection

import trio

from rocketrio.actors.kernel.transport import Handler, Transport

IN_PROCESS_PEER = "in-process"  # the peer name the broker's connection table sees
PIPE_CHUNKS = 64  # unread chunks per direction before a writer waits


class InProcessStream(trio.abc.HalfCloseableStream):
    """One end of an in-memory connection (`in_process_stream_pair`)."""

    remote_host = IN_PROCESS_PEER  # read by the remoting server as the peer's name

    def __init__(
        self,
        tx: trio.MemorySendChannel[bytes],
        rx: trio.MemoryReceiveChannel[bytes],
    ) -> None:
        self._tx, self._rx = tx, rx
        self._pending = b""  # the rest of a chunk a read with max_bytes did not take
        self._closed = False
        self._eof_sent = False
        self._sending = self._receiving = False  # one task per direction at a time

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        self._sending = True
        try:
            if self._closed:
                raise trio.ClosedResourceError("stream closed")
            if self._eof_sent:
                raise trio.ClosedResourceError("send_eof was called")
            if not data:
                await trio.lowlevel.checkpoint()
                return
            try:
                await self._tx.send(bytes(data))
            except trio.BrokenResourceError:
                raise trio.BrokenResourceError("the other end closed") from None
        finally:
            self._sending = False

    async def wait_send_all_might_not_block(self) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        if self._closed:
            raise trio.ClosedResourceError("stream closed")
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if max_bytes is not None and operator.index(max_bytes) < 1:
            raise ValueError("max_bytes must be >= 1")
        if self._receiving:
            raise trio.BusyResourceError("another task is receiving on this stream")
        self._receiving = True
        try:
            if self._closed:
                raise trio.ClosedResourceError("stream closed")
            if self._pending:
                await trio.lowlevel.checkpoint()
            else:
                try:
                    self._pending = await self._rx.receive()
                except trio.EndOfChannel:
                    await trio.lowlevel.checkpoint()
                    return b""
            n = len(self._pending) if max_bytes is None else max_bytes
            chunk, self._pending = self._pending[:n], self._pending[n:]
            return chunk
        finally:
            self._receiving = False

    async def send_eof(self) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        if self._closed:
            raise trio.ClosedResourceError("stream closed")
        self._eof_sent = True
        await self._tx.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self._tx.close()
        self._rx.close()
        await trio.lowlevel.checkpoint()


def in_process_stream_pair(capacity: int = PIPE_CHUNKS) -> tuple[InProcessStream, InProcessStream]:
    """Two connected streams: what one end sends, the other receives, in order."""
    a_tx, b_rx = trio.open_memory_channel[bytes](capacity)
    b_tx, a_rx = trio.open_memory_channel[bytes](capacity)
    return InProcessStream(a_tx, a_rx), InProcessStream(b_tx, b_rx)


class InProcessTransport(Transport):
    """``connect`` to one of ``local_addrs`` runs ``accept`` (the co-located broker's
    connection handler) on the server end of a new pair in ``nursery`` and returns the client
    end; any other address, and ``serve``, go to ``inner``. ``on_connect`` (if given) is told
    each in-process connection's address."""

    def __init__(
        self,
        inner: Transport,
        local_addrs: Collection[str],
        accept: Handler,
        nursery: trio.Nursery,
        on_connect: Callable[[str], None] | None = None,
    ) -> None:
        self.inner = inner
        self.local_addrs = frozenset(local_addrs)
        self._accept = accept
        self._nursery = nursery
        self._on_connect = on_connect
        self.in_process_connections = 0

    async def serve(
        self,
        addr: str,
        handler: Handler,
        *,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        await self.inner.serve(addr, handler, task_status=task_status)

    async def connect(self, addr: str) -> trio.abc.Stream:
        if addr not in self.local_addrs:
            return await self.inner.connect(addr)
        client, server = in_process_stream_pair()
        self._nursery.start_soon(_serve_then_close, self._accept, server)
        self.in_process_connections += 1
        if self._on_connect is not None:
            self._on_connect(addr)
        await trio.lowlevel.checkpoint()
        return client


async def _serve_then_close(
    accept: Callable[[trio.abc.Stream], Awaitable[None]], s: InProcessStream
) -> None:
    try:
        await accept(s)
    finally:
        with trio.CancelScope(shield=True):
            await s.aclose()
