"""The store actor's vocabulary: its inbox messages, its role, the callbacks puts are answered
through and the protocols other parts see it by (`StoreWriter` for the send path, `PutStats` for
the counters).

A put is answered exactly once through its ``on_done``: with the stored results and a
`PutStatus`, or with nothing stored and the status that says why (`fail_put`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.kernel.runtime import ActorStopped, Reply
from rocketrio.storage.message_store import (
    BatchPutResult,
    MessageStore,
    MessageToStore,
    PutResult,
)

# on_done(results, status, remark): results is empty unless status.stored
PutCallback = Callable[[list[PutResult], PutStatus, str | None], None]
# arrived({(topic, queue_id): new max offset}): called once at the end of a turn that added
# ConsumeQueue entries, with every queue that got some
ArrivalListener = Callable[[Mapping[tuple[str, int], int]], None]


class PutStats(Protocol):
    """Where the actor counts its puts (stats.py `BrokerStats`; store_stats.py says what each
    figure means): per stored request, per turn, per failed put."""

    def on_topic_put(self, topic: str, msgs: int, nbytes: int, requests: int = 1) -> None: ...

    def on_put_turn(self, elapsed_ms: int, msgs: int) -> None: ...

    def on_put_failed(self, n: int) -> None: ...


@attrs.define(slots=True)  # not frozen: one per single send, and a frozen init costs 3x
class PutMessages:
    messages: list[MessageToStore]
    on_done: PutCallback


# on_done(result, status, remark): result is None unless status.stored
BatchPutCallback = Callable[[BatchPutResult | None, PutStatus, str | None], None]


@attrs.frozen
class PutBatchBody:
    """A client's SEND_BATCH_MESSAGE body, stored as is (`MessageStore.put_batch_body`)."""

    topic: str
    queue_id: int
    body: bytes
    options: dict[str, Any]  # put_batch_body keyword arguments (properties, sys_flag ...)
    on_done: BatchPutCallback


AnyPut = PutMessages | PutBatchBody
# what a put turned into: PutResults for PutMessages, a BatchPutResult for PutBatchBody
Stored = list[PutResult] | BatchPutResult


@attrs.frozen
class StoreCall:
    """Run ``fn(store)`` between puts and never beside a flush; the result goes to reply.

    ``exclusive``: ``fn`` mutates the store, so it also runs inside ``ReadGate.exclusive()``
    (no off-loop read beside it). A read-only call (a barrier after the queued puts) is not.
    """

    fn: Callable[[MessageStore], Any]
    reply: Reply[Any]
    exclusive: bool = True


@attrs.frozen
class ActorCall:
    """Run ``fn(actor)`` between turns, inside ``ReadGate.exclusive()`` and never beside a
    flush: role changes and the slave's truncations (they touch the actor's own state)."""

    fn: Callable[[Any], Any]  # gets the StoreActor
    reply: Reply[Any]


@attrs.frozen
class ReplicaAppend:
    """Whole records a slave received from its master (SLAVE role only)."""

    offset: int
    data: bytes
    reply: Reply[int]
    confirm: int = -1  # then confirmOffset may move there (`request_confirm`)


@attrs.frozen
class ConfirmPoke:
    """Wake an idle actor to apply a new confirmOffset (`request_confirm`)."""


@attrs.frozen
class DiskProbe:
    """Between turns: try to end the refusing state (`StoreActor.probe_disk`)."""

    reply: Reply[bool]


@attrs.define(slots=True)
class StagedPuts:
    """Single puts that share one inbox slot (`StoreActor.put_nowait`): the actor takes them
    in order as if each had come on its own. The list grows while this token is the newest
    message of the inbox and the actor has not taken it."""

    puts: list[PutMessages]


StoreMsg = (
    PutMessages
    | StagedPuts
    | PutBatchBody
    | StoreCall
    | ActorCall
    | ReplicaAppend
    | ConfirmPoke
    | DiskProbe
)


class StoreRole(enum.Enum):
    STANDALONE = "STANDALONE"
    FENCED = "FENCED"
    MASTER = "MASTER"
    SLAVE = "SLAVE"


class StoreWriter(Protocol):
    """The store actor as the send path sees it: puts answered through callbacks.

    Every method raises `ActorStopped` once the actor stopped; the ``_nowait`` ones raise
    ``trio.WouldBlock`` when the inbox is full (the caller then awaits the other one, so the
    backpressure reaches the producer's connection).
    """

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None: ...

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None: ...

    def put_batch_nowait(self, put: PutBatchBody) -> None: ...

    async def put_batch(self, put: PutBatchBody) -> None: ...


def stored_count(stored: Stored) -> int:
    """How many messages a stored put holds."""
    return stored.count if isinstance(stored, BatchPutResult) else len(stored)


def fail_put(put: AnyPut, status: PutStatus, remark: str | None) -> None:
    """Answer a put that stored nothing."""
    if isinstance(put, PutBatchBody):
        put.on_done(None, status, remark)
    else:
        put.on_done([], status, remark)


@attrs.frozen
class PutAnswer:
    """The store actor's answer to one put: what it stored (empty unless stored)."""

    status: PutStatus
    results: tuple[PutResult, ...]
    remark: str | None

    @property
    def stored(self) -> bool:
        return bool(self.results) and self.status.stored


async def put_and_wait(
    writer: StoreWriter, messages: list[MessageToStore], *, nowait_first: bool = False
) -> PutAnswer:
    """Put ``messages`` (one store request) and wait for the store actor's answer.
    ``nowait_first``: hand them over with `StoreWriter.put_nowait` (no checkpoint, and puts
    back to back share an inbox slot), awaiting `put` only when the inbox is full."""
    done = trio.Event()
    answer: list[PutAnswer] = []

    def on_done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        answer.append(PutAnswer(status, tuple(results), remark))
        done.set()

    try:
        if nowait_first:
            try:
                writer.put_nowait(messages, on_done)
            except trio.WouldBlock:
                await writer.put(messages, on_done)
        else:
            await writer.put(messages, on_done)
    except ActorStopped:
        return PutAnswer(PutStatus.SERVICE_NOT_AVAILABLE, (), "the store is stopped")
    await done.wait()
    return answer[0]
