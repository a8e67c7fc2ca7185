"""ProcessQueue offset rules: the committed offset never passes an unconsumed message."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.client.process_queue import OffsetTable, ProcessQueue
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt


def msgs(*offsets: int) -> list[MessageExt]:
    return [MessageExt(topic="T", body=b"x" * 10, queue_offset=o) for o in offsets]


def test_commit_offset_is_smallest_unconsumed() -> None:
    pq = ProcessQueue()
    batch = msgs(10, 11, 12, 13)
    assert pq.put(batch) == 4
    assert pq.msg_count == 4 and pq.msg_size == 40
    # 12 and 13 finish first: 10 is still being consumed
    assert pq.remove(batch[2:]) == 10
    assert pq.remove(batch[:1]) == 11
    assert pq.max_span() == 0
    assert pq.remove(batch[1:2]) == 14  # nothing in flight: one past the largest pulled
    assert pq.msg_count == 0 and pq.msg_size == 0


def test_remove_when_nothing_tracked_returns_minus_one() -> None:
    pq = ProcessQueue()
    assert pq.remove(msgs(3)) == -1


def test_duplicates_and_older_offsets_are_ignored() -> None:
    pq = ProcessQueue()
    pq.put(msgs(5, 6))
    assert pq.put(msgs(6, 4, 7)) == 1
    assert pq.msg_count == 3
    assert pq.max_span() == 2


def test_clear_forgets_everything() -> None:
    pq = ProcessQueue()
    pq.put(msgs(1, 2))
    pq.clear()
    assert pq.msg_count == 0 and pq.remove(msgs(1)) == -1
    assert pq.put(msgs(0)) == 1  # after a seek, lower offsets are accepted again


@given(st.integers(1, 60).flatmap(lambda n: st.permutations(list(range(n)))), st.integers(0, 9))
def test_any_completion_order_never_skips(order: list[int], chunk: int) -> None:
    base = 100
    pq = ProcessQueue()
    pulled = msgs(*[base + i for i in range(len(order))])
    pq.put(pulled)
    done: set[int] = set()
    table = OffsetTable()
    mq = MessageQueue("T", "b", 0)
    step = chunk + 1
    for i in range(0, len(order), step):
        part = [pulled[j] for j in order[i : i + step]]
        done.update(m.queue_offset for m in part)
        commit = pq.remove(part)
        table.update(mq, commit, increase_only=True)
        first_unconsumed = next(
            (base + k for k in range(len(order)) if base + k not in done), base + len(order)
        )
        assert commit == first_unconsumed
        assert table.read(mq) == first_unconsumed
    assert table.read(mq) == base + len(order)


def test_offset_table_increase_only() -> None:
    t = OffsetTable()
    mq = MessageQueue("T", "b", 1)
    assert t.read(mq) == -1
    t.update(mq, 10, increase_only=True)
    t.update(mq, 7, increase_only=True)
    assert t.read(mq) == 10
    t.update(mq, 7, increase_only=False)
    assert t.read(mq) == 7
    t.update(mq, -1, increase_only=False)
    assert t.read(mq) == 7
    t.remove(mq)
    assert mq not in t


@given(
    st.lists(st.tuples(st.integers(1, 5), st.booleans()), min_size=1, max_size=20),
    st.randoms(use_true_random=False),
)
def test_untracked_consumption_never_skips_a_tracked_message(
    chunks: list[tuple[int, bool]], rnd: Any
) -> None:
    """Chunks pulled in order are either consumed at once (never tracked) or tracked and
    finished later in any order: every commit is the oldest unfinished offset."""
    pq = ProcessQueue()
    pending: list[list[MessageExt]] = []
    unfinished: set[int] = set()
    offset = 50
    for size, inline in chunks:
        chunk = msgs(*range(offset, offset + size))
        offset += size
        if inline:
            assert pq.consumed_untracked(chunk[-1].queue_offset) == min(unfinished, default=offset)
        else:
            assert pq.put(chunk) == size
            unfinished.update(m.queue_offset for m in chunk)
            pending.append(chunk)
            assert pq.min_inflight() == min(unfinished)
        if pending and rnd.random() < 0.5:
            done = pending.pop(rnd.randrange(len(pending)))
            unfinished.difference_update(m.queue_offset for m in done)
            assert pq.remove(done) == min(unfinished, default=offset)
    for done in pending:
        unfinished.difference_update(m.queue_offset for m in done)
        assert pq.remove(done) == min(unfinished, default=offset)
    assert pq.msg_count == 0 and pq.msg_size == 0
    assert pq.consumed_untracked(offset) == offset + 1


def test_untracked_consumption_moves_only_the_high_water_mark() -> None:
    pq = ProcessQueue()
    assert pq.consumed_untracked(2) == 3
    assert pq.msg_count == 0 and pq.msg_size == 0
    assert pq.put(msgs(2, 3)) == 1  # 2 was pulled (and consumed) already
    assert pq.consumed_untracked(4) == 3  # 3 is still in flight
    assert pq.consumed_untracked(1) == 3  # an old offset does not lower the mark
    assert pq.remove(msgs(3)) == 5
