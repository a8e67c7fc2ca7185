"""The bridge between grpcio's asyncio server and the proxy's Trio side.

grpcio's server (``grpc.aio``) runs on its own asyncio loop (uvloop's) in one dedicated thread.
Every RPC becomes a `Call` handed to Trio with ``trio_token.run_sync_soon`` into a bounded memory
channel (full -> the RPC is answered TOO_MANY_REQUESTS at once, never queued without bound), unless
``fast`` takes it first (a call the service can start without a task: service.py's
``start_nowait``, answered from a callback), and unless ``on_loop`` answers it on the gRPC
loop itself (loop_remoting.py: a send without any hop to Trio). A Trio task
per call does the work (a long-polling ReceiveMessage just awaits in Trio: no thread is held)
and completes the call's asyncio future with ``loop.call_soon_threadsafe``. A call the client
cancels cancels its Trio task. So the only threads are the one asyncio loop thread and Trio's.
Each direction of the hop goes through a `Hop`: calls (and answers) that arrive while a wake-up
of the other thread is already pending ride on that one wake-up instead of writing their own,
so under load one wake-up carries many calls (a wake-up costs a syscall and a GIL hand-over).

Why grpcio: it is the reference Python gRPC implementation (the official SDK uses it too); no
maintained gRPC server runs natively on Trio/anyio (grpclib is asyncio-only, purerpc is
unmaintained), and HTTP/2 is not written here by hand.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

import attrs
import grpc
import trio
import uvloop

from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc

CALL_QUEUE = 256  # calls waiting for a Trio task; more are refused TOO_MANY_REQUESTS
STOP_GRACE_S = 0.5
TELEMETRY_QUEUE = 64  # commands waiting to be written to one Telemetry stream
THREAD_NAME = "grpc-asyncio"  # also the OS thread's name, so per-thread CPU can be told apart
PR_SET_NAME = 15  # <linux/prctl.h>


def name_os_thread(name: str) -> None:
    """Give the calling thread ``name`` (<= 15 bytes) in the OS too (``top -H``, /proc), where
    Python 3.11 leaves every thread "python"; elsewhere than Linux it does nothing."""
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


T = TypeVar("T")


class Hop(Generic[T]):
    """Items put from one thread, run by ``run`` in another thread's loop: ``schedule`` (that
    loop's thread-safe call-soon) is called only when no drain is pending already, and a drain
    runs every item queued by then. Safe without a lock: ``put`` appends before it reads the
    flag and the drain clears the flag before it empties the queue, so an item is either seen
    by a drain already scheduled or schedules its own."""

    def __init__(self, schedule: Callable[[Callable[[], None]], Any], run: Callable[[T], Any]):
        self._schedule = schedule
        self._run = run
        self._items: collections.deque[T] = collections.deque()
        self._pending = False

    def put(self, item: T) -> None:
        """Queue ``item``; raises what ``schedule`` raises (the other loop has ended)."""
        self._items.append(item)
        if not self._pending:
            self._pending = True
            try:
                self._schedule(self._drain)
            except BaseException:
                self._pending = False
                raise

    def _drain(self) -> None:
        self._pending = False
        items, run = self._items, self._run
        while items:
            run(items.popleft())


@attrs.define
class Call:
    """One RPC handed to Trio: ``method`` of MessagingService, its request and metadata; the
    Trio side answers with ``respond`` (a response, or a list for a server-streaming RPC)."""

    method: str
    request: Any
    metadata: dict[str, str]
    peer: str
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    cancel_scope: trio.CancelScope | None = None
    cancelled: bool = False
    push: StreamPush | None = None  # Telemetry: offers a command down the client's stream
    answers: Hop[Settle] | None = None  # the bridge's hop back to the gRPC loop

    def respond(self, value: Any) -> None:
        self._settle_soon(value, None)

    def fail(self, exc: BaseException) -> None:
        self._settle_soon(None, exc)

    def _settle_soon(self, value: Any, exc: BaseException | None) -> None:
        try:
            if self.answers is not None:
                self.answers.put((self.future, value, exc))
            else:
                self.loop.call_soon_threadsafe(_settle, self.future, value, exc)
        except RuntimeError:
            pass  # the gRPC loop is closed: the server stopped and the call is gone


class StreamPush:
    """Offers server-initiated Telemetry commands to one stream from the Trio thread; a stream
    whose client does not read (its queue of TELEMETRY_QUEUE is full) loses the command (the
    broker asks again later), so a slow client never blocks the proxy."""

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any]) -> None:
        self._loop = loop
        self._queue = queue

    def __call__(self, command: object) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._offer, command)
        except RuntimeError:
            return False  # the gRPC loop is closed
        return True

    def _offer(self, command: object) -> None:
        try:
            self._queue.put_nowait(command)
        except asyncio.QueueFull:
            pass


_END = object()

Settle = tuple["asyncio.Future[Any]", Any, BaseException | None]


def _settle_one(item: Settle) -> None:
    _settle(*item)


def _settle(fut: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


Overflow = Callable[[str, Any], Any]  # (method, request) -> the TOO_MANY_REQUESTS answer


# what an answer started on the loop gives when it could not be given there after all (a
# receive whose POP was given up at a master that moved): the call then goes to Trio
TO_TRIO: Any = object()


class LoopHandler(Protocol):
    """Calls answered on the gRPC loop itself, never crossing to Trio (loop_remoting.py)."""

    def start(self, method: str, request: Any) -> Awaitable[Any] | None:
        """The call's answer to await on the loop (or `TO_TRIO`); None: the call goes to
        Trio."""

    def close(self) -> None:
        """The loop is ending: close what was opened on it."""


class _Servicer(sgrpc.MessagingServiceServicer):
    """Every MessagingService method, forwarded to Trio as a `Call`."""

    def __init__(self, bridge: GrpcBridge) -> None:
        self._bridge = bridge

    async def _unary(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._bridge.forward(method, request, context)

    async def QueryRoute(self, request: Any, context: Any) -> Any:
        return await self._unary("QueryRoute", request, context)

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        return await self._unary("Heartbeat", request, context)

    async def SendMessage(self, request: Any, context: Any) -> Any:
        return await self._unary("SendMessage", request, context)

    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        return await self._unary("QueryAssignment", request, context)

    async def AckMessage(self, request: Any, context: Any) -> Any:
        return await self._unary("AckMessage", request, context)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        return await self._unary("ForwardMessageToDeadLetterQueue", request, context)

    async def EndTransaction(self, request: Any, context: Any) -> Any:
        return await self._unary("EndTransaction", request, context)

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        return await self._unary("NotifyClientTermination", request, context)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        return await self._unary("ChangeInvisibleDuration", request, context)

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        for response in await self._bridge.forward("ReceiveMessage", request, context):
            yield response

    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        for response in await self._bridge.forward("PullMessage", request, context):
            yield response

    async def UpdateOffset(self, request: Any, context: Any) -> Any:
        return await self._unary("UpdateOffset", request, context)

    async def GetOffset(self, request: Any, context: Any) -> Any:
        return await self._unary("GetOffset", request, context)

    async def QueryOffset(self, request: Any, context: Any) -> Any:
        return await self._unary("QueryOffset", request, context)

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        out: asyncio.Queue[Any] = asyncio.Queue(TELEMETRY_QUEUE)
        push = StreamPush(asyncio.get_running_loop(), out)

        async def answer_commands() -> None:
            try:
                async for command in request_iterator:
                    await out.put(await self._bridge.forward("Telemetry", command, context, push))
            finally:
                await out.put(_END)

        reader = asyncio.ensure_future(answer_commands())
        try:
            while (item := await out.get()) is not _END:
                yield item
        finally:
            reader.cancel()
            self._bridge.stream_closed(push)


class GrpcBridge:
    """Use as ``async with GrpcBridge(host, port, overflow) as bridge:`` in Trio, then read
    ``bridge.calls``; ``bridge.port`` is the bound port."""

    def __init__(
        self,
        host: str,
        port: int,
        overflow: Overflow,
        queue_size: int = CALL_QUEUE,
        on_stream_closed: Callable[[StreamPush], None] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._overflow = overflow
        self._on_stream_closed = on_stream_closed
        self._send, self.calls = trio.open_memory_channel[Call](queue_size)
        self._token: trio.lowlevel.TrioToken | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: grpc.aio.Server | None = None
        self._stop_requested: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._calls_in: Hop[Call] | None = None  # gRPC loop -> Trio
        # run in Trio's thread for each call before the queue: True when it took the call
        self.fast: Callable[[Call], bool] | None = None
        # tried first, on the gRPC loop, for each unary call
        self.on_loop: LoopHandler | None = None
        self._answers: Hop[Settle] | None = None  # Trio -> gRPC loop

    # -- asyncio side (the loop thread)
    async def forward(
        self,
        method: str,
        request: Any,
        context: grpc.aio.ServicerContext,
        push: StreamPush | None = None,
    ) -> Any:
        on_loop = self.on_loop
        if on_loop is not None and push is None:
            answer = on_loop.start(method, request)
            if answer is not None:
                result = await answer
                if result is not TO_TRIO:
                    return result
        loop = asyncio.get_running_loop()
        metadata = {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}
        call = Call(method, request, metadata, context.peer(), loop.create_future(), loop)
        call.push = push
        call.answers = self._answers
        assert self._token is not None and self._calls_in is not None
        try:
            self._calls_in.put(call)
        except trio.RunFinishedError:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "proxy is stopping")
        try:
            return await call.future
        except asyncio.CancelledError:
            try:
                self._token.run_sync_soon(_cancel, call)
            except trio.RunFinishedError:
                pass  # Trio has ended: its tasks are gone already
            raise

    def stream_closed(self, push: StreamPush) -> None:
        """A Telemetry stream ended: tell the Trio side (``on_stream_closed``), without waiting."""
        if self._on_stream_closed is None or self._token is None:
            return
        try:
            self._token.run_sync_soon(self._on_stream_closed, push)
        except trio.RunFinishedError:
            pass

    def _submit(self, call: Call) -> None:  # runs in Trio's thread
        fast = self.fast
        if fast is not None and not call.cancelled and fast(call):
            return
        try:
            self._send.send_nowait(call)
        except (trio.WouldBlock, trio.ClosedResourceError):
            call.respond(self._overflow(call.method, call.request))

    def _thread_main(self, started: Callable[[BaseException | None], None]) -> None:
        name_os_thread(THREAD_NAME)
        # uvloop: grpc.aio's calls and the hops cost less on libuv's loop than on asyncio's
        # own (docs/benchmarks.md, issue 28 item 4)
        loop = uvloop.new_event_loop()
        self._loop = loop
        self._answers = Hop(loop.call_soon_threadsafe, _settle_one)
        asyncio.set_event_loop(loop)

        async def serve() -> None:
            server = grpc.aio.server(
                options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", -1)]
            )
            sgrpc.add_MessagingServiceServicer_to_server(_Servicer(self), server)
            self.port = server.add_insecure_port(f"{self.host}:{self.port}")
            await server.start()
            self._server = server
            self._stop_requested = asyncio.Event()
            started(None)
            await self._stop_requested.wait()
            # in-flight RPCs get STOP_GRACE_S, then grpcio cancels them
            await server.stop(STOP_GRACE_S)
            if self.on_loop is not None:
                self.on_loop.close()

        try:
            loop.run_until_complete(serve())
        except BaseException as e:
            started(e)
        finally:
            loop.close()

    # -- Trio side
    async def __aenter__(self) -> GrpcBridge:
        self._token = trio.lowlevel.current_trio_token()
        self._calls_in = Hop(self._token.run_sync_soon, self._submit)
        ready = trio.Event()
        error: list[BaseException | None] = []

        def started(e: BaseException | None) -> None:
            if not error:
                error.append(e)
                self._token.run_sync_soon(ready.set)  # type: ignore[union-attr]

        self._thread = threading.Thread(
            target=self._thread_main, args=(started,), name=THREAD_NAME, daemon=True
        )
        self._thread.start()
        await ready.wait()
        if error[0] is not None:
            raise OSError(f"gRPC server on {self.host}:{self.port} did not start: {error[0]}")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._send.close()
        if self._loop is not None and self._stop_requested is not None:
            try:
                self._loop.call_soon_threadsafe(self._stop_requested.set)
            except RuntimeError:
                pass  # the loop has ended already
        if self._thread is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._thread.join, 5.0)


def _cancel(call: Call) -> None:
    call.cancelled = True
    if call.cancel_scope is not None:
        call.cancel_scope.cancel()


Handler = Callable[[Call], Awaitable[Any]]


async def serve_calls(
    calls: trio.MemoryReceiveChannel[Call], handler: Handler, max_in_flight: int = 1024
) -> None:
    """Run ``handler`` for each call in its own Trio task (at most ``max_in_flight`` at once)
    and complete the call with its result; an exception the handler lets out fails the RPC
    (grpcio answers it UNKNOWN) and the proxy keeps serving."""
    slots = trio.Semaphore(max_in_flight)

    async def one(call: Call) -> None:
        try:
            with trio.CancelScope() as scope:
                call.cancel_scope = scope
                if call.cancelled:
                    return
                try:
                    call.respond(await handler(call))
                except Exception as e:
                    call.fail(e)
        finally:
            slots.release()

    async with trio.open_nursery() as nursery:
        while True:
            # a full house takes no call off the queue: it fills, and new calls are refused
            await slots.acquire()
            try:
                call = await calls.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                slots.release()
                return
            nursery.start_soon(one, call)
