"""The push consumer (upstream DefaultMQPushConsumer, concurrent consumption).

    consumer = PushConsumer("group", "127.0.0.1:9876")
    consumer.subscribe("Orders", "tagA || tagB")
    consumer.register_listener(fn)          # fn(msgs) -> ConsumeStatus, sync or async
    async with consumer: ...

Rebalance and pulling are `ConsumerCore`'s. Clustering consumers also subscribe to the group's retry
topic %RETRY%<group>. Pulled messages are consumed in chunks of ``consumeMessageBatchMaxSize``. A
plain-function listener is called by the pull loop itself as soon as a pull returns (it runs on the
Trio thread wherever it is called, so a channel and a worker wakeup per chunk would only cost time);
a coroutine-function listener, an awaitable result and any failure go onto the consume channel,
served by ``consumeThreadMax`` worker tasks (the channel is bounded: when it is full the pull loops
wait, as flow control would). The offset committed is always the smallest one still being consumed
(`ProcessQueue.remove`, `ProcessQueue.consumed_untracked`), persisted every
``persistConsumerOffsetInterval``, when a queue is revoked and on shutdown; the broker also commits
it with each pull (COMMIT_OFFSET). RECONSUME_LATER (or an exception in the listener) sends each
message back with CONSUMER_SEND_MSG_BACK, so it returns through the retry topic and the broker moves
it to %DLQ%<group> after ``maxReconsumeTimes``; a message the broker does not take back is consumed
again locally after 5 s. Broadcasting consumers drop messages whose consumption failed, like
upstream.

A synchronous listener runs on the Trio thread, so it must not block; blocking code belongs in
an async listener that uses ``trio.to_thread``, or in `BlockingPushConsumer`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

import attrs
import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.config import (
    ClientConfig,
    ConsumeFromWhere,
    MessageModel,
    PushConsumerConfig,
)
from rocketrio.actors.client.consumer_core import CALL_ERRORS, ConsumerCore, QueueState
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import ConsumeStatus
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.offset_store import RunBlocking, run_in_thread
from rocketrio.actors.client.process_queue import ProcessQueue
from rocketrio.actors.client.remoting import ClientTransport as Transport
from rocketrio.actors.client.trace import trace_consumed
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import ORIGIN_MESSAGE_ID, MessageExt

__all__ = ["ConsumeStatus", "MessageListener", "PushConsumer"]

log = structlog.get_logger("push_consumer")

MessageListener = Callable[[list[MessageExt]], "ConsumeStatus | Awaitable[ConsumeStatus]"]

CONSUME_LATER_DELAY_S = 5.0  # upstream submitConsumeRequestLater
SHUTDOWN_CONSUME_WAIT_S = 5.0  # running listener calls get this long to finish on shutdown
DELAY_LEVEL_BY_BROKER = 0  # the broker picks the delay level from the reconsume count
CONSUME_YIELD_EVERY = 64
NOT_CALLED = object()  # ConsumeRequest.outcome before the listener ran


@attrs.frozen
class ConsumeRequest:
    state: QueueState
    pq: ProcessQueue
    msgs: list[MessageExt]
    # what a listener called inline already returned: a status to act on, or an awaitable
    # for the worker to finish
    outcome: object = NOT_CALLED


class PushConsumer(ConsumerCore):
    consume_type = "CONSUME_PASSIVELY"

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        *,
        transport: Transport | None = None,
        message_model: str | MessageModel = MessageModel.CLUSTERING,
        consume_from_where: str | ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str = "",
        max_reconsume_times: int = 16,
        pull_batch_size: int = 32,
        consume_batch_size: int = 1,
        consume_concurrency: int = 20,
        offset_store_path: str = "",
        config: PushConsumerConfig | None = None,
        client_config: ClientConfig | None = None,
        client: MQClientInstance | None = None,
        run_blocking: RunBlocking = run_in_thread,
    ) -> None:
        self.config = config or PushConsumerConfig(
            consumerGroup=group,
            messageModel=MessageModel(message_model),
            consumeFromWhere=ConsumeFromWhere(consume_from_where),
            consumeTimestamp=consume_timestamp,
            maxReconsumeTimes=max_reconsume_times,
            pullBatchSize=pull_batch_size,
            consumeMessageBatchMaxSize=consume_batch_size,
            consumeThreadMax=consume_concurrency,
            offsetStorePath=offset_store_path,
        )
        super().__init__(
            self.config,
            namesrv_addr,
            transport=transport,
            client_config=client_config,
            client=client,
            run_blocking=run_blocking,
        )
        self._listener: MessageListener | None = None
        self._inline = False
        self._consume_send: aio.MemoryObjectSendStream[ConsumeRequest] | None = None
        self._stopping = False
        self._busy = 0
        self._idle = aio.new_event()
        self._ok_inline = 0  # messages a plain-function listener consumed (for the stats)

    def register_listener(self, fn: MessageListener) -> None:
        self._listener = fn
        # A plain function runs on the Trio thread wherever it is called, so the pull loop
        # calls it directly (no channel hop, no worker wakeup per batch); coroutine
        # functions go through the consumeThreadMax workers.
        self._inline = not inspect.iscoroutinefunction(fn)

    # -- hooks of ConsumerCore
    def _check_startable(self) -> None:
        if self._listener is None:
            raise MQClientError("register a message listener before starting the consumer")
        super()._check_startable()

    def _start_workers(self, nursery: aio.TaskGroup) -> None:
        self._stopping = False
        c = self.config
        # a full pull's chunks for every worker; when it is full the pull loops wait in
        # `_deliver` (workers never wait on it, so it always drains)
        capacity = c.consumeThreadMax * -(-c.pullBatchSize // c.consumeMessageBatchMaxSize)
        send, recv = aio.create_memory_object_stream[ConsumeRequest](capacity)
        self._consume_send = send
        for _ in range(self.config.consumeThreadMax):
            nursery.start_soon(self._consume_worker, recv.clone())
        recv.close()

    async def _before_persist_on_stop(self) -> None:
        self._stopping = True
        with aio.move_on_after(SHUTDOWN_CONSUME_WAIT_S):
            while self._busy:
                await self._idle.wait()

    def _pull_interval_s(self) -> float:
        return self.config.pullInterval / 1000

    def _flow_controlled(self, st: QueueState) -> bool:
        c, pq = self.config, st.pq
        return (
            pq.msg_count > c.pullThresholdForQueue
            or pq.msg_size > c.pullThresholdSizeForQueue * 1024 * 1024
            or pq.max_span() > c.consumeConcurrentlyMaxSpan
        )

    async def _deliver(self, st: QueueState, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        n = self.config.consumeMessageBatchMaxSize
        if self._inline:
            # the stats are counted once per pull result: one clock read before and after
            self._ok_inline = 0
            began = aio.current_time()
            if len(msgs) <= n:
                if (req := self._consume_inline(st, pq, msgs)) is not None:
                    await self._submit(req)
            else:
                for i in range(0, len(msgs), n):
                    if (req := self._consume_inline(st, pq, msgs[i : i + n])) is not None:
                        await self._submit(req)
            rt_ms = int((aio.current_time() - began) * 1000)
            self.stats.on_consumed(st.mq.topic, self._ok_inline, 0, rt_ms, -(-len(msgs) // n))
            pq.last_consume_at = wallclock_ms()
            return
        pq.put(msgs)
        for i in range(0, len(msgs), n):
            await self._submit(ConsumeRequest(st, pq, msgs[i : i + n]))

    async def _submit(self, req: ConsumeRequest) -> None:
        """Queue a consume request for the workers; wait while the channel is full."""
        send = self._consume_send
        assert send is not None
        try:
            send.send_nowait(req)
        except aio.WouldBlock:
            await send.send(req)

    def _consume_inline(
        self, st: QueueState, pq: ProcessQueue, msgs: list[MessageExt]
    ) -> ConsumeRequest | None:
        """Call a plain-function listener now. Consumed messages are never tracked in ``pq``;
        a failure (the send-back is network I/O) or an awaitable result is tracked and returned,
        for a worker."""
        if self._stopping or pq.dropped:
            return None
        assert self._listener is not None
        last_offset = msgs[-1].queue_offset  # before the listener, which may change the list
        try:
            outcome = self._listener(msgs)
        except Exception as e:
            events.emit(
                log, events.ConsumeFailed(group=self.group, error=f"{type(e).__name__}: {e}")
            )
            outcome = ConsumeStatus.RECONSUME_LATER
        if outcome is ConsumeStatus.CONSUME_SUCCESS:
            self._trace(st.mq, msgs)
            self._ok_inline += len(msgs)
            self._commit(st, pq, pq.consumed_untracked(last_offset))
            return None
        pq.put(msgs)
        return ConsumeRequest(st, pq, msgs, outcome)

    # -- consuming
    async def _consume_worker(self, recv: aio.MemoryObjectReceiveStream[ConsumeRequest]) -> None:
        # Take what is already queued without a checkpoint per request (a sync listener never
        # yields), but yield every CONSUME_YIELD_EVERY requests so pulls keep flowing.
        run = 0
        async with recv:
            while True:
                try:
                    req = recv.receive_nowait()
                except aio.WouldBlock:
                    try:
                        req = await recv.receive()
                    except aio.EndOfStream:
                        return
                    run = 0
                except aio.EndOfStream:
                    return
                if self._stopping or req.pq.dropped:
                    continue
                self._busy += 1
                try:
                    await self._consume(req)
                finally:
                    self._busy -= 1
                    if self._busy == 0:
                        self._idle.set()
                        self._idle = aio.new_event()
                run += 1
                if run >= CONSUME_YIELD_EVERY:
                    run = 0
                    await aio.checkpoint()

    async def _call_listener(
        self, msgs: list[MessageExt], outcome: object = NOT_CALLED
    ) -> ConsumeStatus:
        assert self._listener is not None
        try:
            status = self._listener(msgs) if outcome is NOT_CALLED else outcome
            if inspect.isawaitable(status):
                status = await status
        except Exception as e:
            events.emit(
                log, events.ConsumeFailed(group=self.group, error=f"{type(e).__name__}: {e}")
            )
            return ConsumeStatus.RECONSUME_LATER
        if status is ConsumeStatus.CONSUME_SUCCESS:
            return status
        if status is not ConsumeStatus.RECONSUME_LATER:
            events.emit(log, events.ConsumeBadStatus(group=self.group, status=repr(status)))
        return ConsumeStatus.RECONSUME_LATER

    async def _consume(self, req: ConsumeRequest) -> None:
        began = aio.current_time()
        status = await self._call_listener(req.msgs, req.outcome)
        called = req.outcome is NOT_CALLED  # else the inline call was counted already
        rt_ms = int((aio.current_time() - began) * 1000) if called else 0
        n = len(req.msgs)
        ok = status is ConsumeStatus.CONSUME_SUCCESS
        if ok:
            self._trace(req.state.mq, req.msgs)
        self.stats.on_consumed(req.state.mq.topic, n if ok else 0, 0 if ok else n, rt_ms, called)
        req.pq.last_consume_at = wallclock_ms()
        if req.pq.dropped:
            return  # the queue went to another member; it consumes from the committed offset
        done = req.msgs
        if status is ConsumeStatus.RECONSUME_LATER:
            if self.clustering:
                failed = [m for m in req.msgs if not await self._send_back(req.state.mq, m)]
                if failed:
                    done = [m for m in req.msgs if m not in failed]
                    self.nursery.start_soon(self._consume_later, req.state, req.pq, failed)
            else:
                events.emit(
                    log, events.BroadcastConsumeDropped(group=self.group, count=len(req.msgs))
                )
        self._commit(req.state, req.pq, req.pq.remove(done))

    def _trace(self, mq: MessageQueue, msgs: list[MessageExt]) -> None:
        """ClientConfig.trace: one trace_consumed line per message the listener consumed."""
        if self.client.config.trace:
            trace_consumed(self.group, self.client.client_id, mq, msgs)

    def _commit(self, st: QueueState, pq: ProcessQueue, offset: int) -> None:
        if offset >= 0 and not pq.dropped and self.offset_store is not None:
            self.offset_store.table.update(st.mq, offset, increase_only=True)

    async def _send_back(self, mq: MessageQueue, msg: MessageExt) -> bool:
        addr = self.client.find_broker_addr(
            self.client.broker_name_of(mq)
        )  # the master, else a slave
        if addr is None:
            return False
        origin = msg.properties.get(ORIGIN_MESSAGE_ID) or msg.msg_id
        try:
            await self.client.api.send_message_back(
                addr,
                msg,
                self.group,
                DELAY_LEVEL_BY_BROKER,
                self.config.maxReconsumeTimes,
                origin_msg_id=origin,
                stored_topic=mq.topic,
            )
        except CALL_ERRORS as e:
            events.emit(log, events.SendBackFailed(group=self.group, error=str(e)), broker=addr)
            return False
        return True

    async def _consume_later(
        self, st: QueueState, pq: ProcessQueue, msgs: list[MessageExt]
    ) -> None:
        await aio.sleep(CONSUME_LATER_DELAY_S)
        for m in msgs:
            m.reconsume_times += 1
        if not pq.dropped and self._consume_send is not None:
            await self._submit(ConsumeRequest(st, pq, msgs))
