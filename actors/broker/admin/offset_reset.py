"""Moving a group's consumer offsets on a live broker (upstream Broker2Client.resetOffset,
AdminBrokerProcessor.resetOffset / cloneGroupOffset).

INVOKE_BROKER_TO_RESET_OFFSET (222): for each queue of the topic (``writeQueueNums``, or the
one ``queueId`` asked for) the target offset is computed by `reset_target`: the first message
stored at or after ``timestamp`` (-1: the queue's max offset, "skip the accumulated
messages"); a non-forced reset keeps the committed offset when the target is not behind it.
A ``queueId`` with an ``offset`` moves that queue to that offset, if it lies in the queue.
A queue the group never committed on goes to the found offset when forced and is left alone
otherwise (upstream refuses the whole reset instead: a member that has consumed nothing yet
has committed nothing, and skipping its backlog is exactly what an operator then wants).
When the group has an online member, the targets are committed, consumerOffset.json is written
(the answer means "on disk"), and every member hears RESET_CONSUMER_CLIENT_OFFSET (220,
oneway, ResetOffsetBody; ResetOffsetBodyForC when the request came from a C++ client, as
upstream) so it drops what it holds and pulls from there; the answer carries the same
ResetOffsetBody. Without an online member nothing changes and the answer is
CONSUMER_NOT_ONLINE with upstream's remark: the admin then sets the offsets itself with
UPDATE_CONSUMER_OFFSET (upstream resetOffsetByTimestampOld).

CLONE_GROUP_OFFSET (314): destGroup's offsets on the topic (or on every topic srcGroup
committed on) become a copy of srcGroup's; without ``offline``, a topic an online srcGroup does
not subscribe to is skipped, as upstream. Persisted before the answer.

Collaborators: the broker's name and role, the topic, group and offset tables, the consumer
manager (members and their connections), the store view (offset search) and a `ResetPusher`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable
from typing import Protocol

import structlog

from rocketrio.actors.broker.clients.client_manager import ConsumerManager
from rocketrio.actors.broker.dispatch.outcomes import DONE, Done, Refusal
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.tables import OffsetTable, TopicTable
from rocketrio.actors.kernel.remoting import Connection, RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import MessageQueue, ResetOffsetBody, ResetOffsetBodyForC
from rocketrio.protocol.codes import RPC_ONEWAY, RequestCode, ResponseCode
from rocketrio.protocol.headers import CloneGroupOffsetRequestHeader, ResetOffsetRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext

RC = ResponseCode
SKIP_ACCUMULATED = -1  # the timestamp that means "each queue's max offset"
CPP = "CPP"

# ---------------------------------------------------------------------------- the policy


def reset_target(found_offset: int, committed: int, force: bool) -> int:
    """Where a queue's offset goes: the offset found for the timestamp (never below 0); a
    non-forced reset only moves back, so it keeps ``committed`` unless the found offset is
    behind it (upstream Broker2Client.resetOffset)."""
    target = max(found_offset, 0)
    if force or target < committed:
        return target
    return committed


def explicit_offset_refusal(offset: int, min_offset: int, max_offset: int) -> Refusal | None:
    """A queue moved to an explicit ``offset`` must land inside the queue: not before its
    first message, not after one past its end (upstream resetOffsetInner's check)."""
    if (min_offset >= 0 and offset < min_offset) or offset > max_offset + 1:
        return Refusal(
            RC.SYSTEM_ERROR,
            f"Target offset {offset} not in consume queue range [{min_offset}-{max_offset}]",
        )
    return None


# ---------------------------------------------------------------------------- the processor


class ResetPusher(Protocol):
    """RESET_CONSUMER_CLIENT_OFFSET (oneway) to the given member connections."""

    def reset_offset(
        self,
        h: ResetOffsetRequestHeader,
        body: ResetOffsetBody,
        for_c: bool,
        channels: list[Hashable],
    ) -> None: ...


class OffsetResetProcessor:
    def __init__(
        self,
        broker_name: Callable[[], str],
        *,
        is_master: Callable[[], bool],
        topics: TopicTable,
        offsets: OffsetTable,
        consumers: ConsumerManager,
        store: StoreView,
        pusher: ResetPusher,
    ) -> None:
        self.broker_name = broker_name
        self.is_master = is_master
        self.topics = topics
        self.offsets = offsets
        self.consumers = consumers
        self.store = store
        self.pusher = pusher
        self.log = structlog.get_logger("broker")

    def _found_offset(self, topic: str, qid: int, timestamp: int) -> int:
        if timestamp == SKIP_ACCUMULATED or timestamp < 0:
            return self.store.get_max_offset(topic, qid)
        return self.store.search_offset_by_timestamp(topic, qid, timestamp)

    def targets(self, h: ResetOffsetRequestHeader) -> ResetOffsetBody | Refusal:
        """Each queue's new offset, without changing anything."""
        tc = self.topics.select(h.topic)
        if tc is None:
            return Refusal(
                RC.TOPIC_NOT_EXIST,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}",
            )
        queues = range(tc.writeQueueNums) if h.queueId < 0 else [h.queueId]
        if h.queueId >= max(tc.readQueueNums, tc.writeQueueNums):
            return Refusal(
                RC.INVALID_PARAMETER,
                f"queueId {h.queueId} out of range: topic {h.topic} has "
                f"{tc.writeQueueNums} write / {tc.readQueueNums} read queues here",
            )
        body = ResetOffsetBody()
        name = self.broker_name()
        for qid in queues:
            mq = MessageQueue(h.topic, name, qid)
            if h.queueId >= 0 and h.offset is not None and h.offset != -1:
                lo = self.store.get_min_offset(h.topic, qid)
                hi = self.store.get_max_offset(h.topic, qid)
                refusal = explicit_offset_refusal(h.offset, lo, hi)
                if refusal is not None:
                    return refusal
                body.offsetTable[mq] = h.offset
                continue
            committed = self.offsets.query(h.group, h.topic, qid)
            found = self._found_offset(h.topic, qid, h.timestamp)
            if committed == -1:  # never committed here (upstream refuses the whole reset)
                if h.isForce:
                    body.offsetTable[mq] = max(found, 0)
                continue  # "only back" from an unknown position: left alone
            body.offsetTable[mq] = reset_target(found, committed, h.isForce)
        return body

    async def reset_offset(
        self, h: ResetOffsetRequestHeader, language: str
    ) -> ResetOffsetBody | Refusal:
        if not self.is_master():
            return Refusal(RC.SYSTEM_ERROR, "Can not reset offset in slave broker")
        body = self.targets(h)
        if isinstance(body, Refusal):
            return body
        return await self.apply(h, body, language)

    async def apply(
        self,
        h: ResetOffsetRequestHeader,
        body: ResetOffsetBody,
        language: str,
        offline_ok: bool = False,
    ) -> ResetOffsetBody | Refusal:
        """Commit ``body``'s offsets, persist, tell the online members. ``offline_ok``: commit
        even when no member is online (a static topic's logic queues, which the admin's
        fallback cannot set queue by queue)."""
        info = self.consumers.get(h.group)
        channels = list(info.channels) if info is not None else []
        if not channels and not offline_ok:
            return Refusal(
                RC.CONSUMER_NOT_ONLINE,
                f"Consumer not online, so can not reset offset, Group: {h.group} "
                f"Topic: {h.topic} Timestamp: {h.timestamp}",
            )
        if not body.offsetTable and not offline_ok:
            return Refusal(
                RC.SYSTEM_ERROR,
                f"no queue of {h.topic} to reset at {self.broker_name()}: group {h.group} has "
                "no committed offset here and the reset is not forced (-f false)",
            )
        for mq, offset in body.offsetTable.items():
            self.offsets.commit(h.group, h.topic, mq.queueId, offset)
        await self.offsets.persist()
        events.emit(
            self.log,
            events.OffsetReset(
                group=h.group,
                topic=h.topic,
                timestamp=h.timestamp,
                force=h.isForce,
                offsets={f"{mq.brokerName}:{mq.queueId}": o for mq, o in body.offsetTable.items()},
                member_count=len(channels),
            ),
        )
        self.pusher.reset_offset(h, body, language == CPP, channels)
        return body

    async def clone_group_offset(self, h: CloneGroupOffsetRequestHeader) -> Done:
        topics = {h.topic} if h.topic else self.offsets.topics_of_group(h.srcGroup)
        info = self.consumers.get(h.srcGroup)
        cloned: list[str] = []
        for topic in sorted(topics):
            if self.topics.select(topic) is None:
                continue
            if not h.offline and info is not None and info.subscriptions:
                if topic not in info.subscriptions:
                    continue
            if self.offsets.clone_offset(h.srcGroup, h.destGroup, topic):
                cloned.append(topic)
        if cloned:
            await self.offsets.persist()
        events.emit(
            self.log,
            events.GroupOffsetCloned(src_group=h.srcGroup, dest_group=h.destGroup, topics=cloned),
        )
        return DONE


