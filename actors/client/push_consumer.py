"""The push consumer (upstream DefaultMQPushConsumer, concurrent consumption).

    consumer = PushConsumer("group", "127.0.0.1:9876")
    consumer.subscribe("Orders", "tagA || tagB")
    consumer.register_listener(fn)          # fn(msgs) -> ConsumeStatus, sync or async
    async with consumer: ...

Clustering: every ``rebalanceInterval`` and whenever the broker pushes
NOTIFY_CONSUMER_IDS_CHANGED, each subscribed topic (plus the group's retry topic
%RETRY%<group>) is split among the group's members with `allocate` (AllocateMessageQueueAveragely).
A queue taken away stops pulling and its offset is persisted first; a new queue starts at the
group's stored offset or per ``consumeFromWhere``. Broadcasting: every member takes every
queue and keeps offsets in a local file.

Per queue one task long-polls PULL_MESSAGE (SUSPEND | SUBSCRIPTION | COMMIT_OFFSET) and puts
what it gets into the queue's `ProcessQueue` and onto the consume channel; ``consumeThreadMax``
worker tasks call the listener with up to ``consumeMessageBatchMaxSize`` messages. The offset
committed is always the smallest one still being consumed (`ProcessQueue.remove`), persisted
every ``persistConsumerOffsetInterval``, when a queue is revoked, and on shutdown.
RECONSUME_LATER (or an exception in the listener) sends each message back with
CONSUMER_SEND_MSG_BACK so it returns through the retry topic (the broker moves it to
%DLQ%<group> after ``maxReconsumeTimes``); if the broker cannot be reached the message is
consumed again locally after 5 s.

A synchronous listener runs on the Trio thread, so it must not block; blocking code belongs in
an async listener that uses ``trio.to_thread``, or in `BlockingPushConsumer`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import attrs
import structlog
import trio
from rocketrio.actors import events
from rocketrio.actors.client.api import PullResult, PullStatus
from rocketrio.actors.client.config import (
    RETRY_GROUP_TOPIC_PREFIX,
    ClientConfig,
    ConsumeFromWhere,
    MessageModel,
    PushConsumerConfig,
    retry_topic,
)
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import ConsumeStatus
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.offset_store import (
    LocalFileOffsetStore,
    OffsetStore,
    RemoteBrokerOffsetStore,
    default_offsets_path,
)
from rocketrio.actors.client.process_queue import ProcessQueue
from rocketrio.actors.client.queue_select import subscribe_queues
from rocketrio.actors.client.rebalance import (
    StartKind,
    allocate,
    diff_assignment,
    sort_queues,
    start_offset,
)
from rocketrio.actors.client.subscription import build_subscription, filter_by_tags
from rocketrio.actors.logs import wallclock_ms
from rocketrio.actors.remoting import RemotingError
from rocketrio.actors.transport import Transport
from rocketrio.protocol.bodies import ConsumerData, MessageQueue, SubscriptionData
from rocketrio.protocol.headers import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    PullMessageRequestHeader,
)
from rocketrio.protocol.message import (
    ORIGIN_MESSAGE_ID,
    RETRY_TOPIC,
    MessageDecodeError,
    MessageExt,
)
from rocketrio.protocol.serde import HeaderError

__all__ = ["ConsumeStatus", "MessageListener", "PushConsumer"]

log = structlog.get_logger("push_consumer")

MessageListener = Callable[[list[MessageExt]], "ConsumeStatus | Awaitable[ConsumeStatus]"]

PULL_DELAY_WHEN_EXCEPTION_S = 3.0  # upstream PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION
PULL_DELAY_WHEN_FLOW_CONTROL_S = 0.05  # upstream PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
CONSUME_LATER_DELAY_S = 5.0  # upstream submitConsumeRequestLater
SHUTDOWN_CONSUME_WAIT_S = 5.0  # running listener calls get this long to finish on shutdown
PULL_ERRORS = (RemotingError, MQClientError, HeaderError, MessageDecodeError)


def parse_consume_timestamp(text: str) -> int:
    """``yyyyMMddHHmmss`` (local time) -> ms since the epoch."""
    try:
        return int(datetime.strptime(text, "%Y%m%d%H%M%S").timestamp() * 1000)
    except ValueError:
        raise MQClientError(f"consumeTimestamp {text!r} is not yyyyMMddHHmmss") from None


def default_consume_timestamp(now_ms: int) -> str:
    """Half an hour before ``now_ms``, as upstream's default consumeTimestamp."""
    return datetime.fromtimestamp((now_ms - 30 * 60 * 1000) / 1000).strftime("%Y%m%d%H%M%S")


