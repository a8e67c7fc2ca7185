"""The broker's topic table (upstream TopicConfigManager): topics.json content, no I/O.

Owns the `TopicConfig` of every topic this broker hosts and its `DataVersion` (bumped on every
change, so the NameServer can tell a stale registration). Creation paths mirror upstream:

- `create_in_send`: auto-create on first send, allowed only when the default topic (TBW102)
  exists and carries the INHERIT perm bit (present when autoCreateTopicEnable is on); the new
  topic gets ``min(client defaultTopicQueueNums, TBW102 writeQueueNums)`` queues.
- `create_in_send_back`: retry and DLQ topics (%RETRY%group / %DLQ%group), always allowed.
- `update`: admin UPDATE_AND_CREATE_TOPIC after `check_topic_name` / `check_queue_nums`.

Every mutating method returns True when the table changed; the caller (the broker) persists
the table and re-registers with the NameServers. Persistence lives in `config_files`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.schedule.policy import parse_message_delay_level
from rocketrio.actors.broker.tables.meta_log import META_TOPIC
from rocketrio.protocol.bodies import (
    PERM_INHERIT,
    PERM_PRIORITY,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketrio.protocol.reply import reply_topic
from rocketrio.storage.timer_wheel import TIMER_TOPIC, max_queue_id

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
RMQ_SYS_SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
RMQ_SYS_BENCHMARK_TOPIC = "BenchmarkTest"
RMQ_SYS_TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
RMQ_SYS_TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RMQ_SYS_TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
RMQ_SYS_SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
RMQ_SYS_OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
TOPIC_MAX_LENGTH = 127
MAX_QUEUE_NUMS = 1024
DLQ_NUMS_PER_GROUP = 1

# Upstream TopicValidator.SYSTEM_TOPIC_SET (the broker adds its cluster/broker name topics).
_STATIC_SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_BENCHMARK_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRACE_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
    }
)
# Topics a producer may not send to (upstream NOT_ALLOWED_SEND_TOPIC_SET), and the broker's
# metadata journal (meta_log.py: only the broker writes it)
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        META_TOPIC,
        RMQ_SYS_SCHEDULE_TOPIC,
        RMQ_SYS_TRANS_HALF_TOPIC,
        RMQ_SYS_TRANS_OP_HALF_TOPIC,
        RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
        RMQ_SYS_SELF_TEST_TOPIC,
        RMQ_SYS_OFFSET_MOVED_EVENT,
        TIMER_TOPIC,
    }
)
_VALID_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def looks_like_system_topic(topic: str, cluster_and_broker_names: set[str]) -> bool:
    """A topic a tool should list apart from the users' own: upstream's system topics, the
    retry and DLQ topics, and the topics named after a cluster or broker set."""
    return (
        topic in _STATIC_SYSTEM_TOPICS
        or topic in cluster_and_broker_names
        or topic.startswith((SYSTEM_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))
    )


def check_topic_name(topic: str) -> str | None:
    """None when valid, else upstream's remark (TopicValidator.validateTopic)."""
    if not topic or topic.isspace():
        return "The specified topic is blank."
    if not _VALID_NAME.match(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def check_group_name(group: str) -> str | None:
    if not group or group.isspace():
        return "The specified group is blank."
    if not _VALID_NAME.match(group):
        return "The specified group contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > 255:
        return "The specified group is longer than group max length 255."
    return None


def check_queue_nums(read_queue_nums: int, write_queue_nums: int) -> str | None:
    for key, n in (("readQueueNums", read_queue_nums), ("writeQueueNums", write_queue_nums)):
        if not 1 <= n <= MAX_QUEUE_NUMS:
            return f"{key} must be between 1 and {MAX_QUEUE_NUMS}, got {n}"
    return None


def check_perm(perm: int) -> str | None:
    if perm < 0 or perm & ~(PERM_READ | PERM_WRITE | PERM_INHERIT | PERM_PRIORITY):
        return f"perm {perm} is not a valid permission (2=write, 4=read, 6=read+write)"
    return None


class TopicConfigManager:
    """The topic table and its DataVersion. Time comes from ``now_ms`` (injected)."""

    def __init__(self, config: BrokerConfig, now_ms: Callable[[], int]) -> None:
        self.config = config
        self.now_ms = now_ms
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.system_topics: set[str] = set(_STATIC_SYSTEM_TOPICS)

    # -- loading / snapshots
    def load(self, wrapper: TopicConfigSerializeWrapper) -> None:
        """Adopt a table read from topics.json, then (re)create the system topics."""
        self.table = dict(wrapper.topicConfigTable)
        self.data_version = wrapper.dataVersion
        self._init_system_topics()

    def snapshot(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(
            topicConfigTable=dict(self.table),
            dataVersion=DataVersion(
                self.data_version.stateVersion,
                self.data_version.timestamp,
                self.data_version.counter,
            ),
        )

    def _init_system_topics(self) -> None:
        """TBW102, the cluster-name and broker-name topics and SELF_TEST, like upstream init()."""
        c = self.config
        inherit_rw = PERM_INHERIT | PERM_READ | PERM_WRITE
        wanted = [TopicConfig(RMQ_SYS_SELF_TEST_TOPIC, 1, 1)]
        if c.autoCreateTopicEnable:
            n = c.defaultTopicQueueNums
            wanted.append(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, inherit_rw))
        elif AUTO_CREATE_TOPIC_KEY_TOPIC in self.table:
            # A table written while auto-create was on must not keep allowing it.
            self.table[AUTO_CREATE_TOPIC_KEY_TOPIC].perm = PERM_READ | PERM_WRITE
        wanted.append(TopicConfig(c.brokerClusterName, 16, 16, inherit_rw))
        wanted.append(TopicConfig(c.brokerName, 1, 1, inherit_rw))
        # request-reply: where responders send replies (reply/processor.py)
        wanted.append(TopicConfig(reply_topic(c.brokerClusterName), 1, 1))
        # RIP-32 compat mode: a NameServer without GET_BROKER_MEMBER_GROUP lists the group's
        # live members in this topic's route (upstream TopicConfigManager, perm INHERIT only)
        wanted.append(TopicConfig(SYNC_BROKER_MEMBER_GROUP_PREFIX + c.brokerName, 1, 1, 1))
        # the delay levels' and the timer wheel's queues (schedule_service.py), so topicStatus
        # and the routes show them
        levels = len(parse_message_delay_level(c.messageDelayLevel))
        timers = max_queue_id(c.timerMaxDelaySec * 1000) + 1
        wanted.append(TopicConfig(RMQ_SYS_SCHEDULE_TOPIC, levels, levels))
        wanted.append(TopicConfig(TIMER_TOPIC, timers, timers))
        for tc in wanted:
            self.system_topics.add(tc.topicName)
            if tc.topicName not in self.table:
                self.table[tc.topicName] = tc

    # -- queries
    def select(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def is_system_topic(self, topic: str) -> bool:
        return topic in self.system_topics or topic.startswith(SYSTEM_TOPIC_PREFIX)

    # -- changes
    def _bump(self) -> None:
        self.data_version = self.data_version.next_version(self.now_ms())

    def create_in_send(
        self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        """Auto-create on send; None when the default topic does not allow it."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        if default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC and not self.config.autoCreateTopicEnable:
            return None
        base = self.table.get(default_topic)
        if base is None or not base.perm & PERM_INHERIT:
            return None
        n = max(0, min(client_queue_nums, base.writeQueueNums))
        if n == 0:
            return None
        tc = TopicConfig(
            topicName=topic,
            readQueueNums=n,
            writeQueueNums=n,
            perm=base.perm & ~PERM_INHERIT,
            topicFilterType=base.topicFilterType,
            topicSysFlag=topic_sys_flag,
        )
        self.table[topic] = tc
        self._bump()
        return tc

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> tuple[TopicConfig, bool]:
        """Retry / DLQ topic: returns (config, created)."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing, False
        tc = TopicConfig(topic, queue_nums, queue_nums, perm, topicSysFlag=topic_sys_flag)
        self.table[topic] = tc
        self._bump()
        return tc, True

    def update(self, tc: TopicConfig) -> bool:
        """Create or replace (admin). Returns True when something changed."""
        old = self.table.get(tc.topicName)
        if old == tc:
            return False
        self.table[tc.topicName] = tc
        self._bump()
        return True

    def set_auto_create_topic(self, enabled: bool) -> TopicConfig | None:
        """autoCreateTopicEnable changed on a running broker: TBW102, the default topic that
        auto-creation inherits from, gains PERM_INHERIT (created with defaultTopicQueueNums
        queues if missing) or loses it. Returns the changed TBW102, None if nothing changed."""
        old = self.table.get(AUTO_CREATE_TOPIC_KEY_TOPIC)
        rw = PERM_READ | PERM_WRITE
        if enabled:
            n = self.config.defaultTopicQueueNums
            new = (
                TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, PERM_INHERIT | rw)
                if old is None
                else attrs.evolve(old, perm=old.perm | PERM_INHERIT | rw)
            )
        elif old is None:
            return None
        else:
            new = attrs.evolve(old, perm=old.perm & ~PERM_INHERIT)
        self.system_topics.add(AUTO_CREATE_TOPIC_KEY_TOPIC)
        return new if self.update(new) else None

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self._bump()
        return True
