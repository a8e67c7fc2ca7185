"""The client's remoting connections on anyio: one connection per address, requests matched to
responses by opaque, oneways, and the server pushes answered by a processor.

The servers keep the kernel's Trio `Connection` (remoting_connection.py, with its limits and
answer timing); a client needs none of that, so this is the client side only, written on the
backend-neutral layer (backend.py) so it runs on asyncio and on Trio. Frames are the same sans-io
`FrameDecoder` / `encode_command`. Errors are the kernel's `RemotingError` / `RemotingTimeout`
classes, so ``except RemotingError`` catches both kinds of client.

A `ClientTransport` opens byte streams: `TcpClientTransport` (anyio's TCP, both loops) by default;
a kernel `Transport` (the tests' SimNetwork, Trio only) is accepted too and its streams adapted.
"""

from __future__ import annotations

import itertools
import math
import socket
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import SocketAttribute

from rocketrio.actors.client import backend as aio
from rocketrio.actors.kernel.remoting_connection import RemotingError, RemotingTimeout
from rocketrio.actors.kernel.server_limits import MAX_READ, READ_CHUNK
from rocketrio.actors.kernel.transport import split_addr
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RPC_ONEWAY, ResponseCode, request_name
from rocketrio.protocol.remoting import (
    DEFAULT_MAX_FRAME,
    FrameDecoder,
    RemoteProtocolError,
    RemotingCommand,
    encode_command,
)
from rocketrio.protocol.serde import HeaderError

__all__ = [
    "WRITE_HIGH_WATER",
    "ClientConnection",
    "ClientRemoting",
    "ClientRequestContext",
    "ClientTransport",
    "InFlight",
    "RemotingError",
    "RemotingTimeout",
    "TcpClientTransport",
]

log = structlog.get_logger("remoting")

WRITE_HIGH_WATER = 8 * 1024 * 1024  # request()/oneway() wait while more is unsent
RequestHook = Callable[[str, RemotingCommand], None]


class ClientTransport(Protocol):
    async def connect(self, addr: str) -> Any:
        """An anyio ByteStream (or a Trio stream, adapted) to ``addr``; OSError if refused."""


class TcpClientTransport:
    """TCP on the running loop (asyncio or Trio), with TCP_NODELAY."""

    async def connect(self, addr: str) -> anyio.abc.ByteStream:
        host, port = split_addr(addr)
        stream = await anyio.connect_tcp(host, port)
        sock = stream.extra(SocketAttribute.raw_socket, None)
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return stream


class ClientRequestContext:
    """A request a server pushed to us (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE...)."""

    __slots__ = ("cmd", "conn", "responded")

    def __init__(self, conn: ClientConnection, cmd: RemotingCommand) -> None:
        self.conn = conn
        self.cmd = cmd
        self.responded = False

    def respond(self, response: RemotingCommand) -> None:
        if self.responded:
            return
        self.responded = True
        if not self.cmd.is_oneway:
            self.conn.send_nowait(response)


Processor = Callable[[ClientRequestContext], Awaitable[RemotingCommand | None]]


class InFlight:
    """A request written to a connection, its answer not yet taken: awaited in as many pieces
    as the caller likes (`wait` with a timeout raises `aio.WaitTimeout` and leaves the request
    pending), or ended early by a watch (`fail`), then `release`d, which forgets it (a later
    answer is dropped). What a watched request (stuck_sends.RequestWatch, invoke_watched) waits
    on instead of a task of its own."""

    __slots__ = ("_conn", "_opaque", "_reply")

    def __init__(
        self, conn: ClientConnection, opaque: int, reply: aio.Reply[RemotingCommand]
    ) -> None:
        self._conn = conn
        self._opaque = opaque
        self._reply = reply

    @property
    def done(self) -> bool:
        """The answer (or the connection's failure) is there."""
        return self._reply.done

    async def wait(self, timeout: float = math.inf) -> RemotingCommand:
        """The answer (or the connection's failure); `aio.WaitTimeout` if none came within
        ``timeout`` (none: no timeout scope). An answer already there is returned whatever the
        timeout, without a checkpoint."""
        if self._reply.done:
            return self._reply.result()
        return await self._reply.wait(timeout)

    def fail(self, exc: BaseException) -> None:
        """End the wait with ``exc`` (a watch giving the request up); an answer already there
        stays the answer."""
        self._reply.fail(exc)

    def release(self) -> None:
        self._conn._pending.pop(self._opaque, None)


