"""Typed request/response headers for the client-facing remoting calls (extFields).

Attribute names are upstream's extField keys, so `serde.from_ext` / `serde.to_ext` convert them
with no rename table. Required fields have no default; optional ones default to None (omitted
on the wire). Controller headers live in `protocol.controller_headers`.
"""

from __future__ import annotations

import attrs

# --- send ------------------------------------------------------------------------------------


@attrs.define(slots=True)
class SendMessageRequestHeader:
    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: int
    flag: int
    properties: str | None = None
    reconsumeTimes: int | None = None
    unitMode: bool | None = None
    batch: bool | None = None
    maxReconsumeTimes: int | None = None
    bname: str | None = None


@attrs.define(slots=True)
class SendMessageRequestHeaderV2:
    """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE: upstream's one-letter field names."""

    a: str  # producerGroup
    b: str  # topic
    c: str  # defaultTopic
    d: int  # defaultTopicQueueNums
    e: int  # queueId
    f: int  # sysFlag
    g: int  # bornTimestamp
    h: int  # flag
    i: str | None = None  # properties
    j: int | None = None  # reconsumeTimes
    k: bool | None = None  # unitMode
    l: int | None = None  # consumeRetryTimes (maxReconsumeTimes)  # noqa: E741
    m: bool | None = None  # batch
    n: str | None = None  # brokerName

    def to_v1(self) -> SendMessageRequestHeader:
        return SendMessageRequestHeader(
            producerGroup=self.a,
            topic=self.b,
            defaultTopic=self.c,
            defaultTopicQueueNums=self.d,
            queueId=self.e,
            sysFlag=self.f,
            bornTimestamp=self.g,
            flag=self.h,
            properties=self.i,
            reconsumeTimes=self.j,
            unitMode=self.k,
            batch=self.m,
            maxReconsumeTimes=self.l,
            bname=self.n,
        )

    @classmethod
    def from_v1(cls, v1: SendMessageRequestHeader) -> SendMessageRequestHeaderV2:
        return cls(
            a=v1.producerGroup,
            b=v1.topic,
            c=v1.defaultTopic,
            d=v1.defaultTopicQueueNums,
            e=v1.queueId,
            f=v1.sysFlag,
            g=v1.bornTimestamp,
            h=v1.flag,
            i=v1.properties,
            j=v1.reconsumeTimes,
            k=v1.unitMode,
            l=v1.maxReconsumeTimes,
            m=v1.batch,
            n=v1.bname,
        )


@attrs.define(slots=True)
class SendMessageResponseHeader:
    msgId: str
    queueId: int
    queueOffset: int
    transactionId: str | None = None
    batchUniqId: str | None = None


# --- pull / offsets --------------------------------------------------------------------------

PULL_FLAG_COMMIT_OFFSET = 1
PULL_FLAG_SUSPEND = 2
PULL_FLAG_SUBSCRIPTION = 4
PULL_FLAG_CLASS_FILTER = 8
PULL_FLAG_LITE_PULL = 16


@attrs.define(slots=True)
class PullMessageRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    queueOffset: int
    maxMsgNums: int
    sysFlag: int
    commitOffset: int
    suspendTimeoutMillis: int
    subVersion: int
    subscription: str | None = None
    expressionType: str | None = None
    maxMsgBytes: int | None = None
    bname: str | None = None
    lo: bool | None = None  # upstream TopicRequestHeader: false = a physical queue (forwarded)


@attrs.define(slots=True)
class PullMessageResponseHeader:
    suggestWhichBrokerId: int
    nextBeginOffset: int
    minOffset: int
    maxOffset: int
    offsetDelta: int | None = None
    topicSysFlag: int | None = None
    groupSysFlag: int | None = None


@attrs.define(slots=True)
class QueryConsumerOffsetRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    setZeroIfNotFound: bool | None = None
    lo: bool | None = None  # upstream TopicRequestHeader: false = a physical queue (forwarded)


