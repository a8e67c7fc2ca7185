"""JSON bodies of remoting calls and config files, as attrs classes with upstream field names.

Routes (TopicRouteData, QueueData, BrokerData), cluster info, broker registration
(RegisterBrokerBody with TopicConfigSerializeWrapper and DataVersion), topic and subscription
group configs, client heartbeats and consumer lists, admin statistics. Field names and types are
upstream's; maps keyed by MessageQueue are real ``dict[MessageQueue, ...]`` fields, written and
read as upstream's fastjson does by `protocol.fastjson` (encode) and `protocol.serde` (decode).
"""

from __future__ import annotations

import attrs

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1


def perm_to_string(perm: int) -> str:
    return (
        ("R" if perm & PERM_READ else "-")
        + ("W" if perm & PERM_WRITE else "-")
        + ("X" if perm & PERM_INHERIT else "-")
    )


@attrs.define(slots=True)
class DataVersion:
    """Version of a config table: bumped on every change; readers compare all three fields."""

    stateVersion: int = 0
    timestamp: int = 0
    counter: int = 0

    def next_version(self, now_ms: int) -> DataVersion:
        return DataVersion(self.stateVersion, now_ms, self.counter + 1)


@attrs.define(slots=True)
class TopicConfig:
    topicName: str
    readQueueNums: int = 16
    writeQueueNums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topicFilterType: str = "SINGLE_TAG"
    topicSysFlag: int = 0
    order: bool = False
    attributes: dict[str, str] = attrs.field(factory=dict)


@attrs.define(slots=True)
class TopicConfigSerializeWrapper:
    topicConfigTable: dict[str, TopicConfig] = attrs.field(factory=dict)
    dataVersion: DataVersion = attrs.field(factory=DataVersion)


@attrs.define(slots=True)
class TopicQueueMappingInfo:
    """What a broker registers of a static topic (upstream statictopic.TopicQueueMappingInfo):
    ``currIdMap`` maps the logic queues led by ``bname`` to their physical queue ids. The
    full mapping (`static_topic.TopicQueueMappingDetail`) stays on the broker."""

    topic: str
    scope: str = "__global__"
    totalQueues: int = 0
    bname: str = ""
    epoch: int = 0
    dirty: bool = False
    currIdMap: dict[int, int] = attrs.field(factory=dict)


@attrs.define(slots=True)
class TopicConfigAndMappingSerializeWrapper(TopicConfigSerializeWrapper):
    """Registration's topic table plus the static topics' mapping infos (upstream
    TopicConfigAndMappingSerializeWrapper; the details map is never sent here)."""

    topicQueueMappingInfoMap: dict[str, TopicQueueMappingInfo] = attrs.field(factory=dict)
    mappingDataVersion: DataVersion = attrs.field(factory=DataVersion)


def with_mapping(wrapper: TopicConfigSerializeWrapper) -> TopicConfigAndMappingSerializeWrapper:
    """A plain topic table as a registration wrapper with no static topics."""
    if isinstance(wrapper, TopicConfigAndMappingSerializeWrapper):
        return wrapper
    return TopicConfigAndMappingSerializeWrapper(wrapper.topicConfigTable, wrapper.dataVersion)


@attrs.define(slots=True)
class RegisterBrokerBody:
    topicConfigSerializeWrapper: TopicConfigAndMappingSerializeWrapper = attrs.field(
        factory=TopicConfigAndMappingSerializeWrapper, converter=with_mapping
    )
    filterServerList: list[str] = attrs.field(factory=list)


@attrs.define(slots=True)
class KVTable:
    table: dict[str, str] = attrs.field(factory=dict)


@attrs.define(slots=True)
class QueueData:
    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicSysFlag: int = 0


@attrs.define(slots=True)
class BrokerData:
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = attrs.field(factory=dict)
    zoneName: str | None = None
    enableActingMaster: bool = False

    def select_broker_addr(self) -> str | None:
        """Master address if there is one, otherwise any replica (reads can go to slaves)."""
        if 0 in self.brokerAddrs:
            return self.brokerAddrs[0]
        return next(iter(self.brokerAddrs.values()), None)


@attrs.define(slots=True)
class TopicRouteData:
    queueDatas: list[QueueData] = attrs.field(factory=list)
    brokerDatas: list[BrokerData] = attrs.field(factory=list)
    orderTopicConf: str | None = None
    filterServerTable: dict[str, list[str]] = attrs.field(factory=dict)
    # static topics only (None otherwise, and then not written): brokerName -> its mapping info
    topicQueueMappingByBroker: dict[str, TopicQueueMappingInfo] | None = None


