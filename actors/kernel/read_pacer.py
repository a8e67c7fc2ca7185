"""The read pacer: a server's reader lets the actor it fed take that work before it reads again.

A connection's reader dispatches every request of a read (a send goes into the store actor's
inbox), then loops into its next read. Trio's socket receive tries the non-blocking ``recv``
FIRST and yields only after it, so while a client keeps bytes coming the reader reads and
dispatches again before the actor it woke has run: one actor turn takes several reads' work,
and its answers (written as the turn ends, answer_flush.py) leave late, while the client waits
for them before it sends more (a pipeline bubble: docs/benchmarks.md, issue 28's tenth pass).

A server given a `ReadPacer` (the broker's: its store actor's `TakeSignal`) asks it once per read
that dispatched anything: when the actor has work in its inbox it has not taken and it is
between turns (``pending``), the reader waits (``taken``) until the actor takes its inbox, so
that turn, and its answers, come before the connection's next read. The signal is per turn,
not per message: the actor marks it when work arrives in an empty slot and clears it as it takes
a batch. An actor in a turn (a SYNC_FLUSH fsync) does not hold readers back: what they read
meanwhile is its next turn's batch (group commit), as before. Every reader waiting is released
by the same take, so several connections share each turn; a full inbox still back-pressures a
reader through its put, and an actor that stops releases its readers for good (`close`).
"""

from __future__ import annotations

from typing import Protocol

import trio

# a paced reader's read after one that filled its buffer: its turn takes one read, so the read's
# size is the turn's (server_limits.BUSY_READ, 4x this, made turns answer later)
PACED_READ = 16 * 1024


class ReadPacer(Protocol):
    def pending(self) -> bool:
        """Work waits for the actor's next take, which is not under way yet."""
        ...

    async def taken(self) -> None:
        """Return once the actor has taken its inbox (or stopped)."""
        ...


class TakeSignal:
    """An actor's side of the `ReadPacer`: ``untaken`` marked by whoever queues work, ``took``
    as the actor takes its inbox (then ``busy`` until ``idle``: the actor may read it as its
    own "in a turn"), ``close`` as it stops."""

    __slots__ = ("_lot", "busy", "closed", "untaken")

    def __init__(self) -> None:
        self.untaken = False  # work queued since the last take
        self.busy = False  # a turn is under way
        self.closed = False
        self._lot = trio.lowlevel.ParkingLot()

    def pending(self) -> bool:
        return self.untaken and not (self.busy or self.closed)

    async def taken(self) -> None:
        await self._lot.park()

    def took(self) -> None:
        """The actor took its inbox and starts its turn: every waiting reader may read on."""
        self.untaken = False
        self.busy = True
        if self._lot:
            self._lot.unpark_all()

    def idle(self) -> None:
        """The turn ended: work queued meanwhile holds readers until the next take."""
        self.busy = False

    def close(self) -> None:
        self.closed = True  # never pending again
        self._lot.unpark_all()