@attrs.define(slots=True)
class OffsetResponseHeader:
    """Response of QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: int


@attrs.define(slots=True)
class ResetOffsetRequestHeader:
    """INVOKE_BROKER_TO_RESET_OFFSET (222, admin -> broker) and RESET_CONSUMER_CLIENT_OFFSET
    (220, broker -> each member). ``timestamp`` -1: each queue's max offset (skip the
    accumulated messages); ``isForce`` false: an offset only moves back; ``queueId`` >= 0 with
    ``offset``: that one queue to that offset (upstream 5.x)."""

    topic: str
    group: str
    timestamp: int
    isForce: bool
    queueId: int = -1
    offset: int | None = None


@attrs.define(slots=True)
class CloneGroupOffsetRequestHeader:
    """CLONE_GROUP_OFFSET (314): copy srcGroup's committed offsets to destGroup; ``topic``
    None: every topic srcGroup committed on; ``offline`` false: skip a topic an online
    srcGroup does not subscribe to."""

    srcGroup: str
    destGroup: str
    topic: str | None = None
    offline: bool = False


@attrs.define(slots=True)
class UpdateConsumerOffsetRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    commitOffset: int
    lo: bool | None = None  # upstream TopicRequestHeader: false = a physical queue (forwarded)


@attrs.define(slots=True)
class GetMaxOffsetRequestHeader:
    topic: str
    queueId: int
    committed: bool | None = None
    lo: bool | None = None  # upstream TopicRequestHeader: false = a physical queue (forwarded)


@attrs.define(slots=True)
class GetMinOffsetRequestHeader:
    topic: str
    queueId: int
    lo: bool | None = None  # upstream TopicRequestHeader: false = a physical queue (forwarded)


@attrs.define(slots=True)
class SearchOffsetRequestHeader:
    topic: str
    queueId: int
    timestamp: int
    boundaryType: str | None = None
    lo: bool | None = None  # upstream TopicRequestHeader: false = a physical queue (forwarded)


@attrs.define(slots=True)
class GetEarliestMsgStoretimeRequestHeader:
    topic: str
    queueId: int


@attrs.define(slots=True)
class GetEarliestMsgStoretimeResponseHeader:
    timestamp: int


# --- query -----------------------------------------------------------------------------------


@attrs.define(slots=True)
class ViewMessageRequestHeader:
    offset: int
    topic: str | None = None


@attrs.define(slots=True)
class QueryMessageRequestHeader:
    topic: str
    key: str
    maxNum: int
    beginTimestamp: int
    endTimestamp: int


@attrs.define(slots=True)
class QueryMessageResponseHeader:
    indexLastUpdateTimestamp: int
    indexLastUpdatePhyoffset: int


# --- consumers -------------------------------------------------------------------------------


@attrs.define(slots=True)
class GetConsumerListByGroupRequestHeader:
    consumerGroup: str


@attrs.define(slots=True)
class UnregisterClientRequestHeader:
    clientID: str
    producerGroup: str | None = None
    consumerGroup: str | None = None


@attrs.define(slots=True)
class ConsumerSendMsgBackRequestHeader:
    offset: int
    group: str
    delayLevel: int
    originMsgId: str | None = None
    originTopic: str | None = None
    unitMode: bool | None = None
    maxReconsumeTimes: int | None = None


@attrs.define(slots=True)
class NotifyConsumerIdsChangedRequestHeader:
    consumerGroup: str


@attrs.define(slots=True)
class GetConsumeStatsRequestHeader:
    consumerGroup: str
    topic: str | None = None
    topicList: str | None = None  # ";"-separated; when given, exactly these topics

    def topics(self) -> list[str]:
        return [t for t in (self.topicList or "").split(";") if t]


@attrs.define(slots=True)
class GetConsumeStatsInBrokerHeader:
    """GET_BROKER_CONSUME_STATS (317); ``isOrder``: only ordered topics."""

    isOrder: bool = False


@attrs.define(slots=True)
class GetProducerConnectionListRequestHeader:
    producerGroup: str


@attrs.define(slots=True)
class QueryTopicConsumeByWhoRequestHeader:
    topic: str


@attrs.define(slots=True)
class GetConsumerConnectionListRequestHeader:
    consumerGroup: str


# --- topics ----------------------------------------------------------------------------------


@attrs.define(slots=True)
class CreateTopicRequestHeader:
    topic: str
    defaultTopic: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicFilterType: str
    topicSysFlag: int | None = None
    order: bool = False
    attributes: str | None = None
    force: bool | None = None


@attrs.define(slots=True)
class DeleteTopicRequestHeader:
    topic: str


@attrs.define(slots=True)
class DeleteTopicFromNamesrvRequestHeader:
    topic: str
    clusterName: str | None = None


@attrs.define(slots=True)
class GetTopicStatsInfoRequestHeader:
    topic: str


@attrs.define(slots=True)
class GetTopicConfigRequestHeader:
    topic: str
    lo: bool | None = None  # upstream TopicRequestHeader: true asks for the static mapping


@attrs.define(slots=True)
class GetRouteInfoRequestHeader:
    topic: str
    acceptStandardJsonOnly: bool | None = None


@attrs.define(slots=True)
class GetTopicsByClusterRequestHeader:
    cluster: str


# --- broker <-> namesrv ----------------------------------------------------------------------


@attrs.define(slots=True)
class RegisterBrokerRequestHeader:
    brokerName: str
    brokerAddr: str
    clusterName: str
    haServerAddr: str
    brokerId: int
    heartbeatTimeoutMillis: int | None = None
    enableActingMaster: bool | None = None
    compressed: bool = False
    bodyCrc32: int = 0


@attrs.define(slots=True)
class RegisterBrokerResponseHeader:
    haServerAddr: str | None = None
    masterAddr: str | None = None


@attrs.define(slots=True)
class UnRegisterBrokerRequestHeader:
    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: int


@attrs.define(slots=True)
class BrokerHeartbeatRequestHeader:
    clusterName: str
    brokerAddr: str
    brokerName: str
    brokerId: int | None = None
    epoch: int | None = None
    maxOffset: int | None = None
    confirmOffset: int | None = None
    heartbeatTimeoutMills: int | None = None
    electionPriority: int | None = None
    # rocketrio extension (upstream controllers ignore it): true while the broker's catch-up
    # fence holds (it cut its CommitLog after a lost page, actors/broker/store/lost_page.py);
    # our controller-mode brokers always send it to the controllers, absent keeps the last value
    notElectable: bool | None = None


@attrs.define(slots=True)
class GetBrokerMemberGroupRequestHeader:
    clusterName: str
    brokerName: str


@attrs.define(slots=True)
class QueryDataVersionRequestHeader:
    brokerName: str
    brokerAddr: str
    clusterName: str
    brokerId: int


@attrs.define(slots=True)
class QueryDataVersionResponseHeader:
    changed: bool


@attrs.define(slots=True)
class WipeWritePermOfBrokerRequestHeader:
    brokerName: str


@attrs.define(slots=True)
class WipeWritePermOfBrokerResponseHeader:
    wipeTopicCount: int


# --- broker admin (appended by the broker helper) --------------------------------------------


@attrs.define(slots=True)
class DeleteSubscriptionGroupRequestHeader:
    groupName: str
    cleanOffset: bool = False


@attrs.define(slots=True)
class ResumeCheckHalfMessageRequestHeader:
    """RESUME_CHECK_HALF_MESSAGE (323): the half's offset message id (nullable upstream)."""

    msgId: str | None = None