@attrs.define(slots=True)
class ClusterInfo:
    brokerAddrTable: dict[str, BrokerData] = attrs.field(factory=dict)
    clusterAddrTable: dict[str, list[str]] = attrs.field(factory=dict)


@attrs.define(slots=True)
class TopicList:
    topicList: list[str] = attrs.field(factory=list)
    brokerAddr: str | None = None


@attrs.define(slots=True)
class BrokerMemberGroup:
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = attrs.field(factory=dict)


@attrs.define(slots=True)
class GetBrokerMemberGroupResponseBody:
    brokerMemberGroup: BrokerMemberGroup


# --- subscription groups / clients -----------------------------------------------------------


@attrs.define(slots=True)
class GroupRetryPolicy:
    """upstream subscription.GroupRetryPolicy; the policy objects are kept as given."""

    type: str = "CUSTOMIZED"
    exponentialRetryPolicy: dict[str, int] | None = None
    customizedRetryPolicy: dict[str, list[int]] | None = None


@attrs.define(slots=True)
class SubscriptionGroupConfig:
    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    consumeMessageOrderly: bool = False
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True
    groupSysFlag: int = 0
    consumeTimeoutMinute: int = 15
    groupRetryPolicy: GroupRetryPolicy = attrs.field(factory=GroupRetryPolicy)
    attributes: dict[str, str] = attrs.field(factory=dict)


@attrs.define(slots=True)
class SubscriptionData:
    topic: str
    subString: str = "*"
    classFilterMode: bool = False
    tagsSet: list[str] = attrs.field(factory=list)
    codeSet: list[int] = attrs.field(factory=list)
    subVersion: int = 0
    expressionType: str = "TAG"


@attrs.define(slots=True)
class ProducerData:
    groupName: str


@attrs.define(slots=True)
class ConsumerData:
    groupName: str
    consumeType: str = "CONSUME_PASSIVELY"  # push; CONSUME_ACTIVELY = pull
    messageModel: str = "CLUSTERING"  # or BROADCASTING
    consumeFromWhere: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptionDataSet: list[SubscriptionData] = attrs.field(factory=list)
    unitMode: bool = False


@attrs.define(slots=True)
class HeartbeatData:
    clientID: str
    producerDataSet: list[ProducerData] = attrs.field(factory=list)
    consumerDataSet: list[ConsumerData] = attrs.field(factory=list)


@attrs.define(slots=True)
class ConsumerIdList:
    consumerIdList: list[str] = attrs.field(factory=list)


@attrs.define(slots=True, frozen=True)
class MessageQueue:
    """One queue of a topic: (topic, broker set name, queue id)."""

    topic: str
    brokerName: str
    queueId: int


@attrs.define(slots=True)
class LockBatchRequestBody:
    consumerGroup: str
    clientId: str
    onlyThisBroker: bool = False
    mqSet: list[MessageQueue] = attrs.field(factory=list)


@attrs.define(slots=True)
class LockBatchResponseBody:
    lockOKMQSet: list[MessageQueue] = attrs.field(factory=list)


# --- stats (admin) ---------------------------------------------------------------------------


@attrs.define(slots=True)
class TopicOffset:
    """One queue of GET_TOPIC_STATS_INFO (upstream admin.TopicOffset)."""

    minOffset: int = 0
    maxOffset: int = 0
    lastUpdateTimestamp: int = 0


