"""The broker config values the send path reads (send/processor.py), rebuilt on a live change."""

from __future__ import annotations

import attrs

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.schedule.policy import parse_message_delay_level

# the live keys (UPDATE_BROKER_CONFIG) the send path reads, through `SendConfig`
SEND_KEYS = frozenset(
    {"brokerPermission", "autoCreateTopicEnable", "maxMessageSize", "rejectTransactionMessage"}
)


@attrs.frozen
class SendConfig:
    """The broker config values the send path reads (rebuilt by `reconfigure`)."""

    broker_permission: int
    broker_ip: str
    broker_name: str
    cluster_name: str
    auto_create_topic_enable: bool
    max_message_size: int
    reject_transaction_message: bool = False
    delay_levels: int = 18  # how many messageDelayLevel levels
    timer_max_delay_ms: int = 3 * 24 * 3600 * 1000  # timerMaxDelaySec

    @classmethod
    def of(cls, c: BrokerConfig) -> SendConfig:
        return cls(
            c.brokerPermission,
            c.brokerIP1,
            c.brokerName,
            c.brokerClusterName,
            c.autoCreateTopicEnable,
            c.maxMessageSize,
            c.rejectTransactionMessage,
            delay_levels=len(parse_message_delay_level(c.messageDelayLevel)),
            timer_max_delay_ms=c.timerMaxDelaySec * 1000,
        )
