"""What a consumer is doing, in upstream's shapes: GET_CONSUMER_RUNNING_INFO (307) and
QUERY_CONSUME_TIME_SPAN (303) headers and bodies.

ConsumerRunningInfo (remoting/.../protocol/body/ConsumerRunningInfo.java) is what a client
answers to 307 and the broker passes on unchanged: its properties (all string values, keys
``PROP_*`` plus the consumer's config keys), subscriptionSet (a TreeSet ordered by
``topic@subString``), mqTable (a TreeMap ordered by MessageQueue: topic, brokerName, queueId)
of ProcessQueueInfo, mqPopTable, statusTable (a TreeMap by topic) of ConsumeStatus,
userConsumerInfo and, when asked, jstack. The TreeMap / TreeSet orders are made by
`running_info_of`'s callers through `sorted_mq_table` / `sorted_subscriptions`; the MessageQueue
maps are `fastjson.TreeMap`, so the writer keeps that order instead of Java HashMap order.

QueryConsumeTimeSpanBody (303) lists a QueueTimeSpan per queue, with upstream's getter-only
``*TimeStampStr`` properties formatted ``yyyy-MM-dd#HH:mm:ss:SSS`` in the broker's local time.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

import attrs

from rocketrio.protocol.bodies import MessageQueue, SubscriptionData
from rocketrio.protocol.fastjson import TreeMap

# upstream ConsumerRunningInfo.PROP_* (the key of PROP_CONSUME_ORDERLY has no underscore)
PROP_NAMESERVER_ADDR = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP = "PROP_CONSUMER_START_TIMESTAMP"

CONSUME_PASSIVELY = "CONSUME_PASSIVELY"  # push: upstream ConsumeType


@attrs.define(slots=True)
class GetConsumerRunningInfoRequestHeader:
    consumerGroup: str
    clientId: str
    jstackEnable: bool = False


@attrs.define(slots=True)
class QueryConsumeTimeSpanRequestHeader:
    topic: str
    group: str


@attrs.define(slots=True)
class ProcessQueueInfo:
    commitOffset: int = 0
    cachedMsgMinOffset: int = 0
    cachedMsgMaxOffset: int = 0
    cachedMsgCount: int = 0
    cachedMsgSizeInMiB: int = 0
    transactionMsgMinOffset: int = 0
    transactionMsgMaxOffset: int = 0
    transactionMsgCount: int = 0
    locked: bool = False
    tryUnlockTimes: int = 0
    lastLockTimestamp: int = 0
    droped: bool = False  # upstream's spelling
    lastPullTimestamp: int = 0
    lastConsumeTimestamp: int = 0


@attrs.define(slots=True)
class ConsumeStatus:
    """One topic's figures over the last minute (consumeFailedMsgs: the last hour)."""

    pullRT: float = 0.0
    pullTPS: float = 0.0
    consumeRT: float = 0.0
    consumeOKTPS: float = 0.0
    consumeFailedTPS: float = 0.0
    consumeFailedMsgs: int = 0


@attrs.define(slots=True)
class ConsumerRunningInfo:
    properties: dict[str, str] = attrs.field(factory=dict)
    subscriptionSet: list[SubscriptionData] = attrs.field(factory=list)
    mqTable: dict[MessageQueue, ProcessQueueInfo] = attrs.field(factory=TreeMap)
    mqPopTable: dict[MessageQueue, Any] = attrs.field(factory=TreeMap)
    statusTable: dict[str, ConsumeStatus] = attrs.field(factory=dict)
    userConsumerInfo: dict[str, str] = attrs.field(factory=dict)
    jstack: str | None = None

    def is_push(self) -> bool:
        return self.properties.get(PROP_CONSUME_TYPE) == CONSUME_PASSIVELY

    def subscription_keys(self) -> frozenset[str]:
        """What upstream's TreeSet equality compares: ``topic@subString`` of each entry."""
        return frozenset(f"{s.topic}@{s.subString}" for s in self.subscriptionSet)


def mq_order(mq: MessageQueue) -> tuple[str, str, int]:
    """upstream MessageQueue.compareTo: topic, then brokerName, then queueId."""
    return (mq.topic, mq.brokerName, mq.queueId)


def sorted_mq_table(items: Iterable[tuple[MessageQueue, Any]]) -> TreeMap:
    return TreeMap(sorted(items, key=lambda kv: mq_order(kv[0])))


def sorted_subscriptions(subs: Iterable[SubscriptionData]) -> list[SubscriptionData]:
    """A TreeSet<SubscriptionData>: ordered (and deduplicated) by ``topic@subString``."""
    by_key = {f"{s.topic}@{s.subString}": s for s in subs}
    return [by_key[k] for k in sorted(by_key)]


# ---------------------------------------------------------------------------- 303

TIME_SPAN_FORMAT = "%Y-%m-%d#%H:%M:%S"  # + ":SSS": upstream UtilAll.YYYY_MM_DD_HH_MM_SS_SSS


def format_local_ms(ms: int) -> str:
    """``yyyy-MM-dd#HH:mm:ss:SSS`` in this process's local timezone (the broker's JVM zone)."""
    dt = datetime.fromtimestamp(ms // 1000)
    return f"{dt.strftime(TIME_SPAN_FORMAT)}:{ms % 1000:03d}"


@attrs.define(slots=True)
class QueueTimeSpan:
    messageQueue: MessageQueue | None = None
    minTimeStamp: int = 0
    maxTimeStamp: int = 0
    consumeTimeStamp: int = 0
    delayTime: int = 0

    def fastjson_extra(self) -> dict[str, str]:
        """upstream's getter-only properties (ignored when read back)."""
        return {
            "minTimeStampStr": format_local_ms(self.minTimeStamp),
            "maxTimeStampStr": format_local_ms(self.maxTimeStamp),
            "consumeTimeStampStr": format_local_ms(self.consumeTimeStamp),
        }


@attrs.define(slots=True)
class QueryConsumeTimeSpanBody:
    consumeTimeSpanSet: list[QueueTimeSpan] = attrs.field(factory=list)
