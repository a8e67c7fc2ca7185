"""Client-facing bookkeeping: heartbeats, consumer lists, queue locks, consumer offsets.

HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP, GET_CONSUMER_CONNECTION_LIST,
LOCK_BATCH_MQ, UNLOCK_BATCH_MQ, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET,
GET_ALL_CONSUMER_OFFSET (upstream ClientManageProcessor, ConsumerManageProcessor and the lock
part of AdminBrokerProcessor), plus what happens when a client's channel closes or goes silent.
State lives in the pure managers; this module decides the answer (a typed value, `Done` or a
`Refusal`) and tells the `ConsumerIdsNotifier` when a group's members change, so the protocol
adapter can push NOTIFY_CONSUMER_IDS_CHANGED to them.

A client is known by its channel: any hashable handle the adapter gives (the remoting
Connection today).

Collaborators: the topic table (retry topics are created at heartbeat time), the group and
offset tables, the consumer and producer managers, the lock manager, the store view (a new
group's start offset), the notifier and the broker name.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Protocol

import structlog
import trio

from rocketrio.actors.broker.clients.client_manager import (
    ClientChannelInfo,
    ConsumerManager,
    ProducerManager,
)
from rocketrio.actors.broker.clients.lock_manager import RebalanceLockManager
from rocketrio.actors.broker.dispatch.outcomes import DONE, Done, Refusal
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.broker.tables.topic_config import check_group_name, retry_topic
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import (
    PERM_READ,
    PERM_WRITE,
    Connection,
    ConsumerConnection,
    ConsumerIdList,
    ConsumerOffsetSerializeWrapper,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    ProducerConnection,
    SubscriptionData,
)
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.filter import tag_codes_of
from rocketrio.protocol.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetProducerConnectionListRequestHeader,
    QueryConsumerOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)


class ConsumerIdsNotifier(Protocol):
    """Tells a group's members that the member set changed (NOTIFY_CONSUMER_IDS_CHANGED)."""

    def consumer_ids_changed(self, group: str, channels: list[Hashable]) -> None: ...


def _with_codes(sub: SubscriptionData) -> SubscriptionData:
    """Fill codeSet from tagsSet for clients that send tags only."""
    codes = tag_codes_of(sub)
    if codes is not None and not sub.codeSet:
        sub.codeSet = sorted(codes)
    return sub


def _connection(info: ClientChannelInfo) -> Connection:
    return Connection(info.client_id, info.addr, info.language, info.version)