def reset_retry_topic(msgs: list[MessageExt], group_retry_topic: str) -> None:
    """Messages pulled from the retry topic show their original topic (upstream
    resetRetryAndNamespace)."""
    for m in msgs:
        original = m.properties.get(RETRY_TOPIC)
        if original and m.topic == group_retry_topic:
            m.topic = original


@attrs.define(eq=False)
class QueueState:
    """One assigned queue: its pull position and the messages being consumed."""

    mq: MessageQueue
    sub: SubscriptionData
    next_offset: int
    pq: ProcessQueue = attrs.field(factory=ProcessQueue)
    cancel: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    broker_id: int = 0  # the replica the broker suggested pulling from


@attrs.frozen
class ConsumeRequest:
    state: QueueState
    pq: ProcessQueue
    msgs: list[MessageExt]


class PushConsumer:
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
        self.group = self.config.consumerGroup
        self._own_client = client is None
        self.client = client or MQClientInstance(
            namesrv_addr, transport=transport, config=client_config
        )
        self.subscriptions: dict[str, SubscriptionData] = {}
        self._listener: MessageListener | None = None
        self.queues: dict[MessageQueue, QueueState] = {}
        self.offset_store: OffsetStore | None = None
        self._rebalance_event = trio.Event()
        self._consume_send: trio.MemorySendChannel[ConsumeRequest] | None = None
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: Any = None
        self._stopping = False
        self._busy = 0
        self._idle = trio.Event()
        self._consume_from_ms = 0

    @property
    def clustering(self) -> bool:
        return self.config.messageModel is MessageModel.CLUSTERING

    # -- configuration
    def subscribe(self, topic: str, expr: str = "*") -> None:
        self.subscriptions[topic] = build_subscription(topic, expr, wallclock_ms())
        if self._nursery is not None:
            self.client.watch_topic(topic)
            self.request_rebalance()

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)
        if self._nursery is not None:
            self.request_rebalance()

    def register_listener(self, fn: MessageListener) -> None:
        self._listener = fn

    # -- ConsumerInner (called by the client core)
    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            groupName=self.group,
            consumeType="CONSUME_PASSIVELY",
            messageModel=self.config.messageModel.value,
            consumeFromWhere=self.config.consumeFromWhere.value,
            subscriptionDataSet=list(self.subscriptions.values()),
        )

    def subscribed_topics(self) -> set[str]:
        return set(self.subscriptions)

    def request_rebalance(self) -> None:
        self._rebalance_event.set()

    def assigned_queues(self) -> set[MessageQueue]:
        return set(self.queues)

    # -- lifecycle
    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown()

    async def start(self) -> None:
        """Start consuming (call `shutdown` from the same task); prefer ``async with``."""
        if self._listener is None:
            raise MQClientError("register a message listener before starting the consumer")
        if not self.subscriptions:
            raise MQClientError("subscribe to at least one topic before starting the consumer")
        if self.clustering:
            rt = retry_topic(self.group)
            self.subscriptions.setdefault(rt, build_subscription(rt, "*", wallclock_ms()))
        stamp = self.config.consumeTimestamp or default_consume_timestamp(wallclock_ms())
        self._consume_from_ms = parse_consume_timestamp(stamp)
        if self._own_client:
            await self.client.__aenter__()
        try:
            await self._start_services()
        except BaseException:
            await self._stop_services()
            raise

    async def _start_services(self) -> None:
        if self.clustering:
            self.offset_store = RemoteBrokerOffsetStore(self.client, self.group)
        else:
            path = self.config.offsetStorePath or default_offsets_path(
                self.client.client_id, self.group
            )
            self.offset_store = LocalFileOffsetStore(path)
        await self.offset_store.load()
        self._nursery_cm = trio.open_nursery()
        self._nursery = nursery = await self._nursery_cm.__aenter__()
        send, recv = trio.open_memory_channel[ConsumeRequest](math.inf)
        self._consume_send = send
        for _ in range(self.config.consumeThreadMax):
            nursery.start_soon(self._consume_worker, recv.clone())
        recv.close()
        nursery.start_soon(self._rebalance_loop)
        nursery.start_soon(self._persist_loop)
        await self.client.register_consumer(self)
        self.request_rebalance()

    async def shutdown(self) -> None:
        """Stop pulling, let running listener calls finish, persist offsets, leave the group."""
        await self._stop_services()

    async def _stop_services(self) -> None:
        try:
            if self._nursery is not None:
                self._stopping = True
                for st in self.queues.values():
                    st.cancel.cancel()
                with trio.move_on_after(SHUTDOWN_CONSUME_WAIT_S):
                    while self._busy:
                        await self._idle.wait()
                if self.offset_store is not None:
                    await self.offset_store.persist(list(self.queues))
                await self.client.unregister_consumer(self.group)
                self._nursery.cancel_scope.cancel()
        finally:
            if self._nursery_cm is not None:
                cm, self._nursery_cm, self._nursery = self._nursery_cm, None, None
                await cm.__aexit__(None, None, None)
            self.queues.clear()
            if self._own_client:
                await self.client.__aexit__(None, None, None)

    # -- rebalance
    async def _rebalance_loop(self) -> None:
        interval = self.config.rebalanceInterval / 1000
        while True:
            with trio.move_on_after(interval):
                await self._rebalance_event.wait()
            self._rebalance_event = trio.Event()
            for topic in list(self.subscriptions):
                try:
                    await self._rebalance_topic(topic)
                except (RemotingError, MQClientError, HeaderError) as e:
                    log.warning("rebalance_failed", group=self.group, topic=topic, error=str(e))

    async def _topic_queues(self, topic: str) -> set[MessageQueue] | None:
        route = self.client.routes.get(topic)
        if route is None:
            route = await self.client.update_route(topic)
        if route is None:
            return None
        return subscribe_queues(topic, route)

    async def _consumer_ids(self, topic: str) -> list[str]:
        route = self.client.routes.get(topic)
        if route is None:
            return []
        for bd in route.brokerDatas:
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            try:
                return await self.client.api.get_consumer_id_list(addr, self.group)
            except (RemotingError, MQClientError, HeaderError) as e:
                log.warning("get_consumer_ids_failed", group=self.group, broker=addr, error=str(e))
        return []

    async def _rebalance_topic(self, topic: str) -> None:
        mq_all = await self._topic_queues(topic)
        if mq_all is None:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("rebalance_no_route", group=self.group, topic=topic)
            return
        if self.clustering:
            cids = await self._consumer_ids(topic)
            if not cids:
                return
            wanted = allocate(self.client.client_id, mq_all, cids)
        else:
            wanted = sort_queues(mq_all)
        current = [mq for mq in self.queues if mq.topic == topic]
        diff = diff_assignment(current, wanted)
        for mq in sort_queues(diff.removed):
            await self._remove_queue(mq)
        added = [mq for mq in diff.added if await self._add_queue(mq)]
        if diff.removed or added:
            log.info(
                events.REBALANCE,
                group=self.group,
                client_id=self.client.client_id,
                topic=topic,
                queues=[f"{mq.brokerName}:{mq.queueId}" for mq in sort_queues(self._owned(topic))],
            )

    def _owned(self, topic: str) -> list[MessageQueue]:
        return [mq for mq in self.queues if mq.topic == topic]

    async def _remove_queue(self, mq: MessageQueue) -> None:
        st = self.queues.pop(mq)
        st.pq.dropped = True
        st.cancel.cancel()
        assert self.offset_store is not None
        await self.offset_store.persist([mq])
        self.offset_store.forget(mq)

    async def _add_queue(self, mq: MessageQueue) -> bool:
        offset = await self._compute_start_offset(mq)
        if offset < 0:
            return False
        st = QueueState(mq=mq, sub=self.subscriptions[mq.topic], next_offset=offset)
        self.queues[mq] = st
        assert self._nursery is not None
        self._nursery.start_soon(self._pull_loop, st)
        return True

    async def _compute_start_offset(self, mq: MessageQueue) -> int:
        """upstream computePullFromWhere; -1 means try again at the next rebalance."""
        assert self.offset_store is not None
        stored = await self.offset_store.read_from_store(mq)
        decision = start_offset(self.config.consumeFromWhere, stored, mq.topic)
        try:
            if decision.kind is StartKind.OFFSET:
                return decision.offset
            if decision.kind is StartKind.RETRY_LATER:
                return -1
            addr = await self.client.find_master_addr_refreshing(mq.brokerName, mq.topic)
            addr = addr or self.client.find_broker_addr(mq.brokerName)
            if addr is None:
                return -1
            if decision.kind is StartKind.MAX_OFFSET:
                return await self.client.api.get_max_offset(addr, mq)
            return await self.client.api.search_offset(addr, mq, self._consume_from_ms)
        except (RemotingError, MQClientError, HeaderError) as e:
            log.warning("start_offset_failed", group=self.group, mq=str(mq), error=str(e))
            return -1

    # -- pulling
    def _pull_header(self, st: QueueState) -> PullMessageRequestHeader:
        assert self.offset_store is not None
        commit = self.offset_store.table.read(st.mq) if self.clustering else -1
        flag = PULL_FLAG_SUSPEND | PULL_FLAG_SUBSCRIPTION
        if commit > 0:
            flag |= PULL_FLAG_COMMIT_OFFSET
        return PullMessageRequestHeader(
            consumerGroup=self.group,
            topic=st.mq.topic,
            queueId=st.mq.queueId,
            queueOffset=st.next_offset,
            maxMsgNums=self.config.pullBatchSize,
            sysFlag=flag,
            commitOffset=max(commit, 0),
            suspendTimeoutMillis=self.config.brokerSuspendMaxTimeMillis,
            subVersion=st.sub.subVersion,
            subscription=st.sub.subString,
            expressionType=st.sub.expressionType,
        )

    def _flow_controlled(self, pq: ProcessQueue) -> bool:
        c = self.config
        return (
            pq.msg_count > c.pullThresholdForQueue
            or pq.msg_size > c.pullThresholdSizeForQueue * 1024 * 1024
            or pq.max_span() > c.consumeConcurrentlyMaxSpan
        )

    async def _pull_loop(self, st: QueueState) -> None:
        timeout_s = self.config.consumerTimeoutMillisWhenSuspend / 1000
        with st.cancel:
            while not st.pq.dropped:
                if self._flow_controlled(st.pq):
                    await trio.sleep(PULL_DELAY_WHEN_FLOW_CONTROL_S)
                    continue
                addr = self.client.find_broker_addr(st.mq.brokerName, st.broker_id)
                try:
                    if addr is None:
                        await self.client.update_route(st.mq.topic)
                        raise MQClientError(f"no address for broker {st.mq.brokerName}")
                    result = await self.client.api.pull(addr, self._pull_header(st), timeout_s)
                    await self._on_pull_result(st, result)
                except PULL_ERRORS as e:
                    log.warning("pull_failed", group=self.group, mq=str(st.mq), error=str(e))
                    await trio.sleep(PULL_DELAY_WHEN_EXCEPTION_S)
                    continue
                if self.config.pullInterval:
                    await trio.sleep(self.config.pullInterval / 1000)

    async def _on_pull_result(self, st: QueueState, res: PullResult) -> None:
        st.broker_id = res.suggest_which_broker_id
        if res.status is PullStatus.OFFSET_ILLEGAL:
            await self._offset_illegal(st, res.next_begin_offset)
            return
        st.next_offset = res.next_begin_offset
        msgs: list[MessageExt] = []
        if res.status is PullStatus.FOUND:
            msgs = res.messages()
            reset_retry_topic(msgs, retry_topic(self.group))
            msgs = filter_by_tags(msgs, st.sub)
        if not msgs:
            self._correct_tags_offset(st)
            return
        pq = st.pq
        pq.put(msgs)
        assert self._consume_send is not None
        n = self.config.consumeMessageBatchMaxSize
        for i in range(0, len(msgs), n):
            self._consume_send.send_nowait(ConsumeRequest(st, pq, msgs[i : i + n]))

    def _correct_tags_offset(self, st: QueueState) -> None:
        """Nothing in flight: the pull position itself may be committed (upstream
        correctTagsOffset), so filtered-out messages are not pulled again after a restart."""
        if st.pq.msg_count == 0 and self.offset_store is not None:
            self.offset_store.table.update(st.mq, st.next_offset, increase_only=True)

    async def _offset_illegal(self, st: QueueState, next_offset: int) -> None:
        log.warning(
            "pull_offset_illegal",
            group=self.group,
            mq=str(st.mq),
            offset=st.next_offset,
            next_offset=next_offset,
        )
        st.pq.dropped = True  # results of messages in flight from before are ignored
        st.pq = ProcessQueue()
        st.next_offset = next_offset
        assert self.offset_store is not None
        self.offset_store.table.update(st.mq, next_offset, increase_only=False)
        await self.offset_store.persist([st.mq])

    # -- consuming
    async def _consume_worker(self, recv: trio.MemoryReceiveChannel[ConsumeRequest]) -> None:
        async with recv:
            async for req in recv:
                if self._stopping or req.pq.dropped:
                    continue
                self._busy += 1
                try:
                    await self._consume(req)
                finally:
                    self._busy -= 1
                    if self._busy == 0:
                        self._idle.set()
                        self._idle = trio.Event()

    async def _call_listener(self, msgs: list[MessageExt]) -> ConsumeStatus:
        assert self._listener is not None
        try:
            status = self._listener(msgs)
            if inspect.isawaitable(status):
                status = await status
        except Exception as e:
            log.warning("consume_failed", group=self.group, error=f"{type(e).__name__}: {e}")
            return ConsumeStatus.RECONSUME_LATER
        if status is ConsumeStatus.CONSUME_SUCCESS:
            return status
        if status is not ConsumeStatus.RECONSUME_LATER:
            log.warning("consume_bad_status", group=self.group, status=repr(status))
        return ConsumeStatus.RECONSUME_LATER

    async def _consume(self, req: ConsumeRequest) -> None:
        status = await self._call_listener(req.msgs)
        if req.pq.dropped:
            return  # the queue went to another member; it consumes from the committed offset
        done = req.msgs
        if status is ConsumeStatus.RECONSUME_LATER:
            if self.clustering:
                failed = [m for m in req.msgs if not await self._send_back(req.state.mq, m)]
                if failed:
                    done = [m for m in req.msgs if m not in failed]
                    assert self._nursery is not None
                    self._nursery.start_soon(self._consume_later, req.state, req.pq, failed)
            else:
                log.warning("broadcast_consume_dropped", group=self.group, count=len(req.msgs))
        offset = req.pq.remove(done)
        if offset >= 0 and not req.pq.dropped and self.offset_store is not None:
            self.offset_store.table.update(req.state.mq, offset, increase_only=True)

    async def _send_back(self, mq: MessageQueue, msg: MessageExt) -> bool:
        addr = self.client.find_master_addr(mq.brokerName) or self.client.find_broker_addr(
            mq.brokerName
        )
        if addr is None:
            return False
        origin = msg.properties.get(ORIGIN_MESSAGE_ID) or msg.msg_id
        try:
            await self.client.api.send_message_back(
                addr, msg, self.group, 0, self.config.maxReconsumeTimes, origin_msg_id=origin
            )
        except (RemotingError, MQClientError) as e:
            log.warning("send_back_failed", group=self.group, broker=addr, error=str(e))
            return False
        return True

    async def _consume_later(
        self, st: QueueState, pq: ProcessQueue, msgs: list[MessageExt]
    ) -> None:
        await trio.sleep(CONSUME_LATER_DELAY_S)
        for m in msgs:
            m.reconsume_times += 1
        if not pq.dropped and self._consume_send is not None:
            self._consume_send.send_nowait(ConsumeRequest(st, pq, msgs))

    # -- offsets
    async def _persist_loop(self) -> None:
        interval = self.client.config.persistConsumerOffsetInterval / 1000
        while True:
            await trio.sleep(interval)
            if self.offset_store is not None:
                await self.offset_store.persist(list(self.queues))
