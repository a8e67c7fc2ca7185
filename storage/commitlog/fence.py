"""The write fence: what a failed write or fsync leaves, and the rewrite that resolves it.

Write faults (a full disk). A failed append is cut back (`CommitLog` undoes it): the log ends
where it ended before. Two things leave bytes whose state on disk is unknown: an undo that
failed (the files may hold bytes past `max_offset`), and a failed fsync (Linux may have dropped
the pages it could not write and report the next fsync as a success, so nothing from the last
durable offset up is known to be on disk). Either one FENCES the log at that offset
(`WriteFence.unsafe_from`): every append raises `WritesFenced` until the fenced range is
resolved, because a record appended after bytes that may be missing would turn a torn tail
into damage in the middle that recovery refuses. `CommitLog.rewrite_fenced` resolves it
without losing anything it can prove: it checks every record of the range as read back
(`first_bad_record`: CRC, physical offset), writes the range again and fsyncs it
(`rewrite_range`); `CommitLog.truncate_to` at or below the fence cuts it. `CommitLog.flush`
never counts a fenced byte as flushed. The flushed checkpoint file is never torn by a full disk
(`OffsetCheckpoint`).

`WriteFence` is also the store's mark on derived data (ConsumeQueues and index) that a failed
write left unreliable (store_repair.py): one offset and its cause, raised as `WritesFenced`.
"""

from __future__ import annotations

from rocketrio.storage.commitlog.errors import WritesFenced
from rocketrio.storage.commitlog.segments import SegmentFiles
from rocketrio.storage.record_scan import scan_segment

_REWRITE_CHUNK = 4 * 1024 * 1024  # bytes `rewrite_range` reads and writes back at a time


class WriteFence:
    """Where the bytes in an unknown state start (None: nowhere) and what failed."""

    def __init__(self) -> None:
        self._unsafe_from: int | None = None
        self._cause = ""

    @property
    def unsafe_from(self) -> int | None:
        return self._unsafe_from

    @property
    def cause(self) -> str:
        return self._cause

    def fence(self, offset: int, cause: str) -> None:
        """Fence from ``offset`` (a fence only ever moves down until it is lifted)."""
        if self._unsafe_from is None or offset < self._unsafe_from:
            self._unsafe_from = offset
            self._cause = cause

    def lift_at_or_below(self, offset: int) -> None:
        """What was unsafe was cut at ``offset``: lift the fence if it starts there or above."""
        if self._unsafe_from is not None and offset <= self._unsafe_from:
            self._unsafe_from = None
            self._cause = ""

    def lift(self) -> None:
        self._unsafe_from = None

    def move_to(self, offset: int | None) -> None:
        """A rewrite proved everything below ``offset`` (None: the whole range)."""
        self._unsafe_from = offset

    def check(self) -> None:
        """Raise `WritesFenced` while fenced."""
        if self._unsafe_from is not None:
            raise WritesFenced(self._unsafe_from, self._cause)

    def fault(self) -> WritesFenced | None:
        """The fence as an error (None: not fenced)."""
        if self._unsafe_from is None:
            return None
        return WritesFenced(self._unsafe_from, self._cause)


def first_bad_record(segments: SegmentFiles, start: int, end: int) -> int | None:
    """The offset of the first record in [start, end) that fails its full check."""
    seg = segments.segment_size
    offset = start
    while offset < end:
        base = offset - offset % seg
        upto = min(end, base + seg)
        data = segments.pread(base, upto - offset, offset - base)
        # the rest of the segment from `offset`, scanned as if it were a segment of its own
        scan = scan_segment(data, offset, base + seg - offset)
        if scan.blank:
            upto = base + seg  # the BLANK record and its fill close the segment
        elif not scan.ok or offset + scan.end < upto:
            return offset + scan.end
        offset = upto
    return None


def rewrite_range(segments: SegmentFiles, start: int, end: int) -> None:
    """Write the bytes in [start, end) again as they read now, then fdatasync the segments
    and fsync the directory."""
    seg = segments.segment_size
    bases: list[int] = []
    offset = start
    while offset < end:
        base = offset - offset % seg
        upto = min(end, base + seg, offset + _REWRITE_CHUNK)
        if base not in bases:
            bases.append(base)
        segments.rewrite(base, offset - base, upto - offset)
        offset = upto
    segments.sync(segments.fds_of(bases), directory=True)
