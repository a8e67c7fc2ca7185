"""The pure answers of the broker's read-only admin queries (actors/broker/query/answers.py):
the correction offsets (least offset per queue over the groups not filtered out, an offset
below the queue's minimum not counted, Long.MAX_VALUE where the compare group is behind that
least offset), the consume-queue window and entries, and the consumer group's part."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.query.answers import (
    LONG_MAX,
    MAX_CQ_ENTRIES,
    IndexMissing,
    correction_offsets,
    filter_groups,
    group_view,
    queue_data,
    queue_window,
)
from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.query_bodies import ConsumeQueueData, QueryConsumeQueueRequestHeader

NONE: frozenset[str] = frozenset()


def no_min(_topic: str, _queue_id: int) -> int:
    return 0


def test_filter_groups_split_on_commas_and_blank_is_none() -> None:
    assert filter_groups(None) == NONE
    assert filter_groups("  ") == NONE
    assert filter_groups("") == NONE
    assert filter_groups("a,b") == {"a", "b"}


def test_the_least_offset_per_queue_over_every_group_of_the_topic() -> None:
    table = {"T@A": {0: 5, 1: 7}, "T@B": {0: 3}, "U@C": {0: 1}}
    assert correction_offsets(table, "T", "A", NONE, no_min) == {0: 3, 1: 7}


def test_filter_groups_are_left_out_and_the_table_is_untouched() -> None:
    table = {"T@A": {0: 5}, "T@B": {0: 3}}
    assert correction_offsets(table, "T", "A", frozenset({"B"}), no_min) == {0: 5}
    assert table == {"T@A": {0: 5}, "T@B": {0: 3}}


def test_an_offset_below_the_queue_minimum_does_not_count() -> None:
    table = {"T@A": {0: 5}, "T@B": {0: 3}}
    assert correction_offsets(table, "T", "X", NONE, lambda _t, _q: 4) == {0: 5}


def test_the_compare_group_behind_the_least_offset_is_long_max() -> None:
    table = {"T@A": {0: 5, 1: 9}, "T@B": {0: 6, 1: 9}}
    # A's queue 0 offset (2) is below the minimum (4): B's 6 is the least, A is behind it
    table["T@A"][0] = 2
    got = correction_offsets(table, "T", "A", NONE, lambda _t, q: 4 if q == 0 else 0)
    assert got == {0: LONG_MAX, 1: 9}


def test_a_filtered_compare_group_is_not_compared() -> None:
    table = {"T@A": {0: 2}, "T@B": {0: 6}}
    got = correction_offsets(table, "T", "A", frozenset({"A"}), no_min)
    assert got == {0: 6}


def test_a_queue_only_the_compare_group_has_below_the_minimum_is_left_out() -> None:
    table = {"T@A": {3: 1}}
    assert correction_offsets(table, "T", "A", NONE, lambda _t, _q: 2) == {}


@given(
    st.dictionaries(
        st.sampled_from(["T@A", "T@B", "T@C", "U@A"]),
        st.dictionaries(st.integers(0, 3), st.integers(0, 20), max_size=4),
    ),
    st.integers(0, 10),
)
def test_the_answer_never_exceeds_a_counted_group_unless_long_max(
    table: dict[str, dict[int, int]], low: int
) -> None:
    got = correction_offsets(table, "T", "A", NONE, lambda _t, _q: low)
    for queue_id, offset in got.items():
        counted = [
            q[queue_id]
            for k, q in table.items()
            if k.startswith("T@") and q.get(queue_id, -1) >= low
        ]
        assert offset == LONG_MAX or offset == min(counted)


def header(index: int, count: int) -> QueryConsumeQueueRequestHeader:
    return QueryConsumeQueueRequestHeader("T", 1, index, count)


def test_a_missing_queue_is_a_system_error() -> None:
    assert queue_window(header(0, 10), None) == Refusal(
        ResponseCode.SYSTEM_ERROR, "1@T is not exist!"
    )


def test_an_index_outside_min_max_is_missing() -> None:
    for index in (2, 5, 6):
        assert queue_window(header(index, 10), (3, 5)) == IndexMissing(
            f"Index {index} of 1@T is not exist!"
        )
    assert queue_window(header(3, 10), (3, 5)) == 2
    assert queue_window(header(4, 10), (3, 5)) == 1


def test_the_window_is_count_at_most_and_never_negative() -> None:
    assert queue_window(header(0, 2), (0, 100)) == 2
    assert queue_window(header(0, -1), (0, 100)) == 0
    assert queue_window(header(0, 10**9), (0, 10**9)) == MAX_CQ_ENTRIES


def test_queue_data_stops_at_count() -> None:
    entries = [(100, 10, 1), (110, 20, 2), (130, 30, 3)]
    assert queue_data(5, entries, 5, 2) == [
        ConsumeQueueData(100, 10, 1),
        ConsumeQueueData(110, 20, 2),
    ]
    assert queue_data(5, entries, 5, 0) == []
    assert len(queue_data(5, entries, 5, 9)) == 3


def test_group_view_of_an_offline_group() -> None:
    assert group_view("G", "T", None, "null") == (None, "G@T is not online!")
    sub = SubscriptionData("T")
    assert group_view("G", "T", sub, "null") == (sub, "null")
