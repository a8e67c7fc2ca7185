"""Remoting requests from the gRPC loop's own thread: the proxy's sends and acks without any
hop to Trio.

A proxied send costs a Trio round trip besides grpcio's own work: the call crosses to Trio's
thread, Trio writes the request and reads the answer, and the answer crosses back; each crossing
is a wake-up of the other thread and a hand-over of the GIL, which on this VM cost more than
the proxy's own Python work (docs/benchmarks.md, issue 28 item 4). `LoopCalls` answers a
SendMessage, and an AckMessage (one entry: the SDK's per-message ack, one ACK_MESSAGE; several
of one broker set: one BATCH_ACK_MESSAGE, as the Trio path sends them), on the gRPC loop
itself: the same mappings (`SendPath`'s, ack_nowait.py's), the request written on a connection
of the gRPC loop (`LoopRemoting`, an asyncio protocol over the sans-io frame codec of
protocol/remoting.py; the frames of one loop turn written together), the answer set on the
call when the response arrives. Trio is not involved, so its thread stays asleep. An ack is
taken only for a group that never received with auto_renew (`ProxyService.renewing_groups`):
no renewal can have replaced its handle.

What the loop side knows of routes is a snapshot Trio publishes (`LoopCalls.publish`, called
by the client's route listener in Trio's thread; a new dict each time, so the loop only reads
immutable values): a topic's route and its broker sets' masters. A send it cannot do at once
(no snapshot of the topic yet, no open connection to the master: one is then opened in the
background, a refusal such as a body too large, authentication or ACL signing on) returns
None and takes the Trio path (send.py), which answers it as before. A connection lost or a
response later than the send timeout answers INTERNAL_SERVER_ERROR, as the Trio path does.
An ack unanswered for `STUCK_AFTER_S` (a hung master) asks Trio for its topic's route every
`POLL_S`, and a published route naming another master of a broker set gives up what is in
flight to the old one at once (`MasterChanged`, INTERNAL_SERVER_ERROR to the client, as the
Trio path's ``invoke_watched`` gives an ack up), instead of waiting out the 3 s deadline.
A ReceiveMessage the Trio path would answer with one unordered POP is answered on the loop
too (loop_receive.py). Only in cluster mode (TCP to the brokers); local mode keeps its
in-process transport.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import attrs

from rocketrio.actors.client.simple_consumer import batch_ack_body, batch_ackable
from rocketrio.actors.client.stuck_sends import POLL_S, STUCK_AFTER_S, MasterChanged
from rocketrio.actors.kernel.remoting import RemotingError, RemotingTimeout
from rocketrio.actors.proxy.ack_nowait import ack_answer, ack_ext, ack_results, ack_status
from rocketrio.actors.proxy.loop_receive import LoopReceive
from rocketrio.actors.proxy.mapping import TargetQueue, writable_queues
from rocketrio.actors.proxy.receipt import decode_receipt
from rocketrio.actors.proxy.send import SendPath
from rocketrio.protocol.bodies import TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode, request_name
from rocketrio.protocol.remoting import (
    DEFAULT_MAX_FRAME,
    FrameDecoder,
    RemoteProtocolError,
    RemotingCommand,
    encode_command,
)

ErrorAnswer = Callable[[str, BaseException], Any]


class LoopConnection(asyncio.Protocol):
    """One connection to a broker, on the gRPC loop: requests matched to responses by opaque.
    Requests the broker sends (none are expected: this connection never registers as a
    producer or consumer) are ignored."""

    def __init__(self, addr: str, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.addr = addr
        self.closed = False
        self._transport: asyncio.Transport | None = None
        self._decoder = FrameDecoder(max_frame)
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._opaque = itertools.count(1)
        self._out: list[bytes] = []  # frames of this loop turn, written as one at its end

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport

    def data_received(self, data: bytes) -> None:
        try:
            self._decoder.feed(data)
            while (cmd := self._decoder.next_command()) is not None:
                if cmd.is_response:
                    fut = self._pending.pop(cmd.opaque, None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
        except RemoteProtocolError as e:
            self._fail(f"bad frame: {e}")

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail("closed" if exc is None else f"lost: {exc}")

    def _fail(self, why: str, error: type[RemotingError] = RemotingError) -> None:
        self.closed = True
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(error(f"connection to {self.addr} {why}"))
        if self._transport is not None:
            self._transport.close()

    async def request(self, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        if self.closed or self._transport is None:
            raise RemotingError(f"connection to {self.addr} is closed")
        loop = asyncio.get_running_loop()
        opaque = cmd.opaque = next(self._opaque)
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[opaque] = fut
        timer = loop.call_later(timeout_s, _expire, fut, cmd.code, self.addr, timeout_s)
        try:
            if not self._out:
                loop.call_soon(self._flush)
            self._out.append(encode_command(cmd))
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(opaque, None)

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._transport is not None and not self.closed:
            self._transport.write(out[0] if len(out) == 1 else b"".join(out))

    def close(self) -> None:
        self._fail("closed by the proxy")

    def abandon(self, why: str) -> None:
        """Give up every request in flight (`MasterChanged`) and close."""
        self._fail(why, MasterChanged)


def _unwatch(watch: list[asyncio.TimerHandle]) -> None:
    for handle in watch:
        handle.cancel()


def _expire(fut: asyncio.Future[RemotingCommand], code: int, addr: str, timeout_s: float) -> None:
    if not fut.done():
        fut.set_exception(
            RemotingTimeout(f"{request_name(code)} to {addr} timed out after {timeout_s}s")
        )


class LoopRemoting:
    """Connections by broker address on the running (gRPC) loop, opened in the background."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._max_frame = max_frame
        self._conns: dict[str, LoopConnection] = {}
        self._connecting: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def connection(self, addr: str) -> LoopConnection | None:
        """The open connection to ``addr``; None while there is none (one is being opened)."""
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if addr not in self._connecting:
            self._connecting.add(addr)
            task = asyncio.get_running_loop().create_task(self._connect(addr))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return None

    async def _connect(self, addr: str) -> None:
        host, _, port = addr.rpartition(":")
        try:
            _, conn = await asyncio.get_running_loop().create_connection(
                lambda: LoopConnection(addr, self._max_frame), host, int(port)
            )
            self._conns[addr] = conn
        except (OSError, ValueError):
            pass  # the Trio path keeps serving this broker's sends; the next one tries again
        finally:
            self._connecting.discard(addr)

    def abandon(self, addr: str, why: str) -> None:
        """Give up the requests in flight to ``addr`` and close its connection."""
        conn = self._conns.pop(addr, None)
        if conn is not None:
            conn.abandon(why)

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


