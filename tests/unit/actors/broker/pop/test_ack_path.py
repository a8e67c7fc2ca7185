"""ACK_MESSAGE's own path (`PopAckProcessor.ack_nowait`, pop/ack.py) with a fake store writer
and queue reader, on MockClock: an ACK is answered only once the put carrying its record is
stored (never before, and refused when the store refused it); every refusal keeps its code
(a receipt that is not one, a revive queue that is not one, an unknown topic, a queue the
topic does not have, an offset outside the queue's [min, max]); the queue's range is read at
each ACK, so an ACK after the range moved (a truncation, a deleted queue) is judged by the new
range."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.dispatch.outcomes import Done, PutStatus, Refusal
from rocketrio.actors.broker.pop.ack import PopAckProcessor
from rocketrio.actors.broker.pop.attempt import PopConfig
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.actors.broker.store.queue_reader import NoStaticTopics, PlainQueues
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message import PROPERTY_TAGS
from rocketrio.protocol.pop_checkpoint import BatchAck, BatchAckMessageRequestBody
from rocketrio.protocol.pop_extra_info import ACK_TAG
from rocketrio.storage.message_store import MessageToStore, PutResult

TOPIC, GROUP = "T", "G"
POP_TIME = 1_764_360_000_000


@attrs.define
class Topic:
    readQueueNums: int  # upstream's name, as TopicConfig has it


class Topics:
    def __init__(self) -> None:
        self.table = {TOPIC: Topic(4)}

    def select(self, topic: str) -> Topic | None:
        return self.table.get(topic)


@attrs.frozen
class Span:
    """A queue as `PlainQueues` reads it."""

    min_offset: int
    max_offset: int


class Live(Mapping[tuple[str, int], Span]):
    """``ranges`` as the store's live table of queues (read at each look-up)."""

    def __init__(self, ranges: dict[tuple[str, int], tuple[int, int]]) -> None:
        self.ranges = ranges

    def __getitem__(self, key: tuple[str, int]) -> Span:
        return Span(*self.ranges[key])

    def __iter__(self) -> Iterator[tuple[str, int]]:
        return iter(self.ranges)

    def __len__(self) -> int:
        return len(self.ranges)


class Queues:
    """The QueueReader's offset range of each queue; None for a queue the topic lacks."""

    def __init__(self) -> None:
        self.ranges: dict[tuple[str, int], tuple[int, int]] = {}

    def queue_range(self, topic: str, queue_id: int, read_queue_nums: int) -> Any:
        if not 0 <= queue_id < read_queue_nums:
            return None
        return self.ranges.get((topic, queue_id), (0, 0))

    def plain_queues(self) -> PlainQueues:
        return PlainQueues(NoStaticTopics(), Live(self.ranges))  # type: ignore[arg-type]


class FakeWriter:
    """A store writer that records each put and answers it when told."""

    def __init__(self) -> None:
        self.puts: list[tuple[list[MessageToStore], PutCallback]] = []
        self.full = False  # put_nowait refuses (an inbox that is full): put must be awaited
        self.awaited = 0  # puts that came through `put`

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self.awaited += 1
        self.puts.append((messages, on_done))

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        if self.full:
            raise trio.WouldBlock
        self.puts.append((messages, on_done))

    async def put_batch(self, put: Any) -> None:
        pytest.fail("a batch put: this path never makes one")

    def put_batch_nowait(self, put: Any) -> None:
        pytest.fail("a batch put: this path never makes one")


def processor(writer: FakeWriter, queues: Queues) -> PopAckProcessor:
    return PopAckProcessor(
        PopConfig("b", "C", 6, "127.0.0.1", revive_queue_num=2),
        topics=Topics(),  # type: ignore[arg-type]
        order=None,  # type: ignore[arg-type]  # no ordered receipt here
        store=queues,  # type: ignore[arg-type]
        writer=writer,  # type: ignore[arg-type]
        now_ms=lambda: POP_TIME + 5,
        store_host=(b"\x7f\0\0\1", 10911),
        next_revive_qid=lambda: 0,
    )


def receipt(offset: int, *, revive_qid: int = 1, queue_id: int = 0) -> str:
    return f"10 {POP_TIME} 60000 {revive_qid} 0 b {queue_id} {offset}"


