"""Client configuration with upstream key names and defaults (ClientConfig, DefaultMQProducer,
DefaultMQPushConsumer, DefaultLitePullConsumer).

Attribute names are upstream's (camelCase, milliseconds where upstream uses milliseconds), so a
reader of the Java client's docs finds every knob. The user-facing constructors take a few
Pythonic keyword arguments (``send_timeout=3.0`` seconds ...) and fill these classes.
"""

from __future__ import annotations

import enum
from typing import Protocol

import attrs

from rocketrio.actors.client.errors import UsageError
from rocketrio.protocol.acl_signature import RequestSigner, SessionCredentials
from rocketrio.protocol.config import non_negative, positive

DEFAULT_TOPIC = "TBW102"  # createTopicKey: the broker auto-creates topics from its config
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
MASTER_ID = 0


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(enum.Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


@attrs.define
class ClientConfig:
    """Upstream ClientConfig: shared by every producer / consumer of one MQClientInstance."""

    namesrvAddr: str = ""
    clientIP: str = "127.0.0.1"
    instanceName: str = ""  # empty: "<pid>#<n>", unique per client instance in this process
    pollNameServerInterval: int = attrs.field(default=30_000, validator=positive)
    heartbeatBrokerInterval: int = attrs.field(default=30_000, validator=positive)
    persistConsumerOffsetInterval: int = attrs.field(default=5_000, validator=positive)
    mqClientApiTimeout: int = attrs.field(default=3_000, validator=positive)
    # ACL: when set, every request is signed (upstream AclClientRPCHook + SessionCredentials)
    accessKey: str = ""
    secretKey: str = attrs.field(default="", repr=False)
    securityToken: str = attrs.field(default="", repr=False)
    # rocketrio's message tracing (not upstream's trace topic): one log line per acknowledged
    # send (trace_send_acked) and per consumed message (trace_consumed), which
    # `rocketrio analyze` joins to find acknowledged-but-lost messages and duplicates
    trace: bool = False

    def __attrs_post_init__(self) -> None:
        if bool(self.accessKey) != bool(self.secretKey):
            raise ValueError("accessKey and secretKey go together: set both or neither")

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrvAddr.split(";") if a.strip()]

    def request_signer(self) -> RequestSigner | None:
        """The request hook that signs with accessKey/secretKey (None when not set)."""
        return request_signer(self.accessKey, self.secretKey, self.securityToken)


def request_signer(
    access_key: str | None, secret_key: str | None, security_token: str | None = None
) -> RequestSigner | None:
    """A signer for --access-key/--secret-key (both or neither; None when neither)."""
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise UsageError("--access-key and --secret-key go together: give both or neither")
    return RequestSigner(SessionCredentials(access_key, secret_key, security_token or None))


@attrs.define
class ProducerConfig:
    """Upstream DefaultMQProducer keys."""

    producerGroup: str
    createTopicKey: str = DEFAULT_TOPIC
    defaultTopicQueueNums: int = attrs.field(default=4, validator=positive)
    sendMsgTimeout: int = attrs.field(default=3_000, validator=positive)
    retryTimesWhenSendFailed: int = attrs.field(default=2, validator=non_negative)
    retryTimesWhenSendAsyncFailed: int = attrs.field(default=2, validator=non_negative)
    # a sync send answered FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE
    # tries another broker (upstream; the answer is returned when no attempt is left)
    retryAnotherBrokerWhenNotStoreOK: bool = False
    maxMessageSize: int = attrs.field(default=4 * 1024 * 1024, validator=positive)
    # how long a broker whose send failed is avoided (upstream's isolation duration)
    notAvailableDuration: int = attrs.field(default=30_000, validator=non_negative)
    # sends in flight per producer (send_async backpressure)
    maxInFlight: int = attrs.field(default=1024, validator=positive)


@attrs.define
class PushConsumerConfig:
    """Upstream DefaultMQPushConsumer keys."""

    consumerGroup: str
    messageModel: MessageModel = MessageModel.CLUSTERING
    consumeFromWhere: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    # yyyyMMddHHmmss, local time; empty: half an hour before start, like upstream
    consumeTimestamp: str = ""
    consumeThreadMax: int = attrs.field(default=20, validator=positive)
    pullThresholdForQueue: int = attrs.field(default=1000, validator=positive)
    pullThresholdSizeForQueue: int = attrs.field(default=100, validator=positive)  # MiB
    consumeConcurrentlyMaxSpan: int = attrs.field(default=2000, validator=positive)
    pullInterval: int = attrs.field(default=0, validator=non_negative)
    pullBatchSize: int = attrs.field(default=32, validator=positive)
    consumeMessageBatchMaxSize: int = attrs.field(default=1, validator=positive)
    maxReconsumeTimes: int = attrs.field(default=16, validator=non_negative)
    # orderly consumption: how long a SUSPEND_CURRENT_QUEUE_A_MOMENT answer pauses the queue
    suspendCurrentQueueTimeMillis: int = attrs.field(default=1000, validator=positive)
    brokerSuspendMaxTimeMillis: int = attrs.field(default=15_000, validator=positive)
    consumerTimeoutMillisWhenSuspend: int = attrs.field(default=30_000, validator=positive)
    # rebalance period (upstream system property rocketmq.client.rebalance.waitInterval)
    rebalanceInterval: int = attrs.field(default=20_000, validator=positive)
    # broadcasting offsets file; empty: ~/.rocketmq_offsets/<clientId>/<group>/offsets.json
    offsetStorePath: str = ""

    def __attrs_post_init__(self) -> None:
        if self.consumerTimeoutMillisWhenSuspend <= self.brokerSuspendMaxTimeMillis:
            raise ValueError(
                "consumerTimeoutMillisWhenSuspend must exceed brokerSuspendMaxTimeMillis, "
                "or every long-polling pull times out on the client first"
            )


@attrs.define
class LitePullConsumerConfig:
    """Upstream DefaultLitePullConsumer keys."""

    consumerGroup: str
    messageModel: MessageModel = MessageModel.CLUSTERING
    consumeFromWhere: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consumeTimestamp: str = ""
    pullBatchSize: int = attrs.field(default=10, validator=positive)
    pullThresholdForQueue: int = attrs.field(default=1000, validator=positive)
    pullThresholdForAll: int = attrs.field(default=10_000, validator=positive)
    autoCommit: bool = True
    autoCommitIntervalMillis: int = attrs.field(default=5_000, validator=positive)
    brokerSuspendMaxTimeMillis: int = attrs.field(default=20_000, validator=positive)
    consumerTimeoutMillisWhenSuspend: int = attrs.field(default=30_000, validator=positive)
    rebalanceInterval: int = attrs.field(default=20_000, validator=positive)
    offsetStorePath: str = ""


class ConsumerSettings(Protocol):
    """The config keys the shared machinery reads (both consumer config classes have them)."""

    consumerGroup: str
    messageModel: MessageModel
    consumeFromWhere: ConsumeFromWhere
    consumeTimestamp: str
    pullBatchSize: int
    brokerSuspendMaxTimeMillis: int
    consumerTimeoutMillisWhenSuspend: int
    rebalanceInterval: int
    offsetStorePath: str
