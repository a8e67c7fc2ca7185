"""END_TRANSACTION without a task: the common case carried by store callbacks.

A producer's END_TRANSACTION needs its half read back and checked (`TransactionService.claim`,
which never awaits), the commit put and, once that is stored, its op (op_batch.py). The task
path (service.py `_end_task`) awaits each step in a task of its own. This path hands the commit
to the store writer with a callback that submits the op, and the op's callback answers: the
connection's reader awaits only inbox space (the store's backpressure) and no task, event or
semaphore is spent per END. Same steps, same order, same outcomes as the task path.

It is taken only when nothing could make it differ from the task path: the broker is master,
the check lock is free (so `claim` runs exactly as it would under the lock: nothing
interleaves with code that does not await) and the op batcher runs. Otherwise the task path
serves the request. A commit to a static topic is written from a task all the same: its logic
queue may have moved and the commit be forwarded to another broker (static_topic/forward.py),
which must not hold up the connection's reader.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus, Refusal
from rocketrio.actors.broker.transaction.policy import OP_TOPIC
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.kernel.runtime import ActorStopped
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import EndTransactionRequestHeader
from rocketrio.protocol.message import (
    PROPERTY_REAL_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.message_store import MessageToStore, PutResult

if TYPE_CHECKING:
    from rocketrio.actors.broker.transaction.service import TransactionService


def can_end_without_task(s: TransactionService) -> bool:
    return s.ops.running and not s.lock.locked() and s.is_master()


def end_without_task(
    s: TransactionService, ctx: RequestContext, h: EndTransactionRequestHeader
) -> RemotingCommand | Awaitable[RemotingCommand | None] | None:
    """The response now (a refusal, or nothing to do), or None: answered by a callback. No
    coroutine on the common path (the commit queued for the store turn); an awaitable only when
    the store's inbox is full (backpressure) or a static topic's commit must wait for its
    reroute with no nursery to run it in."""
    kind = h.commitOrRollback
    if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
        return s.end_response(ctx.cmd, None)  # unknown state: the check will ask again
    claim = s.claim(h)
    if claim is None or isinstance(claim, Refusal):
        return s.end_response(ctx.cmd, claim)
    uniq, half, offsets = claim
    s.topics.create_in_send_back(OP_TOPIC, 1, PERM_READ | PERM_WRITE)
    end = PendingEnd(s, ctx, uniq, offsets)
    if kind == TRANSACTION_ROLLBACK_TYPE:
        end.write_op()
        return None
    msg = s.final_message(half)
    if s.is_static(half.properties.get(PROPERTY_REAL_TOPIC, "")) or s.is_static(msg.topic):
        return _static_commit(s, end, half, msg)
    try:  # no checkpoint: the reader queues the commits of all its ENDs for one store turn
        s.writer.put_nowait([msg], end)
    except trio.WouldBlock:
        return _put_waiting(end, [msg])  # the inbox is full: backpressure
    except ActorStopped:
        s.decided.discard(uniq)
        return s.end_response(ctx.cmd, Refusal(ResponseCode.SYSTEM_ERROR, "the store is stopped"))
    return None


class PendingEnd:
    """One END between its claim and its answer: the commit's store callback (``__call__``),
    then its op (op_batch.py), then the answer. One slots object rather than three closures
    and their cells: fewer GC-tracked objects alive per END in flight."""

    __slots__ = ("ctx", "offsets", "s", "uniq")

    def __init__(
        self, s: TransactionService, ctx: RequestContext, uniq: str, offsets: list[int]
    ) -> None:
        self.s = s
        self.ctx = ctx
        self.uniq = uniq
        self.offsets = offsets

    def answer(self, outcome: Refusal | None) -> None:
        ctx = self.ctx
        ctx.respond(self.s.end_response(ctx.cmd, outcome))

    def write_op(self) -> None:
        s = self.s
        if s.ops.submit(self.offsets, self.answer):
            return
        nursery = s._nursery  # the batcher is full or stopped: write the op alone
        if nursery is None:
            self.answer(Refusal(ResponseCode.SYSTEM_ERROR, "the broker is stopping"))
            return
        nursery.start_soon(self._op_alone)

    async def _op_alone(self) -> None:
        self.answer(await self.s.ops.write(self.offsets))

    def __call__(self, results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        """The commit's store callback: the op once the commit is stored; a refused commit
        releases its claim and is answered with the store's reason (the check decides it)."""
        if results and status.stored:
            self.write_op()
            return
        self.s.decided.discard(self.uniq)
        self.answer(Refusal(ResponseCode.SYSTEM_ERROR, remark or status.value))

    def refused(self, remark: str) -> RemotingCommand:
        """The claim released, the END answered now with ``remark``."""
        self.s.decided.discard(self.uniq)
        return self.s.end_response(self.ctx.cmd, Refusal(ResponseCode.SYSTEM_ERROR, remark))


async def _put_waiting(end: PendingEnd, here: list[MessageToStore]) -> RemotingCommand | None:
    try:
        await end.s.writer.put(here, end)
    except ActorStopped:
        return end.refused("the store is stopped")
    return None


def _static_commit(
    s: TransactionService, end: PendingEnd, half: MessageExt, msg: MessageToStore
) -> Awaitable[RemotingCommand | None] | None:
    """A static topic's commit: its logic queue may have moved and the commit be forwarded over
    the network, so it is written from a task (the module docstring), or, with no nursery (the
    broker stopping), rerouted inline."""
    nursery = s._nursery
    if nursery is not None:

        async def forwarded() -> None:
            end.answer(await s._decide(end.uniq, half, end.offsets, True))

        nursery.start_soon(forwarded)
        return None
    return _reroute_inline(end, msg)


async def _reroute_inline(end: PendingEnd, msg: MessageToStore) -> RemotingCommand | None:
    here = await end.s.reroute([msg])
    if isinstance(here, str):
        return end.refused(here)
    if not here:  # sent to the logic queue's leader: only the op is written here
        end.write_op()
        return None
    return await _put_waiting(end, here)