def ack(p: PopAckProcessor, offset: int, answers: list[Any], **kw: Any) -> Any:
    queue_id = kw.get("queue_id", 0)
    topic = kw.pop("topic", TOPIC)
    return p.ack_nowait(GROUP, topic, queue_id, receipt(offset, **kw), offset, answers.append)


async def test_an_ack_is_answered_only_once_its_record_is_stored(
    mock_clock: trio.testing.MockClock,
) -> None:
    writer, queues = FakeWriter(), Queues()
    queues.ranges[(TOPIC, 0)] = (10, 20)
    p = processor(writer, queues)
    answers: list[Any] = []
    async with trio.open_nursery() as n:
        await n.start(p.batcher.run)
        assert ack(p, 12, answers) is None and ack(p, 13, answers) is None
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []  # queued and handed to the store: not answered
        ((msgs, on_done),) = writer.puts
        (msg,) = msgs  # one CK's two ACKs: one bAck record in the ACK's revive queue
        body = json.loads(msg.body)
        assert msg.queue_id == 1 and body["aol"] == [12, 13] and body["so"] == 10
        await trio.sleep(5)
        assert answers == []  # still not stored: still not answered
        on_done([PutResult(0, 0, 0, "", 0)], PutStatus.PUT_OK, None)
        assert answers == [Done(), Done()]

        answers.clear()
        assert ack(p, 14, answers) is None
        await trio.testing.wait_all_tasks_blocked()
        (msg,) = writer.puts[1][0]
        assert msg.properties[PROPERTY_TAGS] == ACK_TAG  # a lone ACK: an ``ack`` record
        writer.puts[1][1]([], PutStatus.SERVICE_NOT_AVAILABLE, "stopped")
        assert len(answers) == 1 and isinstance(answers[0], Refusal)
        assert answers[0].code == ResponseCode.SYSTEM_ERROR
        n.cancel_scope.cancel()


def refusal_code(result: Any) -> int:
    assert isinstance(result, Refusal), result
    return result.code


async def test_every_refusal_keeps_its_code(mock_clock: trio.testing.MockClock) -> None:
    writer, queues = FakeWriter(), Queues()
    queues.ranges[(TOPIC, 0)] = (10, 20)
    p = processor(writer, queues)
    answers: list[Any] = []
    bad = p.ack_nowait(GROUP, TOPIC, 0, "not a receipt", 12, answers.append)
    assert refusal_code(bad) == ResponseCode.INVALID_PARAMETER
    assert refusal_code(ack(p, 12, answers, revive_qid=2)) == ResponseCode.INVALID_PARAMETER
    assert refusal_code(ack(p, 12, answers, topic="Other")) == ResponseCode.TOPIC_NOT_EXIST
    assert refusal_code(ack(p, 12, answers, queue_id=4)) == ResponseCode.MESSAGE_ILLEGAL
    below, above = ack(p, 9, answers), ack(p, 21, answers)
    assert refusal_code(below) == refusal_code(above) == ResponseCode.NO_MESSAGE
    assert below.remark == ("offset is illegal, key:T@0, offset:9, minOffset:10, maxOffset:20")
    assert answers == [] and writer.puts == []


async def test_the_range_is_read_at_each_ack(mock_clock: trio.testing.MockClock) -> None:
    """No ACK is judged by a range the queue no longer has: cut below an acknowledged offset
    (a truncation on a role change), its queue deleted (a deleted topic), or grown."""
    writer, queues = FakeWriter(), Queues()
    p = processor(writer, queues)
    answers: list[Any] = []
    async with trio.open_nursery() as n:
        await n.start(p.batcher.run)
        queues.ranges[(TOPIC, 0)] = (0, 8)
        assert ack(p, 7, answers) is None  # taken
        queues.ranges[(TOPIC, 0)] = (0, 5)  # truncated to 5
        assert refusal_code(ack(p, 7, answers)) == ResponseCode.NO_MESSAGE
        assert ack(p, 5, answers) is None
        del queues.ranges[(TOPIC, 0)]  # deleted: (0, 0)
        assert refusal_code(ack(p, 5, answers)) == ResponseCode.NO_MESSAGE
        queues.ranges[(TOPIC, 0)] = (3, 9)  # cleaned below 3, grown to 9
        assert refusal_code(ack(p, 2, answers)) == ResponseCode.NO_MESSAGE
        assert ack(p, 9, answers) is None
        await trio.testing.wait_all_tasks_blocked()
        offsets = sorted(
            o
            for msgs, _ in writer.puts
            for m in msgs
            for o in json.loads(m.body).get("aol", [json.loads(m.body)["ao"]])
        )
        assert offsets == [5, 7, 9]
        n.cancel_scope.cancel()


