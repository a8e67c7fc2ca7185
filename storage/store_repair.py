"""What a failed write or fsync leaves in a MessageStore, and the repair before it writes again.

`StoreRepair` is the part of `MessageStore` that owns the mark on derived data a failed write
left unreliable (`derived_from`, a `WriteFence`) and the rules for a disk that fails a write
(ENOSPC: the disk is full), so that no file is ever left half-written in a way recovery would
refuse, no entry is lost or dispatched twice, and the store can take writes again in the same
process once the disk has room:

- a CommitLog append that fails is cut back by the CommitLog itself: nothing else changed;
- a dispatch that fails after its CommitLog write (a ConsumeQueue or index write):
  * at put time (a store without replication dispatches in the put) the put is UNDONE: the
    CommitLog and the derived data are cut back to where the put began, and the put raises.
    It was not answered yet and nobody read it (nothing runs inside a put), so the store is as
    if it never came, and a producer's retry stores it once;
  * behind confirmOffset (a replicated store): the records stay (they may be acknowledged and
    replicated already); dispatch stops where it stood (`dispatched_offset`);
  either way, if the derived data cannot be cut back at once it is marked unreliable from the
  first record not dispatched (`derived_from`);
- a ConsumeQueue or index fsync that fails in `flush`: Linux may have dropped the pages it could
  not write and report the next fsync as a success, so their data since the last dispatch
  checkpoint is unreliable (`derived_from` = that checkpoint);
- a CommitLog fsync that fails fences the log (commitlog/fence.py).

While any of these is pending (`write_fault`), every append raises `WritesFenced` and nothing
is dispatched. `repair` resolves them in order: a fenced CommitLog range is checked and written
again (`CommitLog.rewrite_fenced`), and where a record in it no longer passes its check (its
page was lost) the log is cut there when the caller allows it (``cut_log``: a broker without
replicas, or a slave, which fetches it again) and otherwise stays fenced (a master: its slaves
may hold those bytes, so only a restart and the failover rules may cut them); then the derived
data from `derived_from` on is cut and dispatched again from the CommitLog, as recovery does.
`probe_space` shows the disk takes a write again.

Synchronous file code, no trio (same contract as message_store.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from rocketrio.storage.commitlog import CommitLog, WriteFence, WritesFenced
from rocketrio.storage.consume_queue_store import ConsumeQueueStore
from rocketrio.storage.dispatch_gate import DispatchGate
from rocketrio.storage.fs import FileSystem
from rocketrio.storage.index_file import MessageIndex
from rocketrio.storage.store_dispatch import StoreDispatch

SPACE_PROBE_FILE = "space.probe"
SPACE_PROBE_BYTES = 64 * 1024


class StoreRepair:
    """The write-fault part of `MessageStore` (see module docstring)."""

    def __init__(
        self,
        commitlog: CommitLog,
        queues: ConsumeQueueStore,
        index: MessageIndex | None,
        gate: DispatchGate,
        dispatch: StoreDispatch,
    ) -> None:
        self._commitlog = commitlog
        self._queues = queues
        self._index = index
        self._gate = gate
        self._dispatch = dispatch
        self._derived = WriteFence()  # derived data unreliable from here (module docstring)

    @property
    def derived_from(self) -> int | None:
        """Where the derived data a failed write left unreliable starts (None: nowhere)."""
        return self._derived.unsafe_from

    @property
    def write_fault(self) -> WritesFenced | None:
        """Why the store takes no append now (None: it does)."""
        fault = self._commitlog.fence.fault()
        return fault if fault is not None else self._derived.fault()

    def check(self) -> None:
        """Raise `WritesFenced` while the derived data is unreliable (the CommitLog checks its
        own fence when it appends)."""
        self._derived.check()

    def lift(self) -> None:
        """Nothing is unreliable any more (open, reset)."""
        self._derived.lift()

    def lift_at_or_below(self, offset: int) -> None:
        """The store was cut at ``offset``: what was unreliable from there on is gone."""
        self._derived.lift_at_or_below(offset)

    def dispatch_at_put(self, start: int, dispatch: Callable[[], None]) -> None:
        """Dispatch a put just written at ``start``; undo the put when that fails."""
        try:
            dispatch()
        except BaseException as e:
            self._undo_put(start, f"a dispatch failed: {e!r}")
            raise

    def _undo_put(self, start: int, cause: str) -> None:
        """Cut the CommitLog and the derived data back to ``start`` (an unanswered put)."""
        self._derived.fence(start, cause)  # until the cut below is done
        self._commitlog.truncate_to(start)  # fences the log itself if it fails
        queues = self._queues
        queues.truncate_by_phy(start)  # shrinking: takes no room
        queues.reset_next_offsets()
        queues.drop_arrivals_past_end()
        self._dispatch.lower_to(start)
        if self._index is not None:  # writes its pending records first: may fail again
            self._index.truncate_from(start)
        self._derived.lift()

    def advance_confirm(self, offset: int) -> None:
        """`StoreDispatch.advance_confirm`, except that dispatch waits while derived data is
        unreliable (`repair` dispatches up to confirmOffset), and a dispatch that fails marks
        the derived data from the first record it did not finish."""
        if self._derived.unsafe_from is not None:
            limit = min(offset, self._commitlog.max_offset)
            self._gate.confirm = max(self._gate.confirm, limit)
            return
        self._dispatch_or_fence(self._dispatch.advance_confirm, offset)

    def release_flushed(self, flushed: int) -> None:
        """`StoreDispatch.release_flushed`, with `advance_confirm`'s rules: nothing while the
        derived data is unreliable (`repair` re-dispatches up to the flushed offset), and a
        dispatch that fails marks the derived data from the first record it did not finish."""
        if self._derived.unsafe_from is None:
            self._dispatch_or_fence(self._dispatch.release_flushed, flushed)

    def _dispatch_or_fence(self, dispatch: Callable[[int], None], offset: int) -> None:
        try:
            dispatch(offset)
        except BaseException as e:
            self._derived.fence(self._dispatch.dispatched_offset, f"a dispatch failed: {e!r}")
            raise

    def flush_derived(self) -> None:
        """fsync the ConsumeQueues and the index; a failure marks their data since the last
        dispatch checkpoint unreliable (module docstring)."""
        try:
            self._queues.flush()
            if self._index is not None:
                self._index.flush()
        except BaseException as e:
            ckpt = self._dispatch.load_checkpoint()
            since = self._commitlog.min_offset if ckpt is None else ckpt
            dispatched = self._dispatch.dispatched_offset
            self._derived.fence(min(since, dispatched), f"an fsync failed: {e!r}")
            raise

    def repair(self, *, cut_log: bool, truncate_to: Callable[[int], None]) -> WritesFenced | None:
        """Resolve what failed writes left (module docstring); returns the fault that remains
        (a master's fenced CommitLog range that holds a record it cannot prove), None when the
        store takes appends again. ``truncate_to`` cuts the whole store (the log and what was
        derived from it). Raises OSError when a write or fsync fails again."""
        clog = self._commitlog
        if clog.unsafe_from is not None:
            bad = clog.rewrite_fenced()
            if bad is not None:
                if not cut_log:
                    return self.write_fault
                truncate_to(bad)
        start = self._derived.unsafe_from
        if start is not None:
            self._dispatch.redo_from(max(start, clog.min_offset))
            self._derived.lift_at_or_below(start)
        return self.write_fault


def probe_space(fs: FileSystem, path: str, nbytes: int = SPACE_PROBE_BYTES) -> None:
    """Write and fsync ``nbytes`` in a scratch file, then delete it: raises OSError (ENOSPC)
    while the disk has no room for them (`MessageStore.probe_space`)."""
    fd = fs.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        block = bytes(min(nbytes, 64 * 1024))
        pos = 0
        while pos < nbytes:
            pos += fs.pwrite(fd, block[: nbytes - pos], pos)
        fs.fdatasync(fd)
    finally:
        fs.close(fd)
        fs.unlink(path)
