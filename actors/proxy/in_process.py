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

from collections.abc import Awaitable, Callable, Collection

import trio

from rocketrio.actors.transport import Handler, Transport

IN_PROCESS_PEER = "in-process"  # the peer name the broker's connection table sees
PIPE_CHUNKS = 64  # unread chunks per direction before a writer waits


class InProcessStream(trio.abc.Stream):
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

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            raise trio.ClosedResourceError("stream closed")
        if not data:
            await trio.lowlevel.checkpoint()
            return
        try:
            await self._tx.send(bytes(data))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise trio.BrokenResourceError("the other end closed") from None

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._closed:
            raise trio.ClosedResourceError("stream closed")
        if not self._pending:
            try:
                self._pending = await self._rx.receive()
            except trio.EndOfChannel:
                return b""
        else:
            await trio.lowlevel.checkpoint()
        n = len(self._pending) if max_bytes is None else max_bytes
        chunk, self._pending = self._pending[:n], self._pending[n:]
        return chunk

    async def send_eof(self) -> None:
        await self._tx.aclose()

    async def aclose(self) -> None:
        self._closed = True
        await self._tx.aclose()
        await self._rx.aclose()


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
