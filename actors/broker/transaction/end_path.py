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

from collections.abc import Awaitable, Callable
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

    def answer(outcome: Refusal | None) -> None:
        ctx.respond(s.end_response(ctx.cmd, outcome))

    def write_op() -> None:
        if s.ops.submit(offsets, answer):
            return
        nursery = s._nursery  # the batcher is full or stopped: write the op alone
        if nursery is None:
            answer(Refusal(ResponseCode.SYSTEM_ERROR, "the broker is stopping"))
            return

        async def alone() -> None:
            answer(await s.ops.write(offsets))

        nursery.start_soon(alone)

    if kind == TRANSACTION_ROLLBACK_TYPE:
        write_op()
        return None
    msg = s.final_message(half)
    if s.is_static(half.properties.get(PROPERTY_REAL_TOPIC, "")) or s.is_static(msg.topic):
        return _static_commit(s, ctx, uniq, half, offsets, msg, write_op, answer)

    on_commit = _on_commit(s, uniq, write_op, answer)
    try:  # no checkpoint: the reader queues the commits of all its ENDs for one store turn
        s.writer.put_nowait([msg], on_commit)
    except trio.WouldBlock:
        return _put_waiting(s, ctx, uniq, [msg], on_commit)  # the inbox is full: backpressure
    except ActorStopped:
        s.decided.discard(uniq)
        return s.end_response(ctx.cmd, Refusal(ResponseCode.SYSTEM_ERROR, "the store is stopped"))
    return None


OnCommit = Callable[[list[PutResult], PutStatus, str | None], None]


def _on_commit(
    s: TransactionService,
    uniq: str,
    write_op: Callable[[], None],
    answer: Callable[[Refusal | None], None],
) -> OnCommit:
    """The commit's store callback: the op once the commit is stored (op_batch.py); a refused
    commit releases its claim and is answered with the store's reason (the check decides it)."""

    def on_commit(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        if results and status.stored:
            write_op()
            return
        s.decided.discard(uniq)
        answer(Refusal(ResponseCode.SYSTEM_ERROR, remark or status.value))

    return on_commit


async def _put_waiting(
    s: TransactionService,
    ctx: RequestContext,
    uniq: str,
    here: list[MessageToStore],
    on_commit: OnCommit,
) -> RemotingCommand | None:
    try:
        await s.writer.put(here, on_commit)
    except ActorStopped:
        s.decided.discard(uniq)
        return s.end_response(ctx.cmd, Refusal(ResponseCode.SYSTEM_ERROR, "the store is stopped"))
    return None


def _static_commit(
    s: TransactionService,
    ctx: RequestContext,
    uniq: str,
    half: MessageExt,
    offsets: list[int],
    msg: MessageToStore,
    write_op: Callable[[], None],
    answer: Callable[[Refusal | None], None],
) -> Awaitable[RemotingCommand | None] | None:
    """A static topic's commit: its logic queue may have moved and the commit be forwarded over
    the network, so it is written from a task (the module docstring), or, with no nursery (the
    broker stopping), rerouted inline."""
    nursery = s._nursery
    if nursery is not None:

        async def forwarded() -> None:
            answer(await s._decide(uniq, half, offsets, True))

        nursery.start_soon(forwarded)
        return None
    return _reroute_inline(s, ctx, uniq, msg, write_op, answer)


async def _reroute_inline(
    s: TransactionService,
    ctx: RequestContext,
    uniq: str,
    msg: MessageToStore,
    write_op: Callable[[], None],
    answer: Callable[[Refusal | None], None],
) -> RemotingCommand | None:
    here = await s.reroute([msg])
    if isinstance(here, str):
        s.decided.discard(uniq)
        return s.end_response(ctx.cmd, Refusal(ResponseCode.SYSTEM_ERROR, here))
    if not here:  # sent to the logic queue's leader: only the op is written here
        write_op()
        return None
    return await _put_waiting(s, ctx, uniq, here, _on_commit(s, uniq, write_op, answer))