class ClientConnection:
    """One connection: a reader task (decodes, matches answers, serves pushes inline) and a
    writer task that coalesces queued frames into few sends."""

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        processor: Processor | None,
        *,
        remote: str = "?",
        max_frame: int = DEFAULT_MAX_FRAME,
        opaque_seq: itertools.count[int] | None = None,
    ) -> None:
        self.stream = stream
        self.processor = processor
        self.remote = remote
        self._out: deque[bytes] = deque()
        self._out_bytes = 0
        self._writer_wake: aio.Event | None = None
        self._drained: aio.Event | None = None
        self._pending: dict[int, aio.Reply[RemotingCommand]] = {}
        self._opaque = opaque_seq or itertools.count(1)
        self._decoder = FrameDecoder(max_frame)
        self.closed = False
        self.close_reason: str | None = None
        self.on_close: list[Callable[[ClientConnection], None]] = []
        self.attrs: dict[str, Any] = {}

    # -- sending
    def send_nowait(self, cmd: RemotingCommand) -> None:
        if self.closed:
            return
        frame = encode_command(cmd)
        self._out.append(frame)
        self._out_bytes += len(frame)
        wake = self._writer_wake
        if wake is not None:
            self._writer_wake = None
            wake.set()

    async def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        call = await self.begin(cmd)
        try:
            return await call.wait(timeout)
        except aio.WaitTimeout:
            raise RemotingTimeout(
                f"{request_name(cmd.code)} to {self.remote} timed out after {timeout}s"
            ) from None
        finally:
            call.release()

    def begin_nowait(self, cmd: RemotingCommand) -> InFlight:
        """`begin` without the wait for the high-water mark (the caller checked it)."""
        if self.closed:
            raise RemotingError(f"connection to {self.remote} is closed")
        opaque = next(self._opaque)
        cmd.opaque = opaque
        reply: aio.Reply[RemotingCommand] = aio.Reply()
        self._pending[opaque] = reply
        self.send_nowait(cmd)
        return InFlight(self, opaque, reply)

    async def begin(self, cmd: RemotingCommand) -> InFlight:
        """Write ``cmd`` once the connection's unsent bytes are under the high-water mark and
        return its `InFlight`, which the caller must `release`."""
        if self.closed:
            raise RemotingError(f"connection to {self.remote} is closed")
        await self._wait_drained()
        return self.begin_nowait(cmd)

    def request_nowait(
        self, cmd: RemotingCommand, on_done: Callable[[aio.Reply[RemotingCommand]], None]
    ) -> int:
        """Send without waiting; ``on_done`` gets the answer or the failure. Returns the opaque
        (for `cancel_request`); the caller owns timeouts."""
        if self.closed:
            raise RemotingError(f"connection to {self.remote} is closed")
        opaque = next(self._opaque)
        cmd.opaque = opaque
        self._pending[opaque] = aio.Reply(on_done=on_done)
        self.send_nowait(cmd)
        return opaque

    def cancel_request(self, opaque: int, exc: BaseException) -> bool:
        """Fail a pending request (its deadline passed); False if it already finished."""
        reply = self._pending.pop(opaque, None)
        if reply is None:
            return False
        reply.fail(exc)
        return True

    @property
    def pending_output_bytes(self) -> int:
        return self._out_bytes

    async def oneway(self, cmd: RemotingCommand) -> None:
        if self.closed:
            raise RemotingError(f"connection to {self.remote} is closed")
        cmd.opaque = next(self._opaque)
        cmd.flag |= RPC_ONEWAY
        await self._wait_drained()
        self.send_nowait(cmd)

    async def _wait_drained(self) -> None:
        while self._out_bytes > WRITE_HIGH_WATER and not self.closed:
            if self._drained is None:
                self._drained = aio.new_event()
            await self._drained.wait()

    def _wake_drained(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None:
            drained.set()

    # -- the tasks
    async def run(self) -> None:
        """Serve the connection until either side closes it."""
        try:
            async with aio.create_task_group() as tg:
                tg.start_soon(self._writer)
                await self._reader()
                tg.cancel_scope.cancel()
        finally:
            self._close("closed")
            with aio.CancelScope(shield=True), aio.move_on_after(1):
                await self.stream.aclose()

    async def _reader(self) -> None:
        decoder = self._decoder
        try:
            while True:
                want = max(READ_CHUNK, min(decoder.missing(), MAX_READ))
                try:
                    data = await self.stream.receive(want)
                except aio.EndOfStream:
                    self.close_reason = "eof"
                    return
                except (aio.BrokenResourceError, aio.ClosedResourceError, OSError):
                    self.close_reason = "reset"
                    return
                try:
                    decoder.feed(data)
                    while (cmd := decoder.next_command()) is not None:
                        await self._dispatch(cmd)
                except RemoteProtocolError as e:
                    self.close_reason = f"bad frame: {e}"
                    events.emit(
                        log, events.BadFrame(remote=self.remote, reason=e.reason, error=str(e))
                    )
                    return
        finally:
            decoder.release()

    async def _dispatch(self, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            reply = self._pending.get(cmd.opaque)
            if reply is not None:
                reply.set(cmd)
            return
        ctx = ClientRequestContext(self, cmd)
        if self.processor is None:
            resp: RemotingCommand | None = cmd.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "this endpoint serves no requests"
            )
        else:
            try:
                resp = await self.processor(ctx)
            except HeaderError as e:
                resp = cmd.make_response(ResponseCode.INVALID_PARAMETER, str(e))
            except Exception as e:
                events.emit(
                    log,
                    events.RequestFailed(code=request_name(cmd.code), remote=self.remote),
                    exc_info=e,
                )
                resp = cmd.make_response(
                    ResponseCode.SYSTEM_ERROR,
                    f"{request_name(cmd.code)} failed: {type(e).__name__}: {e}",
                )
        if resp is not None:
            ctx.respond(resp)

    async def _writer(self) -> None:
        out = self._out
        while True:
            while not out:
                wake = self._writer_wake = aio.new_event()
                await wake.wait()
            if len(out) == 1:
                data = out.popleft()
            else:
                data = b"".join(out)
                out.clear()
            try:
                await self.stream.send(data)
            except (aio.BrokenResourceError, aio.ClosedResourceError, OSError):
                self.close_reason = "reset"
                self._close("write failed")
                with aio.CancelScope(shield=True), aio.move_on_after(1):
                    await self.stream.aclose()
                return
            self._out_bytes -= len(data)
            if self._out_bytes <= WRITE_HIGH_WATER // 2:
                self._wake_drained()

    def _close(self, why: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = self.close_reason or why
        for reply in self._pending.values():
            reply.fail(RemotingError(f"connection to {self.remote} closed ({self.close_reason})"))
        self._pending.clear()
        self._wake_drained()
        for cb in self.on_close:
            cb(self)


class ClientRemoting:
    """Connection pool by address; ``invoke`` / ``invoke_oneway``; answers server pushes.

    Use as ``async with ClientRemoting(transport) as remoting:``; connection tasks live in its
    task group. ``request_hook`` (an ACL signer) runs on every request before it is encoded.
    """

    def __init__(
        self,
        transport: ClientTransport,
        *,
        processor: Processor | None = None,
        connect_timeout: float = 3.0,
        request_hook: RequestHook | None = None,
    ) -> None:
        self.transport = transport
        self.processor = processor
        self.connect_timeout = connect_timeout
        self.request_hook = request_hook
        self._conns: dict[str, ClientConnection] = {}
        self._connecting: dict[str, aio.Event] = {}
        self._tg: aio.TaskGroup | None = None
        self._opaque = itertools.count(1)

    async def __aenter__(self) -> ClientRemoting:
        self._tg = aio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(*exc)

    def connection_nowait(self, addr: str) -> ClientConnection | None:
        conn = self._conns.get(addr)
        return conn if conn is not None and not conn.closed else None

    async def get_connection(self, addr: str) -> ClientConnection:
        while True:
            conn = self._conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            pending = self._connecting.get(addr)
            if pending is None:
                break
            await pending.wait()
        event = aio.new_event()
        self._connecting[addr] = event
        try:
            with aio.move_on_after(self.connect_timeout) as scope:
                stream = aio.adapt_stream(await self.transport.connect(addr))
            if scope.cancelled_caught:
                raise RemotingError(f"connect to {addr} timed out after {self.connect_timeout}s")
        except OSError as e:
            raise RemotingError(f"cannot connect to {addr}: {e}") from None
        finally:
            del self._connecting[addr]
            event.set()
        conn = ClientConnection(stream, self.processor, remote=addr, opaque_seq=self._opaque)
        conn.on_close.append(lambda c: self._conns.get(addr) is c and self._conns.pop(addr))
        self._conns[addr] = conn
        assert self._tg is not None, "use ClientRemoting as an async context manager"
        self._tg.start_soon(conn.run)
        return conn

    def before_request(self, addr: str, cmd: RemotingCommand) -> None:
        if self.request_hook is not None:
            self.request_hook(addr, cmd)

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout: float = 3.0
    ) -> RemotingCommand:
        deadline = aio.current_time() + timeout
        self.before_request(addr, cmd)
        conn = await self.get_connection(addr)
        left = max(0.0, deadline - aio.current_time())
        return await conn.request(cmd, left if left > 0 else math.ulp(0))

    async def begin(self, addr: str, cmd: RemotingCommand) -> InFlight:
        """``cmd`` written to ``addr`` (connecting first if need be), its answer to be waited on
        and released by the caller (`InFlight`); `invoke` in pieces, without its timeout."""
        self.before_request(addr, cmd)
        conn = await self.get_connection(addr)
        return await conn.begin(cmd)

    def begin_nowait(self, addr: str, cmd: RemotingCommand) -> InFlight | None:
        """`begin` when it needs no wait: a connection to ``addr`` is open and under its
        high-water mark; None (nothing written) otherwise."""
        conn = self._conns.get(addr)
        if conn is None or conn.closed or conn._out_bytes > WRITE_HIGH_WATER:
            return None
        self.before_request(addr, cmd)
        return conn.begin_nowait(cmd)

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        self.before_request(addr, cmd)
        conn = await self.get_connection(addr)
        await conn.oneway(cmd)

    def close_connection(self, addr: str) -> None:
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn._close("closed by client")
            assert self._tg is not None
            self._tg.start_soon(conn.stream.aclose)
