"""What a failed write or fsync leaves in a MessageStore, and the repair before it writes again.

`StoreRepair` is the base class of `MessageStore` between it and `StoreDispatch`. It owns the
rules for a disk that fails a write (ENOSPC: the disk is full) so that no file is ever left
half-written in a way recovery would refuse, no entry is lost or dispatched twice, and the store
can take writes again in the same process once the disk has room:

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
- a CommitLog fsync that fails fences the log (commitlog.py, "Write faults").

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

from rocketrio.storage.commitlog import WritesFenced
from rocketrio.storage.fs import FileSystem
from rocketrio.storage.store_dispatch import StoreDispatch

SPACE_PROBE_FILE = "space.probe"
SPACE_PROBE_BYTES = 64 * 1024


class StoreRepair(StoreDispatch):
    """The write-fault half of `MessageStore` (see module docstring)."""

    store_path: str
    _derived_from: int | None
    _derived_cause: str

    @property
    def write_fault(self) -> WritesFenced | None:
        """Why the store takes no append now (None: it does)."""
        clog = self._commitlog
        if clog.unsafe_from is not None:
            return WritesFenced(clog.unsafe_from, clog.fence_cause)
        if self._derived_from is not None:
            return WritesFenced(self._derived_from, self._derived_cause)
        return None

    def _check_derived(self) -> None:
        if self._derived_from is not None:
            raise WritesFenced(self._derived_from, self._derived_cause)

    def _mark_derived(self, offset: int, cause: str) -> None:
        if self._derived_from is None or offset < self._derived_from:
            self._derived_from = offset
            self._derived_cause = cause

    def _dispatch_at_put(self, start: int, dispatch: Callable[[], None]) -> None:
        """Dispatch a put just written at ``start``; undo the put when that fails."""
        try:
            dispatch()
        except BaseException as e:
            self._undo_put(start, f"a dispatch failed: {e!r}")
            raise

    def _undo_put(self, start: int, cause: str) -> None:
        """Cut the CommitLog and the derived data back to ``start`` (an unanswered put)."""
        self._mark_derived(start, cause)  # until the cut below is done
        self._commitlog.truncate_to(start)  # fences the log itself if it fails
        for cq in self._cqs.values():  # shrinking: takes no room
            cq.truncate_by_phy(start)
        self._queue_offsets = {key: cq.max_offset for key, cq in self._cqs.items()}
        self._arrived = {k: v for k, v in self._arrived.items() if v <= self._cqs[k].max_offset}
        self._dispatched = min(self._dispatched, start)
        if self._index is not None:  # writes its pending records first: may fail again
            self._index.truncate_from(start)
        self._derived_from = None

    def _cut_derived(self, offset: int) -> None:
        """Drop the ConsumeQueue entries and index records of records at or above ``offset``."""
        for cq in self._cqs.values():
            cq.truncate_by_phy(offset)
        if self._index is not None:
            self._index.truncate_from(offset)

    def advance_confirm(self, offset: int) -> None:
        """`StoreDispatch.advance_confirm`, except that dispatch waits while derived data is
        unreliable (`repair` dispatches up to confirmOffset), and a dispatch that fails marks
        the derived data from the first record it did not finish."""
        if self._derived_from is not None:
            limit = min(offset, self._commitlog.max_offset)
            self._gate.confirm = max(self._gate.confirm, limit)
            return
        try:
            super().advance_confirm(offset)
        except BaseException as e:
            self._mark_derived(self._dispatched, f"a dispatch failed: {e!r}")
            raise

    def _flush_derived(self) -> None:
        """fsync the ConsumeQueues and the index; a failure marks their data since the last
        dispatch checkpoint unreliable (module docstring)."""
        try:
            for cq in list(self._cqs.values()):
                cq.flush()
            if self._index is not None:
                self._index.flush()
        except BaseException as e:
            ckpt = self._dispatch_ckpt.load()
            since = self._commitlog.min_offset if ckpt is None else ckpt
            self._mark_derived(min(since, self._dispatched), f"an fsync failed: {e!r}")
            raise

    def repair(self, *, cut_log: bool) -> WritesFenced | None:
        """Resolve what failed writes left (module docstring); returns the fault that remains
        (a master's fenced CommitLog range that holds a record it cannot prove), None when the
        store takes appends again. Raises OSError when a write or fsync fails again."""
        clog = self._commitlog
        if clog.unsafe_from is not None:
            bad = clog.rewrite_fenced()
            if bad is not None:
                if not cut_log:
                    return self.write_fault
                self.truncate_to(bad)
        start = self._derived_from
        if start is not None:
            self._redo_dispatch(max(start, clog.min_offset))
        return self.write_fault

    def _redo_dispatch(self, start: int) -> None:
        """Cut the derived data at ``start`` and dispatch the CommitLog's records from there,
        up to confirmOffset (everything, without replication), as recovery does."""
        clog = self._commitlog
        self._cut_derived(start)
        self._gate.drop_held()
        self._dispatched = start
        limit = self._gate.confirm if self._gate.gated else clog.max_offset
        _, end = self._redispatch(start, start, limit)
        self._dispatched = clog.max_offset if limit >= clog.max_offset else end
        if not self._gate.gated:  # every record is dispatched: the queues say what comes next
            self._queue_offsets = {key: cq.max_offset for key, cq in self._cqs.items()}
        self._derived_from = None
        self._derived_cause = ""

    def probe_space(self, nbytes: int = SPACE_PROBE_BYTES) -> None:
        """Write and fsync ``nbytes`` in a scratch file of the store directory, then delete
        it: raises OSError (ENOSPC) while the disk has no room for them."""
        probe_space(self.fs, os.path.join(self.store_path, SPACE_PROBE_FILE), nbytes)


def probe_space(fs: FileSystem, path: str, nbytes: int) -> None:
    """See `StoreRepair.probe_space`."""
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
