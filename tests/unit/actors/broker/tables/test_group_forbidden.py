"""The forbidden table of SubscriptionGroupManager (UPDATE_AND_GET_GROUP_FORBIDDEN): bits per
group and topic, upstream's clear-drops-the-group rule, its round trip through
subscriptionGroup.json's ``forbiddenTable``, and DELETE_SUBSCRIPTIONGROUP dropping it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.tables.subscription_group import (
    PERM_INDEX_READ,
    SubscriptionGroupManager,
)
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import GroupForbidden, SubscriptionGroupWrapper
from rocketrio.protocol.serde import from_json


def manager() -> SubscriptionGroupManager:
    return SubscriptionGroupManager(auto_create=True, now_ms=lambda: 1000)


def test_set_read_and_clear() -> None:
    m = manager()
    assert not m.is_forbidden("G", "T", PERM_INDEX_READ)
    v0 = m.data_version.counter
    assert m.update_forbidden("G", "T", PERM_INDEX_READ, True)
    assert m.is_forbidden("G", "T", PERM_INDEX_READ)
    assert m.forbidden == {"G": {"T": 4}}
    assert m.data_version.counter == v0 + 1
    # setting it again changes nothing
    assert not m.update_forbidden("G", "T", PERM_INDEX_READ, True)
    assert not m.is_forbidden("G", "Other", PERM_INDEX_READ)
    assert not m.is_forbidden("Other", "T", PERM_INDEX_READ)
    assert m.update_forbidden("G", "T", PERM_INDEX_READ, False)
    assert m.forbidden == {}
    # clearing what is not set changes nothing
    assert not m.update_forbidden("G", "T", PERM_INDEX_READ, False)


def test_other_bits_are_kept_and_a_clear_to_zero_drops_the_whole_group() -> None:
    m = manager()
    m.update_forbidden("G", "A", 0, True)
    m.update_forbidden("G", "A", PERM_INDEX_READ, True)
    assert m.forbidden_bits("G", "A") == 5
    m.update_forbidden("G", "A", PERM_INDEX_READ, False)
    assert m.forbidden_bits("G", "A") == 1
    m.update_forbidden("G", "B", PERM_INDEX_READ, True)
    m.update_forbidden("G", "A", 0, False)  # A's value drops to 0: upstream drops G altogether
    assert m.forbidden == {}


def test_negative_values_read_as_nothing_forbidden() -> None:
    m = manager()
    m.load(SubscriptionGroupWrapper(forbiddenTable={"G": {"T": -1}}))
    assert m.forbidden_bits("G", "T") == 0
    assert not m.is_forbidden("G", "T", PERM_INDEX_READ)


def test_snapshot_round_trip_and_delete() -> None:
    m = manager()
    m.update_forbidden("G", "T", PERM_INDEX_READ, True)
    text = fastjson.encode(m.snapshot())
    assert b'"forbiddenTable":{"G":{"T":4}}' in text
    again = manager()
    again.load(from_json(SubscriptionGroupWrapper, text))
    assert again.is_forbidden("G", "T", PERM_INDEX_READ)
    # the snapshot is a copy
    snap = m.snapshot()
    snap.forbiddenTable["G"]["T"] = 0
    assert m.is_forbidden("G", "T", PERM_INDEX_READ)
    # deleting the group drops its bits, even when no config existed
    assert m.delete("G")
    assert m.forbidden == {}
    assert not m.delete("G")


def test_group_forbidden_body_is_upstreams_json() -> None:
    body = fastjson.encode(GroupForbidden(group="G", topic="T", readable=False))
    assert body == b'{"group":"G","readable":false,"topic":"T"}'
    assert from_json(GroupForbidden, body) == GroupForbidden("G", "T", False)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["G1", "G2"]),
            st.sampled_from(["A", "B"]),
            st.integers(0, 3),
            st.booleans(),
        ),
        max_size=30,
    )
)
def test_bits_follow_upstreams_rule(ops: list[tuple[str, str, int, bool]]) -> None:
    """A model of upstream's updateForbiddenValue: the value is set per (group, topic); a value
    of 0 removes the group's whole map."""
    m = manager()
    model: dict[str, dict[str, int]] = {}
    for group, topic, index, forbid in ops:
        bits = model.get(group, {}).get(topic, 0)
        bits = bits | (1 << index) if forbid else bits & ~(1 << index)
        if bits <= 0:
            model.pop(group, None)
        else:
            model.setdefault(group, {})[topic] = bits
        m.update_forbidden(group, topic, index, forbid)
        assert m.forbidden == model
