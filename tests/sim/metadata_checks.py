"""The metadata invariants of the whole-cluster simulation (SPEC F4), as bookkeeping that fails
the run through the `ClusterChecker` (cluster_checks.py):

8. **Queue counts and permissions change only by operator command** (`check_master`): for every
   topic an operator created on a set, the set's master at every step serves exactly the
   (readQueueNums, writeQueueNums, perm) of the operator's last answered command (or, while a
   command is in flight, the one before it), never what a failover, a restart or a promotion
   made of it.
9. **No message is stored in a queue its topic's config does not have** (`check_master`): every
   queue that holds records on the master (but the metadata journal's, and a deleted topic's
   until its segments are cleaned) belongs to a topic of its table, within its readQueueNums
   (operator topics, and the retry, DLQ and system topics the broker creates).
10. **A deleted topic or subscription group stays deleted** (`check_master`): once the
    operator's delete was answered, no master of the set has it again, across restarts and
    failovers.
11. **Consumer offsets never go back by more than the bound** (`on_offset_committed`,
    `check_offsets`): a new master's committed offset of a queue is at least what the group had
    committed `OFFSET_LAG_BOUND_S` before the old master stopped answering. Why that bound:
    offsets reach a slave only through its SlaveSynchronize round (every `SYNC_PERIOD_S`, each
    call bounded by `CALL_TIMEOUT_S`), so a promoted slave may miss the commits of up to one
    round; the group re-consumes those messages (at-least-once, as upstream). The measured
    re-consumption (messages and seconds) is counted in the checker's stats.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NoReturn

import attrs

from rocketrio.actors.broker.roles.slave_sync import CALL_TIMEOUT_S, SYNC_PERIOD_S
from rocketrio.actors.broker.tables.meta_log import META_TOPIC
from rocketrio.protocol.bodies import TopicConfig

OFFSET_LAG_BOUND_S = SYNC_PERIOD_S + CALL_TIMEOUT_S
Shape = tuple[int, int, int]  # (readQueueNums, writeQueueNums, perm)
QueueKey = tuple[str, str, str, int]  # (set, group, topic, queue id)


def shape(tc: TopicConfig) -> Shape:
    return (tc.readQueueNums, tc.writeQueueNums, tc.perm)


@attrs.define
class MetadataChecker:
    fail: Callable[[str], NoReturn]
    count: Callable[[str, int], None]
    # (set, topic) -> the shapes allowed now: the last answered one, plus one in flight
    topics: dict[tuple[str, str], set[Shape]] = attrs.field(factory=dict)
    deleted_topics: set[tuple[str, str]] = attrs.field(factory=set)
    deleted_groups: set[tuple[str, str]] = attrs.field(factory=set)
    # per queue: (time, offset) of every commit a master answered, in order
    commits: dict[QueueKey, list[tuple[float, int]]] = attrs.field(factory=dict)
    # measured at each check_offsets: the most messages / seconds of commits a new master lacked
    rewound_msgs_max: int = 0
    rewound_s_max: float = 0.0

    # ------------------------------------------------------------------ operator commands

    def topic_command(self, set_name: str, tc: TopicConfig) -> None:
        """Before the operator's create/update is sent: the new shape becomes allowed."""
        self.topics.setdefault((set_name, tc.topicName), set()).add(shape(tc))
        self.deleted_topics.discard((set_name, tc.topicName))

    def topic_answered(self, set_name: str, tc: TopicConfig) -> None:
        self.topics[(set_name, tc.topicName)] = {shape(tc)}

    def topic_deleted(self, set_name: str, topic: str) -> None:
        """After the operator's delete was answered."""
        self.topics.pop((set_name, topic), None)
        self.deleted_topics.add((set_name, topic))

    def group_deleted(self, set_name: str, group: str) -> None:
        self.deleted_groups.add((set_name, group))

    # ------------------------------------------------------------------ 8, 9, 10

    def check_master(
        self,
        set_name: str,
        key: str,
        topics: Mapping[str, TopicConfig],
        groups: Mapping[str, object],
        queues_with_records: Mapping[str, int],
    ) -> None:
        for (s, topic), allowed in self.topics.items():
            if s != set_name:
                continue
            tc = topics.get(topic)
            if tc is None:
                self.fail(f"{key} lost the topic {topic} an operator created (allowed {allowed})")
            if shape(tc) not in allowed:
                self.fail(
                    f"{key} serves {topic} as (read, write, perm) {shape(tc)}, but the operator "
                    f"set {sorted(allowed)}: changed by no operator command"
                )
        deleted = {t for s, t in self.deleted_topics if s == set_name}
        for topic, n in queues_with_records.items():
            if topic == META_TOPIC or topic in deleted:
                continue  # a deleted topic's queues stay until their segments are cleaned
            tc = topics.get(topic)
            if tc is None or n > tc.readQueueNums:
                have = "no config" if tc is None else f"{tc.readQueueNums} read queues"
                self.fail(
                    f"{key} stores messages of {topic} in queue {n - 1}, its config has {have}"
                )
        for topic in deleted:
            if topic in topics:
                self.fail(f"{key} serves {topic} again, which an operator deleted")
        for s, group in self.deleted_groups:
            if s == set_name and group in groups:
                self.fail(f"{key} has the subscription group {group} again, deleted by an operator")
        if META_TOPIC in topics:
            self.fail(f"{key} exposes its metadata journal {META_TOPIC} as a topic")

    # ------------------------------------------------------------------ 11. offsets

    def on_offset_committed(self, queue: QueueKey, at: float, offset: int) -> None:
        self.commits.setdefault(queue, []).append((at, offset))

    def check_offsets(
        self, set_name: str, key: str, stopped_at: float, offsets: Callable[[str, str, int], int]
    ) -> None:
        """``offsets(group, topic, queue)``: the new master's committed offset; ``stopped_at``:
        when the old master stopped answering."""
        for (s, group, topic, qid), history in self.commits.items():
            if s != set_name:
                continue
            have = offsets(group, topic, qid)
            before = [o for t, o in history if t <= stopped_at]
            latest = max(before, default=-1)
            floor = max((o for t, o in history if t <= stopped_at - OFFSET_LAG_BOUND_S), default=-1)
            if have < floor:
                self.fail(
                    f"{key}: {group} {topic}:{qid} committed offset {have} is behind {floor}, "
                    f"committed more than {OFFSET_LAG_BOUND_S}s before the master stopped"
                )
            back = max(0, latest - have)
            self.count("offset_rewound_msgs", back)
            self.rewound_msgs_max = max(self.rewound_msgs_max, back)
            if back:
                first_lost = min(t for t, o in history if o > have)
                self.rewound_s_max = max(self.rewound_s_max, stopped_at - first_lost)
