"""The broker's read-only admin queries as the broker serves them (upstream
AdminBrokerProcessor; the rules are answers.py's):

- GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): the system topic set (TBW102, SCHEDULE_TOPIC_XXXX,
  the cluster- and broker-name topics ...), a `TopicList` without brokerAddr;
- QUERY_TOPICS_BY_CONSUMER (343): the topics ``group`` has a committed offset on here, with
  this broker's address;
- QUERY_SUBSCRIPTION_BY_CONSUMER (345): the group's heartbeat subscription of ``topic``
  (none: a body without subscriptionData);
- QUERY_CORRECTION_OFFSET (308): `answers.correction_offsets` over the offset table;
- QUERY_CONSUME_QUEUE (321): a window of one consume queue's entries (commitlog offset, size,
  tagsCode) with its [min, max) and, with ``consumerGroup``, the group's subscription and
  SQL92 filter data. There is no ConsumeQueueExt here, so no entry has extendDataJson, bitMap
  or eval true.

- INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): the members' offsets, asked of each member
  (consumer_status.py).

Every role serves all six, as upstream registers them on every broker: a slave answers from
its own store, the offsets its slave sync copied and the consumers connected to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketrio.actors.broker.clients.client_manager import ConsumerManager
from rocketrio.actors.broker.clients.consumer_calls import Broker2Client
from rocketrio.actors.broker.dispatch.answers import answer_json, on_ext, on_no_args
from rocketrio.actors.broker.dispatch.filter_data import ConsumerFilterData
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.query.answers import (
    IndexMissing,
    correction_offsets,
    filter_groups,
    group_view,
    queue_data,
    queue_window,
)
from rocketrio.actors.broker.query.consumer_status import consumer_status_handlers
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.bodies import SubscriptionData, TopicList
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.fastjson import java_hashmap_order, java_string_hash
from rocketrio.protocol.query_bodies import (
    QueryConsumeQueueRequestHeader,
    QueryConsumeQueueResponseBody,
    QueryCorrectionOffsetBody,
    QueryCorrectionOffsetHeader,
    QuerySubscriptionByConsumerRequestHeader,
    QuerySubscriptionResponseBody,
    QueryTopicsByConsumerRequestHeader,
    pretty,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext

FilterData = Callable[[str, str], ConsumerFilterData | None]  # (topic, group)


def filter_json(data: ConsumerFilterData | None, bit_num: int) -> str:
    """The group's SQL92 filter as the answer's filterData text: upstream's ConsumerFilterData
    in fastjson's pretty layout ("null": none, as for a TAG subscription)."""
    if data is None:
        return "null"
    dead_time = data.dead_ms or 0
    props: dict[str, Any] = {}
    if data.positions:
        props["bloomFilterData"] = {"bitNum": bit_num, "bitPos": list(data.positions)}
    props |= {
        "bornTime": data.born_ms,
        "clientVersion": data.client_version,
        "consumerGroup": data.group,
        "dead": dead_time >= data.born_ms,
        "deadTime": dead_time,
        "expression": data.expression,
        "expressionType": "SQL92",
        "topic": data.topic,
    }
    return pretty(props)


def hash_set_order(names: set[str] | frozenset[str]) -> list[str]:
    """Names in the order upstream's HashSet<String> (and so fastjson) lists them."""
    return java_hashmap_order(sorted(names), java_string_hash)


class QueryFeature:
    """The read-only admin queries of one broker (module docstring)."""

    def __init__(
        self,
        *,
        tables: BrokerTables,
        view: StoreView,
        consumers: ConsumerManager,
        b2c: Broker2Client,
        filter_data: FilterData,
        bit_num: int,
        addr: Callable[[], str],
    ) -> None:
        self.tables = tables
        self.view = view
        self.consumers = consumers
        self.b2c = b2c
        self.filter_data = filter_data
        self.bit_num = bit_num
        self.addr = addr

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        g = self.consumers.get(group)
        return None if g is None else g.find_subscription(topic)

    def system_topics(self) -> TopicList:
        return TopicList(topicList=hash_set_order(self.tables.topics.system_topics))

    def topics_by_consumer(self, h: QueryTopicsByConsumerRequestHeader) -> TopicList:
        topics = hash_set_order(self.tables.offsets.topics_of_group(h.group))
        return TopicList(topicList=topics, brokerAddr=self.addr())

    def subscription_by_consumer(
        self, h: QuerySubscriptionByConsumerRequestHeader
    ) -> QuerySubscriptionResponseBody:
        sub = None if h.topic is None else self.subscription(h.group, h.topic)
        return QuerySubscriptionResponseBody(sub, h.group, h.topic)

    def correction_offset(self, h: QueryCorrectionOffsetHeader) -> QueryCorrectionOffsetBody:
        offsets = correction_offsets(
            self.tables.offsets.table,
            h.topic,
            h.compareGroup,
            filter_groups(h.filterGroups),
            self.view.get_min_offset,
        )
        return QueryCorrectionOffsetBody(offsets)

    def consume_queue(
        self, h: QueryConsumeQueueRequestHeader
    ) -> QueryConsumeQueueResponseBody | IndexMissing | Refusal:
        cq = self.view.live_queues().get((h.topic, h.queueId))
        bounds = None if cq is None else self.view.queue_range(h.topic, h.queueId)
        body = QueryConsumeQueueResponseBody()
        if bounds is not None:
            body.minQueueIndex, body.maxQueueIndex = bounds
        window = queue_window(h, bounds)
        if not isinstance(window, int):
            return window
        if h.consumerGroup is not None:
            sub = self.subscription(h.consumerGroup, h.topic)
            data = None if sub is None else self.filter_data(h.topic, h.consumerGroup)
            body.subscriptionData, body.filterData = group_view(
                h.consumerGroup, h.topic, sub, filter_json(data, self.bit_num)
            )
        first, entries = self.view.read_queue_entries(h.topic, h.queueId, h.index, window)
        body.queueData = queue_data(first, entries, h.index, h.count)
        return body

    def handlers(self) -> Handlers:
        rc = RequestCode

        async def consume_queue(ctx: RequestContext) -> RemotingCommand:
            h = from_ext(QueryConsumeQueueRequestHeader, ctx.cmd.ext_fields)
            outcome = self.consume_queue(h)
            match outcome:
                case IndexMissing(remark):
                    return ctx.cmd.make_response(ResponseCode.SUCCESS, remark)
                case _:
                    return answer_json(ctx.cmd, outcome)

        return {
            rc.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: on_no_args(self.system_topics, answer_json),
            rc.QUERY_TOPICS_BY_CONSUMER: on_ext(
                QueryTopicsByConsumerRequestHeader, self.topics_by_consumer, answer_json
            ),
            rc.QUERY_SUBSCRIPTION_BY_CONSUMER: on_ext(
                QuerySubscriptionByConsumerRequestHeader,
                self.subscription_by_consumer,
                answer_json,
            ),
            rc.QUERY_CORRECTION_OFFSET: on_ext(
                QueryCorrectionOffsetHeader, self.correction_offset, answer_json
            ),
            rc.QUERY_CONSUME_QUEUE: consume_queue,
            **consumer_status_handlers(self.consumers, self.b2c),
        }
