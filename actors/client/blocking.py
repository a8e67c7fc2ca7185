"""Synchronous clients for code that is not async: each runs its async client in a background
thread and exposes plain methods.

    with BlockingProducer("group", "127.0.0.1:9876") as p:
        result = p.send(Message("Orders", b"hello"))

A `TrioThread` runs an event loop (Trio by default; anyio's blocking portal) in a thread; the
async client is built and entered inside that loop, and every method call crosses over with the
portal (the calling thread blocks until the answer). Errors raised in the loop thread reach the
caller unchanged. A push consumer's listener is a plain function; it runs in worker threads
(anyio's ``to_thread``), so it may block without stalling pulls and heartbeats. The same holds for
`BlockingOrderlyPushConsumer` (``fn(msgs, context) -> ConsumeOrderlyStatus``) and for a
`BlockingTransactionProducer`'s listener (execute and check).
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Generic, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from rocketrio.actors.client.backend import run_sync_in_thread
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

DEFAULT_BACKEND = "trio"  # the loop a blocking client runs its async client on


class TrioThread(Generic[T]):
    """One event loop in a background thread (an anyio blocking portal, Trio by default)
    hosting one async service. (The name is kept from when the loop was always Trio.)"""

    def __init__(self, name: str, backend: str = DEFAULT_BACKEND) -> None:
        self.name = name
        self.backend = backend
        self._portal_cm: Any = None
        self._portal: BlockingPortal | None = None
        self._service_cm: Any = None
        self._service: T | None = None

    def start(self, make: Callable[[], AbstractAsyncContextManager[T]]) -> T:
        if self._portal is not None:
            raise MQClientError(f"{self.name} is already started")
        self._portal_cm = start_blocking_portal(self.backend, name=self.name)
        portal = self._portal_cm.__enter__()
        try:
            self._service_cm = portal.wrap_async_context_manager(_Deferred(make))
            self._service = self._service_cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            self._portal_cm = None
            raise
        self._portal = portal
        assert self._service is not None
        return self._service

    def call(self, fn: Callable[..., Awaitable[R]], *args: Any) -> R:
        """Run ``await fn(*args)`` on the loop thread and return its result."""
        if self._portal is None:
            raise MQClientError(f"{self.name} is not running")
        return self._portal.call(fn, *args)

    def stop(self) -> None:
        """Leave the service's context (clean shutdown) and stop the loop thread."""
        portal, self._portal = self._portal, None
        if portal is None:
            return
        try:
            self._service_cm.__exit__(None, None, None)
        finally:
            self._portal_cm.__exit__(None, None, None)
            self._service_cm = self._portal_cm = self._service = None


class _Deferred(AbstractAsyncContextManager[T]):
    """Builds the service inside the loop thread (its constructor may need the loop)."""

    def __init__(self, make: Callable[[], AbstractAsyncContextManager[T]]) -> None:
        self._make = make
        self._cm: AbstractAsyncContextManager[T] | None = None

    async def __aenter__(self) -> T:
        self._cm = self._make()
        return await self._cm.__aenter__()

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._cm is not None
        return await self._cm.__aexit__(*exc)


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
        return await run_sync_in_thread(fn, msgs)

    return listener


OrderlyFn = Callable[[list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]


def _orderly_in_worker_thread(fn: OrderlyFn) -> Any:
    async def listener(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        return await run_sync_in_thread(fn, msgs, ctx)

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
        state = await run_sync_in_thread(self.listener.execute_local_transaction, msg, arg)
        assert isinstance(state, LocalTransactionState | None)
        return state or LocalTransactionState.UNKNOW

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        state = await run_sync_in_thread(self.listener.check_local_transaction, msg)
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
