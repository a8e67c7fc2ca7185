"""CommitLog recovery: check the segments' records on open and cut a torn tail.

`recover` checks every record (CRC included: upstream checkCRCOnRecover) with the scan of
record_scan.py from the flushed checkpoint itself (a record boundary), clean shutdown or not,
so restart time grows with the unflushed tail (at most a flush interval of writes), never with
the store. It starts at the first segment only when asked (``verify_all``: benchmarks and
tools) or when the checkpoint is missing or fails its CRC. What lies below the checkpoint was
fsynced, and its records were checked when this or an earlier process appended them (or by an
earlier scan); an append-only segment below the flushed offset is never written again. A
segment that ends below the checkpoint is refused (fsynced data is missing). What recovery
does not check (bytes that rotted on disk since) the read check (read_check.py) and
``rocketrio admin checkStore`` find: a damaged record is never served. At the first invalid
record, offset P:
- P below the flushed checkpoint: fsynced data changed -> CorruptionError;
- a valid record (full CRC and matching physical offset) starts after P in the same segment:
  the damage is in the middle, not a torn tail -> `LostRecord` (a CorruptionError) naming file
  and offset (a replica may move that tail aside: quarantine.py);
- otherwise P starts a torn tail: the file is truncated at P (ftruncate + fdatasync) and later
  segments, which then hold only never-flushed bytes, are deleted, last first (as
  `CommitLog.truncate_to` does), so a crash in between never leaves the missing segment `open`
  refuses. The report says so.
The price of that rule: if a crash persisted a later unflushed page but not an earlier one,
open refuses rather than silently dropping the later, valid records. Across segments the rule
is not applied above the flushed checkpoint: a power cut may keep a later segment's unflushed
pages and lose the end of the one before (a BLANK record never written), which is a torn tail
of never-fsynced bytes; a segment that ends with its BLANK record and has a bad record before
it, though, always has a valid record after the damage and is refused.
"""

from __future__ import annotations

import itertools

import attrs

from rocketrio.storage.commitlog.checkpoint import CheckpointState
from rocketrio.storage.commitlog.errors import CorruptionError, LostRecord
from rocketrio.storage.commitlog.segments import SegmentFiles, segment_name
from rocketrio.storage.fs import ReadMap
from rocketrio.storage.record_scan import find_valid_record, scan_segment


@attrs.frozen
class CommitLogRecovery:
    """What `CommitLog.open` found and did.

    ``scanned_from``: the CommitLog offset the record scan started at; every record from there
    to ``max_offset`` (``bytes_scanned`` bytes) was checked, CRC included unless
    checkCRCOnRecover=false. ``full_scan``: the scan started at the first segment.
    ``checkpoint_state``: how ``flushed.checkpoint`` loaded ("corrupt" forces a full scan).
    """

    scanned_from: int
    max_offset: int
    flushed_checkpoint: int | None
    truncated_at: int | None = None
    bytes_dropped: int = 0
    segment: str | None = None
    reason: str = ""
    deleted_segments: tuple[str, ...] = ()
    checkpoint_state: CheckpointState = "ok"
    full_scan: bool = False
    bytes_scanned: int = 0


def check_sequence(path: str, bases: list[int], size: int) -> None:
    """CorruptionError when the segments leave a gap or are not aligned to ``size``."""
    for prev, nxt in itertools.pairwise(bases):
        if nxt != prev + size:
            raise CorruptionError(
                f"commitlog {path}: segment {segment_name(nxt)} does not follow "
                f"{segment_name(prev)} (segment size {size}); a segment file is missing"
            )
    if bases and bases[0] % size:
        raise CorruptionError(
            f"commitlog {path}: segment {segment_name(bases[0])} is not aligned to "
            f"mappedFileSizeCommitLog={size}; was the store written with another size?"
        )


def recover(
    segments: SegmentFiles, bases: list[int], start: int, ckpt: int | None, check_crc: bool
) -> CommitLogRecovery:
    """Scan the open segments from ``start`` and cut a torn tail (module docstring); the
    report's ``max_offset`` is where the recovered log ends."""
    size = segments.segment_size
    max_offset = 0
    for base in (b for b in bases if b + size >= start):
        is_last = base == bases[-1]
        with segments.mapped(base) as data:
            at = max(0, start - base)
            if at >= size and len(data) < size:
                at = 0  # a closed segment never extended: find its BLANK record again
            if at > len(data):
                raise CorruptionError(
                    f"commitlog {segments.path}: segment {segment_name(base)} ends at offset "
                    f"{base + len(data)}, below the flushed checkpoint {ckpt}: fsynced "
                    "data is missing (truncated or deleted file?)"
                )
            if at >= size:  # the checkpoint is at this segment's very end
                max_offset = base + size
                if is_last:
                    break
                continue
            scan = scan_segment(data, base, size, check_crc=check_crc, start=at)
            end, reason = scan.end, scan.reason
            if reason is None and scan.blank:
                segments.extend(base)
                max_offset = base + size
                continue
            if reason is None and is_last:
                max_offset = base + end
                break
            if reason is None:
                reason = "segment ends without an end-of-file record"
            _refuse_if_corrupt(segments, base, end, data, reason, ckpt)
        return _cut_torn_tail(segments, base, end, bases, start, ckpt, reason)
    if ckpt is not None and ckpt > max_offset:
        raise CorruptionError(
            f"commitlog {segments.path} ends at offset {max_offset}, below its flushed "
            f"checkpoint {ckpt}: fsynced data is missing (truncated or deleted file?)"
        )
    return CommitLogRecovery(start, max_offset, ckpt)


def _refuse_if_corrupt(
    segments: SegmentFiles, base: int, pos: int, data: ReadMap, reason: str, ckpt: int | None
) -> None:
    where = f"{segments.file_of(base)} position {pos} (offset {base + pos})"
    if ckpt is not None and base + pos < ckpt:
        raise CorruptionError(
            f"commitlog corruption in {where}: {reason}; this is below the flushed "
            f"checkpoint {ckpt}, so fsynced data changed. Refusing to truncate."
        )
    after = find_valid_record(data, base, segments.segment_size, pos + 1)
    if after is not None:
        raise LostRecord(
            f"commitlog corruption in {where}: {reason}; a valid record follows at offset "
            f"{after}, so this is damage in the middle, not a torn tail. Refusing to truncate.",
            segment=segments.file_of(base),
            offset=base + pos,
            valid_after=after,
        )


def _cut_torn_tail(
    segments: SegmentFiles,
    base: int,
    pos: int,
    bases: list[int],
    start: int,
    ckpt: int | None,
    reason: str,
) -> CommitLogRecovery:
    dropped = segments.cut(base, pos)
    deleted = []
    # last first: a crash in between leaves segments without a gap (open refuses a gap)
    for later in sorted((b for b in bases if b > base), reverse=True):
        dropped += segments.delete(later)
        deleted.insert(0, segment_name(later))
    if deleted:
        segments.sync_dir()
    return CommitLogRecovery(
        scanned_from=start,
        max_offset=base + pos,
        flushed_checkpoint=ckpt,
        truncated_at=base + pos,
        bytes_dropped=dropped,
        segment=segments.file_of(base),
        reason=reason,
        deleted_segments=tuple(deleted),
    )
