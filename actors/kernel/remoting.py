"""The remoting endpoints: `RemotingServer` (upstream NettyRemotingServer) accepts connections
on a `Transport` and serves their requests within the server's `ServerLimits`;
`RemotingClient` (NettyRemotingClient) keeps one connection per address and sends requests,
oneways and hooks (an ACL signer) through it, answering server pushes with its processor.

The connection itself (framing, request/response matching, the reader and writer tasks, the
per-read limits and the answer timing) is remoting_connection.py; its names are re-exported
here, so ``from rocketrio.actors.kernel.remoting import RequestContext`` keeps working.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import trio

from rocketrio.actors.kernel.remoting_connection import (
    WRITE_HIGH_WATER,
    Connection,
    DirectHandler,
    Processor,
    RemotingError,
    RemotingTimeout,
    RequestContext,
    ServerSide,
)
from rocketrio.actors.kernel.server_limits import (
    READ_CHUNK,
    ConnectionTable,
    InputBudget,
    ServerLimits,
)
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.actors.observe.rpc_metrics import RpcLatency
from rocketrio.protocol.remoting import DEFAULT_MAX_FRAME, RemotingCommand

__all__ = [
    "WRITE_HIGH_WATER",
    "Connection",
    "DirectHandler",
    "Processor",
    "RemotingClient",
    "RemotingError",
    "RemotingServer",
    "RemotingTimeout",
    "RequestContext",
    "RequestHook",
    "ServerSide",
]

# Runs on every request a RemotingClient sends, before it is encoded (upstream
# RPCHook.doBeforeRequest): e.g. an ACL signer adding AccessKey and Signature.
RequestHook = Callable[[str, RemotingCommand], None]


class RemotingServer:
    """Accepts connections on ``addr`` and feeds their requests to ``processor``, within
    ``limits`` (`ServerLimits`; the defaults when not given), timing the answers into
    ``rpc_latency`` when given (see the module docstring); ``direct`` maps request codes to
    direct paths that skip the processor (remoting_connection.DirectHandler; not used when
    answers are timed)."""

    def __init__(
        self,
        transport: Transport,
        addr: str,
        processor: Processor,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        on_connect: Callable[[Connection], None] | None = None,
        limits: ServerLimits | None = None,
        rpc_latency: RpcLatency | None = None,
        direct: dict[int, DirectHandler] | None = None,
    ) -> None:
        self.transport = transport
        self.addr = addr
        self.processor = processor
        self.max_frame = max_frame
        self.on_connect = on_connect
        self.limits = limits or ServerLimits()
        if self.limits.input_budget_bytes < max_frame + 4 + READ_CHUNK:
            raise ValueError(
                f"input budget {self.limits.input_budget_bytes} cannot hold one frame of "
                f"{max_frame} bytes plus a read"
            )
        self.side = ServerSide(self.limits, rpc_latency, direct)
        self.table = ConnectionTable(
            self.limits.max_connections, self.limits.max_connections_per_address
        )
        self.connections: set[Connection] = set()

    @property
    def budget(self) -> InputBudget:
        return self.side.budget

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        await self.transport.serve(self.addr, self._handle, task_status=task_status)

    async def accept(self, stream: trio.abc.Stream) -> None:
        """Serve one connection that did not come through ``transport`` (a local-mode
        proxy's in-process stream), under the same limits as the others."""
        await self._handle(stream)

    async def _handle(self, stream: trio.abc.Stream) -> None:
        remote = _peer_name(stream)
        host = _peer_host(remote)
        refusal = self.table.admit(host)
        if refusal is not None:
            self.side.warn(
                events.ConnectionRefused(remote=remote, reason=refusal.reason, why=refusal.remark)
            )
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await stream.aclose()
            return
        try:
            conn = Connection(
                stream, self.processor, remote=remote, max_frame=self.max_frame, server=self.side
            )
            self.connections.add(conn)
            conn.on_close.append(self.connections.discard)
            if self.on_connect is not None:
                self.on_connect(conn)
            await conn.run()
        finally:
            self.table.release(host)


def _peer_name(stream: trio.abc.Stream) -> str:
    sock = getattr(stream, "socket", None)
    if sock is not None:
        try:
            host, port = sock.getpeername()[:2]
            return f"{host}:{port}"
        except OSError:
            return "?"
    host = getattr(stream, "remote_host", None)
    return str(host) if host else "?"


def _peer_host(remote: str) -> str:
    """The host part of a peer name ("1.2.3.4:5678", "[::1]:5678" or a bare simulated host)."""
    host, sep, port = remote.rpartition(":")
    return host if sep and port.isdigit() else remote


class RemotingClient:
    """Connection pool by address; ``invoke`` / ``invoke_oneway``; answers server pushes.

    Use as ``async with RemotingClient(transport) as client:`` so connection tasks live in a
    nursery that the client owns. ``request_hook`` runs on every request sent through
    `invoke` / `invoke_oneway`; code that sends on a `Connection` itself calls
    `before_request` first.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        processor: Processor | None = None,
        connect_timeout: float = 3.0,
        request_hook: RequestHook | None = None,
    ) -> None:
        self.transport = transport
        self.processor = processor
        self.connect_timeout = connect_timeout
        self.request_hook = request_hook
        self._conns: dict[str, Connection] = {}
        self._connecting: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None
        self._opaque = itertools.count(1)
        self._cm: Any = None

    async def __aenter__(self) -> RemotingClient:
        self._cm = trio.open_nursery()
        self._nursery = await self._cm.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> bool | None:
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        return await self._cm.__aexit__(*exc)

    def connection_nowait(self, addr: str) -> Connection | None:
        """The open connection to ``addr``, if there is one (no connecting, no waiting)."""
        conn = self._conns.get(addr)
        return conn if conn is not None and not conn.closed else None

    async def get_connection(self, addr: str) -> Connection:
        while True:
            conn = self._conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            pending = self._connecting.get(addr)
            if pending is None:
                break
            await pending.wait()
        event = trio.Event()
        self._connecting[addr] = event
        try:
            with trio.move_on_after(self.connect_timeout) as scope:
                stream = await self.transport.connect(addr)
            if scope.cancelled_caught:
                raise RemotingError(f"connect to {addr} timed out after {self.connect_timeout}s")
        except OSError as e:
            raise RemotingError(f"cannot connect to {addr}: {e}") from None
        finally:
            del self._connecting[addr]
            event.set()
        conn = Connection(stream, self.processor, remote=addr, opaque_seq=self._opaque)
        conn.on_close.append(lambda c: self._conns.get(addr) is c and self._conns.pop(addr))
        self._conns[addr] = conn
        assert self._nursery is not None, "use RemotingClient as an async context manager"
        self._nursery.start_soon(conn.run)
        return conn

    def before_request(self, addr: str, cmd: RemotingCommand) -> None:
        """Apply the request hook (if any) to a request about to go to ``addr``."""
        if self.request_hook is not None:
            self.request_hook(addr, cmd)

    async def invoke(
        self, addr: str, cmd: RemotingCommand, timeout: float = 3.0
    ) -> RemotingCommand:
        deadline = trio.current_time() + timeout
        self.before_request(addr, cmd)
        conn = await self.get_connection(addr)
        left = max(0.0, deadline - trio.current_time())
        return await conn.request(cmd, left if left > 0 else math.ulp(0))

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        self.before_request(addr, cmd)
        conn = await self.get_connection(addr)
        await conn.oneway(cmd)

    def close_connection(self, addr: str) -> None:
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn._close("closed by client")
            self._nursery.start_soon(conn.stream.aclose)  # type: ignore[union-attr]
