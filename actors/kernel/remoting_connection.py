"""One remoting connection over a stream: framing, request/response matching, oneway, pushes.

This module owns the `Connection` (upstream NettyRemotingAbstract's request and response
handling, per channel) and `ServerSide`, what a server's connections share (the
`RequestContext` a processor answers through is request_context.py's); remoting.py holds the
endpoints that make connections (`RemotingServer`, `RemotingClient`) and re-exports these names.

A `Connection` is symmetric (either side may send requests: the broker pushes
NOTIFY_CONSUMER_IDS_CHANGED, the controller NOTIFY_BROKER_ROLE_CHANGED). It has one reader
task that decodes frames with `FrameDecoder` and one writer task that coalesces queued frames
into few ``send_all`` calls (or, for answers given inside a store turn, none: answer_flush.py
writes them as the turn ends). Incoming requests go to a `Processor` inline in the reader: fast
requests answer at once; slow ones (long-polling pulls, synced sends) hand the `RequestContext`
to an actor, return, and the actor answers later with ``ctx.respond``. That keeps many requests
in flight on one connection without a task per request.

A server may name direct paths (`DirectHandler`, per request code: POP's ACK_MESSAGE): a plain
request of such a code is served from the decoded frame (`DirectRequest`: no RemotingCommand
for a JSON header, no RequestContext, no processor), and one the path declines goes the
generic way unchanged. The broker installs them only when the processor adds nothing to that
code (no ACL gate, no wrapper, not stopping: actors/broker/pop/direct_ack.py).

A malformed frame closes only that connection (logged as ``bad_frame``, as soon as its length
words are in); a processor exception becomes a SYSTEM_ERROR answer with the reason, and is logged
with its traceback.

A server's connections also apply the server's `ServerLimits` (server_limits.py): a cap on
connections (in all and per remote host) checked at accept; the reader takes its bytes from the
server's `InputBudget` before each read and stops reading while the connection's unsent output
is above the high-water mark (a client that does not read its responses stops being served
instead of growing the server's memory); and a watchdog task closes the connection when it is
idle too long or a frame has been partly received for too long. The per-read bookkeeping is a
few comparisons; the watchdog wakes once per read timeout, not per read.

A server given an `RpcLatency` (its role's metricsExporterType=PROM) times every answer for
``rocketmq_rpc_latency`` (rpc_metrics.py) without reading the clock per request: a request's
start is the clock reading the reader takes anyway when its bytes arrive (one per read); answers
given inline, while the reader dispatches that read's requests, are timed together by one more
reading after the read's requests are dispatched; an answer given later (a held pull, a synced
send, a controller write) reads the clock when it is given. Without one, nothing is timed.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import attrs
import structlog
import trio

from rocketrio.actors.kernel.answer_flush import ANSWERS, fd_sender
from rocketrio.actors.kernel.request_context import RequestContext
from rocketrio.actors.kernel.runtime import AskTimeout, Reply
from rocketrio.actors.kernel.server_limits import (
    BUSY_READ,
    MAX_READ,
    READ_CHUNK,
    InputBudget,
    LogRateLimiter,
    ServerLimits,
)
from rocketrio.actors.observe import events
from rocketrio.actors.observe.rpc_metrics import LONG_POLLING_CODES, Outcome, RpcLatency
from rocketrio.protocol.codes import (
    RPC_ONEWAY,
    RPC_TYPE_RESPONSE,
    ResponseCode,
    request_name,
)
from rocketrio.protocol.remoting import (
    DEFAULT_MAX_FRAME,
    DirectRequest,
    FrameDecoder,
    RemoteProtocolError,
    RemotingCommand,
    command_of,
    encode_command,
)
from rocketrio.protocol.serde import HeaderError

log = structlog.get_logger("remoting")

_SUCCESS = int(Outcome.SUCCESS)
_RESPONSE_FLAG = RPC_TYPE_RESPONSE
WRITE_HIGH_WATER = 8 * 1024 * 1024  # a client connection's request()/oneway() wait above this


class RemotingError(Exception):
    """A call failed before a response arrived (connect failure, closed connection, timeout)."""


class RemotingTimeout(RemotingError):
    pass


# A processor's answer: a response, or None when it will (or need not) respond later.
Answer = RemotingCommand | None
# A processor answers at once (the hot path: a send handed to the store, no coroutine) or
# returns an awaitable of its answer, which the reader awaits before the next request.
Processor = Callable[[RequestContext], Awaitable[Answer] | Answer]
# A server's direct path for one request code (e.g. POP's ACK_MESSAGE): served from the decoded
# frame without a RemotingCommand, a RequestContext or the processor. It answers through the
# connection itself (``send_frame_nowait``) and returns None, an awaitable the reader awaits
# before the next request, or NOT_DIRECT: then the request goes the generic way, untouched.
DirectHandler = Callable[["Connection", DirectRequest], Awaitable[None] | Literal[False] | None]
NOT_DIRECT: Literal[False] = False


class ServerSide:
    """What a server's connections share: its limits, its input budget and the rate limiter of
    its refusal and timeout log lines."""

    def __init__(
        self,
        limits: ServerLimits,
        rpc_latency: RpcLatency | None = None,
        direct: dict[int, DirectHandler] | None = None,
    ) -> None:
        self.limits = limits
        self.rpc_latency = rpc_latency
        # direct paths only where answers are not timed (they skip the RequestContext)
        self.direct = direct if direct and rpc_latency is None else None
        self.budget = InputBudget(limits.input_budget_bytes)
        self.log_limiter = LogRateLimiter()

    def warn(
        self, ev: events.BadFrame | events.ConnectionReadTimeout | events.ConnectionRefused
    ) -> None:
        """A WARN line, unless too many came lately (the next one says how many were not
        written, as ``suppressed``)."""
        suppressed = self.log_limiter.admit(trio.current_time())
        if suppressed is not None:
            events.emit(log, attrs.evolve(ev, suppressed=suppressed), level="warning")


class Connection:
    def __init__(
        self,
        stream: trio.abc.Stream,
        processor: Processor | None,
        *,
        remote: str = "?",
        max_frame: int = DEFAULT_MAX_FRAME,
        opaque_seq: itertools.count[int] | None = None,
        server: ServerSide | None = None,
    ) -> None:
        self.stream = stream
        self.processor = processor
        self.remote = remote
        self.max_frame = max_frame
        self._out: deque[bytes] = deque()
        self._out_bytes = 0  # queued or being written: not yet handed to the transport
        self._writer_lot = trio.lowlevel.ParkingLot()
        self._sending = False  # the writer is in send_all
        # a server's answers given in a turn are written as it ends (answer_flush.py)
        self._send_inline = fd_sender(stream) if server is not None else None
        self._drain_lot = trio.lowlevel.ParkingLot()
        self._pending: dict[int, Reply[RemotingCommand]] = {}
        self._opaque = opaque_seq or itertools.count(1)
        self._decoder = FrameDecoder(max_frame)
        self._server = server
        self.rpc_latency: RpcLatency | None = None if server is None else server.rpc_latency
        self._read_at = 0.0  # when the bytes being dispatched arrived (servers only)
        self._answered_inline: list[tuple[int, int, int]] = []
        self._direct = None if server is None else server.direct
        if self._direct is not None:
            self._decoder.direct_codes = frozenset(self._direct)
        if server is not None:
            # the reader stops reading requests above the high mark until the low mark
            self._read_pause_bytes: float = server.limits.write_high_water_bytes
            self._low_water = server.limits.write_low_water_bytes
        else:
            # a client never stops reading: its server may be waiting for it to read
            self._read_pause_bytes = math.inf
            self._low_water = WRITE_HIGH_WATER // 2
        self._active_at = trio.current_time()  # last read or write (server side only)
        self._partial_since: float | None = None  # when the partly received frame began
        self.closed = False
        self.close_reason: str | None = None
        self.on_close: list[Callable[[Connection], None]] = []
        self.attrs: dict[str, Any] = {}  # per-connection facts (client id, broker identity...)

    # -- sending
    def send_nowait(self, cmd: RemotingCommand) -> None:
        if self.closed:
            return
        self.send_frame_nowait(encode_command(cmd))

    def send_frame_nowait(self, frame: bytes) -> None:
        """Queue an encoded frame for the writer."""
        if self.closed:
            return
        out = self._out
        out.append(frame)
        self._out_bytes += len(frame)
        if len(out) == 1:  # the writer parks only on an empty queue
            if ANSWERS.depth and self._send_inline is not None and not self._sending:
                ANSWERS.pending.append(self)  # written as the turn ends: `flush_inline`
            else:
                self._writer_lot.unpark()

    def flush_inline(self) -> None:
        """Hand every queued frame to the socket with one non-blocking send (answer_flush.py);
        the writer sends what it did not take (or meets the socket's error and closes)."""
        out = self._out
        if self.closed or not out or self._sending or self._send_inline is None:
            return  # closed: dropped, as the writer drops them; sending: the writer goes on
        data = out[0] if len(out) == 1 else b"".join(out)
        try:
            sent = self._send_inline([data])
        except OSError:
            sent = 0
        if sent:
            out.clear()
            if sent < len(data):
                out.append(data[sent:])
            self._out_bytes -= sent
            self._active_at = trio.current_time()
            if self._out_bytes <= self._low_water:
                self._drain_lot.unpark_all()
        if out:
            self._writer_lot.unpark()

    async def request(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        if self.closed:
            raise RemotingError(f"connection to {self.remote} is closed")
        opaque = next(self._opaque)
        cmd.opaque = opaque
        reply: Reply[RemotingCommand] = Reply()
        self._pending[opaque] = reply
        try:
            await self._wait_drained()
            self.send_nowait(cmd)
            try:
                return await reply.wait(timeout)
            except AskTimeout:
                raise RemotingTimeout(
                    f"{request_name(cmd.code)} to {self.remote} timed out after {timeout}s"
                ) from None
        finally:
            self._pending.pop(opaque, None)

    def request_nowait(
        self, cmd: RemotingCommand, on_done: Callable[[Reply[RemotingCommand]], None]
    ) -> int:
        """Send a request without waiting; ``on_done`` gets the reply (or the failure when the
        connection closes). Returns the opaque, for `cancel_request`. The caller owns timeouts."""
        if self.closed:
            raise RemotingError(f"connection to {self.remote} is closed")
        opaque = next(self._opaque)
        cmd.opaque = opaque
        self._pending[opaque] = Reply(on_done=on_done)
        self.send_nowait(cmd)
        return opaque

    def cancel_request(self, opaque: int, exc: BaseException) -> bool:
        """Fail a pending request (e.g. its deadline passed); False if it already finished."""
        reply = self._pending.pop(opaque, None)
        if reply is None:
            return False
        reply.fail(exc)
        return True

    @property
    def pending_output_bytes(self) -> int:
        """Bytes queued or being written, not yet handed to the transport."""
        return self._out_bytes

    @property
    def buffered_input_bytes(self) -> int:
        """Bytes read but not yet decoded (a partly received frame)."""
        return self._decoder.buffered

    async def oneway(self, cmd: RemotingCommand) -> None:
        if self.closed:
            raise RemotingError(f"connection to {self.remote} is closed")
        cmd.opaque = next(self._opaque)
        cmd.flag |= RPC_ONEWAY
        await self._wait_drained()
        self.send_nowait(cmd)

    async def _wait_drained(self) -> None:
        while self._out_bytes > WRITE_HIGH_WATER and not self.closed:
            await self._drain_lot.park()

    # -- the tasks
    async def run(self) -> None:
        """Serve the connection until either side closes it (or a server limit does)."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer)
                if self._server is not None:
                    nursery.start_soon(self._watchdog, self._server, nursery.cancel_scope)
                await self._reader()
                nursery.cancel_scope.cancel()
        finally:
            self._close("closed")
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await self.stream.aclose()

    async def _reader(self) -> None:
        decoder = self._decoder
        server = self._server
        budget = server.budget if server is not None else None
        # budget this reader holds: its partial frame plus the read under way, less READ_CHUNK.
        # Every connection may hold one READ_CHUNK outside the budget (so at most
        # serverMaxConnections x 16 KiB in all): a new connection's first read never waits, so
        # its frame's read timeout starts at once even while an attack holds the whole budget.
        held = 0
        chunk = READ_CHUNK  # BUSY_READ after a read that filled its buffer
        try:
            while True:
                if self._out_bytes > self._read_pause_bytes:
                    await self._wait_output_below_low_water()
                # small reads let requests and answers overlap; a big frame (a pull response)
                # is read in as few calls as its size allows
                want = max(chunk, min(decoder.missing(), MAX_READ))
                if budget is not None:
                    need = decoder.buffered + want - READ_CHUNK
                    if need > held:
                        if not budget.try_take(need - held):
                            if want == chunk > READ_CHUNK:  # no room to read more: read less
                                want = READ_CHUNK
                                need = decoder.buffered
                            if need > held:
                                await budget.take(need - held)
                    if need < held:
                        budget.give(held - need)
                    held = need
                try:
                    data = await self.stream.receive_some(want)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    self.close_reason = "reset"
                    return
                if not data:
                    self.close_reason = "eof"
                    return
                chunk = BUSY_READ if len(data) == want else READ_CHUNK
                if server is not None:
                    now = self._read_at = self._active_at = trio.current_time()
                decoded = False
                try:
                    decoder.feed(data)
                    # every complete frame of the read in one loop; it yields only for a
                    # request whose processor must wait
                    while (cmd := decoder.next_command()) is not None:
                        decoded = True
                        waiting = self._dispatch(cmd)
                        if waiting is not None:
                            await waiting
                except RemoteProtocolError as e:
                    self._bad_frame(e)
                    return
                finally:
                    if self._answered_inline:
                        self._time_inline_answers()
                if server is not None:
                    if not decoder.buffered:
                        self._partial_since = None
                    elif decoded or self._partial_since is None:
                        self._partial_since = now
        finally:
            decoder.release()  # the memory goes before the budget that covered it
            if budget is not None and held:
                budget.give(held)

    def answered(self, ctx: RequestContext, response_code: int) -> None:
        """Time one answer for rocketmq_rpc_latency (only called when `rpc_latency` is set)."""
        cmd = ctx.cmd
        if cmd.is_oneway:
            outcome = Outcome.ONEWAY
        elif self.closed:
            outcome = Outcome.WRITE_CHANNEL_FAILED
        elif not ctx.inline and cmd.code in LONG_POLLING_CODES:
            outcome = Outcome.LONG_POLLING
        else:
            outcome = Outcome.SUCCESS
        if ctx.inline:
            self._answered_inline.append((cmd.code, response_code, outcome))
        else:
            assert self.rpc_latency is not None
            elapsed = trio.current_time() - ctx.start
            self.rpc_latency.observe(cmd.code, response_code, outcome, elapsed)

    def _time_inline_answers(self) -> None:
        """The answers given while the last read's requests were dispatched took until now."""
        assert self.rpc_latency is not None
        elapsed = trio.current_time() - self._read_at
        self.rpc_latency.observe_all(self._answered_inline, elapsed)
        self._answered_inline.clear()

    def _bad_frame(self, e: RemoteProtocolError) -> None:
        self.close_reason = f"bad frame: {e}"
        fields = {"remote": self.remote, "reason": e.reason, "error": str(e)}
        if self._server is not None:
            self._server.warn(events.BadFrame(**fields))
        else:
            events.emit(log, events.BadFrame(**fields))

    async def _wait_output_below_low_water(self) -> None:
        while self._out_bytes > self._low_water and not self.closed:
            await self._drain_lot.park()

    async def _watchdog(self, server: ServerSide, scope: trio.CancelScope) -> None:
        """Close the connection when idle too long or a frame is partly received too long.

        Sleeps until the earliest moment either could expire: a frame that begins while it
        sleeps (at t >= now) cannot expire before now + read timeout, when it wakes anyway."""
        idle_s = server.limits.idle_timeout_s
        read_s = server.limits.read_timeout_s
        while True:
            # each check compares with the very deadline slept until (``now - start >= limit``
            # can be False at ``start + limit`` in floating point, and the loop would spin)
            now = trio.current_time()
            partial = self._partial_since
            if partial is not None and now >= partial + read_s:
                self.close_reason = "read timeout"
                server.warn(
                    events.ConnectionReadTimeout(
                        remote=self.remote,
                        buffered=self._decoder.buffered,
                        missing=self._decoder.missing(),
                        timeout_s=read_s,
                    )
                )
                scope.cancel()
                return
            if idle_s is not None and now >= self._active_at + idle_s:
                self.close_reason = "idle timeout"
                events.emit(log, events.ConnectionIdleClosed(remote=self.remote, idle_s=idle_s))
                scope.cancel()
                return
            deadline = partial + read_s if partial is not None else now + read_s
            if idle_s is not None:
                deadline = min(deadline, self._active_at + idle_s)
            await trio.sleep_until(deadline)

    def _dispatch(self, cmd: RemotingCommand | DirectRequest) -> Awaitable[None] | None:
        """Match a response or serve a request; an awaitable when the request's processor
        must wait (the reader awaits it before the next frame). A request of a direct code
        goes to its direct path first (inline here: one call per send less); a direct
        handler that raised is answered as a processor that raised (`_failed`)."""
        direct = self._direct
        if direct is not None:
            req: DirectRequest | None = None
            if cmd.__class__ is tuple:  # a plain JSON request of a direct code
                req = cmd  # type: ignore[assignment]
            elif not cmd.flag and cmd.code in direct:  # type: ignore[union-attr]
                c: RemotingCommand = cmd  # type: ignore[assignment]
                req = (c.code, c.opaque, c.ext_fields, c.body, c.serialize_type, c)
            if req is not None:
                try:
                    served = direct[req[0]](self, req)
                except Exception as e:
                    self.send_nowait(self._failed(command_of(req), e))
                    return None
                if served is None:
                    return None
                if served is not NOT_DIRECT:
                    return self._direct_later(req, served)  # type: ignore[arg-type]
                if cmd.__class__ is tuple:
                    cmd = command_of(req)
        if cmd.flag & _RESPONSE_FLAG:  # type: ignore[union-attr]
            reply = self._pending.get(cmd.opaque)
            if reply is not None:
                reply.set(cmd)
            return None
        ctx = RequestContext(self, cmd, self._read_at)
        if self.processor is None:
            ctx.respond_code(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "this endpoint serves no requests"
            )
            return None
        try:
            resp = self.processor(ctx)
        except Exception as e:
            resp = self._failed(cmd, e)
        if resp is not None and not isinstance(resp, RemotingCommand):
            return self._answer_later(ctx, resp)  # type: ignore[arg-type]
        if resp is not None:
            ctx.respond(resp)
        ctx.inline = False
        return None

    async def _direct_later(self, req: DirectRequest, waiting: Awaitable[None]) -> None:
        try:
            await waiting
        except Exception as e:
            self.send_nowait(self._failed(command_of(req), e))

    async def _answer_later(self, ctx: RequestContext, waiting: Awaitable[Answer]) -> None:
        try:
            resp = await waiting
        except Exception as e:
            resp = self._failed(ctx.cmd, e)
        if resp is not None:
            ctx.respond(resp)
        ctx.inline = False  # (a processor that raised BaseException takes the connection down)

    def _failed(self, cmd: RemotingCommand, e: Exception) -> RemotingCommand:
        """The answer to a request whose processor raised."""
        if isinstance(e, HeaderError):
            return cmd.make_response(ResponseCode.INVALID_PARAMETER, str(e))
        events.emit(
            log,
            events.RequestFailed(code=request_name(cmd.code), remote=self.remote),
            exc_info=e,
        )
        return cmd.make_response(
            ResponseCode.SYSTEM_ERROR,
            f"{request_name(cmd.code)} failed: {type(e).__name__}: {e}",
        )

    async def _writer(self) -> None:
        out = self._out
        server_side = self._server is not None
        while True:
            while not out:
                await self._writer_lot.park()
            if len(out) == 1:
                data = out.popleft()
            else:
                data = b"".join(out)
                out.clear()
            self._sending = True
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                self._sending = False
                self.close_reason = "reset"
                self._close("write failed")
                # wake the reader by closing the stream
                with trio.CancelScope(shield=True), trio.move_on_after(1):
                    await self.stream.aclose()
                return
            self._sending = False
            self._out_bytes -= len(data)
            if server_side:
                self._active_at = trio.current_time()
            if self._out_bytes <= self._low_water:
                self._drain_lot.unpark_all()

    def _close(self, why: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = self.close_reason or why
        for reply in self._pending.values():
            reply.fail(RemotingError(f"connection to {self.remote} closed ({self.close_reason})"))
        self._pending.clear()
        self._drain_lot.unpark_all()
        for cb in self.on_close:
            cb(self)
