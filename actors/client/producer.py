"""The producer (upstream DefaultMQProducer): single, batch, async, oneway and ordered sends.

``async with Producer(group, "127.0.0.1:9876") as p: await p.send(Message(...))``.

A send picks a writable master queue round robin (`TopicPublishInfo`), stamps a UNIQ_KEY,
and sends SEND_MESSAGE_V2 (310). On a failure that another broker may not have (no answer:
connection refused, reset or closed, timeout; or SYSTEM_ERROR, SYSTEM_BUSY from a stopping
broker, SERVICE_NOT_AVAILABLE from a broker that is no longer master, TOPIC_NOT_EXIST,
NO_PERMISSION) it isolates that broker set for ``notAvailableDuration``, waits for a fresh route
(`MQClientInstance.refresh_route`: shared and rate limited, so a storm of failing sends costs one
NameServer query) and retries, up to ``retries`` times, all within ``send_timeout``. Like
upstream the retry prefers another broker set that is available; when it has to use the same
one (the only one, or every other is isolated too) it goes to the master address of the fresh
route, and the isolation ends as soon as the route names a different master address than the one
that failed (the failure was about the old master, not the new one); a send a hung master leaves
unanswered is retried once the route names a new master (stuck_sends.py). FLUSH_DISK_TIMEOUT,
FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE is a result, retried on another broker only by sync
sends with ``retryAnotherBrokerWhenNotStoreOK`` (upstream). Ordered sends (a queue selector),
sends to a given queue and oneway sends are one attempt, like upstream (a retry on another queue
would break the order), but their failure still refreshes the route.

``send_batch`` sends SEND_BATCH_MESSAGE (320) bodies of at most ``maxMessageSize`` bytes.
``send_async`` returns a `SendFuture` at once (after waiting for a free slot when
``maxInFlight`` sends are outstanding), so hundreds of sends share one connection; each runs as
a task in the producer's nursery, and leaving the ``async with`` waits for them to finish.

Requests, results and checks: send_api.py; writable queues and isolation: publish_routes.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client import request_reply, send_trace
from rocketrio.actors.client.async_send import CallbackRequests, SendFuture
from rocketrio.actors.client.backend import Reply
from rocketrio.actors.client.config import (
    ClientConfig,
    ProducerConfig,
)
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.message import (
    Message,
    SendResult,
    SendStatus,
    UniqIdGenerator,
)
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.publish_routes import PublishRoutes
from rocketrio.actors.client.queue_select import (
    MessageQueueSelector,
    TopicPublishInfo,
)
from rocketrio.actors.client.remoting import ClientTransport as Transport
from rocketrio.actors.client.send_api import (
    batch_chunks,
    check_message,
    parse_send_result,
    retryable,
    send_request,
)
from rocketrio.actors.client.stuck_sends import StuckSendWatch, avoid_while_stuck
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message import (
    WAIT,
    BatchItem,
    MessageExt,
    encode_batch_body,
    encode_properties,
)
from rocketrio.protocol.remoting import RemotingCommand

log = structlog.get_logger("producer")

EXPIRE_SCAN_S = 0.1  # how often async sends are checked for timeouts


class Producer:
    """Sends messages to a topic: ``async with Producer(group, namesrv) as p: await p.send(m)``.

    `send` (sync, retried on another broker set), `send_async` (a `SendFuture`, optional
    callback), `send_oneway`, `send_batch`; ordered sends with a `MessageQueueSelector` and an
    argument (e.g. `SelectMessageQueueByHash` on an order id). Runs on asyncio or Trio.
    """

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        *,
        transport: Transport | None = None,
        send_timeout: float = 3.0,
        retries: int = 2,
        config: ProducerConfig | None = None,
        client_config: ClientConfig | None = None,
        client: MQClientInstance | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config or ProducerConfig(
            producerGroup=group,
            sendMsgTimeout=round(send_timeout * 1000),
            retryTimesWhenSendFailed=retries,
        )
        self.group = self.config.producerGroup
        self._own_client = client is None
        self.client = client or MQClientInstance(
            namesrv_addr, transport=transport, config=client_config
        )
        # the writable queues per topic and the broker sets avoided after a failure
        self.publish_routes = PublishRoutes(self.client, self.config, rng or random.Random())
        self.faults = self.publish_routes.faults
        self._ids: UniqIdGenerator | None = None
        self._in_flight = aio.Semaphore(self.config.maxInFlight)
        self._callbacks = CallbackRequests()
        # an unanswered send whose broker set changes master is re-sent at once (stuck_sends)
        self.stuck = StuckSendWatch(
            lambda addr, cmd, timeout_s: self.client.remoting.invoke(addr, cmd, timeout_s),
            self.client.find_master_addr, self.client.request_route_refresh,
            begin_nowait=lambda addr, cmd: self.client.remoting.begin_nowait(addr, cmd),
            on_stuck=avoid_while_stuck(self.publish_routes.available, self.faults.mark_unavailable),
        )  # fmt: skip
        self._nursery: aio.TaskGroup | None = None
        self._nursery_cm: Any = None

    # -- lifecycle
    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown()

    async def start(self) -> None:
        """Start (call `shutdown` from the same task); prefer ``async with``."""
        if self._own_client:
            await self.client.__aenter__()
        try:
            self._ids = UniqIdGenerator(self.client.client_ip)
            self._nursery_cm = aio.create_task_group()
            self._nursery = await self._nursery_cm.__aenter__()
            self._nursery.start_soon(self._expire_loop)
            self._nursery.start_soon(self.stuck.run)
            self.client.route_listeners.append(self.publish_routes.on_route)
            await self.client.register_producer(self.group)
        except BaseException:
            await self._close()
            raise

    async def shutdown(self) -> None:
        """Wait for outstanding async sends, unregister, stop the client if we own it."""
        await self._close()

    async def _close(self) -> None:
        try:
            if self._nursery_cm is not None:
                # every outstanding async send ends within its timeout and frees its slot
                drain_s = self.config.sendMsgTimeout / 1000 + 2 * EXPIRE_SCAN_S + 1
                with aio.CancelScope(shield=True), aio.move_on_after(drain_s):
                    for _ in range(self.config.maxInFlight):
                        await self._in_flight.acquire()
        finally:
            try:
                if self._nursery_cm is not None:
                    assert self._nursery is not None
                    self._nursery.cancel_scope.cancel()
                    cm, self._nursery_cm = self._nursery_cm, None
                    # raises when an outer scope is cancelled: the client below (entered
                    # before this nursery) must still be exited, or Trio's nursery stack breaks
                    await cm.__aexit__(None, None, None)
            finally:
                self._nursery = None
                if self.publish_routes.on_route in self.client.route_listeners:
                    self.client.route_listeners.remove(self.publish_routes.on_route)
                if self._own_client:
                    await self.client.__aexit__(None, None, None)
                else:
                    await self.client.unregister_producer(self.group)

    @property
    def nursery(self) -> aio.TaskGroup:
        if self._nursery is None:
            raise MQClientError("producer is not started")
        return self._nursery

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        """Writable queues of the topic (upstream tryToFindTopicPublishInfo)."""
        return await self.publish_routes.get(topic)

    # -- sends
    def _next_id(self) -> str:
        if self._ids is None:
            raise MQClientError("producer is not started")
        return self._ids.next_id()

    async def send(
        self,
        msg: Message,
        queue_selector: MessageQueueSelector | None = None,
        arg: Any = None,
        *,
        timeout: float | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer; retries after a failure (see the module)."""
        started = aio.current_time()
        check_message(msg, self.config.maxMessageSize)
        uniq = self._next_id()
        body = msg.body
        props = encode_properties(msg.wire_properties(uniq))
        timeout_s = self.config.sendMsgTimeout / 1000 if timeout is None else timeout
        if queue_selector is not None:
            info = await self.publish_routes.get(msg.topic)
            mq = queue_selector(list(info.queues), msg, arg)
            try:
                result = await self._send_once(mq, msg, body, props, uniq, timeout_s)
            except Exception as e:
                self._trace_failed(msg.topic, mq.brokerName, e)
                raise
            self._trace(result, started)
            return result
        try:
            result = await self._send_with_retries(
                msg,
                body,
                props,
                uniq,
                False,
                timeout_s,
                self.config.retryTimesWhenSendFailed,
                sync=True,
            )
        except Exception as e:
            self._trace_failed(msg.topic, None, e)
            raise
        self._trace(result, started)
        return result

    def _trace(self, result: SendResult, started: float) -> None:
        if self.client.config.trace:
            send_trace.acked(result, started, self.group, self.client.client_id)

    def _trace_failed(self, topic: str, broker: str | None, exc: BaseException) -> None:
        if self.client.config.trace:
            send_trace.failed(topic, broker, exc, self.group, self.client.client_id)

    async def request(
        self,
        msg: Message,
        timeout: float,
        queue_selector: MessageQueueSelector | None = None,
        arg: Any = None,
        *,
        queue: MessageQueue | None = None,
    ) -> MessageExt:
        """Send ``msg`` as a request and return its reply; `RequestTimeout` when none comes
        within ``timeout`` seconds (request_reply.py)."""
        return await request_reply.request(self, msg, timeout, queue_selector, arg, queue=queue)

    async def send_to_queue(
        self, msg: Message, mq: MessageQueue, *, timeout: float | None = None
    ) -> SendResult:
        """Send to one given queue (one attempt)."""
        started = aio.current_time()
        check_message(msg, self.config.maxMessageSize)
        if mq.topic != msg.topic:
            raise MQClientError(f"queue {mq} is not of topic {msg.topic}")
        uniq = self._next_id()
        props = encode_properties(msg.wire_properties(uniq))
        timeout_s = self.config.sendMsgTimeout / 1000 if timeout is None else timeout
        try:
            result = await self._send_once(mq, msg, msg.body, props, uniq, timeout_s)
        except Exception as e:
            self._trace_failed(msg.topic, mq.brokerName, e)
            raise
        self._trace(result, started)
        return result

    async def send_async(
        self,
        msg: Message,
        callback: Callable[[SendFuture], None] | None = None,
        queue_selector: MessageQueueSelector | None = None,
        arg: Any = None,
    ) -> SendFuture:
        """Start a send and return its future; waits only when ``maxInFlight`` sends are out.

        The usual path sends at once with a callback (no task per send); the answer, a retry
        on another broker or the final error reach the future. While slots are free this
        does not yield, so a burst of sends leaves in a few large socket writes.
        """
        if self._nursery is None:
            raise MQClientError("producer is not started")
        check_message(msg, self.config.maxMessageSize)
        try:
            self._in_flight.acquire_nowait()
        except aio.WouldBlock:
            await self._in_flight.acquire()
        started = aio.current_time() if self.client.config.trace else 0.0
        fut = SendFuture(callback, msg.topic, started)
        try:
            await self._start_async(fut, msg, queue_selector, arg)
        except BaseException:
            self._in_flight.release()
            raise
        return fut

    async def _start_async(
        self, fut: SendFuture, msg: Message, selector: MessageQueueSelector | None, arg: Any
    ) -> None:
        uniq = self._next_id()
        props = encode_properties(msg.wire_properties(uniq))
        info = self.publish_routes.table.get(msg.topic)
        if info is None or not info.ok():
            info = await self.publish_routes.get(msg.topic)
        if selector is not None:
            mq = selector(list(info.queues), msg, arg)
        else:
            mq = info.select(None, self.publish_routes.available)
        addr = self.client.find_master_addr(self.client.broker_name_of(mq))
        conn = None
        if addr is not None:
            conn = self.client.remoting.connection_nowait(addr)
            if conn is None:
                try:  # the first send to a broker connects
                    conn = await self.client.remoting.get_connection(addr)
                except RemotingError:
                    conn = None
        if addr is None or conn is None:  # find the master / fail over in a task
            self.nursery.start_soon(self._send_async_slow, fut, msg, props, uniq, mq, selector)
            return
        timeout_s = self.config.sendMsgTimeout / 1000
        deadline = aio.current_time() + timeout_s
        cmd = send_request(self.group, self.config, mq, msg.flag, props, msg.body, batch=False)

        def on_done(reply: Reply[RemotingCommand]) -> None:
            # runs inside the connection's reader (or the expiry scan): never raises
            try:
                result = parse_send_result(reply.result(), mq, uniq, addr)
            except Exception as e:
                if not retryable(e) or self._nursery is None:
                    self._finish_async(fut, None, e)
                elif selector is None:
                    self.publish_routes.note_failure(msg.topic, mq, addr, e, 1)
                    self._nursery.start_soon(
                        self._retry_async, fut, msg, props, uniq, mq.brokerName, deadline, e
                    )
                else:  # ordered: one attempt, but the next send finds the new master
                    self.client.request_route_refresh(msg.topic)
                    self._finish_async(fut, None, e)
                return
            self._finish_async(fut, result, None)

        self.client.remoting.before_request(addr, cmd)  # e.g. the ACL signature
        self._callbacks.start(conn, cmd, deadline, on_done)

    def _finish_async(
        self, fut: SendFuture, result: SendResult | None, exc: BaseException | None
    ) -> None:
        self._in_flight.release()
        if result is not None:
            self._trace(result, fut.started)
        elif exc is not None and self.client.config.trace:
            self._trace_failed(fut.topic, None, exc)
        fut.finish(result, exc)

    async def _send_async_slow(
        self,
        fut: SendFuture,
        msg: Message,
        props: str,
        uniq: str,
        mq: MessageQueue,
        selector: MessageQueueSelector | None,
    ) -> None:
        timeout_s = self.config.sendMsgTimeout / 1000
        try:
            if selector is not None:
                result = await self._send_once(mq, msg, msg.body, props, uniq, timeout_s)
            else:
                result = await self._send_with_retries(
                    msg, msg.body, props, uniq, False, timeout_s,
                    self.config.retryTimesWhenSendAsyncFailed,
                )  # fmt: skip
        except Exception as e:
            self._finish_async(fut, None, e)
        else:
            self._finish_async(fut, result, None)

    async def _retry_async(
        self,
        fut: SendFuture,
        msg: Message,
        props: str,
        uniq: str,
        failed_broker: str,
        deadline: float,
        first: Exception,
    ) -> None:
        """The first attempt of an async send failed: the remaining retries, in a task."""
        retries = self.config.retryTimesWhenSendAsyncFailed - 1
        try:
            if retries < 0 or deadline <= aio.current_time():
                raise first
            await self.client.refresh_route(msg.topic, deadline)
            left_s = deadline - aio.current_time()
            result = await self._send_with_retries(
                msg, msg.body, props, uniq, False, left_s, retries, failed_broker, attempt=1
            )
        except Exception as e:
            self._finish_async(fut, None, e)
        else:
            self._finish_async(fut, result, None)

    async def _expire_loop(self) -> None:
        while True:
            await aio.sleep(EXPIRE_SCAN_S)
            self._callbacks.expire(aio.current_time())

    async def send_oneway(
        self, msg: Message, queue_selector: MessageQueueSelector | None = None, arg: Any = None
    ) -> None:
        """Send without waiting for an answer (no result, no retry)."""
        check_message(msg, self.config.maxMessageSize)
        info = await self.publish_routes.get(msg.topic)
        if queue_selector is not None:
            mq = queue_selector(list(info.queues), msg, arg)
        else:
            mq = info.select(None, self.publish_routes.available)
        addr = await self.client.find_master_addr_refreshing(
            self.client.broker_name_of(mq), msg.topic
        )
        if addr is None:
            raise MQClientError(f"broker {mq.brokerName} has no master address")
        uniq = self._next_id()
        props = encode_properties(msg.wire_properties(uniq))
        cmd = send_request(self.group, self.config, mq, msg.flag, props, msg.body, batch=False)
        try:
            await self.client.remoting.invoke_oneway(addr, cmd)
        except RemotingError:
            self.client.request_route_refresh(msg.topic)
            raise

    async def send_batch(
        self, msgs: Sequence[Message], *, timeout: float | None = None
    ) -> list[SendResult]:
        """Send messages of one topic as SEND_BATCH_MESSAGE; one result per request (bodies
        above maxMessageSize are split into several requests, each to one queue)."""
        started = aio.current_time()
        if not msgs:
            raise MQClientError("the batch is empty")
        topic = msgs[0].topic
        for m in msgs:
            check_message(m, self.config.maxMessageSize)
            if m.topic != topic:
                raise MQClientError("every message of a batch must have the same topic")
            if m.delay_time_level > 0:
                raise MQClientError("delay messages cannot be sent in a batch")
        timeout_s = self.config.sendMsgTimeout / 1000 if timeout is None else timeout
        wait = "true" if msgs[0].wait_store_msg_ok else "false"
        header_props = encode_properties({WAIT: wait})
        ids = [self._next_id() for _ in msgs]
        records = [
            encode_batch_body([BatchItem(m.flag, m.body, m.wire_properties(u))])
            for m, u in zip(msgs, ids, strict=True)
        ]
        results = []
        for lo, hi in batch_chunks([len(r) for r in records], self.config.maxMessageSize):
            result = await self._send_with_retries(
                msgs[lo],
                b"".join(records[lo:hi]),
                header_props,
                ",".join(ids[lo:hi]),
                True,
                timeout_s,
                self.config.retryTimesWhenSendFailed,
                sync=True,
            )
            self._trace(result, started)
            results.append(result)
        return results

    async def _send_with_retries(
        self,
        msg: Message,
        body: bytes,
        props: str,
        uniq: str,
        batch: bool,
        timeout_s: float,
        retries: int,
        last_failed: str | None = None,
        *,
        attempt: int = 0,
        sync: bool = False,
    ) -> SendResult:
        """Up to ``1 + retries`` attempts within ``timeout_s``, avoiding failed brokers; after a
        failure the next attempt waits for a route fetched after it (shared, rate limited)."""
        deadline = aio.current_time() + timeout_s
        last_exc: Exception | None = None
        not_ok: SendResult | None = None
        retry_not_ok = sync and self.config.retryAnotherBrokerWhenNotStoreOK
        last = attempt + 1 + retries
        for n in range(attempt + 1, last + 1):
            left = deadline - aio.current_time()
            if left <= 0:
                break
            info = await self.publish_routes.get(msg.topic)
            mq = info.select(last_failed, self.publish_routes.available)
            addr = self.client.find_master_addr(self.client.broker_name_of(mq))
            try:
                result = await self._send_to(mq, addr, msg, body, props, uniq, batch, left)
            except (RemotingError, MQBrokerError) as e:
                if not retryable(e):
                    raise
                last_exc, last_failed = e, mq.brokerName
                self.publish_routes.note_failure(msg.topic, mq, addr, e, n)
                if n < last:
                    await self.client.refresh_route(msg.topic, deadline)
                else:  # no attempt left to wait for: the next send gets the new route
                    self.client.request_route_refresh(msg.topic)
                continue
            if result.send_status is SendStatus.SEND_OK or not retry_not_ok:
                return result
            not_ok, last_failed = result, mq.brokerName  # upstream: try another broker
        if not_ok is not None:
            return not_ok
        if last_exc is None:
            raise MQClientError(f"send to {msg.topic} timed out after {timeout_s}s")
        raise MQClientError(
            f"send to {msg.topic} failed after {last} attempts: {last_exc}"
        ) from last_exc

    async def _send_once(
        self,
        mq: MessageQueue,
        msg: Message,
        body: bytes,
        props: str,
        uniq: str,
        timeout_s: float,
    ) -> SendResult:
        """One attempt to a chosen queue (ordered sends): no retry, but a failure refreshes the
        route so that the next send reaches the new master."""
        deadline = aio.current_time() + timeout_s
        addr = self.client.find_master_addr(self.client.broker_name_of(mq))
        if addr is None:
            await self.client.refresh_route(mq.topic, deadline)
            addr = self.client.find_master_addr(self.client.broker_name_of(mq))
        try:
            left = max(deadline - aio.current_time(), 0.0)
            return await self._send_to(mq, addr, msg, body, props, uniq, False, left)
        except (RemotingError, MQBrokerError) as e:
            if retryable(e):
                self.client.request_route_refresh(mq.topic)
            raise

    async def _send_to(
        self,
        mq: MessageQueue,
        addr: str | None,
        msg: Message,
        body: bytes,
        props: str,
        uniq: str,
        batch: bool,
        timeout_s: float,
    ) -> SendResult:
        if addr is None:
            raise MQBrokerError(
                ResponseCode.SERVICE_NOT_AVAILABLE,
                f"broker {mq.brokerName} has no master in the route of {mq.topic}",
            )
        cmd = send_request(self.group, self.config, mq, msg.flag, props, body, batch=batch)
        resp = await self.stuck.invoke(mq.topic, mq.brokerName, addr, cmd, timeout_s)
        return parse_send_result(resp, mq, uniq, addr)
