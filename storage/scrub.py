"""The background scrub's core: which CommitLog range to verify next, what verifying a chunk
finds, where to resume, and how long the rate budget makes the scrub wait. No I/O, no clock.

Recovery checks the records above the flushed checkpoint; below it a record is checked when
it is read (the pull path's `ReadCheck`) or by ``rocketrio admin checkStore``. The scrub walks
what lies below `CommitLog.verified_from` (the checkpoint recovery started from), segment by
segment and chunk by chunk, from the oldest offset; at the checkpoint it starts a new lap.

- `next_range`: the range to read next from the cursor: at most ``chunk_bytes`` (or the size
  of one record bigger than a chunk), never across a segment's end nor past the checkpoint.
- `verify_chunk`: every whole record of the chunk must hold its record CRC (`crc_intact`);
  one that does not is a `ScrubFinding` named by `check_stored_record`'s reason. A BLANK
  record must cover the rest of its segment. A record cut by the chunk's end is left to the
  next chunk.
- A finding means: that record must never be served. The shell lowers the read check's
  verified-by-reads mark of its segment to it (`CommitLog.distrust`), so every read of it runs
  the pull path's check again and is refused. Nothing is deleted or rewritten. The record's
  length can no longer be trusted, so the scrub resumes at the next segment (reads still
  check the records after it).
- `pause_s`: the rate budget: verifying n bytes at r bytes/s costs n / r seconds.
- Laps start at least ``lap_interval_s`` apart (`ScrubCursor.next` answers a `LapWait` until
  then): the rate bounds how fast a lap goes, the interval how often one starts, so a small
  log is verified once per interval, not re-read at the full rate for ever.
"""

from __future__ import annotations

import struct

import attrs

from rocketrio.protocol.message import BLANK_MAGIC_CODE, MessageDecodeError, check_stored_record
from rocketrio.storage.record_scan import END_FILE_MIN_BLANK_LENGTH, crc_intact

_HEAD = struct.Struct(">ii")


@attrs.frozen
class ScrubBounds:
    """What the scrub may verify: ``[min_offset, verified_from)`` of a log whose segments
    hold ``segment_size`` bytes each."""

    min_offset: int
    verified_from: int
    segment_size: int


@attrs.frozen
class ScrubRange:
    """The bytes to read next: ``size`` bytes from CommitLog offset ``start``; ``final``: the
    range ends at its segment's end or at the checkpoint (not at the chunk limit)."""

    start: int
    size: int
    final: bool


@attrs.frozen
class LapWait:
    """A new lap may not start for ``seconds`` more (laps start ``lap_interval_s`` apart)."""

    seconds: float


@attrs.frozen
class ScrubFinding:
    """A record below the checkpoint that failed its check."""

    segment_base: int
    offset: int
    reason: str


@attrs.frozen
class ChunkResult:
    """What `verify_chunk` found: the offset to resume at, the bytes and records verified,
    the damage found (or None), and the size of a record bigger than the chunk (0: none)."""

    next_offset: int
    verified_bytes: int
    records: int
    finding: ScrubFinding | None = None
    need_bytes: int = 0


def next_range(cursor: int, bounds: ScrubBounds, chunk_bytes: int) -> ScrubRange | None:
    """The range to verify from ``cursor``; None when nothing lies below the checkpoint. A
    cursor outside ``[min_offset, verified_from)`` (a deleted segment, a lap's end, a
    truncated log) restarts at ``min_offset``: the caller counts that as a new lap."""
    start = cursor
    if not bounds.min_offset <= start < bounds.verified_from:
        start = bounds.min_offset
    if start >= bounds.verified_from:
        return None
    seg = bounds.segment_size
    range_end = min(start - start % seg + seg, bounds.verified_from)
    end = min(start + chunk_bytes, range_end)
    return ScrubRange(start, end - start, end == range_end)


