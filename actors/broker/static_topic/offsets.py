"""Offsets of a static topic's logic queues (RIP-21 S4; upstream ConsumerManageProcessor and
AdminBrokerProcessor, static parts).

Only the logic queue's leader answers (others: NOT_LEADER_FOR_QUEUE); ``queueId`` is the logic
id, every offset a logic offset:

- UPDATE_CONSUMER_OFFSET stores the logic value under the logic queue id, on the leader (the
  RIP's "store logic values"; upstream stores physical values on the item's broker).
- QUERY_CONSUMER_OFFSET is the RIP's Double-Check-Read: the leader's own value, else the value
  the previous leaders stored while they led (asked with ``lo=false``, newest first), so a
  remapping moves no offsets. Not found anywhere: 0 when the logic queue's data starts at 0
  and the client did not say setZeroIfNotFound=false, like a physical queue; else
  QUERY_NOT_FOUND. A previous leader that cannot be asked makes the answer SYSTEM_ERROR (the
  client asks again) rather than a guess that would skip or repeat messages.
- GET_MIN_OFFSET: the oldest generation that still holds data (generations whose physical data
  is gone entirely are passed over); GET_MAX_OFFSET: the newest decided generation;
  SEARCH_OFFSET_BY_TIMESTAMP: the first generation, oldest first, where the time falls inside
  its data. Other brokers' generations are asked with ``lo=false`` and the physical queue id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from rocketrio.actors.broker.admin.processor import AdminProcessor
from rocketrio.actors.broker.dispatch.answers import refused
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.broker.static_topic.pull import not_leader
from rocketrio.actors.broker.static_topic.remote import RemoteBrokers, RemoteUnavailable
from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.tables.topic_queue_mapping import (
    TopicQueueMappingManager,
    leader_items,
)
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.protocol.static_topic import LogicQueueMappingItem, TopicQueueMappingDetail

RC = ResponseCode
PhysicalHeader = GetMinOffsetRequestHeader | GetMaxOffsetRequestHeader | SearchOffsetRequestHeader


class _Failed(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.remark)
        self.refusal = refusal


class StaticTopicOffsets:
    def __init__(
        self,
        *,
        mappings: TopicQueueMappingManager,
        offsets: ConsumerOffsetManager,
        admin: AdminProcessor,
        remote: RemoteBrokers,
        log: Any,
    ) -> None:
        self.mappings = mappings
        self.offsets = offsets
        self.admin = admin
        self.remote = remote
        self.log = log

    def _items(
        self, topic: str, gid: int
    ) -> tuple[TopicQueueMappingDetail, list[LogicQueueMappingItem]] | Refusal:
        detail = self.mappings.get(topic)
        assert detail is not None
        items = leader_items(detail, gid)
        if items is None:
            return not_leader(topic, gid, detail.bname)
        return detail, items

    async def _remote(
        self, item: LogicQueueMappingItem, topic: str, gid: int, code: int, header: Any
    ) -> RemotingCommand:
        try:
            return await self.remote.call(item.bname, topic, code, attrs.evolve(header, lo=False))
        except RemoteUnavailable as e:
            events.emit(
                self.log,
                events.StaticTopicRemoteReadFailed(
                    topic=topic, queue_id=gid, item_broker=item.bname, call=str(code), error=str(e)
                ),
            )
            raise _Failed(Refusal(RC.SYSTEM_ERROR, f"static topic {topic}-{gid}: {e}")) from e

    async def _physical(
        self,
        detail: TopicQueueMappingDetail,
        gid: int,
        item: LogicQueueMappingItem,
        code: int,
        h: PhysicalHeader,
    ) -> int:
        """One physical figure of ``item``'s queue, here or on its broker."""
        h = attrs.evolve(h, queueId=item.queueId)
        if item.bname == detail.bname:
            local = {
                RequestCode.GET_MIN_OFFSET: self.admin.min_offset,
                RequestCode.GET_MAX_OFFSET: self.admin.max_offset,
                RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.admin.search_offset,
            }[code]
            out = local(h)  # type: ignore[arg-type]
            if isinstance(out, Refusal):
                raise _Failed(out)
            return out
        resp = await self._remote(item, detail.topic, gid, code, h)
        if resp.code != RC.SUCCESS:
            raise _Failed(Refusal(resp.code, f"broker {item.bname}: {resp.remark}"))
        return from_ext(OffsetResponseHeader, resp.ext_fields).offset

    async def physical_range(
        self, detail: TopicQueueMappingDetail, gid: int, item: LogicQueueMappingItem
    ) -> tuple[int, int] | None:
        """The min and max offsets of ``item``'s physical queue, here or on its broker; None
        when they cannot be read."""
        try:
            lo = await self._physical(
                detail, gid, item, RequestCode.GET_MIN_OFFSET,
                GetMinOffsetRequestHeader(detail.topic, item.queueId),
            )  # fmt: skip
            hi = await self._physical(
                detail, gid, item, RequestCode.GET_MAX_OFFSET,
                GetMaxOffsetRequestHeader(detail.topic, item.queueId),
            )  # fmt: skip
        except _Failed:
            return None
        return lo, hi

    async def min_offset(self, h: GetMinOffsetRequestHeader) -> int | Refusal:
        found = self._items(h.topic, h.queueId)
        if isinstance(found, Refusal):
            return found
        # a generation whose data is gone: the next one holds the oldest
        return await self._first_within(found, h, RequestCode.GET_MIN_OFFSET)

    async def max_offset(self, h: GetMaxOffsetRequestHeader) -> int | Refusal:
        found = self._items(h.topic, h.queueId)
        if isinstance(found, Refusal):
            return found
        detail, items = found
        decided = [i for i in items if i.logic_decided()]
        if not decided:
            return 0
        item = decided[-1]
        p = await self._physical(detail, h.queueId, item, RequestCode.GET_MAX_OFFSET, h)
        return item.static_offset_loosely(p)

    async def search_offset(self, h: SearchOffsetRequestHeader) -> int | Refusal:
        found = self._items(h.topic, h.queueId)
        if isinstance(found, Refusal):
            return found
        # a time after a generation's last message: the next one holds it
        return await self._first_within(found, h, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP)

    async def _first_within(
        self,
        found: tuple[TopicQueueMappingDetail, list[LogicQueueMappingItem]],
        h: PhysicalHeader,
        code: int,
    ) -> int:
        """Ask each decided generation, oldest first, for the physical answer to ``code``;
        the first answer inside that generation's data, as a logic offset (the newest
        generation's answer, however far, when no older one holds it)."""
        detail, items = found
        decided = [i for i in items if i.logic_decided()]
        for item in decided:
            p = await self._physical(detail, h.queueId, item, code, h)
            if item.end_decided() and p >= item.endOffset and item is not decided[-1]:
                continue
            return item.static_offset_loosely(p)
        return 0

    async def query_consumer_offset(self, h: QueryConsumerOffsetRequestHeader) -> int | Refusal:
        found = self._items(h.topic, h.queueId)
        if isinstance(found, Refusal):
            return found
        detail, items = found
        offset = self.offsets.query(h.consumerGroup, h.topic, h.queueId)
        if offset >= 0:
            return offset
        asked = {detail.bname}
        for item in reversed(items[:-1]):  # Double-Check-Read: the previous leaders
            if item.bname in asked:
                continue
            asked.add(item.bname)
            q = QueryConsumerOffsetRequestHeader(
                h.consumerGroup, h.topic, h.queueId, setZeroIfNotFound=False
            )
            resp = await self._remote(
                item, h.topic, h.queueId, RequestCode.QUERY_CONSUMER_OFFSET, q
            )
            if resp.code == RC.SUCCESS:
                return from_ext(OffsetResponseHeader, resp.ext_fields).offset
            if resp.code != RC.QUERY_NOT_FOUND:
                return Refusal(RC.SYSTEM_ERROR, f"broker {item.bname}: {resp.code} {resp.remark}")
        first = items[0]
        if h.setZeroIfNotFound is not False and first.logicOffset == 0:
            gmin = GetMinOffsetRequestHeader(h.topic, first.queueId)
            p = await self._physical(detail, h.queueId, first, RequestCode.GET_MIN_OFFSET, gmin)
            if p <= first.startOffset:
                return 0
        return Refusal(RC.QUERY_NOT_FOUND, "Not found, maybe this group consumer boot first")

    async def logic_max(self, topic: str, gid: int) -> int | Refusal:
        """GET_MAX_OFFSET of logic queue ``gid`` led here, a refusal when it cannot be read."""
        try:
            return await self.max_offset(GetMaxOffsetRequestHeader(topic, gid))
        except _Failed as e:
            return e.refusal

    async def logic_min(self, topic: str, gid: int) -> int | Refusal:
        """GET_MIN_OFFSET of logic queue ``gid`` led here, a refusal when it cannot be read."""
        try:
            return await self.min_offset(GetMinOffsetRequestHeader(topic, gid))
        except _Failed as e:
            return e.refusal

    async def logic_search(self, topic: str, gid: int, timestamp: int) -> int | Refusal:
        """SEARCH_OFFSET_BY_TIMESTAMP of logic queue ``gid`` led here (or the refusal)."""
        try:
            return await self.search_offset(SearchOffsetRequestHeader(topic, gid, timestamp))
        except _Failed as e:
            return e.refusal

    async def prime(self, group: str, topic: str, gid: int) -> Refusal | None:
        """Before a POP of logic queue ``gid`` led here: the group's offset found by
        Double-Check-Read (a previous leader's) stored here, so the POP continues where the
        group was rather than at its initMode; nothing found leaves initMode to decide."""
        if self.offsets.query(group, topic, gid) >= 0:
            return None
        q = QueryConsumerOffsetRequestHeader(group, topic, gid, setZeroIfNotFound=False)
        try:
            out = await self.query_consumer_offset(q)
        except _Failed as e:
            return e.refusal
        if isinstance(out, Refusal):
            return None if out.code == RC.QUERY_NOT_FOUND else out
        if self.offsets.query(group, topic, gid) < 0:  # no commit landed meanwhile
            self.offsets.commit(group, topic, gid, out)
        return None

    def update_consumer_offset(self, h: UpdateConsumerOffsetRequestHeader) -> int | Refusal:
        found = self._items(h.topic, h.queueId)
        if isinstance(found, Refusal):
            return found
        if h.commitOffset < 0:
            return Refusal(RC.INVALID_PARAMETER, f"commitOffset must be >= 0, got {h.commitOffset}")
        self.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return h.commitOffset

    def handlers(self, plain: Mapping[int, Handler]) -> dict[int, Handler]:
        """The five offset calls for logic queues; the ``plain`` handlers for the rest."""
        calls: dict[int, tuple[type, Any]] = {
            RequestCode.QUERY_CONSUMER_OFFSET: (
                QueryConsumerOffsetRequestHeader,
                self.query_consumer_offset,
            ),
            RequestCode.UPDATE_CONSUMER_OFFSET: (
                UpdateConsumerOffsetRequestHeader,
                self.update_consumer_offset,
            ),
            RequestCode.GET_MIN_OFFSET: (GetMinOffsetRequestHeader, self.min_offset),
            RequestCode.GET_MAX_OFFSET: (GetMaxOffsetRequestHeader, self.max_offset),
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: (SearchOffsetRequestHeader, self.search_offset),
        }

        def make(code: int, cls: type, fn: Any) -> Handler:
            plain_handler = plain[code]

            async def handle(ctx: RequestContext) -> RemotingCommand | None:
                ext = ctx.cmd.ext_fields
                topic = ext.get("topic")
                if topic is None or ext.get("lo") == "false" or not self.mappings.is_static(topic):
                    return await plain_handler(ctx)
                h = from_ext(cls, ext)
                try:
                    out = fn(h)
                    if not isinstance(out, (int, Refusal)):
                        out = await out
                except _Failed as e:
                    out = e.refusal
                if isinstance(out, Refusal):
                    return refused(ctx.cmd, out)
                if code == RequestCode.UPDATE_CONSUMER_OFFSET:
                    return ctx.cmd.make_response(RC.SUCCESS)
                return ctx.cmd.make_response(
                    RC.SUCCESS, ext_fields=to_ext(OffsetResponseHeader(out))
                )

            return handle

        return {code: make(code, cls, fn) for code, (cls, fn) in calls.items() if code in plain}
