"""A send's completion: the store actor's answer to a put, turned into the send's typed outcome
(`SendStored` or `PutFailed`) for the caller's ``on_done``."""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from rocketrio.actors.broker.dispatch.outcomes import PutFailed, PutStatus, SendOutcome, SendStored
from rocketrio.actors.broker.store.messages import BatchPutCallback
from rocketrio.storage.message_store import BatchPutResult, PutResult

_PUT_OK = PutStatus.PUT_OK

# a send's completion: called once, from the store actor's turn
OnSent = Callable[[SendOutcome], None]


def is_stored(status: PutStatus, results: list[Any]) -> bool:
    """The store answered with the message(s) in the CommitLog (PUT_OK first: no enum hash)."""
    return bool(results) and (status is _PUT_OK or status.stored)


class PendingSend:
    """A single send waiting for the store: the `PutCallback` that makes its outcome.

    One slots object rather than a closure: a closure over three values is four GC-tracked
    allocations per send."""

    __slots__ = ("on_done", "queue_id", "uniq")

    def __init__(self, on_done: OnSent, queue_id: int, uniq: str) -> None:
        self.on_done = on_done
        self.queue_id = queue_id
        self.uniq = uniq

    def __call__(self, results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        if not is_stored(status, results):
            self.on_done(PutFailed(status, remark))
            return
        r = results[0]
        self.on_done(SendStored(status, remark, r.msg_id, self.queue_id, r.queue_offset, self.uniq))


class DirectAnswer(abc.ABC):
    """A single send's answer that takes the store's result as it is: the processor fills in
    the queue the answer names and the UNIQ_KEY and hands the answer itself to the store as
    the send's `PutCallback` (no `PendingSend` and no `SendStored` in between: the remoting
    send's hot path, send/handlers.py `StoredAnswer`). A subclass answers in ``__call__``
    exactly as `PendingSend` would have with the same values."""

    __slots__ = ("queue_id", "uniq")

    def __init__(self) -> None:
        self.queue_id = -1
        self.uniq = ""

    @abc.abstractmethod
    def __call__(self, results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        """The store's answer to the put (`PutCallback`)."""


def batch_done(on_done: OnSent) -> BatchPutCallback:
    def done(stored: BatchPutResult | None, status: PutStatus, remark: str | None) -> None:
        if stored is None or not is_stored(status, stored.sizes):
            on_done(PutFailed(status, remark))
            return
        on_done(
            SendStored(
                status,
                remark,
                stored.msg_ids_csv(),
                stored.queue_id,
                stored.first_queue_offset,
                stored.uniq_keys_csv(),
            )
        )

    return done
