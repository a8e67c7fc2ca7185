"""The lite pull consumer (upstream DefaultLitePullConsumer): the application pulls.

    consumer = LitePullConsumer("group", "127.0.0.1:9876")
    consumer.subscribe("Orders", "*")       # rebalanced with the group, or
    consumer.assign([mq1, mq2])             # exactly these queues, no rebalance
    async with consumer:                    # pulls with LITE_PULL_MESSAGE (361), upstream's code
        msgs = await consumer.poll(timeout=1.0)
        await consumer.commit()             # automatic every 5 s unless auto_commit=False
        consumer.pause([mq1]); consumer.resume([mq1])
        await consumer.seek(mq1, await consumer.offset_for_timestamp(mq1, ts_ms))

`ConsumerCore` owns the queues and their long-polling pull tasks; found messages wait in one buffer
(``pullThresholdForQueue`` / ``pullThresholdForAll`` bound it, and the buffer's own capacity: when
it is full, pulling waits) until ``poll`` hands out one pulled batch. Like upstream, a polled batch
counts as consumed: its offsets enter the offset table at once and are persisted by ``commit`` (or
the auto-commit loop). ``seek`` restarts a queue at an offset between its min and max; batches
buffered from before the seek are discarded. There is no retry topic and no send-back: what to do
with a failed message is the application's call."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.config import (
    ClientConfig,
    ConsumeFromWhere,
    LitePullConsumerConfig,
    MessageModel,
)
from rocketrio.actors.client.consumer_core import ConsumerCore, QueueState
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.offset_store import RunBlocking, run_in_thread
from rocketrio.actors.client.process_queue import ProcessQueue
from rocketrio.actors.client.queue_select import subscribe_queues
from rocketrio.actors.client.rebalance import sort_queues
from rocketrio.actors.client.remoting import ClientTransport as Transport
from rocketrio.actors.client.trace import trace_consumed
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.headers import PULL_FLAG_LITE_PULL, PullMessageRequestHeader
from rocketrio.protocol.message import MessageExt


@attrs.frozen
class PulledBatch:
    state: QueueState
    pq: ProcessQueue
    msgs: list[MessageExt]


class LitePullConsumer(ConsumerCore):
    consume_type = "CONSUME_ACTIVELY"
    commit_offset_in_pull = False
    subscribe_retry_topic = False

    def __init__(
        self,
        group: str,
        namesrv_addr: str | list[str],
        *,
        transport: Transport | None = None,
        message_model: str | MessageModel = MessageModel.CLUSTERING,
        consume_from_where: str | ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str = "",
        pull_batch_size: int = 10,
        auto_commit: bool = True,
        offset_store_path: str = "",
        config: LitePullConsumerConfig | None = None,
        client_config: ClientConfig | None = None,
        client: MQClientInstance | None = None,
        run_blocking: RunBlocking = run_in_thread,
    ) -> None:
        self.config = config or LitePullConsumerConfig(
            consumerGroup=group,
            messageModel=MessageModel(message_model),
            consumeFromWhere=ConsumeFromWhere(consume_from_where),
            consumeTimestamp=consume_timestamp,
            pullBatchSize=pull_batch_size,
            autoCommit=auto_commit,
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
        self._mode: str | None = None  # "subscribe" or "assign"
        self._assigned: set[MessageQueue] = set()
        self._pending_seek: dict[MessageQueue, int] = {}
        self._paused: set[MessageQueue] = set()
        self._send: aio.MemoryObjectSendStream[PulledBatch] | None = None
        self._recv: aio.MemoryObjectReceiveStream[PulledBatch] | None = None
        self._buffered = 0

    # -- choosing queues
    def subscribe(self, topic: str, expr: str = "*", *, sql: str | None = None) -> None:
        if self._mode == "assign":
            raise MQClientError("the consumer assigns queues; it cannot also subscribe")
        self._mode = "subscribe"
        super().subscribe(topic, expr, sql=sql)

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Own exactly these queues (no group rebalance); replaces an earlier assignment."""
        if self._mode == "subscribe":
            raise MQClientError("the consumer subscribes to topics; it cannot also assign queues")
        self._mode = "assign"
        self._assigned = set(queues)
        for mq in self._assigned:
            self.client.watch_topic(mq.topic)
        if self.started:
            self.request_rebalance()

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """Every readable queue of the topic (upstream fetchMessageQueues)."""
        route = await self.client.update_route(topic)
        if route is None:
            raise MQClientError(f"no route for topic {topic}")
        return sort_queues(subscribe_queues(topic, route))

    def _check_startable(self) -> None:
        """A lite consumer may start before it subscribes or assigns."""

    def _rebalance_topics(self) -> list[str]:
        if self._mode == "assign":
            return sorted({mq.topic for mq in self._assigned})
        return list(self.subscriptions)

    async def _wanted_queues(self, topic: str) -> list[MessageQueue] | None:
        if self._mode == "assign":
            return sort_queues(mq for mq in self._assigned if mq.topic == topic)
        return await super()._wanted_queues(topic)

    async def _compute_start_offset(self, mq: MessageQueue) -> int:
        if mq not in self._pending_seek:
            offset = await super()._compute_start_offset(mq)
            if mq not in self._pending_seek:  # a seek may arrive while that call is out
                return offset
        offset = self._pending_seek.pop(mq)
        assert self.offset_store is not None
        self.offset_store.table.update(mq, offset, increase_only=False)
        return offset

    # -- hooks of ConsumerCore
    def _start_workers(self, nursery: aio.TaskGroup) -> None:
        # room for what flow control lets in at full batches; smaller batches fill it first,
        # and then the pull loops wait in `_deliver` until `poll` makes room
        c = self.config
        capacity = -(-c.pullThresholdForAll // c.pullBatchSize) + 1
        self._send, self._recv = aio.create_memory_object_stream[PulledBatch](capacity)
        self._buffered = 0

    def _pull_header(self, st: QueueState, from_master: bool) -> PullMessageRequestHeader:
        """Upstream's lite pull header: the lite-pull flag, so it goes as LITE_PULL_MESSAGE."""
        h = super()._pull_header(st, from_master)
        return attrs.evolve(h, sysFlag=h.sysFlag | PULL_FLAG_LITE_PULL)

    async def _before_persist_on_stop(self) -> None:
        return None  # nothing runs on our side: polled batches already count as consumed

    def _persist_interval_s(self) -> float | None:
        return self.config.autoCommitIntervalMillis / 1000 if self.config.autoCommit else None

    def _flow_controlled(self, st: QueueState) -> bool:
        return (
            st.mq in self._paused
            or st.pq.msg_count > self.config.pullThresholdForQueue
            or self._buffered > self.config.pullThresholdForAll
        )

    async def _deliver(self, st: QueueState, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        assert self._send is not None
        pq.put(msgs)
        batch = PulledBatch(st, pq, msgs)
        try:
            self._send.send_nowait(batch)
        except aio.WouldBlock:
            await self._send.send(batch)  # cancelled only with the queue (pq dropped) or us
        self._buffered += len(msgs)

    # -- the application's calls
    async def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        """One pulled batch, or [] when nothing arrives within ``timeout`` seconds."""
        if self._recv is None:
            raise MQClientError("the consumer is not started")
        with aio.move_on_after(timeout):
            while True:
                batch = await self._recv.receive()
                self._buffered -= len(batch.msgs)
                if batch.pq.dropped or self.queues.get(batch.state.mq) is not batch.state:
                    continue  # from before a seek or a rebalance
                offset = batch.pq.remove(batch.msgs)
                if offset >= 0 and self.offset_store is not None:
                    self.offset_store.table.update(batch.state.mq, offset, increase_only=True)
                if self.client.config.trace:
                    trace_consumed(self.group, self.client.client_id, batch.state.mq, batch.msgs)
                return batch.msgs
        return []

    async def commit(
        self, offsets: Mapping[MessageQueue, int] | None = None, *, persist: bool = True
    ) -> None:
        """Persist the offsets of everything polled so far; with ``offsets``, first set these
        queues' offsets (owned queues only, upstream commitSync(offsetMap, persist)), and with
        ``persist=False`` only set them (the next commit or auto-commit persists them)."""
        if self.offset_store is None:
            raise MQClientError("the consumer is not started")
        for mq, offset in (offsets or {}).items():
            if mq in self.queues:
                self.offset_store.table.update(mq, offset, increase_only=False)
        if persist:
            await self.offset_store.persist(list(self.queues))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stop pulling these queues (a pull already in flight still delivers)."""
        self._paused.update(queues)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._paused.difference_update(queues)

    def is_paused(self, mq: MessageQueue) -> bool:
        return mq in self._paused

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The queue's first offset stored at or after ``timestamp_ms`` (upstream
        offsetForTimestamp, SEARCH_OFFSET_BY_TIMESTAMP), e.g. to ``seek`` to."""
        return await self.client.api.search_offset(await self._broker_addr(mq), mq, timestamp_ms)

    async def committed(self, mq: MessageQueue) -> int:
        """The offset stored for the group on the broker (or in the local file), -1 if none."""
        if self.offset_store is None:
            raise MQClientError("the consumer is not started")
        return await self.offset_store.fetch(mq)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue this queue at ``offset`` (between its min and max offset)."""
        owned = mq in self.queues or (self._mode == "assign" and mq in self._assigned)
        if not owned:
            raise MQClientError(f"queue {mq} is not assigned to this consumer")
        lo, hi = await self._offset_range(mq)
        if not lo <= offset <= hi:
            raise MQClientError(f"seek offset {offset} of {mq} is outside [{lo}, {hi}]")
        st = self.queues.pop(mq, None)
        if st is None:
            self._pending_seek[mq] = offset
            return
        st.pq.dropped = True
        st.cancel.cancel()
        new = QueueState(mq=mq, sub=st.sub, next_offset=offset)
        self.queues[mq] = new
        assert self.offset_store is not None
        self.offset_store.table.update(mq, offset, increase_only=False)
        self.nursery.start_soon(self._pull_loop, new)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, (await self._offset_range(mq))[0])

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, (await self._offset_range(mq))[1])

    async def _broker_addr(self, mq: MessageQueue) -> str:
        addr = await self.client.find_broker_addr_refreshing(
            self.client.broker_name_of(mq), mq.topic
        )
        if addr is None:
            raise MQClientError(f"no address for broker {mq.brokerName}")
        return addr

    async def _offset_range(self, mq: MessageQueue) -> tuple[int, int]:
        addr = await self._broker_addr(mq)
        lo = await self.client.api.get_min_offset(addr, mq)
        hi = await self.client.api.get_max_offset(addr, mq)
        return lo, hi
