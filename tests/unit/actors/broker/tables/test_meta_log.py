"""The metadata journal's pure core (actors/broker/tables/meta_log.py): the record codec, the
fold (last record per name wins) and the adoption plan of a new master."""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.tables.meta_log import (
    META_TOPIC,
    Adopt,
    GroupGone,
    GroupSet,
    MetaChange,
    TopicGone,
    TopicSet,
    decode,
    encode,
    fold,
    plan_adoption,
)
from rocketrio.protocol.bodies import SubscriptionGroupConfig, TopicConfig

T4 = TopicConfig("T", 4, 4, perm=6, attributes={"+message.type": "NORMAL"})


@pytest.mark.parametrize(
    "change",
    [
        TopicSet(T4),
        TopicGone("T"),
        GroupSet(SubscriptionGroupConfig("G", retryQueueNums=2, consumeMessageOrderly=True)),
        GroupGone("G"),
    ],
    ids=["topic_set", "topic_gone", "group_set", "group_gone"],
)
def test_every_change_round_trips(change: MetaChange) -> None:
    assert decode(encode(change)) == change


@pytest.mark.parametrize(
    "body", [b"not json", b'{"kind": "topic_set", "name": "T"}', b'{"kind": "other", "name": "T"}']
)
def test_an_unreadable_record_is_none_never_a_delete(body: bytes) -> None:
    assert decode(body) is None


def test_fold_keeps_the_last_record_per_name() -> None:
    t8 = TopicConfig("T", 8, 8)
    state = fold(
        [
            TopicSet(T4),
            TopicSet(TopicConfig("U", 2, 2)),
            TopicGone("U"),
            TopicSet(t8),
            GroupSet(SubscriptionGroupConfig("G")),
            GroupGone("G"),
            TopicGone("V"),
            TopicSet(TopicConfig("V", 1, 1)),
        ]
    )
    assert state.topics == {"T": t8, "U": None, "V": TopicConfig("V", 1, 1)}
    assert state.groups == {"G": None}
    assert state.deleted_topics() == {"U"}


def test_adoption_takes_exactly_the_queues_the_log_holds_never_a_default() -> None:
    # the topic's journal records were cleaned: 3 queues hold records; 3, not 8
    assert plan_adoption({}, {"Old": 3}, fold([])) == [Adopt("Old", 3)]


def test_adoption_leaves_known_deleted_and_journal_topics_alone() -> None:
    state = fold([TopicSet(T4), TopicGone("Gone")])
    known = {"T": T4, "Narrowed": TopicConfig("Narrowed", 2, 2)}
    queues = {"T": 4, "Gone": 4, META_TOPIC: 1, "Narrowed": 8, "New": 1}
    # a narrowed topic stays as the operator set it (records above it stay unread, as upstream)
    assert plan_adoption(known, queues, state) == [Adopt("New", 1)]
