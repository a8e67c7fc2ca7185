"""The CommitLog's read check: which records must be checked before they are served.

`ReadCheck.check` verifies a record before it is served (the pull path) unless a watermark
vouches for it. It owns the two watermarks: every byte at or above `verified_from` was appended
by this process (built and sealed, or checked in full by `CommitLog.append_raw`) or checked by
recovery; below it, each segment has a mark that sequential reads move past the records they
checked. A record that fails raises `RecordCorrupt` naming segment, offset and reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from rocketrio.protocol.message import MessageDecodeError, check_stored_record
from rocketrio.storage.commitlog.errors import RecordCorrupt
from rocketrio.storage.commitlog.segments import segment_name
from rocketrio.storage.record_scan import crc_intact


class ReadCheck:
    """The read check's watermarks over one CommitLog (module docstring)."""

    def __init__(self, path: str, segment_size: int) -> None:
        self._path = path
        self._segment_size = segment_size
        self._verified_from = 0
        # a segment's bytes under _verified_upto[base] were checked by an earlier read
        self._verified_upto: dict[int, int] = {}

    @property
    def verified_from(self) -> int:
        return self._verified_from

    def restart_at(self, offset: int) -> None:
        """Every byte from ``offset`` on is vouched for, nothing below it (open, reset)."""
        self._verified_from = offset
        self._verified_upto.clear()

    def lower_to(self, offset: int) -> None:
        """The log was cut at ``offset``: what is appended from there on is this process's."""
        self._verified_from = min(self._verified_from, offset)

    def forget(self, bases: Iterable[int]) -> None:
        """Segments deleted by retention."""
        for b in bases:
            self._verified_upto.pop(b, None)

    def distrust(self, offset: int) -> None:
        """The record at ``offset`` failed a check elsewhere (the background scrub): no mark
        vouches for it again, so every read of it runs `check` (and is refused)."""
        base = offset - offset % self._segment_size
        if self._verified_upto.get(base, base) > offset:
            self._verified_upto[base] = offset

    def check(self, offset: int, size: int, data: bytes, pos: int) -> None:
        """Check the record at CommitLog ``offset``, read as ``data[pos : pos + size]``, before
        it is served; RecordCorrupt (naming segment, offset, reason) when it fails.

        Skipped when a watermark vouches for the bytes: at or above `verified_from`, or below
        the segment's verified-by-reads mark. A record that passes and starts at that mark
        moves it past itself, so a sequential reader checks each record once. May run in a
        worker thread beside the owner: a racing update can only lower a mark (a record is
        checked again), never vouch for bytes nobody checked.
        """
        if offset >= self._verified_from:
            return
        base = offset - offset % self._segment_size
        upto = self._verified_upto.get(base, base)
        if offset + size <= upto:
            return
        if crc_intact(data, pos, offset, pos + size) == size:
            if offset == upto:
                self._verified_upto[base] = offset + size
            return
        segment = os.path.join(self._path, segment_name(base))
        try:
            total = check_stored_record(data, pos, expected_offset=offset, limit=pos + size)
        except MessageDecodeError as e:
            raise RecordCorrupt(segment, offset, str(e)) from None
        if total != size:
            raise RecordCorrupt(
                segment, offset, f"record of {total} bytes, its consume queue entry says {size}"
            )
        if offset == upto:
            self._verified_upto[base] = offset + size
