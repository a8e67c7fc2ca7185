"""Synchronous clients for code that is not async: each runs its Trio client in a background
thread and exposes plain methods.

    with BlockingProducer("group", "127.0.0.1:9876") as p:
        result = p.send(Message("Orders", b"hello"))

A `TrioThread` runs ``trio.run`` in a daemon thread; the async client is built and entered
inside that run, and every method call crosses over with ``trio.from_thread.run`` (the calling
thread blocks until the answer). Errors raised in the Trio thread reach the caller unchanged.
A push consumer's listener is a plain function; it runs in Trio's worker threads
(``trio.to_thread``), so it may block without stalling pulls and heartbeats. The same holds for
`BlockingOrderlyPushConsumer` (``fn(msgs, context) -> ConsumeOrderlyStatus``) and for a
`BlockingTransactionProducer`'s listener (execute and check).
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

import trio

from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import ConsumeStatus, Message, SendResult
from rocketrio.actors.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import OrderlyPushConsumer
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.pull_consumer import LitePullConsumer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.client.queue_select import MessageQueueSelector
from rocketrio.actors.client.transaction_producer import (
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt

T = TypeVar("T")
R = TypeVar("R")

START_TIMEOUT_S = 30.0


class TrioThread(Generic[T]):
    """One Trio run in a background thread hosting one async service."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._service: T | None = None
        self._error: BaseException | None = None

    def start(self, make: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        if self._thread is not None:
            raise MQClientError(f"{self.name} is already started")
        self._thread = threading.Thread(
            target=self._main, args=(make,), name=self.name, daemon=True
        )
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise MQClientError(f"{self.name} did not start within {START_TIMEOUT_S}s")
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise self._error
        assert self._service is not None
        return self._service

    def _main(self, make: Callable[[], AbstractAsyncContextManager[T]]) -> None:
        try:
            trio.run(self._host, make)
        except BaseException as e:
            self._error = e
            self._ready.set()

    async def _host(self, make: Callable[[], AbstractAsyncContextManager[T]]) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()
        async with make() as service:
            self._service = service
            self._ready.set()
            await self._stop.wait()

    def call(self, fn: Callable[..., Awaitable[R]], *args: Any) -> R:
        """Run ``await fn(*args)`` in the Trio thread and return its result."""
        if self._token is None or self._stop is None or self._stop.is_set():
            raise MQClientError(f"{self.name} is not running")
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def stop(self) -> None:
        """Leave the service's context (clean shutdown) and join the thread."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        if self._token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass  # the run already ended (it failed); the error is reported below
        thread.join()
        if self._error is not None:
            raise self._error


class BlockingProducer:
    """`Producer` with plain methods; keyword arguments go to `Producer`."""

    def __init__(self, group: str, namesrv_addr: str | list[str], **kwargs: Any) -> None:
        self._make = lambda: Producer(group, namesrv_addr, **kwargs)
        self._thread: TrioThread[Producer] = TrioThread(f"producer-{group}")
        self._producer: Producer | None = None

    def start(self) -> None:
        self._producer = self._thread.start(self._make)

    def shutdown(self) -> None:
        self._thread.stop()
        self._producer = None

    def __enter__(self) -> BlockingProducer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _p(self) -> Producer:
        if self._producer is None:
            raise MQClientError("the producer is not started")
        return self._producer

    def send(
        self, msg: Message, queue_selector: MessageQueueSelector | None = None, arg: Any = None
    ) -> SendResult:
        return self._thread.call(self._p().send, msg, queue_selector, arg)

    def send_batch(self, msgs: Sequence[Message]) -> list[SendResult]:
        return self._thread.call(self._p().send_batch, msgs)

    def send_oneway(self, msg: Message) -> None:
        self._thread.call(self._p().send_oneway, msg)

    def request(self, msg: Message, timeout: float) -> MessageExt:
        """Request-reply (request_reply.py): the reply, or `RequestTimeout`."""
        return self._thread.call(self._p().request, msg, timeout)


def _in_worker_thread(fn: Callable[[list[MessageExt]], ConsumeStatus]) -> Any:
    async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        return await trio.to_thread.run_sync(fn, msgs)

    return listener


OrderlyFn = Callable[[list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]


def _orderly_in_worker_thread(fn: OrderlyFn) -> Any:
    async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        return await trio.to_thread.run_sync(fn, msgs, ctx)

    return listener


C = TypeVar("C", PushConsumer, OrderlyPushConsumer)
_Self = TypeVar("_Self", bound="_BlockingPush[Any]")


class _BlockingPush(abc.ABC, Generic[C]):
    """What both blocking push consumers share: the Trio thread running the consumer, the
    subscriptions and listener given before start, start / shutdown / assigned queues."""

    _kind: type[C]
    _thread_name: str

    def __init__(self, group: str, namesrv_addr: str | list[str], **kwargs: Any) -> None:
        self.group = group
        self._args = (group, namesrv_addr, kwargs)
        self._subs: dict[str, str] = {}
        self._listener: Callable[..., Any] | None = None
        self._thread: TrioThread[C] = TrioThread(f"{self._thread_name}-{group}")
        self._consumer: C | None = None

    @abc.abstractmethod
    def _wrap(self, fn: Callable[..., Any]) -> Any:
        """The listener as the consumer calls it: ``fn`` run in a worker thread."""

    def _make(self) -> C:
        group, namesrv_addr, kwargs = self._args
        consumer = self._kind(group, namesrv_addr, **kwargs)
        for topic, expr in self._subs.items():
            consumer.subscribe(topic, expr)
        if self._listener is None:
            raise MQClientError("register a message listener before starting the consumer")
        consumer.register_listener(self._wrap(self._listener))
        return consumer

    def start(self) -> None:
        self._consumer = self._thread.start(self._make)

    def shutdown(self) -> None:
        self._thread.stop()
        self._consumer = None

    def assigned_queues(self) -> set[MessageQueue]:
        consumer = self._consumer
        if consumer is None:
            return set()
        return self._thread.call(_call_sync, consumer.assigned_queues)

    def __enter__(self: _Self) -> _Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class BlockingPushConsumer(_BlockingPush[PushConsumer]):
    """`PushConsumer` for plain functions; keyword arguments go to `PushConsumer`."""

    _kind = PushConsumer
    _thread_name = "push-consumer"

    def subscribe(self, topic: str, expr: str = "*") -> None:
        self._subs[topic] = expr
        if self._consumer is not None:
            self._thread.call(self._subscribe_async, topic, expr)

    async def _subscribe_async(self, topic: str, expr: str) -> None:
        assert self._consumer is not None
        self._consumer.subscribe(topic, expr)

    def register_listener(self, fn: Callable[[list[MessageExt]], ConsumeStatus]) -> None:
        """``fn(msgs) -> ConsumeStatus`` runs in a worker thread; it may block."""
        self._listener = fn

    def _wrap(self, fn: Callable[..., Any]) -> Any:
        return _in_worker_thread(fn)


class BlockingOrderlyPushConsumer(_BlockingPush[OrderlyPushConsumer]):
    """`OrderlyPushConsumer` for plain functions; keyword arguments go to it."""

    _kind = OrderlyPushConsumer
    _thread_name = "orderly-consumer"

    def subscribe(self, topic: str, expr: str = "*") -> None:
        if self._consumer is not None:
            raise MQClientError("subscribe before starting the consumer")
        self._subs[topic] = expr

    def register_listener(self, fn: OrderlyFn) -> None:
        """``fn(msgs, context) -> ConsumeOrderlyStatus`` runs in a worker thread; it may block
        (one call per queue at a time, as always for an orderly consumer)."""
        self._listener = fn

    def _wrap(self, fn: Callable[..., Any]) -> Any:
        return _orderly_in_worker_thread(fn)


class BlockingPullConsumer:
    """`LitePullConsumer` with plain methods; keyword arguments go to `LitePullConsumer`."""

    def __init__(self, group: str, namesrv_addr: str | list[str], **kwargs: Any) -> None:
        self._args = (group, namesrv_addr, kwargs)
        self._subs: dict[str, str] = {}
        self._assign: list[MessageQueue] | None = None
        self._thread: TrioThread[LitePullConsumer] = TrioThread(f"pull-consumer-{group}")
        self._consumer: LitePullConsumer | None = None

    def subscribe(self, topic: str, expr: str = "*") -> None:
        if self._consumer is None:
            self._subs[topic] = expr
        else:
            self._thread.call(_call_sync, self._consumer.subscribe, topic, expr)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        if self._consumer is None:
            self._assign = list(queues)
        else:
            self._thread.call(_call_sync, self._consumer.assign, list(queues))

    def _make(self) -> LitePullConsumer:
        group, namesrv_addr, kwargs = self._args
        consumer = LitePullConsumer(group, namesrv_addr, **kwargs)
        for topic, expr in self._subs.items():
            consumer.subscribe(topic, expr)
        if self._assign is not None:
            consumer.assign(self._assign)
        return consumer

    def start(self) -> None:
        self._consumer = self._thread.start(self._make)

    def shutdown(self) -> None:
        self._thread.stop()
        self._consumer = None

    def _c(self) -> LitePullConsumer:
        if self._consumer is None:
            raise MQClientError("the consumer is not started")
        return self._consumer

    def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        return self._thread.call(self._c().poll, timeout)

    def commit(self) -> None:
        self._thread.call(self._c().commit)

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._thread.call(self._c().seek, mq, offset)

    def committed(self, mq: MessageQueue) -> int:
        return self._thread.call(self._c().committed, mq)

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self._thread.call(_call_sync, self._c().pause, list(queues))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._thread.call(_call_sync, self._c().resume, list(queues))

    def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        return self._thread.call(self._c().offset_for_timestamp, mq, timestamp_ms)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        return self._thread.call(self._c().fetch_message_queues, topic)

    def __enter__(self) -> BlockingPullConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


async def _call_sync(fn: Callable[..., R], *args: Any) -> R:
    """Run a plain method of a Trio-owned object inside its thread."""
    return fn(*args)


class _ThreadedListener:
    """A plain `TransactionListener` whose methods run in Trio's worker threads."""

    def __init__(self, listener: TransactionListener) -> None:
        self.listener = listener

    async def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        state = await trio.to_thread.run_sync(self.listener.execute_local_transaction, msg, arg)
        assert isinstance(state, LocalTransactionState | None)
        return state or LocalTransactionState.UNKNOW

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        state = await trio.to_thread.run_sync(self.listener.check_local_transaction, msg)
        assert isinstance(state, LocalTransactionState | None)
        return state or LocalTransactionState.UNKNOW


class BlockingTransactionProducer:
    """`TransactionProducer` for plain code: the listener's methods are plain functions that
    may block (they run in worker threads); keyword arguments go to `TransactionProducer`."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        listener: TransactionListener,
        **kwargs: Any,
    ) -> None:
        threaded = _ThreadedListener(listener)
        self._make = lambda: TransactionProducer(group, namesrv_addr, threaded, **kwargs)
        self._thread: TrioThread[TransactionProducer] = TrioThread(f"tx-producer-{group}")
        self._producer: TransactionProducer | None = None

    def start(self) -> None:
        self._producer = self._thread.start(self._make)

    def shutdown(self) -> None:
        self._thread.stop()
        self._producer = None

    def __enter__(self) -> BlockingTransactionProducer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        if self._producer is None:
            raise MQClientError("the producer is not started")
        return self._thread.call(self._producer.send_message_in_transaction, msg, arg)