@attrs.frozen
class RouteView:
    """What the gRPC loop knows of a topic: its route, each broker set's master, and the
    route's writable queues (worked out once, in Trio's thread, not on every send)."""

    route: TopicRouteData
    masters: Mapping[str, str]
    queues: Sequence[TargetQueue] = attrs.field()

    @queues.default
    def _writable(self) -> Sequence[TargetQueue]:
        return tuple(writable_queues(self.route))


class LoopCalls:
    """`GrpcBridge.on_loop` for SendMessage, AckMessage and ReceiveMessage (module
    docstring; receives: loop_receive.py)."""

    def __init__(
        self,
        sends: SendPath,
        error_answer: ErrorAnswer,
        renewing_groups: Callable[[], AbstractSet[str]],
        refresh: Callable[[str], object] = lambda topic: None,
    ) -> None:
        self.sends = sends
        self.error_answer = error_answer
        self.refresh = refresh  # any thread: ask Trio to refresh the topic's route soon
        self.stuck_after_s = STUCK_AFTER_S  # an ack this late looks at its route (POLL_S)
        self._loop: asyncio.AbstractEventLoop | None = None  # the gRPC loop, at its first call
        self.renewing_groups = renewing_groups  # an immutable set Trio replaces
        self.routes: Mapping[str, RouteView] = {}
        self.remoting: LoopRemoting | None = None  # made on the loop, at its first call
        self.receives = LoopReceive(error_answer, sends.now_ms, refresh)

    def publish(self, topic: str, view: RouteView) -> None:
        """Trio's thread: the route of ``topic`` as the loop is to see it from now on. A broker
        set whose route names another master than before: the requests in flight to the old
        one are given up at once (`MasterChanged`), as the Trio path's ``invoke_watched``
        gives an ack up, instead of waiting for their deadline at a hung master."""
        old = self.routes.get(topic)
        self.routes = {**self.routes, topic: view}
        if old is None or self._loop is None:
            return
        moved = [(n, a) for n, a in old.masters.items() if view.masters.get(n, a) != a]
        for name, addr in moved:
            why = f"given up: the route names {view.masters[name]} the master of {name}"
            try:
                self._loop.call_soon_threadsafe(self._abandon, addr, why)
            except RuntimeError:
                return  # the gRPC loop has ended

    def _abandon(self, addr: str, why: str) -> None:
        if self.remoting is not None:
            self.remoting.abandon(addr, why)

    def start(self, method: str, request: Any) -> Awaitable[Any] | None:
        """The answer of the call, to await on the loop; None: the Trio path takes it."""
        if method == "AckMessage":
            return self._start_ack(request)
        if method == "ReceiveMessage":
            view = self.routes.get(request.message_queue.topic.name)
            masters = view.masters if view is not None else None
            return self.receives.start(request, masters, self._connection)
        if method != "SendMessage":
            return None
        try:
            msg, props = self.sends.message_of(request)
        except Exception:
            return None  # a refusal: the Trio path answers it
        view = self.routes.get(msg.topic.name)
        if view is None:
            return None
        target = self.sends.target_in(msg, view.queues)
        addr = view.masters.get(target.broker_name)
        conn = self._connection(addr)
        if addr is None or conn is None:
            return None
        return self._send(conn, self.sends.prepare(msg, props, target, addr))

    def _connection(self, addr: str | None) -> LoopConnection | None:
        if self.remoting is None:
            self.remoting = LoopRemoting()
            self._loop = asyncio.get_running_loop()
        return self.remoting.connection(addr) if addr else None

    def _start_ack(self, req: Any) -> Awaitable[Any] | None:
        """An ack of a group that never received with auto_renew (so no renewal can have
        replaced its handles: ``AutoRenewer.release`` would return them unchanged): one entry
        is one ACK_MESSAGE; several, all of one broker set and all unordered in their
        checkpoint's range, one BATCH_ACK_MESSAGE (`_ack_batch`). Anything else is Trio's."""
        group = req.group.name
        if not req.entries or not group or group in self.renewing_groups():
            return None
        view = self.routes.get(req.topic.name)
        if view is None:
            return None
        try:
            receipts = [decode_receipt(e.receipt_handle) for e in req.entries]
        except Exception:
            return None  # a bad handle: the Trio path answers each entry's status
        broker = receipts[0].extra.broker_name
        if any(r.extra.broker_name != broker for r in receipts):
            return None
        addr = view.masters.get(broker)
        conn = self._connection(addr)
        if addr is None or conn is None:
            return None
        topic = req.topic.name
        if len(receipts) == 1:
            ext = ack_ext(group, topic, receipts[0])
            cmd = RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=ext)
            return self._ack(conn, cmd, req.entries[0], addr, topic)
        acked = [(topic, r.extra, r.extra.queue_offset or 0) for r in receipts]
        if not all(batch_ackable(extra, offset) for _, extra, offset in acked):
            return None
        body = batch_ack_body(group, broker, acked)
        cmd = RemotingCommand(RequestCode.BATCH_ACK_MESSAGE, body=body)
        return self._ack_batch(conn, cmd, req, receipts, addr)

    async def _ack(
        self, conn: LoopConnection, cmd: RemotingCommand, entry: Any, addr: str, topic: str
    ) -> Any:
        watch = self._watch(topic)
        try:
            return ack_answer(entry, await conn.request(cmd, self.sends.timeout_s), addr)
        except Exception as e:
            return self.error_answer("AckMessage", e)
        finally:
            _unwatch(watch)

    async def _ack_batch(
        self, conn: LoopConnection, cmd: RemotingCommand, req: Any, receipts: list[Any], addr: str
    ) -> Any:
        """The entries in one BATCH_ACK_MESSAGE, all OK once the broker takes it; refused, one
        ACK_MESSAGE each, whose statuses name the entries that failed (as the Trio path's
        ``ProxyService.ack_message``). A lost or late broker fails the call."""
        group, topic = req.group.name, req.topic.name
        watch = self._watch(topic)
        try:
            resp = await conn.request(cmd, self.sends.timeout_s)
            if resp.code == ResponseCode.SUCCESS:
                return ack_results(req.entries, [None] * len(req.entries))
            statuses = []
            for r in receipts:
                one = RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=ack_ext(group, topic, r))
                resp = await conn.request(one, self.sends.timeout_s)
                statuses.append(ack_status(resp, addr))
            return ack_results(req.entries, statuses)
        except Exception as e:
            return self.error_answer("AckMessage", e)
        finally:
            _unwatch(watch)

    def _watch(self, topic: str) -> list[asyncio.TimerHandle]:
        """An ack's watch: unanswered for ``stuck_after_s``, its topic's route is asked for
        (`_stuck`); `_unwatch` ends it."""
        watch: list[asyncio.TimerHandle] = []
        loop = asyncio.get_running_loop()
        watch.append(loop.call_later(self.stuck_after_s, self._stuck, topic, watch))
        return watch

    def _stuck(self, topic: str, watch: list[asyncio.TimerHandle]) -> None:
        """An unanswered ack: its topic's route is asked for every `POLL_S` (a new master
        in it gives the ack up, see `publish`)."""
        self.refresh(topic)
        watch[:] = [asyncio.get_running_loop().call_later(POLL_S, self._stuck, topic, watch)]

    async def _send(self, conn: LoopConnection, sent: Any) -> Any:
        try:
            return SendPath.answer(sent, await conn.request(sent.cmd, self.sends.timeout_s))
        except Exception as e:
            return self.error_answer("SendMessage", e)

    def close(self) -> None:
        """The gRPC loop's thread, before the loop closes."""
        if self.remoting is not None:
            self.remoting.close()
