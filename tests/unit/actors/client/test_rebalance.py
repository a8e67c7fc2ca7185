"""AllocateMessageQueueAveragely and computePullFromWhere, against upstream's rules."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.client.config import ConsumeFromWhere
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.pull_api import reset_retry_topic
from rocketrio.actors.client.rebalance import (
    OFFSET_ERROR,
    OFFSET_NOT_FOUND,
    StartKind,
    StartOffset,
    allocate,
    allocate_averagely,
    default_consume_timestamp,
    diff_assignment,
    parse_consume_timestamp,
    start_offset,
)
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt


def qs(n: int, broker: str = "b") -> list[MessageQueue]:
    return [MessageQueue("T", broker, i) for i in range(n)]


# (queues, clients) -> queue ids per client index, worked out by hand from upstream's
# AllocateMessageQueueAveragely (contiguous blocks, the first n%m clients get one more)
ALLOCATION_TABLE = [
    (8, 1, [[0, 1, 2, 3, 4, 5, 6, 7]]),
    (8, 2, [[0, 1, 2, 3], [4, 5, 6, 7]]),
    (8, 3, [[0, 1, 2], [3, 4, 5], [6, 7]]),
    (5, 2, [[0, 1, 2], [3, 4]]),
    (7, 4, [[0, 1], [2, 3], [4, 5], [6]]),
    (4, 4, [[0], [1], [2], [3]]),
    (2, 3, [[0], [1], []]),
    (1, 3, [[0], [], []]),
    (16, 5, [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9], [10, 11, 12], [13, 14, 15]]),
]


@pytest.mark.parametrize(("n_mq", "n_cid", "expected"), ALLOCATION_TABLE)
def test_allocate_averagely_table(n_mq: int, n_cid: int, expected: list[list[int]]) -> None:
    mqs = qs(n_mq)
    cids = [f"10.0.0.1@{i}" for i in range(n_cid)]
    got = [[mq.queueId for mq in allocate_averagely(c, mqs, cids)] for c in cids]
    assert got == expected


def test_unknown_client_gets_nothing_and_empty_id_is_an_error() -> None:
    assert allocate_averagely("x@1", qs(4), ["a@1", "b@1"]) == []
    with pytest.raises(ValueError):
        allocate_averagely("", qs(4), ["a@1"])


def test_allocate_sorts_like_upstream_whatever_the_input_order() -> None:
    mqs = [MessageQueue("T", "broker-b", 1), MessageQueue("T", "broker-a", 1)]
    mqs += [MessageQueue("T", "broker-b", 0), MessageQueue("T", "broker-a", 0)]
    cids = ["c@2", "c@1"]
    assert allocate("c@1", mqs, cids) == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
    ]
    assert allocate("c@2", reversed(mqs), cids) == [
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-b", 1),
    ]


@given(st.integers(1, 64), st.integers(1, 12))
def test_every_queue_goes_to_exactly_one_member(n_mq: int, n_cid: int) -> None:
    mqs = qs(n_mq)
    cids = [f"c@{i:02d}" for i in range(n_cid)]
    parts = [allocate_averagely(c, mqs, cids) for c in cids]
    flat = [mq for p in parts for mq in p]
    assert sorted(flat, key=lambda m: m.queueId) == mqs
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


LAST = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
TIME = ConsumeFromWhere.CONSUME_FROM_TIMESTAMP

START_TABLE = [
    # stored offset always wins
    (LAST, 17, "T", StartOffset(StartKind.OFFSET, 17)),
    (FIRST, 17, "T", StartOffset(StartKind.OFFSET, 17)),
    (TIME, 0, "T", StartOffset(StartKind.OFFSET, 0)),
    # no stored offset
    (LAST, OFFSET_NOT_FOUND, "T", StartOffset(StartKind.MAX_OFFSET)),
    (LAST, OFFSET_NOT_FOUND, "%RETRY%g", StartOffset(StartKind.OFFSET, 0)),
    (FIRST, OFFSET_NOT_FOUND, "T", StartOffset(StartKind.OFFSET, 0)),
    (FIRST, OFFSET_NOT_FOUND, "%RETRY%g", StartOffset(StartKind.OFFSET, 0)),
    (TIME, OFFSET_NOT_FOUND, "T", StartOffset(StartKind.SEARCH_BY_TIME)),
    (TIME, OFFSET_NOT_FOUND, "%RETRY%g", StartOffset(StartKind.MAX_OFFSET)),
    # broker unreachable: try again at the next rebalance, never guess
    (LAST, OFFSET_ERROR, "T", StartOffset(StartKind.RETRY_LATER)),
    (FIRST, OFFSET_ERROR, "T", StartOffset(StartKind.RETRY_LATER)),
]


@pytest.mark.parametrize(("where", "stored", "topic", "expected"), START_TABLE)
def test_start_offset_table(
    where: ConsumeFromWhere, stored: int, topic: str, expected: StartOffset
) -> None:
    assert start_offset(where, stored, topic) == expected


def test_diff_assignment_keeps_common_queues() -> None:
    cur = qs(4)[:3]
    wanted = qs(4)[1:]
    d = diff_assignment(cur, wanted)
    assert d.removed == frozenset({MessageQueue("T", "b", 0)})
    assert d.added == (MessageQueue("T", "b", 3),)


def test_consume_timestamp_parsing_and_default() -> None:
    ms = parse_consume_timestamp("20250310120000")
    assert datetime.fromtimestamp(ms / 1000) == datetime(2025, 3, 10, 12, 0, 0)
    assert default_consume_timestamp(ms + 30 * 60 * 1000) == "20250310120000"
    with pytest.raises(MQClientError, match="yyyyMMddHHmmss"):
        parse_consume_timestamp("2025-03-10")


def test_retry_messages_show_their_original_topic() -> None:
    retried = MessageExt("%RETRY%g", b"", properties={"RETRY_TOPIC": "T"})
    other = MessageExt("%RETRY%other", b"", properties={"RETRY_TOPIC": "U"})
    plain = MessageExt("T", b"")
    reset_retry_topic([retried, other, plain], "%RETRY%g")
    assert [m.topic for m in (retried, other, plain)] == ["T", "%RETRY%other", "T"]
