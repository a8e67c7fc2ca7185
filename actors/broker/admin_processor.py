"""Admin and query calls (upstream AdminBrokerProcessor / QueryMessageProcessor, reduced).

Topics: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_TOPIC_CONFIG (351), GET_TOPIC_STATS_INFO (202). Groups: UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
(200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_SUBSCRIPTIONGROUP_CONFIG (352),
DELETE_SUBSCRIPTIONGROUP (207), GET_CONSUME_STATS (208). Broker: GET_BROKER_RUNTIME_INFO (28),
GET_BROKER_CONFIG (26). Offsets: GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
SEARCH_OFFSET_BY_TIMESTAMP (29), GET_EARLIEST_MSG_STORETIME (32). Messages: VIEW_MESSAGE_BY_ID
(33, body = the stored record) and QUERY_MESSAGE (12, by key or by UNIQ_KEY when the ext field
``_UNIQUE_KEY_QUERY`` is true; body = the stored records).

Remarks follow upstream where it has one, and otherwise say what to change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketrio.actors.broker.topic_config import (
    check_group_name,
    check_perm,
    check_queue_nums,
    check_topic_name,
)
from rocketrio.actors.remoting import RequestContext
from rocketrio.protocol.bodies import (
    ConsumeStats,
    KVTable,
    OffsetWrapper,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicOffset,
    TopicStatsTable,
)
from rocketrio.protocol.codes import CURRENT_VERSION, ResponseCode
from rocketrio.protocol.config import dump_config
from rocketrio.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    OffsetResponseHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SearchOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, from_json, to_ext, to_json
from rocketrio.storage.message_store import MessageStore

if TYPE_CHECKING:
    from rocketrio.actors.broker.broker import Broker

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
VERSION_DESC = "V5_2_0"


def _runtime_text(ms: int) -> str:
    s = ms // 1000
    return (
        f"[ {s // 86400} days, {s // 3600 % 24} hours, {s // 60 % 60} minutes, {s % 60} seconds ]"
    )


class AdminProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config

    # ------------------------------------------------------------------ topics

    async def update_topic(self, ctx: RequestContext) -> RemotingCommand:
        cmd, b = ctx.cmd, self.broker
        h = from_ext(CreateTopicRequestHeader, cmd.ext_fields)
        topic = h.topic
        bad = (
            check_topic_name(topic)
            or check_queue_nums(h.readQueueNums, h.writeQueueNums)
            or check_perm(h.perm)
        )
        if bad:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, bad)
        if b.topics.is_system_topic(topic):
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
            )
        if topic == self.config.brokerClusterName:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"Create topic [{topic}] failed: it conflicts with the cluster name",
            )
        filter_type = h.topicFilterType or "SINGLE_TAG"
        if filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"topicFilterType must be SINGLE_TAG or MULTI_TAG, got {filter_type}",
            )
        tc = TopicConfig(
            topicName=topic,
            readQueueNums=h.readQueueNums,
            writeQueueNums=h.writeQueueNums,
            perm=h.perm,
            topicFilterType=filter_type,
            topicSysFlag=h.topicSysFlag or 0,
            order=h.order,
        )
        await b.update_topic(tc)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def delete_topic(self, ctx: RequestContext) -> RemotingCommand:
        cmd, b = ctx.cmd, self.broker
        h = from_ext(DeleteTopicRequestHeader, cmd.ext_fields)
        bad = check_topic_name(h.topic)
        if bad:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, bad)
        if b.topics.is_system_topic(h.topic):
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"The topic[{h.topic}] is conflict with system topic."
            )
        await b.delete_topic(h.topic)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def all_topic_config(self, ctx: RequestContext) -> RemotingCommand:
        body = to_json(self.broker.topics.snapshot())
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def topic_config(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(GetTopicConfigRequestHeader, cmd.ext_fields)
        tc = self.broker.topics.select(h.topic)
        if tc is None:
            return cmd.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}"
            )
        return cmd.make_response(ResponseCode.SUCCESS, body=to_json(tc))

    async def topic_stats(self, ctx: RequestContext) -> RemotingCommand:
        cmd, b = ctx.cmd, self.broker
        h = from_ext(GetTopicStatsInfoRequestHeader, cmd.ext_fields)
        tc = b.topics.select(h.topic)
        if tc is None:
            return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store, name = b.store, self.config.brokerName
        table = TopicStatsTable()
        for qid in range(tc.writeQueueNums):
            hi = store.get_max_offset(h.topic, qid)
            last = store.get_message_store_timestamp(h.topic, qid, hi - 1) if hi > 0 else None
            table.offsets.append(
                TopicOffset(name, qid, store.get_min_offset(h.topic, qid), hi, last or 0)
            )
        return cmd.make_response(ResponseCode.SUCCESS, body=to_json(table))

    # ------------------------------------------------------------------ subscription groups

    async def update_group(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        sgc = from_json(SubscriptionGroupConfig, cmd.body)
        bad = check_group_name(sgc.groupName)
        if bad:
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, bad)
        if sgc.retryQueueNums < 0 or sgc.retryMaxTimes < -1:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, "retryQueueNums must be >= 0 and retryMaxTimes >= -1"
            )
        await self.broker.update_group(sgc)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def all_groups(self, ctx: RequestContext) -> RemotingCommand:
        body = to_json(self.broker.groups.snapshot())
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=body)

    async def group_config(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(GetSubscriptionGroupConfigRequestHeader, cmd.ext_fields)
        sgc = self.broker.groups.table.get(h.group)
        if sgc is None:
            return cmd.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"The subscription group {h.group} not exist",
            )
        return cmd.make_response(ResponseCode.SUCCESS, body=to_json(sgc))

    async def delete_group(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(DeleteSubscriptionGroupRequestHeader, cmd.ext_fields)
        await self.broker.delete_group(h.groupName, h.cleanOffset)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def consume_stats(self, ctx: RequestContext) -> RemotingCommand:
        cmd, b = ctx.cmd, self.broker
        h = from_ext(GetConsumeStatsRequestHeader, cmd.ext_fields)
        topics = [h.topic] if h.topic else sorted(b.offsets.topics_of_group(h.consumerGroup))
        group = b.consumers.get(h.consumerGroup)
        if not h.topic and group is not None:
            topics = sorted(set(topics) | set(group.subscriptions))
        stats = ConsumeStats()
        store, name = b.store, self.config.brokerName
        for topic in topics:
            tc = b.topics.select(topic)
            if tc is None:
                continue
            committed = b.offsets.queue_offsets(h.consumerGroup, topic)
            for qid in range(tc.readQueueNums):
                hi = store.get_max_offset(topic, qid)
                mine = committed.get(qid, -1)
                last_ts = 0
                if 0 <= mine < hi:
                    last_ts = store.get_message_store_timestamp(topic, qid, mine) or 0
                stats.offsets.append(OffsetWrapper(topic, name, qid, hi, mine, last_ts))
        return cmd.make_response(ResponseCode.SUCCESS, body=to_json(stats))

    # ------------------------------------------------------------------ broker info

    async def runtime_info(self, ctx: RequestContext) -> RemotingCommand:
        b = self.broker
        st, ss = b.stats, b.store.stats()
        now = b.now_ms()
        table = {
            "brokerVersionDesc": VERSION_DESC,
            "brokerVersion": str(CURRENT_VERSION),
            "msgPutTotalTodayMorning": str(st.put_today_morning),
            "msgPutTotalTodayNow": str(st.msg_put_total),
            "msgGetTotalTodayMorning": str(st.get_today_morning),
            "msgGetTotalTodayNow": str(st.msg_get_total),
            "putTps": st.tps_triple("put"),
            "getTotalTps": st.tps_triple("get"),
            "sendBackTotal": str(st.send_back_total),
            "dlqTotal": str(st.dlq_total),
            "commitLogMinOffset": str(ss.commitlog_min_offset),
            "commitLogMaxOffset": str(ss.commitlog_max_offset),
            "commitLogFlushedOffset": str(ss.commitlog_flushed_offset),
            "bootTimestamp": str(b.boot_ms),
            "runtime": _runtime_text(now - b.boot_ms),
            "brokerName": self.config.brokerName,
            "brokerId": str(self.config.brokerId),
            "brokerRole": self.config.brokerRole.value,
            "flushDiskType": self.config.flushDiskType.value,
            "pullHoldCount": str(b.pull_hold.count),
            "consumerGroups": str(len(b.consumers.groups)),
            "producerGroups": str(len(b.producers.groups)),
            "topicCount": str(len(b.topics.table)),
            "brokerActive": "true",
        }
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=to_json(KVTable(table)))

    async def broker_config(self, ctx: RequestContext) -> RemotingCommand:
        body = dump_config(self.config).encode()
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=body)

    # ------------------------------------------------------------------ offsets

    def _queue_check(self, cmd: RemotingCommand, queue_id: int) -> RemotingCommand | None:
        if queue_id < 0:
            return cmd.make_response(
                ResponseCode.INVALID_PARAMETER, f"queueId must be >= 0, got {queue_id}"
            )
        return None

    async def max_offset(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(GetMaxOffsetRequestHeader, cmd.ext_fields)
        err = self._queue_check(cmd, h.queueId)
        if err:
            return err
        offset = self.broker.store.get_max_offset(h.topic, h.queueId)
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields=to_ext(OffsetResponseHeader(offset))
        )

    async def min_offset(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(GetMinOffsetRequestHeader, cmd.ext_fields)
        err = self._queue_check(cmd, h.queueId)
        if err:
            return err
        offset = self.broker.store.get_min_offset(h.topic, h.queueId)
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields=to_ext(OffsetResponseHeader(offset))
        )

    async def search_offset(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(SearchOffsetRequestHeader, cmd.ext_fields)
        err = self._queue_check(cmd, h.queueId)
        if err:
            return err
        boundary = (h.boundaryType or "LOWER").upper()
        if boundary not in ("LOWER", "UPPER"):
            return cmd.make_response(
                ResponseCode.INVALID_PARAMETER,
                f"boundaryType must be LOWER or UPPER, got {boundary}",
            )
        offset = self.broker.store.search_offset_by_timestamp(
            h.topic,
            h.queueId,
            h.timestamp,
            boundary,  # type: ignore[arg-type]
        )
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields=to_ext(OffsetResponseHeader(offset))
        )

    async def earliest_store_time(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(GetEarliestMsgStoretimeRequestHeader, cmd.ext_fields)
        ts = self.broker.store.get_earliest_msg_store_time(h.topic, h.queueId)
        if ts is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"queue {h.topic}:{h.queueId} holds no message"
            )
        header = GetEarliestMsgStoretimeResponseHeader(ts)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=to_ext(header))

    # ------------------------------------------------------------------ messages

    async def view_message(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(ViewMessageRequestHeader, cmd.ext_fields)
        store = self.broker.store
        if store.look_message_by_offset(h.offset) is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}"
            )
        record = store.commitlog.read_record(h.offset)
        return cmd.make_response(ResponseCode.SUCCESS, body=record)

    async def query_message(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(QueryMessageRequestHeader, cmd.ext_fields)
        if h.maxNum <= 0:
            raise HeaderError(f"maxNum must be > 0, got {h.maxNum}")
        store: MessageStore = self.broker.store
        max_num = min(h.maxNum, 64)
        if cmd.ext_fields.get(UNIQUE_KEY_QUERY, "").lower() == "true":
            msgs = store.query_by_uniq_key(h.topic, h.key, max_num)
        else:
            end = h.endTimestamp if h.endTimestamp > 0 else 2**63 - 1
            msgs = store.query_by_key(h.topic, h.key, max_num, h.beginTimestamp, end)
        header = QueryMessageResponseHeader(
            indexLastUpdateTimestamp=self.broker.now_ms(),
            indexLastUpdatePhyoffset=store.get_commitlog_max_offset(),
        )
        if not msgs:
            return cmd.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"can not find message of topic {h.topic} with key {h.key}, "
                "maybe time range not correct",
                to_ext(header),
            )
        body = b"".join(store.commitlog.read_record(m.commitlog_offset) for m in msgs)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields=to_ext(header), body=body)
