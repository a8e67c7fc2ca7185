"""What the HA shells need from the broker's store, and nothing more.

The store actor implements both ports (actors/broker/store/actor.py); tests use an in-memory
fake. Reads (`MasterStorePort`) happen on the caller's task and see only whole, written bytes;
every mutation (`SlaveStorePort`) is a message to the store actor, the store's one writer, and
returns only once it is done (durable where the method says so).

`Watermark` is how the store tells the master's writers that the CommitLog grew: each writer
waits for the value to pass the offset it has sent up to. A listener (`listen`) is called inline
by `advance`, before the waiters wake: the master's HA service ships a store turn's bytes from
there, in the turn itself, without waiting for a writer task to be scheduled. A writer waits
with `wait_past`, which reads how far it has sent at each `advance`: a writer whose bytes the
listener has just shipped is not woken (it would find nothing to send: a task switch, a cancel
scope's exit and an empty burst plan per store turn before); `woke` says whether the last
advance woke anyone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import trio

from rocketrio.actors.broker.ha.truncation import TruncationPlan
from rocketrio.storage.epoch_file import EpochRecord


class Watermark:
    """A monotonic offset tasks can wait on (no lost wake-ups, no polling)."""

    def __init__(self, value: int = 0) -> None:
        self.value = value
        self._lot = trio.lowlevel.ParkingLot()  # `wait_kick`: woken by every change
        self._past: list[tuple[Callable[[], int], trio.Event]] = []  # `wait_past`
        self._listeners: list[Callable[[int], None]] = []
        self.woke = False  # the last `advance` woke a waiter (module doc)

    def listen(self, fn: Callable[[int], None]) -> Callable[[], None]:
        """Call ``fn(value)`` inline on every `advance` that moves the value (it must not
        raise); returns the function that stops it."""
        self._listeners.append(fn)
        return lambda: self._listeners.remove(fn)

    def advance(self, value: int) -> None:
        self.woke = False
        if value > self.value:
            self.value = value
            for fn in self._listeners:
                fn(value)
            self._wake(everyone=False)

    def reset(self, value: int) -> None:
        """Set (possibly lower, after a truncation) and wake every waiter to re-check."""
        self.value = value
        self._wake(everyone=True)

    async def wait_above(self, offset: int) -> None:
        """Return once the value exceeds ``offset`` (at once if it already does; a `kick` alone
        does not return)."""
        while self.value <= offset:
            await self.wait_past(lambda: offset)

    async def wait_past(self, sent: Callable[[], int]) -> None:
        """Return once the value exceeds ``sent()``, read again at every `advance` (at once if
        it already does); a `kick` or `reset` returns too, for the caller to re-check."""
        if self.value > sent():
            return
        entry = (sent, trio.Event())
        self._past.append(entry)
        try:
            await entry[1].wait()
        finally:
            if entry in self._past:  # cancelled before a wake took it out
                self._past.remove(entry)

    def kick(self) -> None:
        """Wake every waiter without changing the value (a role or epoch change)."""
        self._wake(everyone=True)

    async def wait_kick(self) -> None:
        """Return at the next `advance`, `reset` or `kick`."""
        await self._lot.park()

    def _wake(self, *, everyone: bool) -> None:
        woken = self._lot.unpark_all()
        if woken:
            self.woke = True
        if not self._past:
            return
        value, keep = self.value, []
        for entry in self._past:
            if everyone or value > entry[0]():
                entry[1].set()
                self.woke = True
            else:
                keep.append(entry)
        self._past = keep


def first_leaf(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    """The first exception of ``kinds`` inside ``exc`` (which may be a nursery's group)."""
    if isinstance(exc, kinds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = first_leaf(inner, kinds)
            if found is not None:
                return found
    return None


class MasterStorePort(Protocol):
    """Reads the master's HA service makes (inline, between the store actor's turns)."""

    written: Watermark  # the CommitLog end; advances after every stored turn

    def log_min_offset(self) -> int: ...

    def log_end_offset(self) -> int: ...

    def read_commitlog(self, offset: int, size: int) -> bytes:
        """Exactly ``size`` bytes from ``offset`` (whole, written bytes only)."""
        ...

    def epoch_records(self) -> Sequence[EpochRecord]:
        """The epoch file as it is now (a master appends to it when it takes a new epoch)."""
        ...

    def confirm_offset(self) -> int: ...


class SlaveStorePort(Protocol):
    """The slave's HA client changes the store only through these (the store actor runs them)."""

    segment_size: int

    def log_min_offset(self) -> int: ...

    def log_end_offset(self) -> int: ...

    def epoch_records(self) -> Sequence[EpochRecord]: ...

    async def truncate(self, plan: TruncationPlan) -> tuple[int, int, EpochRecord | None]:
        """Carry out a truncation plan durably: CommitLog, ConsumeQueues, index, epoch file and
        confirmOffset are all cut and fsynced before this returns. Returns the log's
        (min offset, max offset, last epoch record)."""
        ...

    async def reset_log_at(self, offset: int, reason: str) -> None:
        """Drop every record and epoch entry durably; the empty log continues at ``offset``."""
        ...

    async def record_epoch(self, epoch: int, start_offset: int) -> None:
        """Append an epoch entry durably (before the records it labels are written)."""
        ...

    async def append_replicated(self, offset: int, data: bytes, confirm: int = -1) -> int:
        """Append whole records at ``offset`` (the log end), checked record by record (size,
        magic, physical offset, CRC); with SYNC_FLUSH fsynced before returning. Returns the
        new log end. Raises ValueError for data that is not valid records at that offset.
        ``confirm`` >= 0: once written, `request_confirm(confirm)` (in the same store turn)."""
        ...

    def request_confirm(self, offset: int) -> None:
        """The slave's confirmOffset moved: dispatch ConsumeQueues up to it (asynchronously)."""
        ...
