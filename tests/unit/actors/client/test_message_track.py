"""The pure parts of the admin message commands: a group's MessageTrack of a message
(upstream DefaultMQAdminExtImpl.messageTrackDetail's rules, actors/client/message_track.py),
the queue lookup in a route (actors/client/message_admin.py) and the CLI's timestamp and body
handling (cli/admin_msgs.py)."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.client.api import PullResult, PullStatus
from rocketrio.actors.client.errors import NotFound, UsageError
from rocketrio.actors.client.message_admin import (
    MessageAdmin,
    QueueTarget,
    all_queues,
    select_queue,
)
from rocketrio.actors.client.message_track import (
    LookupFailure,
    TrackedMessage,
    TrackType,
    decide_track,
)
from rocketrio.cli.admin_msgs import MessageView, escape_controls, parse_timestamp, read_queue
from rocketrio.protocol.bodies import (
    BrokerData,
    ConsumerConnection,
    ConsumeStats,
    MessageQueue,
    OffsetWrapper,
    QueueData,
    SubscriptionData,
    TopicRouteData,
)
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message import MessageExt, build_stored_message

MQ = MessageQueue("T", "broker-a", 1)
MSG = TrackedMessage(MQ, queue_offset=5, tags="TagA")


def push(tags: list[str] | None = None, model: str = "CLUSTERING") -> ConsumerConnection:
    subs = {} if tags is None else {"T": SubscriptionData("T", " || ".join(tags), tagsSet=tags)}
    return ConsumerConnection(
        subscriptionTable=subs, consumeType="CONSUME_PASSIVELY", messageModel=model
    )


def stats(consumer_offset: int, mq: MessageQueue = MQ) -> ConsumeStats:
    return ConsumeStats({mq: OffsetWrapper(brokerOffset=9, consumerOffset=consumer_offset)})


@pytest.mark.parametrize(
    ("conn", "st_", "expected"),
    [
        (push(), stats(6), TrackType.CONSUMED),
        (push(), stats(5), TrackType.NOT_CONSUME_YET),  # offset 5 is the next to consume
        (push(), stats(0), TrackType.NOT_CONSUME_YET),
        (push(), stats(9, MessageQueue("T", "broker-b", 1)), TrackType.NOT_CONSUME_YET),
        (push(), stats(9, MessageQueue("T", "broker-a", 0)), TrackType.NOT_CONSUME_YET),
        (push(["TagB"]), stats(6), TrackType.CONSUMED_BUT_FILTERED),
        (push(["TagA", "TagB"]), stats(6), TrackType.CONSUMED),
        (push(["*"]), stats(6), TrackType.CONSUMED),
        (push(model="BROADCASTING"), ConsumeStats(), TrackType.CONSUME_BROADCASTING),
        (push(), ConsumeStats(), TrackType.NOT_CONSUME_YET),
        (ConsumerConnection(consumeType="CONSUME_ACTIVELY"), None, TrackType.PULL),
        (LookupFailure(ResponseCode.CONSUMER_NOT_ONLINE, "CODE:206"), None, TrackType.NOT_ONLINE),
        (LookupFailure(None, "cannot connect"), None, TrackType.UNKNOWN),
        (push(), LookupFailure(1, "CODE:1 DESC:boom"), TrackType.UNKNOWN),
    ],
)
def test_track_follows_upstreams_rules(conn: object, st_: object, expected: TrackType) -> None:
    track = decide_track("G", MSG, conn, st_)  # type: ignore[arg-type]
    assert track.consumerGroup == "G" and track.trackType is expected


def test_a_failed_lookup_is_named_in_the_track() -> None:
    t = decide_track("G", MSG, LookupFailure(206, "CODE:206 DESC:not online"), None)
    assert t.exceptionDesc == "CODE:206 DESC:not online"


@given(st.integers(0, 10**6), st.integers(-1, 10**6))
def test_consumed_exactly_when_the_consumer_offset_is_past_the_message(
    queue_offset: int, consumer_offset: int
) -> None:
    msg = TrackedMessage(MQ, queue_offset, None)
    t = decide_track("G", msg, push(), stats(consumer_offset))
    assert (t.trackType is TrackType.CONSUMED) == (consumer_offset > queue_offset)


ROUTE = TopicRouteData(
    queueDatas=[QueueData("broker-b", 2, 1, 6), QueueData("broker-a", 3, 3, 6)],
    brokerDatas=[
        BrokerData("C", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}),
        BrokerData("C", "broker-b", {1: "10.0.0.3:10911"}),
    ],
)


def test_select_queue_reads_from_the_master_or_a_replica() -> None:
    assert select_queue(ROUTE, "T", "broker-a", 2).addr == "10.0.0.1:10911"
    assert select_queue(ROUTE, "T", "broker-b", 1).addr == "10.0.0.3:10911"
    assert [q.mq.queueId for q in all_queues(ROUTE, "T")] == [0, 1, 2, 0, 1]


def test_select_queue_names_the_brokers_and_the_valid_ids() -> None:
    with pytest.raises(NotFound, match=r"broker-x does not serve topic T \(brokers: broker-a, br"):
        select_queue(ROUTE, "T", "broker-x", 0)
    with pytest.raises(NotFound, match=r"queue id 3 is out of range.*3 read queue.*ids 0\.\.2"):
        select_queue(ROUTE, "T", "broker-a", 3)
    with pytest.raises(NotFound, match="queue id -1 is out of range"):
        select_queue(ROUTE, "T", "broker-a", -1)
    # a send checks the write queues: broker-b reads 2 queues but takes writes on 1
    assert select_queue(ROUTE, "T", "broker-b", 1).mq.queueId == 1
    with pytest.raises(NotFound, match=r"1 write queue\(s\) on broker broker-b \(ids 0\.\.0\)"):
        select_queue(ROUTE, "T", "broker-b", 1, write=True)


def test_timestamps_in_mqadmins_two_forms() -> None:
    assert parse_timestamp("1700000000123") == 1700000000123
    local = dt.datetime(2026, 11, 23, 22, 1, 2, 345000).astimezone()
    assert parse_timestamp("2026-11-23#22:01:02:345") == int(local.timestamp() * 1000)
    with pytest.raises(UsageError, match="neither epoch milliseconds nor"):
        parse_timestamp("yesterday")


def test_bodies_print_as_text_or_base64_never_raw() -> None:
    text = MessageExt("T", "héllo\nworld\x1b[31m".encode(), store_host="10.0.0.1:10911")
    v = MessageView.of(text)
    assert v.body == "héllo\nworld\x1b[31m" and v.bodyBase64 is None
    assert v.body_line() == "héllo\\nworld\\x1b[31m"  # one line, no terminal escape
    raw = b"\x00\xff\xfe\x80"
    binary = MessageView.of(MessageExt("T", raw, store_host="10.0.0.1:10911"))
    assert binary.body is None and base64.b64decode(binary.bodyBase64 or "") == raw
    assert binary.body_line().startswith("(4 bytes, not text) base64:")
    gbk = MessageView.of(MessageExt("T", "中文".encode("gbk"), store_host="1.2.3.4:5"), "gbk")
    assert gbk.body == "中文"
    assert MessageView.of(text, with_body=False).body_line() == "NOT PRINT BODY"
    assert escape_controls("plain") == "plain"


class StubReads(MessageAdmin):
    """A MessageAdmin whose broker answers every pull with ``answer`` (no sockets)."""

    def __init__(self, answer: PullResult) -> None:
        self.answer = answer
        self.pulls: list[int] = []

    async def pull(self, q: QueueTarget, offset: int, max_nums: int, **kw: Any) -> PullResult:
        self.pulls.append(offset)
        await trio.lowlevel.checkpoint()
        return self.answer


QT = QueueTarget(MQ, "10.0.0.1:10911")


def _pulled(status: PullStatus, next_begin: int, *offsets: int) -> PullResult:
    host = (bytes([10, 0, 0, 1]), 10911)
    body = b"".join(
        build_stored_message(
            topic="T", queue_id=1, body=b"x", flag=0, properties="", sys_flag=0,
            born_timestamp=1, born_host=host, store_timestamp=2, store_host=host,
            queue_offset=o,
        )
        for o in offsets
    )  # fmt: skip
    return PullResult(status, next_begin, 0, 9, 0, body)


async def test_a_read_stops_when_the_broker_does_not_move_on() -> None:
    stuck = StubReads(_pulled(PullStatus.NO_MATCHED_MSG, 3))
    with trio.move_on_after(1):  # a loop that never ends is cut here
        read = await read_queue(stuck, QT, 3, 9)
    assert stuck.pulls == [3] and read.messages == []
    assert read.notes[-1] == "stopped at offset 3: the broker does not move past it"


async def test_message_at_is_the_message_at_that_offset_only() -> None:
    # a broker that answers FOUND from another offset has not found the one asked for
    other = StubReads(_pulled(PullStatus.FOUND, 5, 4))
    with pytest.raises(NotFound, match="no message at offset 7 of topic T queue 1"):
        await other.message_at(QT, 7)
    right = StubReads(_pulled(PullStatus.FOUND, 8, 7))
    assert (await right.message_at(QT, 7)).queue_offset == 7
