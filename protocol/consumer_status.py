"""The header and body of ``mqadmin getConsumerStatus``: INVOKE_BROKER_TO_GET_CONSUMER_STATUS
(223, admin -> broker) and GET_CONSUMER_STATUS_FROM_CLIENT (221, broker -> each consumer of the
group). A consumer answers ``messageQueueTable`` (its offsets of the topic); the broker answers
``consumerTable`` (client id -> that table). Upstream's names; written with `fastjson.encode`
(MessageQueue keys bare, in Java HashMap order).
"""

from __future__ import annotations

from typing import Final

import attrs

from rocketrio.protocol.bodies import MessageQueue

# MQVersion.Version names below V3_0_7_SNAPSHOT (ordinal 28), the first that answers 221
OLD_VERSION_NAMES: Final = (
    "V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", "V3_0_0_BETA1", "V3_0_0_BETA2", "V3_0_0_BETA3",
    "V3_0_0_BETA4", "V3_0_0_BETA5", "V3_0_0_BETA6_SNAPSHOT", "V3_0_0_BETA6",
    "V3_0_0_BETA7_SNAPSHOT", "V3_0_0_BETA7", "V3_0_0_BETA8_SNAPSHOT", "V3_0_0_BETA8",
    "V3_0_0_BETA9_SNAPSHOT", "V3_0_0_BETA9", "V3_0_0_FINAL", "V3_0_1_SNAPSHOT", "V3_0_1",
    "V3_0_2_SNAPSHOT", "V3_0_2", "V3_0_3_SNAPSHOT", "V3_0_3", "V3_0_4_SNAPSHOT", "V3_0_4",
    "V3_0_5_SNAPSHOT", "V3_0_5", "V3_0_6_SNAPSHOT", "V3_0_6",
)  # fmt: skip
V3_0_7_SNAPSHOT: Final = len(OLD_VERSION_NAMES)


@attrs.define(slots=True)
class GetConsumerStatusRequestHeader:
    topic: str
    group: str
    clientAddr: str | None = None  # the one client id to ask (blank: every member)


@attrs.define(slots=True)
class GetConsumerStatusBody:
    messageQueueTable: dict[MessageQueue, int] = attrs.field(factory=dict)
    consumerTable: dict[str, dict[MessageQueue, int]] = attrs.field(factory=dict)
