"""The headers and bodies of the broker's read-only admin queries (upstream
AdminBrokerProcessor): QUERY_CONSUME_QUEUE (321, ``mqadmin queryCq``), QUERY_TOPICS_BY_CONSUMER
(343), QUERY_SUBSCRIPTION_BY_CONSUMER (345), QUERY_CORRECTION_OFFSET (308,
``mqadmin queryCorrectionOffset``). GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) answers a
`TopicList` (protocol/bodies.py).

Field names are upstream's; bodies are written with `fastjson.encode` (alphabetical, compact,
None omitted, the correction map's integer keys unquoted); `pretty` is fastjson's pretty layout,
which QUERY_CONSUME_QUEUE's filterData and ``queryCq``'s subscription use.
"""

from __future__ import annotations

from typing import Any

import attrs

from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import SubscriptionData


@attrs.define(slots=True)
class QueryTopicsByConsumerRequestHeader:
    group: str


@attrs.define(slots=True)
class QuerySubscriptionByConsumerRequestHeader:
    group: str
    topic: str | None = None


@attrs.define(slots=True)
class QuerySubscriptionResponseBody:
    subscriptionData: SubscriptionData | None = None
    group: str | None = None
    topic: str | None = None


@attrs.define(slots=True)
class QueryCorrectionOffsetHeader:
    compareGroup: str
    topic: str
    filterGroups: str | None = None


@attrs.define(slots=True)
class QueryCorrectionOffsetBody:
    correctionOffsets: dict[int, int] = attrs.field(factory=dict)


@attrs.define(slots=True)
class QueryConsumeQueueRequestHeader:
    topic: str
    queueId: int = 0
    index: int = 0
    count: int = 0
    consumerGroup: str | None = None


@attrs.define(slots=True)
class ConsumeQueueData:
    physicOffset: int = 0
    physicSize: int = 0
    tagsCode: int = 0
    extendDataJson: str | None = None
    bitMap: str | None = None
    eval: bool = False
    msg: str | None = None


@attrs.define(slots=True)
class QueryConsumeQueueResponseBody:
    subscriptionData: SubscriptionData | None = None
    filterData: str | None = None
    queueData: list[ConsumeQueueData] | None = None
    maxQueueIndex: int = 0
    minQueueIndex: int = 0


def pretty(props: dict[str, Any], depth: int = 0) -> str:
    """Properties as fastjson's pretty format writes a bean: one tab-indented property a line,
    in the given order, nested beans (dicts) likewise, every other value compact (lists on
    one line)."""
    if not props:
        return "{}"
    pad = "\t" * (depth + 1)
    lines = [
        f"{pad}{fastjson.dumps(k)}:"
        + (pretty(v, depth + 1) if isinstance(v, dict) else fastjson.dumps(v))
        for k, v in props.items()
    ]
    return "{\n" + ",\n".join(lines) + "\n" + "\t" * depth + "}"