@attrs.define(slots=True)
class UpdateGroupForbiddenRequestHeader:
    """UPDATE_AND_GET_GROUP_FORBIDDEN (353): no ``readable`` only reads the current value."""

    group: str
    topic: str
    readable: bool | None = None


@attrs.define(slots=True)
class GetSubscriptionGroupConfigRequestHeader:
    group: str


@attrs.define(slots=True)
class GetBrokerConfigResponseHeader:
    version: str | None = None


# --- namesrv: kv config, topic registration, write perm, min broker id (helper-namesrv) -------


@attrs.define(slots=True)
class PutKVConfigRequestHeader:
    namespace: str
    key: str
    value: str


@attrs.define(slots=True)
class GetKVConfigRequestHeader:
    namespace: str
    key: str


@attrs.define(slots=True)
class GetKVConfigResponseHeader:
    value: str | None = None


@attrs.define(slots=True)
class DeleteKVConfigRequestHeader:
    namespace: str
    key: str


@attrs.define(slots=True)
class GetKVListByNamespaceRequestHeader:
    namespace: str


@attrs.define(slots=True)
class RegisterTopicRequestHeader:
    """REGISTER_TOPIC_IN_NAMESRV; the body is a TopicRouteData whose queueDatas are taken."""

    topic: str


@attrs.define(slots=True)
class AddWritePermOfBrokerRequestHeader:
    brokerName: str


@attrs.define(slots=True)
class AddWritePermOfBrokerResponseHeader:
    addTopicCount: int


@attrs.define(slots=True)
class NotifyMinBrokerIdChangeRequestHeader:
    """NOTIFY_MIN_BROKER_ID_CHANGE (905), NameServer -> broker, oneway; every field nullable."""

    minBrokerId: int | None = None
    brokerName: str | None = None
    minBrokerAddr: str | None = None
    offlineBrokerAddr: str | None = None
    haBrokerAddr: str | None = None


@attrs.define(slots=True)
class ExchangeHAInfoRequestHeader:
    """EXCHANGE_BROKER_HA_INFO (906), broker -> broker; every field nullable. With
    masterHaAddress set it pushes the master's HA address; without it, it asks for it."""

    masterHaAddress: str | None = None
    masterFlushOffset: int | None = None
    masterAddress: str | None = None


@attrs.define(slots=True)
class ExchangeHAInfoResponseHeader:
    """The answer to a 906 pull: the master's HA address, max offset and address (every field
    empty when the answering broker is not the master)."""

    masterHaAddress: str | None = None
    masterFlushOffset: int | None = None
    masterAddress: str | None = None


# --- transactions (upstream EndTransactionRequestHeader, CheckTransactionStateRequestHeader) --


@attrs.define(slots=True)
class EndTransactionRequestHeader:
    """END_TRANSACTION (37, oneway from the producer). ``commitOrRollback`` is a transaction
    sysFlag value: 0 (not type: unknown), 8 (commit) or 12 (rollback). ``bname`` is the
    RpcRequestHeader field the Java client fills with the broker name."""

    producerGroup: str
    tranStateTableOffset: int
    commitLogOffset: int
    commitOrRollback: int
    msgId: str
    topic: str | None = None
    fromTransactionCheck: bool | None = None
    transactionId: str | None = None
    bname: str | None = None


@attrs.define(slots=True)
class CheckTransactionStateRequestHeader:
    """CHECK_TRANSACTION_STATE (39, oneway from the broker to a producer of the group); the
    body is the half message encoded with its real topic and queue."""

    tranStateTableOffset: int
    commitLogOffset: int
    topic: str | None = None
    msgId: str | None = None
    transactionId: str | None = None
    offsetMsgId: str | None = None
    bname: str | None = None
