"""The merging of one turn's ACK_MESSAGE records (ack_batch.py): one record per checkpoint,
never across checkpoints or revive queues; the batcher writes a turn's ACKs as one put and
answers each only once that put is stored (or refuses each when the store refused it)."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.dispatch.outcomes import Done, PutStatus, Refusal
from rocketrio.actors.broker.pop.ack import not_stored
from rocketrio.actors.broker.pop.ack_batch import AckBatcher, MergedAck, merge_acks
from rocketrio.actors.broker.pop.revive import ReviveCore
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.pop_checkpoint import AckMsg, MergeKey, PopCheckPoint
from rocketrio.storage.message_store import MessageToStore, PutResult


def ack(offset: int, *, start: int = 0, pop_time: int = 1000, queue: int = 0) -> AckMsg:
    return AckMsg((offset,), start, "G", "T", queue, pop_time, "b")


def queued(qid: int, a: AckMsg) -> tuple[int, MergeKey, int]:
    """An ACK as the batcher queues it: (revive queue, its CK's merge key, its offset)."""
    return qid, a.merge_key, a.ack_offsets[0]


def merge(acks: list[tuple[int, AckMsg]]) -> list[MergedAck]:
    return merge_acks([queued(q, a) for q, a in acks])


def test_acks_of_one_checkpoint_become_one_batch_record() -> None:
    merged = merge([(0, ack(3)), (0, ack(1)), (0, ack(3)), (0, ack(2))])
    assert len(merged) == 1
    m = merged[0]
    assert m.ack.batch and m.ack.ack_offsets == (1, 2, 3)
    assert m.items == (0, 1, 2, 3)
    assert m.ack.merge_key == ack(3).merge_key


def test_a_lone_ack_stays_the_record_it_was() -> None:
    a = ack(5)
    (m,) = merge([(2, a)])
    assert m.ack == a and not m.ack.batch and m.revive_qid == 2 and m.items == (0,)
    assert m.ack.to_json() == a.to_json()


def test_acks_of_two_checkpoints_are_never_merged() -> None:
    """Same queue, group and topic: another CK start offset, pop time, revive queue or broker
    is another checkpoint and gets its own record."""
    base = ack(10, start=8)
    others = [
        ack(10, start=9),  # another pop of the queue
        ack(10, start=8, pop_time=1001),
        ack(10, start=8, queue=1),
        attrs.evolve(base, broker_name="c"),
    ]
    for other in others:
        merged = merge([(0, base), (0, other)])
        assert [m.items for m in merged] == [(0,), (1,)]
        assert [m.ack for m in merged] == [base, other]
    merged = merge([(0, base), (1, base)])  # same CK key in two revive queues
    assert [(m.revive_qid, m.items) for m in merged] == [(0, (0,)), (1, (1,))]


@given(
    st.lists(
        st.tuples(
            st.integers(0, 1), st.integers(0, 2), st.integers(0, 1), st.integers(0, 7)
        ),  # (revive qid, CK start, pop time, offset above the start)
        min_size=1,
        max_size=40,
    )
)
def test_merged_records_ack_exactly_what_the_acks_did(
    draws: list[tuple[int, int, int, int]],
) -> None:
    """Fed to a revive core (per revive queue), the merged records set the same bits of the
    same checkpoints as the ACKs one by one, and every ACK is covered exactly once."""
    acks = [(q, ack(s + o, start=s, pop_time=1000 + p)) for q, s, p, o in draws]
    merged = merge(acks)
    assert sorted(i for m in merged for i in m.items) == list(range(len(acks)))

    def revive_state(records: list[tuple[int, AckMsg]]) -> list[list[tuple[int, ...]]]:
        cores = [ReviveCore(q, 0) for q in range(2)]
        for core in cores:
            for s in range(3):
                for p in range(2):
                    ck = PopCheckPoint(
                        start_offset=s,
                        pop_time=1000 + p,
                        invisible_time=10,
                        num=8,
                        queue_id=0,
                        topic="T",
                        cid="G",
                        broker_name="b",
                        queue_offset_diff=tuple(range(8)),
                    )
                    core.on_ck(ck, s * 2 + p)
        for q, a in records:
            cores[q].on_ack(a)
        return [sorted(r.offsets for r in core.due(1 << 40)) for core in cores]

    assert revive_state([(m.revive_qid, m.ack) for m in merged]) == revive_state(acks)


class FakeWriter:
    """A store writer that records each put and answers it when told."""

    def __init__(self) -> None:
        self.puts: list[tuple[list[MessageToStore], PutCallback]] = []

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self.puts.append((messages, on_done))

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        raise NotImplementedError

    async def put_batch(self, put: Any) -> None:
        raise NotImplementedError

    def put_batch_nowait(self, put: Any) -> None:
        raise NotImplementedError


def named(outcome: Done | Refusal, name: str) -> str | Refusal:
    return name if isinstance(outcome, Done) else outcome


def record(a: AckMsg, qid: int) -> MessageToStore:
    return MessageToStore(topic="REVIVE", queue_id=qid, body=a.to_json())


async def test_one_turn_one_put_answered_only_once_stored(
    mock_clock: trio.testing.MockClock,
) -> None:
    writer = FakeWriter()
    batcher = AckBatcher(writer, record, not_stored)
    answers: list[Any] = []
    async with trio.open_nursery() as n:
        assert not batcher.submit(*queued(0, ack(1)), answers.append)  # not running yet
        await n.start(batcher.run)
        for i in range(5):
            assert batcher.submit(
                *queued(0, ack(i)), lambda o, i=i: answers.append(named(o, f"ok{i}"))
            )
        assert batcher.submit(
            *queued(1, ack(9, start=9)), lambda o: answers.append(named(o, "ok9"))
        )
        await trio.testing.wait_all_tasks_blocked()
        assert len(writer.puts) == 1
        msgs, on_done = writer.puts[0]
        assert [(m.queue_id, m.body.count(b'"aol"')) for m in msgs] == [(0, 1), (1, 0)]
        assert answers == []  # nothing answered before the store
        results = [PutResult(0, 0, 0, "", 0) for _ in msgs]
        on_done(results, PutStatus.PUT_OK, None)
        assert answers == ["ok0", "ok1", "ok2", "ok3", "ok4", "ok9"]

        answers.clear()
        batcher.submit(*queued(0, ack(7)), answers.append)
        await trio.testing.wait_all_tasks_blocked()
        assert len(writer.puts) == 2
        writer.puts[1][1]([], PutStatus.OS_PAGE_CACHE_BUSY, "busy")
        assert len(answers) == 1 and isinstance(answers[0], Refusal)
        assert answers[0].code == ResponseCode.SYSTEM_ERROR
        n.cancel_scope.cancel()
    assert not batcher.running
