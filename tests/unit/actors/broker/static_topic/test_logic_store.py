"""POP on a logic queue, pure (issue 30 item 1): `plan_read` / `to_logic` / `relabel` of
static_topic/logic_store.py, as the POP path uses them. The property: popping a logic queue
from its first offset, following each answer's next offset the way PopMessageProcessor does
(a reset status moves the offset and reads again), hands out every message of every
generation exactly once and in order, under logic offsets; and every checkpoint (its logic
start offset plus the offset diffs) read again, as revive and ACK checks read it, names the
very message it was built from."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.static_topic.logic_store import (
    ReadAt,
    plan_read,
    relabel,
    remote_result,
    to_logic,
)
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import PullMessageResponseHeader
from rocketrio.protocol.message import QUEUE_OFFSET_POSITION
from rocketrio.protocol.message_format import QUEUE_ID_POSITION
from rocketrio.protocol.static_topic import LogicQueueMappingItem as Item
from rocketrio.protocol.static_topic import check_item_offsets
from rocketrio.storage.store_types import GetMessageStatus, GetResult

_S = GetMessageStatus
GID = 5
RESET = (_S.OFFSET_TOO_SMALL, _S.OFFSET_OVERFLOW_BADLY, _S.OFFSET_FOUND_NULL)


def record(gen: int, physical: int) -> bytes:
    buf = bytearray(48)
    struct.pack_into(">i", buf, 0, 48)
    struct.pack_into(">i", buf, QUEUE_ID_POSITION, 90 + gen)  # the physical queue id
    struct.pack_into(">q", buf, QUEUE_OFFSET_POSITION, physical)
    struct.pack_into(">i", buf, 40, gen)  # which message it is: (gen, physical)
    return bytes(buf)


def ident(rec: bytes) -> tuple[int, int, int, int]:
    """(queue id, queue offset, gen, ...) as the record says after relabelling."""
    qid = struct.unpack_from(">i", rec, QUEUE_ID_POSITION)[0]
    off = struct.unpack_from(">q", rec, QUEUE_OFFSET_POSITION)[0]
    return qid, off, struct.unpack_from(">i", rec, 40)[0], 0


class Queues:
    """Each generation's physical queue: ``sizes[gen]`` messages from offset 0 (``lost``:
    the first ones retention removed)."""

    def __init__(self, sizes: list[int], lost: int = 0) -> None:
        self.sizes = sizes
        self.lost = lost

    def read(self, plan: ReadAt, k: int) -> GetResult:
        gen, p = plan.item.gen, plan.physical_offset
        size, lo = self.sizes[gen], (self.lost if gen == 0 else 0)
        if p < lo:
            return GetResult(_S.OFFSET_TOO_SMALL, lo, lo, size)
        if p >= size:
            status = _S.OFFSET_OVERFLOW_ONE if p == size else _S.OFFSET_OVERFLOW_BADLY
            return GetResult(status, size, lo, size)
        n = min(k, plan.max_count, size - p)
        recs = [record(gen, x) for x in range(p, p + n)]
        return GetResult(_S.FOUND, p + n, lo, size, recs, n)


@st.composite
def chains(draw: st.DrawFn) -> tuple[list[Item], list[int]]:
    """Sealed generations (holes between them, as a remapping leaves) and an open leader; the
    physical queues hold exactly the sealed range, the leader any number."""
    n = draw(st.integers(1, 4))
    items, sizes, logic = [], [], draw(st.integers(0, 30))
    for gen in range(n):
        length = draw(st.integers(0, 25)) if gen == n - 1 else draw(st.integers(1, 25))
        end = -1 if gen == n - 1 else length
        items.append(Item(gen, 90 + gen, f"b{gen % 2}", logic, 0, end))
        sizes.append(length)
        logic += length + draw(st.integers(1, 20))
    check_item_offsets(items)
    return items, sizes


def pop_all(
    items: list[Item], q: Queues, k: int, start: int = 0
) -> list[tuple[int, int, int, int]]:
    """Pop the logic queue from ``start`` to its end as PopMessageProcessor does; the
    checkpoints' entries (logic offset, gen, physical) read back as revive does."""
    out = []
    offset = start
    for _ in range(10_000):
        plan = plan_read(items, offset, k)
        r = q.read(plan, k) if isinstance(plan, ReadAt) else None
        res = to_logic(plan, GID, r) if isinstance(plan, ReadAt) and r else plan
        assert isinstance(res, GetResult)
        if res.status in RESET and not res.buffers:
            assert res.next_begin_offset > offset or res.status is _S.OFFSET_TOO_SMALL
            offset = res.next_begin_offset
            continue
        if not res.buffers:
            assert res.next_begin_offset >= offset
            if res.next_begin_offset == offset:
                return out
            offset = res.next_begin_offset
            continue
        ck_start = offset
        diffs = [ident(b)[1] - ck_start for b in res.buffers]
        for b, d in zip(res.buffers, diffs, strict=True):
            qid, logic, gen, _ = ident(b)
            assert qid == GID and logic == ck_start + d
            # revive / ACK: the CK's offset read again is this very message
            again = plan_read(items, ck_start + d, 1)
            assert isinstance(again, ReadAt)
            got = to_logic(again, GID, q.read(again, 1))
            assert [ident(x) for x in got.buffers] == [ident(b)]
            out.append((logic, gen, logic - items[gen].offset_delta(), 0))
        offset = res.next_begin_offset
    raise AssertionError("the POP never reached the end")