def verify_chunk(data: bytes, rng: ScrubRange, segment_size: int) -> ChunkResult:
    """Verify the whole records of ``data``, the bytes read for ``rng`` (module docstring)."""
    start, n = rng.start, len(data)
    base = start - start % segment_size
    seg_end = base + segment_size - start  # the segment's end, as a position in data
    limit = seg_end - END_FILE_MIN_BLANK_LENGTH
    pos = records = 0

    def damaged(reason: str) -> ChunkResult:
        finding = ScrubFinding(base, start + pos, reason)
        return ChunkResult(base + segment_size, pos, records, finding)

    while n - pos >= 8:
        total, magic = _HEAD.unpack_from(data, pos)
        if magic == BLANK_MAGIC_CODE:
            if total != seg_end - pos:
                return damaged(f"blank record size {total} != {seg_end - pos} bytes left")
            return ChunkResult(base + segment_size, pos + total, records)
        if 8 < total <= limit - pos and pos + total > n:
            break  # cut by the chunk's end: the next chunk reads it whole
        if crc_intact(data, pos, start + pos, limit) != total or total <= 8:
            return damaged(_reason(data, pos, start + pos, limit))
        pos += total
        records += 1
    if pos < n and rng.final:
        return damaged("record crosses the end of the range below the checkpoint")
    need = _HEAD.unpack_from(data, 0)[0] if pos == 0 and n >= 8 else 0
    if pos == 0 and not need:
        return damaged("partial record header")
    return ChunkResult(start + pos, pos, records, need_bytes=need)


def _reason(data: bytes, pos: int, offset: int, limit: int) -> str:
    try:
        check_stored_record(data, pos, expected_offset=offset, limit=limit)
    except MessageDecodeError as e:
        return str(e)
    return "record fails the quick CRC check"


def pause_s(verified_bytes: int, bytes_per_second: int) -> float:
    """Seconds the rate budget asks the scrub to wait after verifying ``verified_bytes``."""
    return verified_bytes / bytes_per_second if bytes_per_second > 0 else 0.0


class ScrubCursor:
    """Where the scrub resumes, what it verified and the damage it knows (module docstring).
    Each damaged record is reported once (`advance` returns it the first time only)."""

    def __init__(self, chunk_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes
        self.cursor = -1  # the first `next` starts a pass at the oldest offset
        self.laps = 0  # passes over [min_offset, verified_from) started
        self.lap_started_at: float | None = None  # clock reading when the last lap started
        self.verified_bytes = 0
        self.records = 0
        self.found: dict[int, ScrubFinding] = {}  # offset -> finding, in the log now
        self.damage_found = 0  # damaged records found since start (never goes down)
        self._need = 0

    def next(
        self, bounds: ScrubBounds, now: float = 0.0, lap_interval_s: float = 0.0
    ) -> ScrubRange | LapWait | None:
        """The range to verify next at clock reading ``now``; a `LapWait` when it would start
        a lap sooner than ``lap_interval_s`` after the last one started; None: nothing to do."""
        b = bounds
        rng = next_range(self.cursor, b, max(self.chunk_bytes, self._need))
        if rng is not None and rng.start != self.cursor:
            last = self.lap_started_at
            if last is not None and now - last < lap_interval_s:
                return LapWait(lap_interval_s - (now - last))
            self.laps += 1
            self.lap_started_at = now
        # retention deleted, or a truncation cut, what held them: forget those findings
        for offset in [o for o in self.found if not b.min_offset <= o < b.verified_from]:
            del self.found[offset]
        return rng

    def advance(self, result: ChunkResult) -> ScrubFinding | None:
        """Move past what ``result`` verified; the finding when it is new."""
        self.cursor = result.next_offset
        self.verified_bytes += result.verified_bytes
        self.records += result.records
        self._need = result.need_bytes
        f = result.finding
        if f is None or f.offset in self.found:
            return None
        self.found[f.offset] = f
        self.damage_found += 1
        return f