class ClientProcessor:
    def __init__(
        self,
        broker_name: str,
        *,
        topics: TopicTable,
        groups: GroupTable,
        offsets: OffsetTable,
        consumers: ConsumerManager,
        producers: ProducerManager,
        locks: RebalanceLockManager,
        store: StoreView,
        notifier: ConsumerIdsNotifier,
        leads_logic_queue: Callable[[MessageQueue], bool] = lambda mq: False,
    ) -> None:
        self.broker_name = broker_name
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.producers = producers
        self.locks = locks
        self.store = store
        self.notifier = notifier
        # static topics: a logic queue (mock broker name) this broker leads is its own too
        self.leads_logic_queue = leads_logic_queue
        self.log = structlog.get_logger("broker").bind(broker=broker_name)

    # ------------------------------------------------------------------ membership

    def group_changed(self, group: str, notify: bool) -> None:
        """A group's member set changed: log it and (when enabled) notify the members."""
        info = self.consumers.get(group)
        members = info.client_ids() if info else []
        events.emit(self.log, events.ConsumerGroupChanged(group=group, members=members))
        if notify and info is not None:
            self.notifier.consumer_ids_changed(group, list(info.channels))

    def channel_closed(self, channel: Hashable) -> None:
        self.producers.connection_closed(channel)
        for group in self.consumers.connection_closed(channel):
            self.group_changed(group, self.groups.notify_enabled(group))

    def scan_expired(self, now_s: float) -> None:
        """Drop clients silent for too long (every CLIENT_SCAN_INTERVAL_S)."""
        self.producers.scan_expired(now_s)
        for group in {group for group, _ in self.consumers.scan_expired(now_s)}:
            self.group_changed(group, self.groups.notify_enabled(group))

    # ------------------------------------------------------------------ heartbeats

    def heartbeat(
        self, data: HeartbeatData, channel: Hashable, language: str, version: int, addr: str = ""
    ) -> Done | Refusal:
        now = trio.current_time()
        info = ClientChannelInfo(channel, data.clientID, language, version, now, addr)
        for cd in data.consumerDataSet:
            bad = check_group_name(cd.groupName)
            if bad:
                return Refusal(ResponseCode.INVALID_PARAMETER, bad)
            sgc = self.groups.find_group(cd.groupName)
            notify = True
            if sgc is not None:
                notify = sgc.notifyConsumerIdsChangedEnable
                if cd.messageModel == "CLUSTERING" and sgc.retryQueueNums > 0:
                    # upstream creates the retry topic at heartbeat time, so the consumer's
                    # %RETRY% subscription finds a topic to pull
                    self.topics.create_in_send_back(
                        retry_topic(cd.groupName), sgc.retryQueueNums, PERM_READ | PERM_WRITE
                    )
            subs = [_with_codes(s) for s in cd.subscriptionDataSet]
            changed = self.consumers.register(
                cd.groupName, info, cd.consumeType, cd.messageModel, cd.consumeFromWhere, subs
            )
            if changed:
                self.group_changed(cd.groupName, notify)
        for pd in data.producerDataSet:
            self.producers.register(pd.groupName, info)
        return DONE

    def unregister_client(self, h: UnregisterClientRequestHeader, channel: Hashable) -> Done:
        if h.producerGroup:
            self.producers.unregister(h.producerGroup, channel)
        if h.consumerGroup and self.consumers.unregister(h.consumerGroup, channel):
            self.group_changed(h.consumerGroup, self.groups.notify_enabled(h.consumerGroup))
        return DONE

    def consumer_list(self, h: GetConsumerListByGroupRequestHeader) -> ConsumerIdList | Refusal:
        group = self.consumers.get(h.consumerGroup)
        if group is None or not group.channels:
            return Refusal(
                ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumerGroup}"
            )
        return ConsumerIdList(group.client_ids())

    def consumer_connections(
        self, h: GetConsumerConnectionListRequestHeader
    ) -> ConsumerConnection | Refusal:
        group = self.consumers.get(h.consumerGroup)
        if group is None or not group.channels:
            return Refusal(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group[{h.consumerGroup}] not online",
            )
        return ConsumerConnection(
            connectionSet=[_connection(c) for c in group.channels.values()],
            subscriptionTable=dict(group.subscriptions),
            consumeType=group.consume_type,
            messageModel=group.message_model,
            consumeFromWhere=group.consume_from_where,
        )

    def producer_connections(
        self, h: GetProducerConnectionListRequestHeader
    ) -> ProducerConnection | Refusal:
        members = self.producers.groups.get(h.producerGroup)
        if members is None:
            return Refusal(
                ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producerGroup}] not exist"
            )
        return ProducerConnection([_connection(c) for c in members.values()])

    # ------------------------------------------------------------------ queue locks

    def _own_queues(self, mqs: list[MessageQueue]) -> list[MessageQueue]:
        return [mq for mq in mqs if mq.brokerName == self.broker_name or self.leads_logic_queue(mq)]

    def lock_batch(self, req: LockBatchRequestBody) -> LockBatchResponseBody:
        got = self.locks.try_lock_batch(
            req.consumerGroup, self._own_queues(req.mqSet), req.clientId, trio.current_time()
        )
        return LockBatchResponseBody(got)

    def unlock_batch(self, req: LockBatchRequestBody) -> Done:
        self.locks.unlock_batch(req.consumerGroup, self._own_queues(req.mqSet), req.clientId)
        return DONE

    # ------------------------------------------------------------------ consumer offsets

    def query_offset(self, h: QueryConsumerOffsetRequestHeader) -> int | Refusal:
        offset = self.offsets.query(h.consumerGroup, h.topic, h.queueId)
        if offset >= 0:
            return offset
        # upstream: a new group on a queue whose data starts at 0 starts at 0, unless the
        # client asked not to (setZeroIfNotFound=false)
        if h.setZeroIfNotFound is not False and self.store.get_min_offset(h.topic, h.queueId) <= 0:
            return 0
        return Refusal(
            ResponseCode.QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        )

    def update_offset(self, h: UpdateConsumerOffsetRequestHeader) -> Done | Refusal:
        if h.commitOffset < 0:
            return Refusal(
                ResponseCode.INVALID_PARAMETER, f"commitOffset must be >= 0, got {h.commitOffset}"
            )
        self.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        return DONE

    def all_offsets(self) -> ConsumerOffsetSerializeWrapper:
        return self.offsets.snapshot()
