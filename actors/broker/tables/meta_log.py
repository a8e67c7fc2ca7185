"""The metadata journal's pure core: topic and group changes as records of the CommitLog.

A master writes every change of its topic table (created by an operator, auto-created by a
send or a send-back, updated, deleted) and every operator change of its subscription-group
table (updated, deleted) as one record of the system topic `META_TOPIC` (queue 0) into its own
CommitLog, in the same store inbox as the messages. The HA log replicates them like any record,
so a replica's log is a prefix of the master's *with the configs in it*: whoever holds a
topic's first message holds the record that created the topic (it was put before the message),
and whoever holds a delete holds the tombstone. A promoted slave replays the journal before it
takes writes (`fold`, then `plan_adoption`): the topic an operator created is the topic the new
master serves, a deleted topic stays deleted. Why this option and not the others:
docs/metadata-failover.md.

This module: the record codec (`encode` / `decode`, JSON bodies), `fold` (the last record per
name wins: the state the journal describes) and `plan_adoption` (what the new master must
still do for queues that hold records but have no config: a topic whose journal records were
cleaned with their CommitLog segment, or written before the journal existed). No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, assert_never

import attrs

from rocketrio.protocol.bodies import SubscriptionGroupConfig, TopicConfig
from rocketrio.protocol.serde import HeaderError, from_json, to_json

META_TOPIC = "rmq_sys_BROKER_META"  # system topic (`rmq_sys_` prefix): never routed or pulled
META_QUEUE = 0


@attrs.frozen
class TopicSet:
    """A topic was created or changed; ``config`` is its whole new config."""

    config: TopicConfig


@attrs.frozen
class TopicGone:
    topic: str


@attrs.frozen
class GroupSet:
    config: SubscriptionGroupConfig


@attrs.frozen
class GroupGone:
    group: str


MetaChange = TopicSet | TopicGone | GroupSet | GroupGone


@attrs.define
class _Body:
    """The JSON shape of one record (one of ``topic`` / ``group`` set for a *_set kind)."""

    kind: Literal["topic_set", "topic_gone", "group_set", "group_gone"]
    name: str
    topic: TopicConfig | None = None
    group: SubscriptionGroupConfig | None = None


def encode(change: MetaChange) -> bytes:
    match change:
        case TopicSet(config=tc):
            body = _Body("topic_set", tc.topicName, topic=tc)
        case TopicGone(topic=t):
            body = _Body("topic_gone", t)
        case GroupSet(config=g):
            body = _Body("group_set", g.groupName, group=g)
        case GroupGone(group=g):
            body = _Body("group_gone", g)
        case _:
            assert_never(change)
    return to_json(body)


def decode(data: bytes) -> MetaChange | None:
    """The change a record holds; None for a body this version cannot read (logged by the
    caller, never applied: an unreadable record must not delete or narrow anything)."""
    try:
        b = from_json(_Body, data)
    except HeaderError:
        return None
    match b.kind:
        case "topic_set":
            return TopicSet(b.topic) if b.topic is not None else None
        case "topic_gone":
            return TopicGone(b.name)
        case "group_set":
            return GroupSet(b.group) if b.group is not None else None
        case "group_gone":
            return GroupGone(b.name)
        case _:
            assert_never(b.kind)


@attrs.frozen
class MetaState:
    """What the journal says, per name: the last config, or None when the last record is a
    delete. Names the journal never mentions are absent (the table keeps what it has)."""

    topics: dict[str, TopicConfig | None]
    groups: dict[str, SubscriptionGroupConfig | None]

    def deleted_topics(self) -> set[str]:
        return {t for t, tc in self.topics.items() if tc is None}


def fold(changes: Iterable[MetaChange]) -> MetaState:
    topics: dict[str, TopicConfig | None] = {}
    groups: dict[str, SubscriptionGroupConfig | None] = {}
    for c in changes:
        match c:
            case TopicSet(config=tc):
                topics[tc.topicName] = tc
            case TopicGone(topic=t):
                topics[t] = None
            case GroupSet(config=g):
                groups[g.groupName] = g
            case GroupGone(group=g):
                groups[g] = None
            case _:
                assert_never(c)
    return MetaState(topics, groups)


@attrs.frozen
class Adopt:
    """A queue range with records but no config anywhere: serve exactly the queues the log
    holds (never a default count: that would invent queues nobody created)."""

    topic: str
    queues: int


def plan_adoption(
    known: dict[str, TopicConfig],
    queues_with_records: dict[str, int],
    state: MetaState,
) -> list[Adopt]:
    """What a new master does for queues with records after replaying the journal: nothing
    for a topic the journal deleted, for the journal itself or for a known topic (its config
    is the operator's, even when it is narrower than old records: upstream serves a narrowed
    topic the same way); `Adopt` an unknown topic with exactly the queues the log holds."""
    deleted = state.deleted_topics()
    return [
        Adopt(topic, n)
        for topic, n in sorted(queues_with_records.items())
        if topic != META_TOPIC and topic not in deleted and topic not in known
    ]
