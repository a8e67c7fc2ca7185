"""Client-facing bookkeeping calls: heartbeats, consumer lists, queue locks, consumer offsets.

HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
GET_CONSUMER_CONNECTION_LIST (203), LOCK_BATCH_MQ (41), UNLOCK_BATCH_MQ (42),
QUERY_CONSUMER_OFFSET (14), UPDATE_CONSUMER_OFFSET (15), GET_ALL_CONSUMER_OFFSET (43)
(upstream ClientManageProcessor, ConsumerManageProcessor and the lock part of
AdminBrokerProcessor). State lives in the pure managers; this module parses, decides the
answer and asks the broker to push NOTIFY_CONSUMER_IDS_CHANGED when a group's members change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from rocketrio.actors.broker.client_manager import ClientChannelInfo
from rocketrio.actors.broker.filter import tag_codes_of
from rocketrio.actors.broker.topic_config import check_group_name, retry_topic
from rocketrio.actors.remoting import RequestContext
from rocketrio.protocol.bodies import (
    PERM_READ,
    PERM_WRITE,
    ConsumerConnection,
    ConsumerIdList,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    SubscriptionData,
)
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext, to_json

if TYPE_CHECKING:
    from rocketrio.actors.broker.broker import Broker


def _with_codes(sub: SubscriptionData) -> SubscriptionData:
    """Fill codeSet from tagsSet for clients that send tags only."""
    codes = tag_codes_of(sub)
    if codes is not None and not sub.codeSet:
        sub.codeSet = sorted(codes)
    return sub


class ClientProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    # ------------------------------------------------------------------ heartbeats

    async def heartbeat(self, ctx: RequestContext) -> RemotingCommand:
        cmd, b = ctx.cmd, self.broker
        data = from_json(HeartbeatData, cmd.body)
        now = trio.current_time()
        info = ClientChannelInfo(ctx.conn, data.clientID, cmd.language, cmd.version, now)
        for cd in data.consumerDataSet:
            bad = check_group_name(cd.groupName)
            if bad:
                return cmd.make_response(ResponseCode.INVALID_PARAMETER, bad)
            sgc = b.find_group(cd.groupName)
            notify = True
            if sgc is not None:
                notify = sgc.notifyConsumerIdsChangedEnable
                if cd.messageModel == "CLUSTERING" and sgc.retryQueueNums > 0:
                    # upstream creates the retry topic at heartbeat time, so the consumer's
                    # %RETRY% subscription finds a topic to pull
                    b.create_topic_in_send_back(
                        retry_topic(cd.groupName), sgc.retryQueueNums, PERM_READ | PERM_WRITE
                    )
            subs = [_with_codes(s) for s in cd.subscriptionDataSet]
            changed = b.consumers.register(
                cd.groupName, info, cd.consumeType, cd.messageModel, cd.consumeFromWhere, subs
            )
            if changed:
                b.consumer_group_changed(cd.groupName, notify)
        for pd in data.producerDataSet:
            b.producers.register(pd.groupName, info)
        ctx.conn.attrs["client_id"] = data.clientID
        return cmd.make_response(ResponseCode.SUCCESS)

    async def unregister_client(self, ctx: RequestContext) -> RemotingCommand:
        cmd, b = ctx.cmd, self.broker
        h = from_ext(UnregisterClientRequestHeader, cmd.ext_fields)
        if h.producerGroup:
            b.producers.unregister(h.producerGroup, ctx.conn)
        if h.consumerGroup and b.consumers.unregister(h.consumerGroup, ctx.conn):
            sgc = b.groups.table.get(h.consumerGroup)
            b.consumer_group_changed(
                h.consumerGroup, sgc is None or sgc.notifyConsumerIdsChangedEnable
            )
        return cmd.make_response(ResponseCode.SUCCESS)

    async def consumer_list(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(GetConsumerListByGroupRequestHeader, cmd.ext_fields)
        group = self.broker.consumers.get(h.consumerGroup)
        if group is None or not group.channels:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}"
            )
        return cmd.make_response(
            ResponseCode.SUCCESS, body=to_json(ConsumerIdList(group.client_ids()))
        )

    async def consumer_connections(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(GetConsumerConnectionListRequestHeader, cmd.ext_fields)
        group = self.broker.consumers.get(h.consumerGroup)
        if group is None or not group.channels:
            return cmd.make_response(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group[{h.consumerGroup}] not online",
            )
        body = ConsumerConnection(
            clientIds=group.client_ids(),
            messageModel=group.message_model,
            consumeType=group.consume_type,
            subscriptions=list(group.subscriptions.values()),
        )
        return cmd.make_response(ResponseCode.SUCCESS, body=to_json(body))

    # ------------------------------------------------------------------ queue locks

    def _own_queues(self, mqs: list[MessageQueue]) -> list[MessageQueue]:
        name = self.broker.config.brokerName
        return [mq for mq in mqs if mq.brokerName == name]

    async def lock_batch(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        req = from_json(LockBatchRequestBody, cmd.body)
        got = self.broker.locks.try_lock_batch(
            req.consumerGroup, self._own_queues(req.mqSet), req.clientId, trio.current_time()
        )
        return cmd.make_response(ResponseCode.SUCCESS, body=to_json(LockBatchResponseBody(got)))

    async def unlock_batch(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        req = from_json(LockBatchRequestBody, cmd.body)
        self.broker.locks.unlock_batch(req.consumerGroup, self._own_queues(req.mqSet), req.clientId)
        return cmd.make_response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ consumer offsets

    async def query_offset(self, ctx: RequestContext) -> RemotingCommand:
        cmd, b = ctx.cmd, self.broker
        h = from_ext(QueryConsumerOffsetRequestHeader, cmd.ext_fields)
        offset = b.offsets.query(h.consumerGroup, h.topic, h.queueId)
        if offset < 0:
            # upstream: a new group on a queue whose data starts at 0 starts at 0, unless the
            # client asked not to (setZeroIfNotFound=false)
            if h.setZeroIfNotFound is not False and b.store.get_min_offset(h.topic, h.queueId) <= 0:
                offset = 0
            else:
                return cmd.make_response(
                    ResponseCode.QUERY_NOT_FOUND,
                    "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                )
        return cmd.make_response(
            ResponseCode.SUCCESS, ext_fields=to_ext(OffsetResponseHeader(offset))
        )

    async def update_offset(self, ctx: RequestContext) -> RemotingCommand:
        cmd = ctx.cmd
        h = from_ext(UpdateConsumerOffsetRequestHeader, cmd.ext_fields)
        if h.commitOffset < 0:
            return cmd.make_response(
                ResponseCode.INVALID_PARAMETER, f"commitOffset must be >= 0, got {h.commitOffset}"
            )
        self.broker.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return cmd.make_response(ResponseCode.SUCCESS)

    async def all_offsets(self, ctx: RequestContext) -> RemotingCommand:
        snap = self.broker.offsets.snapshot()
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=to_json(snap))
