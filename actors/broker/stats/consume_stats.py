"""Consumption figures as upstream's admin tools read them (AdminBrokerProcessor, in part).

GET_TOPIC_STATS_INFO (202): per queue min / max offset and the store time of the last message.
GET_CONSUME_STATS (208): per queue of a group's topics the broker offset, the committed
consumer offset, where the group's last pull ended (pullOffset) and the store time of the last
consumed message, plus the group's consume TPS. GET_BROKER_CONSUME_STATS (317): the same for
every subscription group of the broker, with the total lag. QUERY_TOPIC_CONSUME_BY_WHO (300):
the groups subscribed to a topic or holding an offset on it.

Values follow upstream exactly (the admin-bodies reference): offsets below zero are reported as
0, so a lag is never negative or -1; ``lastTimestamp`` stays 0 until something was consumed;
GET_CONSUME_STATS reads ``readQueueNums`` queues, GET_BROKER_CONSUME_STATS ``writeQueueNums``
(and leaves pullOffset 0), as upstream does.

Collaborators: the broker's name and address, the topic table, the offset table (committed and
pull offsets), the consumer manager (subscriptions), the subscription group table, the store
view and the per-group consume TPS.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from rocketrio.actors.broker.clients.client_manager import ConsumerManager
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.protocol.bodies import (
    ConsumeStats,
    ConsumeStatsList,
    GroupList,
    MessageQueue,
    OffsetWrapper,
    TopicConfig,
    TopicOffset,
    TopicStatsTable,
)
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import (
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)

# the consume TPS of (group, topic): GROUP_GET_NUMS over the last minute
GroupTps = Callable[[str, str], float]


class ConsumeStatsProcessor:
    def __init__(
        self,
        broker_name: Callable[[], str],
        broker_addr: Callable[[], str],
        *,
        topics: TopicTable,
        offsets: OffsetTable,
        consumers: ConsumerManager,
        groups: GroupTable,
        store: StoreView,
        group_tps: GroupTps,
    ) -> None:
        self.broker_name = broker_name
        self.broker_addr = broker_addr
        self.topics = topics
        self.offsets = offsets
        self.consumers = consumers
        self.groups = groups
        self.store = store
        self.group_tps = group_tps

    def topic_stats(self, h: GetTopicStatsInfoRequestHeader) -> TopicStatsTable | Refusal:
        tc = self.topics.select(h.topic)
        if tc is None:
            return Refusal(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store, name = self.store, self.broker_name()
        table = TopicStatsTable()
        for qid in range(tc.writeQueueNums):
            hi = max(0, store.get_max_offset(h.topic, qid))
            lo = max(0, store.get_min_offset(h.topic, qid))
            last = store.get_message_store_timestamp(h.topic, qid, hi - 1) if hi > 0 else None
            table.offsetTable[MessageQueue(h.topic, name, qid)] = TopicOffset(lo, hi, last or 0)
        return table

    def _last_consumed_ts(self, topic: str, qid: int, consumer_offset: int) -> int:
        if consumer_offset <= 0:
            return 0
        return self.store.get_message_store_timestamp(topic, qid, consumer_offset - 1) or 0

    def _topics_of(self, group: str, topic: str | None) -> list[str]:
        """upstream getTopicsForCollectingConsumeStats without a topic list: the asked topic
        or every topic the group committed on, minus those an online group does not
        subscribe to."""
        topics = {topic} if topic else self.offsets.topics_of_group(group)
        info = self.consumers.get(group)
        if info is not None and info.subscriptions:
            topics = {t for t in topics if t in info.subscriptions}
        return sorted(topics)

    def _queue_stats(
        self, group: str, tc: TopicConfig, queues: int, with_pull: bool
    ) -> ConsumeStats:
        stats = ConsumeStats()
        topic, name = tc.topicName, self.broker_name()
        for qid in range(queues):
            broker_offset = max(0, self.store.get_max_offset(topic, qid))
            consumer_offset = max(0, self.offsets.query(group, topic, qid))
            pull_offset = 0
            if with_pull:
                pull_offset = max(consumer_offset, self.offsets.query_pull(group, topic, qid))
            stats.offsetTable[MessageQueue(topic, name, qid)] = OffsetWrapper(
                brokerOffset=broker_offset,
                consumerOffset=consumer_offset,
                pullOffset=pull_offset,
                lastTimestamp=self._last_consumed_ts(topic, qid, consumer_offset),
            )
        stats.consumeTps = self.group_tps(group, topic)
        return stats

    def consume_stats(self, h: GetConsumeStatsRequestHeader) -> ConsumeStats:
        group = h.consumerGroup
        topics = h.topics() or self._topics_of(group, h.topic)
        out = ConsumeStats()
        for topic in topics:
            tc = self.topics.select(topic)
            if tc is None:
                continue
            one = self._queue_stats(group, tc, tc.readQueueNums, with_pull=True)
            out.offsetTable.update(one.offsetTable)
            out.consumeTps += one.consumeTps
        return out

    def _group_stats(self, group: str, order_only: bool) -> Iterator[tuple[str, ConsumeStats]]:
        """(topic, stats) of each of a group's topics as GET_BROKER_CONSUME_STATS reads them
        (``writeQueueNums`` queues, no pull offsets)."""
        for topic in self._topics_of(group, None):
            tc = self.topics.select(topic)
            if tc is not None and not (order_only and not tc.order):
                yield topic, self._queue_stats(group, tc, tc.writeQueueNums, with_pull=False)

    def broker_consume_stats(self, h: GetConsumeStatsInBrokerHeader) -> ConsumeStatsList:
        body = ConsumeStatsList(brokerAddr=self.broker_addr())
        for group in self.groups.table:
            per_topic: list[ConsumeStats] = []
            for _topic, stats in self._group_stats(group, bool(h.isOrder)):
                body.totalDiff += stats.total_diff()
                body.totalInflightDiff += sum(
                    w.pullOffset - w.consumerOffset for w in stats.offsetTable.values()
                )
                per_topic.append(stats)
            body.consumeStatsList.append({group: per_topic})
        return body

    def lags(self) -> list[tuple[str, str, int]]:
        """(group, topic, messages behind) of every subscription group's topics, as
        GET_BROKER_CONSUME_STATS counts them (never negative: offsets below 0 count as 0)."""
        return [
            (group, topic, max(0, stats.total_diff()))
            for group in self.groups.table
            for topic, stats in self._group_stats(group, False)
        ]

    def consumed_by_whom(self, h: QueryTopicConsumeByWhoRequestHeader) -> GroupList:
        groups = {
            name for name, info in self.consumers.groups.items() if h.topic in info.subscriptions
        }
        groups |= self.offsets.groups_of_topic(h.topic)
        return GroupList(sorted(groups))
