"""The op records of one scheduler turn's decided transactions as ONE op message.

An op (RMQ_SYS_TRANS_OP_HALF_TOPIC, tag ``d``) names the half offsets it decides, comma
separated; upstream 5.x batches them the same way (one op message for several halves, up to
transactionOpMsgMaxSize bytes). Every END_TRANSACTION (commit or rollback) and every check that
finds a commit without its op hands its half offsets to `OpBatcher.submit`; the batcher's task
wakes once per turn and writes what is queued (at most MAX_OFFSETS_PER_OP offsets) as one op
message, one store put, then answers each submitter with the store's outcome.

A commit's op is submitted only after the commit itself is stored (service.py `_decide`), so an
op never names a half whose commit the store refused; a crash between the two leaves a commit
without its op, which the check round repairs without a second commit (as before). An op the
store refuses is answered to every END of the batch (their transactions stay decided in memory,
as a refused op did before, and are checked again after a restart).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus, Refusal
from rocketrio.actors.broker.store.messages import StoreWriter
from rocketrio.actors.broker.store.turn_puts import TurnPuts
from rocketrio.protocol.codes import ResponseCode
from rocketrio.storage.message_store import MessageToStore

MAX_OFFSETS_PER_OP = 256  # keeps an op body under upstream's transactionOpMsgMaxSize (4096)
MAX_QUEUED = 8192  # beyond this `submit` refuses and the caller writes its op alone

OnWritten = Callable[[Refusal | None], None]
MakeOp = Callable[[list[int]], MessageToStore]  # half offsets -> the op message


@attrs.define
class _Queued:
    offsets: list[int]
    on_written: OnWritten


def take_batch(queued: list[_Queued], max_offsets: int) -> int:
    """How many queued submissions (from the head) go into one op: at least one, and no more
    than fit in ``max_offsets`` offsets after the first."""
    n, total = 0, 0
    for q in queued:
        if n and total + len(q.offsets) > max_offsets:
            break
        n += 1
        total += len(q.offsets)
    return n


class OpBatcher:
    """Queues op offsets; writes one op message per turn (module docstring; the queue and its
    task are `TurnPuts`)."""

    def __init__(self, writer: StoreWriter, make_op: MakeOp) -> None:
        self.make_op = make_op
        self._puts = TurnPuts[_Queued](
            writer, self._op, _answer, _refused,
            take=lambda q: take_batch(q, MAX_OFFSETS_PER_OP), max_queued=MAX_QUEUED,
        )  # fmt: skip

    @property
    def running(self) -> bool:
        return self._puts.running

    @property
    def ops_written(self) -> int:
        return self._puts.puts

    def submit(self, offsets: list[int], on_written: OnWritten) -> bool:
        """Queue the op of ``offsets``; False (nothing queued) when the task is not running or
        the queue is full: the caller then writes its op itself."""
        return self._puts.submit(_Queued(offsets, on_written))

    async def write(self, offsets: list[int]) -> Refusal | None:
        """The op of ``offsets`` through the batcher, awaited; None once stored."""
        done = trio.Event()
        box: list[Refusal | None] = []

        def on_written(outcome: Refusal | None) -> None:
            box.append(outcome)
            done.set()

        if not self.submit(offsets, on_written):
            await self._puts.put([_Queued(offsets, on_written)])
        await done.wait()
        return box[0]

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self._puts.run(task_status=task_status)

    def _op(self, batch: list[_Queued]) -> list[MessageToStore]:
        msg = self.make_op([o for q in batch for o in q.offsets])
        return [msg]


def _answer(batch: list[_Queued], outcome: Refusal | None) -> None:
    for q in batch:
        q.on_written(outcome)


def _refused(status: PutStatus, remark: str | None) -> Refusal:
    return Refusal(ResponseCode.SYSTEM_ERROR, remark or status.value)
