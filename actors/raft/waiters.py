"""Who waits on a Raft node, and what each is told: proposers and linearizable readers.

- A proposer waits for ITS entry, registered by log index with the term it was proposed in.
  When the entry at that index is applied, the proposer gets the state machine's outcome if the
  terms match, else `ProposalDropped` (another leader's entry took the index); a snapshot that
  covers the index drops it too.
- A reader (Raft's ReadIndex, `RaftNode.read_barrier`) waits first, by its read ctx, for the
  core's ReadState, then until the node has applied up to that state's index. A reader whose
  ctx the core dropped, or whose leader lost its term meanwhile, is told `NotLeader`.
- The node stopping fails everyone (`NodeStopped`).

The node task is the only caller (no locks); resolving a `Reply` never blocks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from rocketrio.actors.kernel.runtime import Reply


class ProposalDropped(Exception):
    """The proposal's entry will never be applied under it (or its fate is unknown)."""


class NodeStopped(ProposalDropped):
    """The node shut down before the proposal resolved."""


class Waiters:
    """The proposers by log index and the readers by read ctx, then by commit index."""

    def __init__(self) -> None:
        self.proposals: dict[int, tuple[int, Reply[Any]]] = {}  # index -> (term, proposer)
        self._reads: dict[int, Reply[None]] = {}  # ctx -> reader, until its ReadState comes
        self._waiting_reads: list[tuple[int, Reply[None]]] = []  # (index, reader)
        self._read_ctx = itertools.count(1)

    # -- proposers

    def add_proposals(self, last_index: int, term: int, replies: list[Reply[Any]]) -> None:
        """The proposers of the entries appended up to ``last_index`` in ``term``, in order."""
        for index, reply in enumerate(replies, start=last_index - len(replies) + 1):
            self.proposals[index] = (term, reply)

    def applied(self, index: int, term: int, outcome: Any) -> None:
        """The entry at ``index`` (of ``term``) was applied with ``outcome``."""
        waiter = self.proposals.pop(index, None)
        if waiter is None:
            return
        proposed_term, reply = waiter
        if proposed_term == term:
            reply.set(outcome)
        else:
            reply.fail(
                ProposalDropped(f"entry {index} of term {proposed_term} was replaced (term {term})")
            )

    def superseded_by_snapshot(self, index: int) -> None:
        """A snapshot up to ``index`` replaced the entries: their proposers will never know."""
        for i in [i for i in self.proposals if i <= index]:
            _, reply = self.proposals.pop(i)
            reply.fail(ProposalDropped(f"entry {i} was superseded by the leader's snapshot"))

    # -- readers

    def next_read_ctx(self) -> int:
        return next(self._read_ctx)

    def add_read(self, ctx: int, reply: Reply[None]) -> None:
        """A reader whose ReadIndex request the core took under ``ctx``."""
        self._reads[ctx] = reply

    def read_state(self, ctx: int, index: int) -> None:
        """The core confirmed ``ctx``'s leadership: its reader waits until ``index`` is
        applied."""
        reply = self._reads.pop(ctx, None)
        if reply is not None:
            self._waiting_reads.append((index, reply))

    def drop_read(self, ctx: int, exc: Exception) -> None:
        reply = self._reads.pop(ctx, None)
        if reply is not None:
            reply.fail(exc)

    def release_reads(self, applied: int) -> None:
        """Answer the readers whose index is applied now."""
        if not self._waiting_reads:
            return
        keep = []
        for index, reply in self._waiting_reads:
            if index <= applied:
                reply.set(None)
            else:
                keep.append((index, reply))
        self._waiting_reads = keep

    def fail_waiting_reads(self, make_exc: Callable[[], Exception]) -> None:
        """The leader lost its term: reads confirmed under it are not linearizable any more
        (each reader gets its own exception from ``make_exc``)."""
        for _, reply in self._waiting_reads:
            reply.fail(make_exc())
        self._waiting_reads = []

    # -- everyone

    def fail_all(self, exc: ProposalDropped) -> None:
        for _, reply in self.proposals.values():
            reply.fail(exc)
        self.proposals.clear()
        for reply in self._reads.values():
            reply.fail(exc)
        self._reads.clear()
        for _, reply in self._waiting_reads:
            reply.fail(exc)
        self._waiting_reads = []
