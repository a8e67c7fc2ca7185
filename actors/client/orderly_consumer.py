"""The orderly push consumer (upstream DefaultMQPushConsumer with a MessageListenerOrderly and
ConsumeMessageOrderlyService): the Trio shell of actors/client/orderly.py.

    consumer = OrderlyPushConsumer("group", "127.0.0.1:9876")
    consumer.subscribe("Orders", "*")
    consumer.register_listener(fn)   # fn(msgs, context) -> ConsumeOrderlyStatus, sync or async
    async with consumer: ...

Rebalance, pulling and offsets are `ConsumerCore`'s; this module adds the queue locks and the
one-batch-at-a-time consumption (clustering; a broadcasting consumer takes no locks):

- A newly assigned queue is taken only once LOCK_BATCH_MQ granted it to this client; its start
  offset is read from the broker after that, so it is the offset the previous owner committed
  before it gave the lock back. A queue the broker refuses is asked for again by a rebalance
  1 s later, until the old owner unlocks it or its lock expires on the broker
  (rebalanceLockMaxLiveTime).
- Every 20 s (first after 1 s) the locks of all owned queues are renewed, one LOCK_BATCH_MQ per
  broker; a queue the broker no longer grants stops being pulled and consumed. A lock not
  renewed for 30 s counts as lost on the client (consumption stops; the consume task asks for
  the lock again every 3 s).
- Each queue has at most one consume task: it takes ``consumeMessageBatchMaxSize`` messages in
  offset order, calls the listener, acts on the answer (`result_action`), commits the offset
  after a successful batch, and only then takes the next batch. Queues are consumed
  concurrently, at most ``consumeThreadMax`` listener calls at a time.
- A queue leaving this client (rebalance) stops pulling at once; its consume task finishes the
  batch in flight (none starts after it), the offset is committed to the broker, and only then
  UNLOCK_BATCH_MQ releases it. Until then its lock keeps being renewed. Shutdown does the same
  for every queue.

A synchronous listener runs on the Trio thread, so it must not block; blocking code belongs in
an async listener that uses ``trio.to_thread``, or in `BlockingOrderlyPushConsumer`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import assert_never

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
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.offset_store import RunBlocking, run_in_thread
from rocketrio.actors.client.orderly import (
    LOCK_ALL_FIRST_DELAY_S,
    REBALANCE_LOCK_INTERVAL_S,
    TRY_LOCK_LATER_S,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    Gate,
    OrderlyProcessQueue,
    ResultAction,
    apply_lock_result,
    check_reconsume_times,
    consume_gate,
    effective_max_reconsume_times,
    group_by_broker,
    result_action,
    suspend_delay_s,
    to_dlq,
)
from rocketrio.actors.client.process_queue import ProcessQueue
from rocketrio.actors.client.remoting import ClientTransport as Transport
from rocketrio.actors.client.trace import trace_consumed
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import ORIGIN_MESSAGE_ID, MessageExt

__all__ = [
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageListenerOrderly",
    "OrderlyPushConsumer",
]

log = structlog.get_logger("push_consumer")

MessageListenerOrderly = Callable[
    [list[MessageExt], ConsumeOrderlyContext],
    "ConsumeOrderlyStatus | Awaitable[ConsumeOrderlyStatus]",
]

SHUTDOWN_CONSUME_WAIT_S = 5.0  # batches in flight get this long to finish on shutdown
REBALANCE_RETRY_S = 1.0  # upstream rebalance minInterval: a queue not locked is asked again
LOCK_LATER_FIRST_S = 0.01  # upstream tryLockLaterAndReconsume(10 ms)
DLQ_DELAY_LEVEL = -1  # CONSUMER_SEND_MSG_BACK with a negative level: straight to %DLQ%<group>


def _mq_names(mqs: list[MessageQueue]) -> list[str]:
    return [f"{mq.topic}@{mq.brokerName}:{mq.queueId}" for mq in mqs]


class OrderlyPushConsumer(ConsumerCore):
    consume_type = "CONSUME_PASSIVELY"
    consume_orderly = True

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        *,
        transport: Transport | None = None,
        message_model: str | MessageModel = MessageModel.CLUSTERING,
        consume_from_where: str | ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str = "",
        max_reconsume_times: int = -1,
        suspend_current_queue_time_ms: int = 1000,
        pull_batch_size: int = 32,
        consume_batch_size: int = 1,
        consume_concurrency: int = 20,
        offset_store_path: str = "",
        config: PushConsumerConfig | None = None,
        client_config: ClientConfig | None = None,
        client: MQClientInstance | None = None,
        run_blocking: RunBlocking = run_in_thread,
    ) -> None:
        """``max_reconsume_times`` -1 (the default) never gives a message up, like upstream's
        orderly consumer; otherwise a message suspended that many times goes to the DLQ."""
        self.config = config or PushConsumerConfig(
            consumerGroup=group,
            messageModel=MessageModel(message_model),
            consumeFromWhere=ConsumeFromWhere(consume_from_where),
            consumeTimestamp=consume_timestamp,
            maxReconsumeTimes=effective_max_reconsume_times(max_reconsume_times),
            suspendCurrentQueueTimeMillis=suspend_current_queue_time_ms,
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
        self._listener: MessageListenerOrderly | None = None
        self._limiter = aio.CapacityLimiter(self.config.consumeThreadMax)
        # one consume task per process queue at most; its event is set when it ends
        self._consuming: dict[OrderlyProcessQueue, aio.Event] = {}
        # queues given up by a rebalance, until their offset is committed and they are unlocked
        self._releasing: dict[MessageQueue, QueueState] = {}
        self._stopping = False
        self._rebalance_retry_pending = False

    def register_listener(self, fn: MessageListenerOrderly) -> None:
        """``fn(msgs, context) -> ConsumeOrderlyStatus`` (or a coroutine function)."""
        self._listener = fn

    # -- hooks of ConsumerCore
    def _check_startable(self) -> None:
        if self._listener is None:
            raise MQClientError("register a message listener before starting the consumer")
        super()._check_startable()

    def _new_process_queue(self) -> ProcessQueue:
        return OrderlyProcessQueue()

    def _start_workers(self, nursery: aio.TaskGroup) -> None:
        self._stopping = False
        if self.clustering:
            nursery.start_soon(self._lock_loop)

    def _pull_interval_s(self) -> float:
        return self.config.pullInterval / 1000

    def _flow_controlled(self, st: QueueState) -> bool:
        """Pull only queues whose lock this client holds (upstream pullMessage: "pull message
        later because not locked in broker"; unlike upstream, not after the lock expired on the
        client either: nothing pulled then could be consumed), within the cache thresholds."""
        c, pq = self.config, st.pq
        assert isinstance(pq, OrderlyProcessQueue)
        return (
            (self.clustering and not self._holds_lock(pq))
            or pq.msg_count > c.pullThresholdForQueue
            or pq.msg_size > c.pullThresholdSizeForQueue * 1024 * 1024
        )

    @staticmethod
    def _holds_lock(pq: OrderlyProcessQueue) -> bool:
        return pq.locked and not pq.is_lock_expired(aio.current_time())

    async def _deliver(self, st: QueueState, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        assert isinstance(pq, OrderlyProcessQueue)
        pq.put(msgs)
        if pq not in self._consuming and not self._stopping:
            self._consuming[pq] = aio.new_event()
            self.nursery.start_soon(self._consume_loop, st, pq)

    async def _before_persist_on_stop(self) -> None:
        """Let batches in flight finish, commit, then give every lock back."""
        self._stopping = True
        with aio.move_on_after(SHUTDOWN_CONSUME_WAIT_S):
            for done in list(self._consuming.values()):
                await done.wait()
        if not self.clustering or self.offset_store is None:
            return
        held = [*self.queues, *self._releasing]
        await self.offset_store.persist(held)
        for broker, mqs in group_by_broker(held, self.client.broker_name_of).items():
            await self._unlock(broker, mqs)

    # -- rebalance
    async def _add_queue(self, mq: MessageQueue) -> bool:
        if not self.clustering:
            return await super()._add_queue(mq)
        if mq in self._releasing:  # still giving it up: take it again once that is done
            self._retry_rebalance_soon()
            return False
        granted_at, wall = aio.current_time(), wallclock_ms()
        if not await self._lock_one(mq):
            self._retry_rebalance_soon()
            return False
        # the start offset is read after the lock: the previous owner committed before unlocking
        if not await super()._add_queue(mq):
            self._retry_rebalance_soon()
            return False
        pq = self.queues[mq].pq
        assert isinstance(pq, OrderlyProcessQueue)
        pq.on_lock_granted(granted_at, wall)
        return True

    async def _remove_queue(self, mq: MessageQueue) -> None:
        st = self.queues.pop(mq)
        st.pq.dropped = True
        st.cancel.cancel()
        if not self.clustering:
            assert self.offset_store is not None
            await self.offset_store.persist([mq])
            self.offset_store.forget(mq)
            return
        self._releasing[mq] = st
        self.nursery.start_soon(self._release, st)

    async def _release(self, st: QueueState) -> None:
        """After the batch in flight: commit the queue's offset, then unlock it."""
        mq, pq = st.mq, st.pq
        assert isinstance(pq, OrderlyProcessQueue) and self.offset_store is not None
        done = self._consuming.get(pq)
        if done is not None:
            await done.wait()
        offset = self.offset_store.table.read(mq)
        await self.offset_store.persist([mq])
        self.offset_store.forget(mq)
        await self._unlock(self.client.broker_name_of(mq), [mq])
        del self._releasing[mq]
        events.emit(log, events.OrderlyQueueUnlocked(group=self.group, mq=str(mq), offset=offset))

    def _retry_rebalance_soon(self) -> None:
        if not self._rebalance_retry_pending:
            self._rebalance_retry_pending = True
            self.nursery.start_soon(self._rebalance_later)

    async def _rebalance_later(self) -> None:
        await aio.sleep(REBALANCE_RETRY_S)
        self._rebalance_retry_pending = False
        self.request_rebalance()

    # -- locks
    async def _lock_batch(self, broker: str, mqs: list[MessageQueue]) -> list[MessageQueue] | None:
        """LOCK_BATCH_MQ at the broker set's master; None when it could not be asked."""
        addr = self.client.find_master_addr(broker)
        try:
            if addr is None:
                raise MQClientError(f"no master address for broker {broker}")
            return await self.client.api.lock_batch_mq(addr, self.group, self.client.client_id, mqs)
        except CALL_ERRORS as e:
            events.emit(
                log,
                events.OrderlyLockFailed(group=self.group, queues=_mq_names(mqs), error=str(e)),
            )
            return None

    async def _unlock(self, broker: str, mqs: list[MessageQueue]) -> None:
        addr = self.client.find_master_addr(broker)
        try:
            if addr is None:
                raise MQClientError(f"no master address for broker {broker}")
            await self.client.api.unlock_batch_mq(addr, self.group, self.client.client_id, mqs)
        except CALL_ERRORS as e:  # the broker's lock then expires (rebalanceLockMaxLiveTime)
            events.emit(
                log,
                events.OrderlyLockFailed(group=self.group, queues=_mq_names(mqs), error=str(e)),
            )

    async def _lock_one(self, mq: MessageQueue) -> bool:
        got = await self._lock_batch(self.client.broker_name_of(mq), [mq])
        return got is not None and mq in got

    async def _lock_loop(self) -> None:
        await aio.sleep(LOCK_ALL_FIRST_DELAY_S)
        while True:
            if not self._stopping:
                await self.lock_all()
            await aio.sleep(REBALANCE_LOCK_INTERVAL_S)

    async def lock_all(self) -> None:
        """Renew the locks of every owned queue and of those still being given up (upstream
        RebalanceImpl.lockAll)."""
        pqs: dict[MessageQueue, OrderlyProcessQueue] = {}
        for mq, st in [*self.queues.items(), *self._releasing.items()]:
            assert isinstance(st.pq, OrderlyProcessQueue)
            pqs[mq] = st.pq
        for broker, mqs in group_by_broker(pqs, self.client.broker_name_of).items():
            asked_at, wall = aio.current_time(), wallclock_ms()
            got = await self._lock_batch(broker, mqs)
            if got is None:
                continue  # not renewed: the client-side expiry stops consumption in time
            lost = apply_lock_result({mq: pqs[mq] for mq in mqs}, got, asked_at, wall)
            if lost:
                events.emit(log, events.OrderlyLockLost(group=self.group, queues=_mq_names(lost)))

    # -- consuming
    async def _consume_loop(self, st: QueueState, pq: OrderlyProcessQueue) -> None:
        """The one consume task of ``pq``: batches in order until nothing is waiting."""
        try:
            while True:
                gate = Gate.DROPPED if self._stopping else Gate.OK
                delay: float | None = None
                async with self._limiter:
                    if gate is Gate.OK:
                        gate = consume_gate(pq, aio.current_time(), clustering=self.clustering)
                    if gate is Gate.OK:
                        msgs = pq.take_messages(self.config.consumeMessageBatchMaxSize)
                        if not msgs:
                            return
                        delay = await self._consume_batch(st, pq, msgs)
                match gate:
                    case Gate.OK:
                        if delay is not None:
                            await aio.sleep(delay)
                    case Gate.DROPPED:
                        return
                    case Gate.NOT_LOCKED | Gate.LOCK_EXPIRED:
                        await self._lock_later(st.mq, pq)
                    case _:
                        assert_never(gate)
        finally:
            self._consuming.pop(pq).set()

    async def _lock_later(self, mq: MessageQueue, pq: OrderlyProcessQueue) -> None:
        """Upstream tryLockLaterAndReconsume: ask for the lock; if refused, wait 3 s."""
        await aio.sleep(LOCK_LATER_FIRST_S)
        if pq.dropped or self._stopping:
            return
        asked_at, wall = aio.current_time(), wallclock_ms()
        got = await self._lock_batch(self.client.broker_name_of(mq), [mq])
        if got is not None:
            apply_lock_result({mq: pq}, got, asked_at, wall)
        if not pq.locked or pq.is_lock_expired(aio.current_time()):
            await aio.sleep(TRY_LOCK_LATER_S)

    async def _call_listener(
        self, mq: MessageQueue, msgs: list[MessageExt], ctx: ConsumeOrderlyContext
    ) -> ConsumeOrderlyStatus:
        assert self._listener is not None
        try:
            status = self._listener(msgs, ctx)
            if inspect.isawaitable(status):
                status = await status
        except Exception as e:
            events.emit(
                log, events.ConsumeFailed(group=self.group, error=f"{type(e).__name__}: {e}")
            )
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        if not isinstance(status, ConsumeOrderlyStatus):
            events.emit(log, events.ConsumeBadStatus(group=self.group, status=repr(status)))
            return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return status

    async def _consume_batch(
        self, st: QueueState, pq: OrderlyProcessQueue, msgs: list[MessageExt]
    ) -> float | None:
        """One listener call and its outcome; returns how long to pause the queue, if at all."""
        ctx = ConsumeOrderlyContext(st.mq)
        began = aio.current_time()
        status = await self._call_listener(st.mq, list(msgs), ctx)
        rt_ms = int((aio.current_time() - began) * 1000)
        pq.last_consume_at = wallclock_ms()
        action = result_action(status, auto_commit=ctx.auto_commit)
        ok = action is not ResultAction.SUSPEND
        n = len(msgs)
        self.stats.on_consumed(st.mq.topic, n if ok else 0, 0 if ok else n, rt_ms, 1)
        if ok and self.client.config.trace:
            trace_consumed(self.group, self.client.client_id, st.mq, msgs)
        delay = suspend_delay_s(
            ctx.suspend_current_queue_time_millis, self.config.suspendCurrentQueueTimeMillis
        )
        match action:
            case ResultAction.COMMIT:
                self._commit(st, pq, pq.commit())
            case ResultAction.KEEP:
                pass
            case ResultAction.ROLLBACK:
                pq.rollback()
                return delay
            case ResultAction.SUSPEND:
                if await self._suspend(st.mq, msgs):
                    pq.make_message_to_consume_again(msgs)
                    return delay
                if ctx.auto_commit:
                    self._commit(st, pq, pq.commit())
            case _:
                assert_never(action)
        return None

    async def _suspend(self, mq: MessageQueue, msgs: list[MessageExt]) -> bool:
        """Upstream checkReconsumeTimes: messages reconsumed maxReconsumeTimes times go to the
        DLQ; the others (and any the broker did not take) count one more reconsume. True: put
        the batch back and retry it later."""
        dlq = to_dlq([m.reconsume_times for m in msgs], self.config.maxReconsumeTimes)
        sent = [d and await self._send_to_dlq(mq, m) for m, d in zip(msgs, dlq, strict=True)]
        check = check_reconsume_times(dlq, sent)
        for m, bump in zip(msgs, check.bump, strict=True):
            if bump:
                m.reconsume_times += 1
        return check.suspend

    async def _send_to_dlq(self, mq: MessageQueue, msg: MessageExt) -> bool:
        addr = self.client.find_broker_addr(self.client.broker_name_of(mq))
        if addr is None:
            return False
        origin = msg.properties.get(ORIGIN_MESSAGE_ID) or msg.msg_id
        try:
            await self.client.api.send_message_back(
                addr,
                msg,
                self.group,
                DLQ_DELAY_LEVEL,
                self.config.maxReconsumeTimes,
                origin_msg_id=origin,
                stored_topic=mq.topic,
            )
        except CALL_ERRORS as e:
            events.emit(log, events.SendBackFailed(group=self.group, error=str(e)), broker=addr)
            return False
        return True

    def _commit(self, st: QueueState, pq: OrderlyProcessQueue, offset: int) -> None:
        """Commit in memory (persisted with pulls, periodically and on release). A batch of a
        queue being given up still commits; one of a queue restarted elsewhere (reset,
        illegal offset) does not."""
        if offset < 0 or self.offset_store is None:
            return
        current = self.queues.get(st.mq) is st or self._releasing.get(st.mq) is st
        if current and st.pq is pq:
            self.offset_store.table.update(st.mq, offset, increase_only=False)