def batch_ack(p: PopAckProcessor, acks: list[tuple[str, int, int, tuple[int, ...]]]) -> Any:
    """BATCH_ACK_MESSAGE of (topic, queueId, start offset, bits) per CK; its outcome and the
    offsets of each record it put, in order."""
    body = BatchAckMessageRequestBody(
        "b",
        tuple(BatchAck(GROUP, t, "0", so, q, 1, POP_TIME, 60000, bits) for t, q, so, bits in acks),
    )
    answers: list[Any] = []
    refusal = trio.run(p.batch_ack, body, answers.append)
    return refusal, answers


@settings(max_examples=300, deadline=None)
@given(
    lo=st.integers(0, 40),
    width=st.integers(0, 40),
    acks=st.lists(
        st.tuples(
            st.sampled_from([TOPIC, "Other"]),
            st.integers(0, 5),
            st.integers(0, 80),
            st.lists(st.integers(0, 31), max_size=8, unique=True).map(tuple),
        ),
        max_size=4,
    ),
)
def test_a_batch_ack_takes_exactly_the_offsets_ack_message_takes(
    lo: int, width: int, acks: list[tuple[str, int, int, tuple[int, ...]]]
) -> None:
    """BATCH_ACK reads each CK's queue range once; the offsets it writes are exactly those for
    which ACK_MESSAGE's per-offset check (`_check_offset`) refuses nothing."""
    writer, queues = FakeWriter(), Queues()
    for q in range(4):
        queues.ranges[(TOPIC, q)] = (lo + q, lo + q + width)
    p = processor(writer, queues)
    refusal, answers = batch_ack(p, acks)
    assert refusal is None
    expected = [
        [so + i for i in bits if p._check_offset(t, q, so + i) is None] for t, q, so, bits in acks
    ]
    expected = [e for e in expected if e]
    put = [json.loads(m.body)["aol"] for msgs, _ in writer.puts for m in msgs]
    assert put == expected
    assert len(writer.puts) == (1 if expected else 0)
    if expected:  # answered once the put is stored, not before
        assert answers == []
        writer.puts[0][1]([PutResult(0, 0, 0, "", 0)], PutStatus.PUT_OK, None)
    assert answers == [Done()]


def test_a_batch_ack_reads_the_range_the_queue_has_now() -> None:
    writer, queues = FakeWriter(), Queues()
    p = processor(writer, queues)
    queues.ranges[(TOPIC, 0)] = (0, 8)
    batch_ack(p, [(TOPIC, 0, 4, (0, 3, 4))])  # 4, 7, 8
    queues.ranges[(TOPIC, 0)] = (5, 7)  # cleaned below 5, truncated to 7
    batch_ack(p, [(TOPIC, 0, 4, (0, 3, 4))])
    assert [json.loads(msgs[0].body)["aol"] for msgs, _ in writer.puts] == [[4, 7, 8], [7]]


def test_a_batch_ack_put_waits_for_inbox_space_only_when_the_inbox_is_full() -> None:
    """The records go without a checkpoint while the inbox has room; a full inbox makes the
    BATCH_ACK await `put` (backpressure), and either way it is answered once stored."""
    writer, queues = FakeWriter(), Queues()
    queues.ranges[(TOPIC, 0)] = (0, 40)
    p = processor(writer, queues)
    for full in (False, True):
        writer.full = full
        refusal, answers = batch_ack(p, [(TOPIC, 0, 4, (0, 1))])
        assert refusal is None and answers == []
        writer.puts[-1][1]([PutResult(0, 0, 0, "", 0)], PutStatus.PUT_OK, None)
        assert answers == [Done()]
    assert len(writer.puts) == 2 and writer.awaited == 1
