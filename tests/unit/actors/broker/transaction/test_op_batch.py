"""One op message per turn (transaction/op_batch.py): every submitted half offset in it, each
submitter answered only once the op is stored, a refusal answered to every one of the batch,
batches bounded by MAX_OFFSETS_PER_OP."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus, Refusal
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.actors.broker.transaction.op_batch import (
    MAX_OFFSETS_PER_OP,
    OpBatcher,
    _Queued,
    take_batch,
)
from rocketrio.actors.broker.transaction.policy import decode_op_body, op_message
from rocketrio.storage.message_store import MessageToStore, PutResult


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


def make_op(offsets: list[int]) -> MessageToStore:
    return op_message(offsets, "U", 0, (b"\x7f\x00\x00\x01", 1))


def stored(msgs: list[MessageToStore]) -> list[PutResult]:
    return [PutResult(0, 0, 0, "", 0) for _ in msgs]


def test_a_batch_is_bounded_by_its_offsets_and_takes_at_least_one() -> None:
    def q(n: int) -> _Queued:
        return _Queued(list(range(n)), lambda _: None)

    assert take_batch([q(1)] * 5, 3) == 3
    assert take_batch([q(2), q(2), q(1)], 4) == 2
    assert take_batch([q(10), q(1)], 4) == 1  # a submission larger than the bound goes alone
    assert take_batch([q(1)] * (MAX_OFFSETS_PER_OP + 9), MAX_OFFSETS_PER_OP) == MAX_OFFSETS_PER_OP


async def test_the_ops_of_one_turn_are_one_op_answered_once_stored(
    mock_clock: trio.testing.MockClock,
) -> None:
    writer = FakeWriter()
    ops = OpBatcher(writer, make_op)
    answers: dict[int, Refusal | None] = {}

    async def end(i: int, offsets: list[int]) -> None:
        answers[i] = await ops.write(offsets)

    async with trio.open_nursery() as n:
        await n.start(ops.run)
        for i, offsets in enumerate([[4], [7, 2], [9]]):
            n.start_soon(end, i, offsets)
        await trio.testing.wait_all_tasks_blocked()
        assert len(writer.puts) == 1
        msgs, on_done = writer.puts[0]
        assert len(msgs) == 1 and sorted(decode_op_body(msgs[0].body)) == [2, 4, 7, 9]
        assert answers == {}  # nobody answered before the store
        on_done(stored(msgs), PutStatus.PUT_OK, None)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == {0: None, 1: None, 2: None}

        answers.clear()
        n.start_soon(end, 5, [11])
        n.start_soon(end, 6, [12])
        await trio.testing.wait_all_tasks_blocked()
        writer.puts[1][1]([], PutStatus.SERVICE_NOT_AVAILABLE, "not master")
        await trio.testing.wait_all_tasks_blocked()
        assert set(answers) == {5, 6}
        assert all(isinstance(a, Refusal) and "not master" in a.remark for a in answers.values())
        assert ops.ops_written == 2
        n.cancel_scope.cancel()


async def test_without_its_task_an_op_is_written_alone(
    mock_clock: trio.testing.MockClock,
) -> None:
    writer = FakeWriter()
    ops = OpBatcher(writer, make_op)
    async with trio.open_nursery() as n:
        box: list[Refusal | None] = []

        async def end() -> None:
            box.append(await ops.write([3]))

        n.start_soon(end)
        await trio.testing.wait_all_tasks_blocked()
        ((msgs, on_done),) = writer.puts
        assert decode_op_body(msgs[0].body) == [3]
        on_done(stored(msgs), PutStatus.PUT_OK, None)
    assert box == [None]
