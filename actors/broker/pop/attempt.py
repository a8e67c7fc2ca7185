"""What one POP attempt works with: the broker config values the POP path reads (`PopConfig`),
the attempt's fixed parts (`PopAttempt`), what it gathers (`PopAcc`) and its answer (`Popped`,
or a `Refusal`). Shared by the task path (processor.py) and the path without a task
(pop_nowait.py), and by the ACK and probe processors for the config.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.message_filter import MessageSelector
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.protocol.pop_extra_info import revive_topic
from rocketrio.protocol.pop_headers import PopMessageRequestHeader


@attrs.frozen
class PopConfig:
    """The broker config values the POP path reads."""

    broker_name: str
    cluster: str
    broker_permission: int
    broker_ip: str
    revive_queue_num: int = 8
    pop_from_retry_probability: int = 20
    enable_retry_topic_v2: bool = False
    retrieve_from_retry_v1: bool = True
    max_transfer_bytes: int = 256 * 1024
    max_poll_ms: int = 60_000
    max_held_pops: int = 100_000

    @property
    def revive_topic(self) -> str:
        return revive_topic(self.cluster)

    @classmethod
    def of(cls, c: BrokerConfig) -> PopConfig:
        return cls(
            c.brokerName,
            c.brokerClusterName,
            c.brokerPermission,
            c.brokerIP1,
            c.reviveQueueNum,
            c.popFromRetryProbability,
            c.enableRetryTopicV2,
            c.retrieveMessageFromPopRetryTopicV1,
            c.maxTransferBytesOnMessageInMemory,
            c.pullSuspendMaxTimeMillis,
            int(c.maxPopPollingSize),
        )


@attrs.frozen
class Popped:
    """A pop's answer: ``buffers`` the stored records to return (FOUND when not empty)."""

    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str
    msg_offset_info: str
    buffers: tuple[bytes, ...]
    polling_full: bool = False
    order_count_info: str | None = None  # an ordered pop's (None otherwise)

    @property
    def found(self) -> bool:
        return bool(self.buffers)


PopOutcome = Popped | Refusal


@attrs.define
class PopAcc:
    """What one pop gathered so far."""

    max_nums: int
    buffers: list[bytes] = attrs.field(factory=list)
    start_infos: list[str] = attrs.field(factory=list)
    msg_infos: list[str] = attrs.field(factory=list)
    order_infos: list[str] = attrs.field(factory=list)
    rest: int = 0

    @property
    def full(self) -> bool:
        return len(self.buffers) >= self.max_nums


@attrs.frozen
class PopAttempt:
    """The fixed parts of one pop attempt."""

    h: PopMessageRequestHeader
    sel: MessageSelector
    pop_time: int
    revive_qid: int
    rand_q: int