@settings(max_examples=300, deadline=None)
@given(chains(), st.integers(1, 9))
def test_popping_a_logic_queue_hands_out_every_generation_once_in_order(
    chain: tuple[list[Item], list[int]], k: int
) -> None:
    items, sizes = chain
    got = pop_all(items, Queues(sizes), k)
    expected = [(g, p) for g, size in enumerate(sizes) for p in range(size)]
    assert [(gen, p) for _, gen, p, _ in got] == expected
    logic = [x[0] for x in got]
    assert logic == sorted(set(logic))  # strictly increasing: a CK's diffs are never negative
    assert all(lo == p + items[g].offset_delta() for lo, g, p, _ in got)


@settings(max_examples=300, deadline=None)
@given(chains(), st.integers(1, 9), st.data())
def test_a_pop_from_any_committed_offset_continues_from_there(
    chain: tuple[list[Item], list[int]], k: int, data: st.DataObject
) -> None:
    """A group's offset anywhere (a generation's end, a remapping's hole, a push consumer's
    commit): the POP goes on with exactly the messages at or after it."""
    items, sizes = chain
    top = items[-1].logicOffset + sizes[-1]  # past the open end is OFFSET_OVERFLOW_BADLY
    start = data.draw(st.integers(0, top))
    got = pop_all(items, Queues(sizes), k, start)
    expected = [
        (g, p)
        for g, size in enumerate(sizes)
        for p in range(size)
        if p + items[g].offset_delta() >= start
    ]
    assert [(gen, p) for _, gen, p, _ in got] == expected


@settings(max_examples=100, deadline=None)
@given(chains(), st.integers(1, 9), st.integers(1, 10))
def test_retention_in_the_first_generation_moves_the_pop_forward(
    chain: tuple[list[Item], list[int]], k: int, lost: int
) -> None:
    items, sizes = chain
    lost = min(lost, sizes[0])
    got = pop_all(items, Queues(sizes, lost), k)
    expected = [(g, p) for g, size in enumerate(sizes) for p in range(size) if g or p >= lost]
    assert [(gen, p) for _, gen, p, _ in got] == expected


def test_a_sealed_newest_generation_waits_for_the_next_one() -> None:
    # a remapping sealed the old leader, the new one is not decided yet: nothing moves
    items = [Item(0, 1, "a", 0, 0, 3), Item(1, 2, "c", -1, 0, -1)]
    a = plan_read(items, 3, 8)
    assert isinstance(a, GetResult) and a.status is _S.OFFSET_OVERFLOW_ONE
    assert a.next_begin_offset == 3


def test_relabel_touches_only_queue_id_and_offset() -> None:
    rec = record(2, 7)
    out = relabel(rec, 4, 10_000)
    assert ident(out)[:3] == (4, 10_007, 2) and out[28:] == rec[28:] and out[:12] == rec[:12]
    assert out[16:20] == rec[16:20]


def test_a_remote_answer_becomes_a_store_result() -> None:
    h = PullMessageResponseHeader(0, 5, 2, 9)
    body = record(0, 3) + record(0, 4)
    r = remote_result(RC.SUCCESS, h, body, 3, None)
    assert r.status is _S.FOUND and r.message_count == 2 and r.next_begin_offset == 5
    assert remote_result(RC.PULL_OFFSET_MOVED, h, b"", 1, None).status is _S.OFFSET_TOO_SMALL
    assert remote_result(RC.PULL_OFFSET_MOVED, h, b"", 12, None).status is (
        _S.OFFSET_OVERFLOW_BADLY
    )
    assert remote_result(RC.PULL_NOT_FOUND, h, b"", 9, None).status is _S.OFFSET_OVERFLOW_ONE
