"""The admin offset tools on a static topic's logic queues (issue 30 item 2; upstream's
AdminBrokerProcessor works on physical queues there, rocketrio keeps logic offsets on the
leader: docs/static-topics.md).

Each broker answers for the logic queues it leads (queue ids are logic ids, offsets logic
offsets, the queues named MessageQueue(topic, ``__syslo__global__``, id) as the consumers name
them); a group's offset is found by Double-Check-Read (`StaticTopicOffsets`), so a remapping
changes nothing here:

- INVOKE_BROKER_TO_RESET_OFFSET (resetOffsetByTime, skipAccumulatedMessage): per logic queue
  the first logic offset stored at or after the time (SEARCH across generations), or the logic
  max offset (timestamp -1); a non-forced reset only moves back (`reset_target`). The offsets
  are committed here and the online members told (RESET_CONSUMER_CLIENT_OFFSET with the logic
  queues), so running consumers move as on ordinary topics. Unlike an ordinary topic, the
  offsets are committed even when no member is online (the admin's fallback, UPDATE of each
  physical queue, has no meaning on logic queues). A broker leading none answers an empty set.
- GET_CONSUME_STATS (consumerProgress): the plain answer with the static topics' physical
  queues replaced by the logic queues led here: brokerOffset the logic max, consumerOffset the
  group's logic offset. The lag (broker - consumer) of a consumer still in an older generation
  includes the hole a remapping leaves before the next generation (at most 10,000 per
  remapping), as the logic offsets themselves do.
- GET_BROKER_CONSUME_STATS (the console's group view, brokerConsumeStats): the same
  replacement in every group's per-topic stats, totals recomputed.
- CLONE_GROUP_OFFSET: the plain copy (every broker keeps the logic values it stored while it
  led), then on the leader the source group's Double-Check-Read offset of each logic queue, so
  the destination reads what the source reads.

- QUERY_CONSUME_TIME_SPAN: per logic queue led here the store times of its first and last
  message and of the last consumed one, read through the POP path's reader (logic_store.py:
  older generations on their brokers). A time that falls in a remapping's hole (an empty new
  generation, a group at the start of the next one) reads as -1, like an empty queue.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from rocketrio.actors.broker.admin.offset_reset import reset_target
from rocketrio.actors.broker.dispatch.answers import refused
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.broker.static_topic.logic_store import LogicQueueStore
from rocketrio.actors.broker.static_topic.offsets import StaticTopicOffsets
from rocketrio.actors.broker.static_topic.pop import led_queues
from rocketrio.actors.broker.store.queue_reader import QueueReadUnavailable
from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import (
    ConsumeStats,
    ConsumeStatsList,
    MessageQueue,
    OffsetWrapper,
    ResetOffsetBody,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    CloneGroupOffsetRequestHeader,
    GetConsumeStatsRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketrio.protocol.message import decode_stored
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.running_info import (
    QueryConsumeTimeSpanBody,
    QueryConsumeTimeSpanRequestHeader,
    QueueTimeSpan,
)
from rocketrio.protocol.serde import from_ext, from_json
from rocketrio.protocol.static_topic import METADATA_SCOPE_GLOBAL, mock_broker_name

RC = ResponseCode
SKIP_ACCUMULATED = -1
# commits the offsets, persists, tells the members (admin/offset_reset.py's apply)
ApplyReset = Callable[
    [ResetOffsetRequestHeader, ResetOffsetBody, str, bool],
    Awaitable[ResetOffsetBody | Refusal],
]


def logic_mq(topic: str, gid: int) -> MessageQueue:
    return MessageQueue(topic, mock_broker_name(METADATA_SCOPE_GLOBAL), gid)


class StaticOffsetTools:
    """The offset tools for logic queues (module docstring)."""

    def __init__(
        self,
        *,
        mappings: TopicQueueMappingManager,
        offsets: ConsumerOffsetManager,
        static_offsets: StaticTopicOffsets,
        apply_reset: ApplyReset,
        reader: LogicQueueStore,
        now_ms: Callable[[], int],
    ) -> None:
        self.reader = reader
        self.now_ms = now_ms
        self.mappings = mappings
        self.offsets = offsets
        self.static = static_offsets
        self.apply_reset = apply_reset

    async def group_offset(self, group: str, topic: str, gid: int) -> int | Refusal:
        """The group's logic offset of ``gid`` (-1: none anywhere)."""
        refusal = await self.static.prime(group, topic, gid)
        if refusal is not None:
            return refusal
        return self.offsets.query(group, topic, gid)

    async def _found(self, topic: str, gid: int, timestamp: int) -> int | Refusal:
        if timestamp == SKIP_ACCUMULATED or timestamp < 0:
            return await self.static.logic_max(topic, gid)
        return await self.static.logic_search(topic, gid, timestamp)

    async def reset_targets(self, h: ResetOffsetRequestHeader) -> ResetOffsetBody | Refusal:
        ids = led_queues(self.mappings, h.topic)
        if h.queueId >= 0:
            ids = [g for g in ids if g == h.queueId]
        body = ResetOffsetBody()
        for gid in ids:
            if h.queueId >= 0 and h.offset is not None and h.offset != -1:
                body.offsetTable[logic_mq(h.topic, gid)] = h.offset
                continue
            committed = await self.group_offset(h.group, h.topic, gid)
            found = await self._found(h.topic, gid, h.timestamp)
            for v in (committed, found):
                if isinstance(v, Refusal):
                    return v
            assert isinstance(committed, int) and isinstance(found, int)
            if committed == -1:
                if h.isForce:
                    body.offsetTable[logic_mq(h.topic, gid)] = max(found, 0)
                continue
            body.offsetTable[logic_mq(h.topic, gid)] = reset_target(found, committed, h.isForce)
        return body

    async def consume_stats(self, group: str, topic: str) -> dict[MessageQueue, OffsetWrapper]:
        out: dict[MessageQueue, OffsetWrapper] = {}
        for gid in led_queues(self.mappings, topic):
            hi = await self.static.logic_max(topic, gid)
            committed = await self.group_offset(group, topic, gid)
            if isinstance(hi, Refusal) or isinstance(committed, Refusal):
                continue  # another broker cannot be asked now: the queue is left out
            pulled = self.offsets.query_pull(group, topic, gid)
            out[logic_mq(topic, gid)] = OffsetWrapper(
                brokerOffset=max(hi, 0),
                consumerOffset=max(committed, 0),
                pullOffset=max(pulled, 0),
            )
        return out

    async def clone(self, h: CloneGroupOffsetRequestHeader, topic: str) -> None:
        for gid in led_queues(self.mappings, topic):
            src = await self.group_offset(h.srcGroup, topic, gid)
            if isinstance(src, int) and src >= 0:
                self.offsets.commit(h.destGroup, topic, gid, src)

    async def _store_time(self, topic: str, gid: int, offset: int) -> int:
        """The store time of the message at logic ``offset`` (-1: none there)."""
        if offset < 0:
            return -1
        r = await self.reader.read_messages(topic, gid, offset, 1, 1 << 20)
        if not r.buffers:
            return -1
        msg, _ = decode_stored(r.buffers[0])
        return msg.store_timestamp if msg.queue_offset == offset else -1

    async def time_span(self, h: QueryConsumeTimeSpanRequestHeader) -> QueryConsumeTimeSpanBody:
        body = QueryConsumeTimeSpanBody()
        for gid in led_queues(self.mappings, h.topic):
            lo = await self.static.logic_min(h.topic, gid)
            hi = await self.static.logic_max(h.topic, gid)
            committed = await self.group_offset(h.group, h.topic, gid)
            if isinstance(lo, Refusal) or isinstance(hi, Refusal):
                continue
            if isinstance(committed, Refusal):
                continue
            try:
                min_time = await self._store_time(h.topic, gid, lo)
                max_time = await self._store_time(h.topic, gid, hi - 1)
                consume_time = (
                    await self._store_time(h.topic, gid, committed - 1)
                    if committed > 0
                    else min_time
                )
                delay = 0
                if 0 <= committed < hi:
                    at = await self._store_time(h.topic, gid, committed)
                    delay = self.now_ms() - at if at >= 0 else 0
            except QueueReadUnavailable:
                continue  # an older generation's broker cannot be asked now
            body.consumeTimeSpanSet.append(
                QueueTimeSpan(
                    messageQueue=logic_mq(h.topic, gid),
                    minTimeStamp=min_time,
                    maxTimeStamp=max_time,
                    consumeTimeStamp=consume_time,
                    delayTime=delay,
                )
            )
        return body

    def handlers(self, plain: Mapping[int, Handler]) -> dict[int, Handler]:
        code = RequestCode
        out: dict[int, Handler] = {}
        if code.INVOKE_BROKER_TO_RESET_OFFSET in plain:
            out[code.INVOKE_BROKER_TO_RESET_OFFSET] = self._reset(
                plain[code.INVOKE_BROKER_TO_RESET_OFFSET]
            )
        if code.GET_CONSUME_STATS in plain:
            out[code.GET_CONSUME_STATS] = self._stats(plain[code.GET_CONSUME_STATS])
        if code.GET_BROKER_CONSUME_STATS in plain:
            out[code.GET_BROKER_CONSUME_STATS] = self._broker_stats(
                plain[code.GET_BROKER_CONSUME_STATS]
            )
        if code.QUERY_CONSUME_TIME_SPAN in plain:
            out[code.QUERY_CONSUME_TIME_SPAN] = self._span(plain[code.QUERY_CONSUME_TIME_SPAN])
        if code.CLONE_GROUP_OFFSET in plain:
            out[code.CLONE_GROUP_OFFSET] = self._clone(plain[code.CLONE_GROUP_OFFSET])
        return out

    def _reset(self, plain: Handler) -> Handler:
        async def handle(ctx: RequestContext) -> RemotingCommand | None:
            cmd = ctx.cmd
            topic = cmd.ext_fields.get("topic")
            if topic is None or not self.mappings.is_static(topic):
                return await plain(ctx)
            h = from_ext(ResetOffsetRequestHeader, cmd.ext_fields)
            body = await self.reset_targets(h)
            if not isinstance(body, Refusal):
                body = await self.apply_reset(h, body, cmd.language, True)
            if isinstance(body, Refusal):
                return refused(cmd, body)
            return cmd.make_response(RC.SUCCESS, body=fastjson.encode(body))

        return handle

    def _stats(self, plain: Handler) -> Handler:
        async def handle(ctx: RequestContext) -> RemotingCommand | None:
            h = from_ext(GetConsumeStatsRequestHeader, ctx.cmd.ext_fields)
            asked = h.topics() or ([h.topic] if h.topic else None)
            if asked is None:
                asked = sorted(self.offsets.topics_of_group(h.consumerGroup))
            static = [t for t in asked if self.mappings.is_static(t)]
            resp = await plain(ctx)
            if not static or resp is None or resp.code != RC.SUCCESS:
                return resp
            stats = from_json(ConsumeStats, resp.body)
            table = {mq: w for mq, w in stats.offsetTable.items() if mq.topic not in static}
            for topic in static:
                table.update(await self.consume_stats(h.consumerGroup, topic))
            stats.offsetTable = table
            return ctx.cmd.make_response(RC.SUCCESS, body=fastjson.encode(stats))

        return handle

    async def _to_logic(self, group: str, stats: ConsumeStats) -> None:
        """``stats`` with its static topics' physical queues replaced by logic ones."""
        static = {mq.topic for mq in stats.offsetTable} & set(self.mappings.table)
        if not static:
            return
        table = {mq: w for mq, w in stats.offsetTable.items() if mq.topic not in static}
        for topic in sorted(static):
            table.update(await self.consume_stats(group, topic))
        stats.offsetTable = table

    def _broker_stats(self, plain: Handler) -> Handler:
        async def handle(ctx: RequestContext) -> RemotingCommand | None:
            resp = await plain(ctx)
            if resp is None or resp.code != RC.SUCCESS or not self.mappings.table:
                return resp
            body = from_json(ConsumeStatsList, resp.body)
            total = 0
            for per_group in body.consumeStatsList:
                for group, per_topic in per_group.items():
                    for stats in per_topic:
                        await self._to_logic(group, stats)
                        total += stats.total_diff()
            body.totalDiff = total
            return ctx.cmd.make_response(RC.SUCCESS, body=fastjson.encode(body))

        return handle

    def _span(self, plain: Handler) -> Handler:
        async def handle(ctx: RequestContext) -> RemotingCommand | None:
            topic = ctx.cmd.ext_fields.get("topic")
            if topic is None or not self.mappings.is_static(topic):
                return await plain(ctx)
            h = from_ext(QueryConsumeTimeSpanRequestHeader, ctx.cmd.ext_fields)
            body = await self.time_span(h)
            return ctx.cmd.make_response(RC.SUCCESS, body=fastjson.encode(body))

        return handle

    def _clone(self, plain: Handler) -> Handler:
        async def handle(ctx: RequestContext) -> RemotingCommand | None:
            h = from_ext(CloneGroupOffsetRequestHeader, ctx.cmd.ext_fields)
            resp = await plain(ctx)
            if resp is None or resp.code != RC.SUCCESS:
                return resp
            topics = [h.topic] if h.topic else sorted(self.offsets.topics_of_group(h.srcGroup))
            for topic in topics:
                if self.mappings.is_static(topic):
                    await self.clone(h, topic)
            return resp

        return handle