@attrs.define(slots=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO (202): upstream admin.TopicStatsTable, keyed by MessageQueue."""

    offsetTable: dict[MessageQueue, TopicOffset] = attrs.field(factory=dict)


@attrs.define(slots=True)
class ResetOffsetBody:
    """INVOKE_BROKER_TO_RESET_OFFSET's answer and RESET_CONSUMER_CLIENT_OFFSET's request body
    (upstream body.ResetOffsetBody): the new offset of each queue."""

    offsetTable: dict[MessageQueue, int] = attrs.field(factory=dict)


@attrs.define(slots=True)
class MessageQueueForC:
    """One queue and its new offset, for a C++ client (upstream common.message.MessageQueueForC)."""

    topic: str
    brokerName: str
    queueId: int
    offset: int


@attrs.define(slots=True)
class ResetOffsetBodyForC:
    """RESET_CONSUMER_CLIENT_OFFSET's body when the reset was asked for C++ clients: a list,
    no MessageQueue map keys (upstream body.ResetOffsetBodyForC)."""

    offsetTable: list[MessageQueueForC] = attrs.field(factory=list)

    @classmethod
    def of(cls, body: ResetOffsetBody) -> ResetOffsetBodyForC:
        return cls(
            [
                MessageQueueForC(mq.topic, mq.brokerName, mq.queueId, offset)
                for mq, offset in body.offsetTable.items()
            ]
        )

    def to_body(self) -> ResetOffsetBody:
        return ResetOffsetBody(
            {MessageQueue(q.topic, q.brokerName, q.queueId): q.offset for q in self.offsetTable}
        )


@attrs.define(slots=True)
class OffsetWrapper:
    """One queue of GET_CONSUME_STATS (upstream admin.OffsetWrapper)."""

    brokerOffset: int = 0
    consumerOffset: int = 0
    pullOffset: int = 0
    lastTimestamp: int = 0

    @property
    def lag(self) -> int:
        """Messages not yet consumed; never negative (an uncommitted queue counts whole)."""
        return max(0, self.brokerOffset - max(self.consumerOffset, 0))


@attrs.define(slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS (208): upstream admin.ConsumeStats, keyed by MessageQueue."""

    offsetTable: dict[MessageQueue, OffsetWrapper] = attrs.field(factory=dict)
    consumeTps: float = 0.0

    def total_diff(self) -> int:
        """upstream computeTotalDiff: broker offset minus consumer offset over the queues."""
        return sum(w.brokerOffset - w.consumerOffset for w in self.offsetTable.values())


@attrs.define(slots=True)
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS (317): one ``{group: [ConsumeStats]}`` map per group."""

    consumeStatsList: list[dict[str, list[ConsumeStats]]] = attrs.field(factory=list)
    brokerAddr: str | None = None
    totalDiff: int = 0
    totalInflightDiff: int = 0


@attrs.define(slots=True)
class Connection:
    """A client connection as admin bodies show it (upstream body.Connection)."""

    clientId: str
    clientAddr: str
    language: str = "JAVA"
    version: int = 0


@attrs.define(slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST (203): upstream body.ConsumerConnection."""

    connectionSet: list[Connection] = attrs.field(factory=list)
    subscriptionTable: dict[str, SubscriptionData] = attrs.field(factory=dict)
    consumeType: str | None = None
    messageModel: str | None = None
    consumeFromWhere: str | None = None

    def client_ids(self) -> list[str]:
        return sorted({c.clientId for c in self.connectionSet})


@attrs.define(slots=True)
class ProducerConnection:
    """GET_PRODUCER_CONNECTION_LIST (204): upstream body.ProducerConnection."""

    connectionSet: list[Connection] = attrs.field(factory=list)


@attrs.define(slots=True)
class GroupList:
    """QUERY_TOPIC_CONSUME_BY_WHO (300): the groups consuming a topic (body.GroupList)."""

    groupList: list[str] = attrs.field(factory=list)


@attrs.define(slots=True)
class BrokerRuntimeInfo:
    table: dict[str, str] = attrs.field(factory=dict)


# --- broker config files (appended by the broker helper) -------------------------------------


@attrs.define(slots=True)
class ConsumerOffsetSerializeWrapper:
    """consumerOffset.json and GET_ALL_CONSUMER_OFFSET: ``topic@group -> {queueId: offset}``."""

    offsetTable: dict[str, dict[int, int]] = attrs.field(factory=dict)
    dataVersion: DataVersion = attrs.field(factory=DataVersion)


@attrs.define(slots=True)
class SubscriptionGroupWrapper:
    """subscriptionGroup.json and GET_ALL_SUBSCRIPTIONGROUP_CONFIG, with upstream's
    ``forbiddenTable``: group -> topic -> forbidden bits (UPDATE_AND_GET_GROUP_FORBIDDEN)."""

    subscriptionGroupTable: dict[str, SubscriptionGroupConfig] = attrs.field(factory=dict)
    dataVersion: DataVersion = attrs.field(factory=DataVersion)
    forbiddenTable: dict[str, dict[str, int]] = attrs.field(factory=dict)


@attrs.define(slots=True)
class GroupForbidden:
    """UPDATE_AND_GET_GROUP_FORBIDDEN's answer: may ``group`` read ``topic`` on this broker."""

    group: str
    topic: str
    readable: bool


@attrs.define(slots=True)
class KVConfigSerializeWrapper:
    """The NameServer's kvConfig.json: namespace -> key -> value (upstream's file layout)."""

    configTable: dict[str, dict[str, str]] = attrs.field(factory=dict)