# ---------------------------------------------------------------------------- remoting side


class RemotingResetPusher:
    """RESET_CONSUMER_CLIENT_OFFSET (220, oneway) on the members' connections."""

    def __init__(self) -> None:
        self._opaque = 0

    def reset_offset(
        self,
        h: ResetOffsetRequestHeader,
        body: ResetOffsetBody,
        for_c: bool,
        channels: list[Hashable],
    ) -> None:
        ext = to_ext(ResetOffsetRequestHeader(h.topic, h.group, h.timestamp, h.isForce))
        if for_c:
            c_body = ResetOffsetBodyForC.of(body)
            c_body.offsetTable.sort(key=lambda q: (q.brokerName, q.queueId))
            data = fastjson.encode(c_body)
        else:
            data = fastjson.encode(body)
        for conn in channels:
            assert isinstance(conn, Connection)
            self._opaque += 1
            cmd = RemotingCommand(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                opaque=self._opaque,
                flag=RPC_ONEWAY,
                ext_fields=dict(ext),
                body=data,
            )
            conn.send_nowait(cmd)


Handler = Callable[[RequestContext], Awaitable[RemotingCommand | None]]


def offset_reset_handlers(proc: OffsetResetProcessor) -> dict[int, Handler]:
    """The handlers of INVOKE_BROKER_TO_RESET_OFFSET (222) and CLONE_GROUP_OFFSET (314)."""

    async def reset_offset(ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(ResetOffsetRequestHeader, cmd.ext_fields)
        out = await proc.reset_offset(h, cmd.language)
        if isinstance(out, Refusal):
            return cmd.make_response(out.code, out.remark)
        return cmd.make_response(RC.SUCCESS, body=fastjson.encode(out))

    async def clone_group_offset(ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        await proc.clone_group_offset(from_ext(CloneGroupOffsetRequestHeader, cmd.ext_fields))
        return cmd.make_response(RC.SUCCESS)

    return {
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: reset_offset,
        RequestCode.CLONE_GROUP_OFFSET: clone_group_offset,
    }
