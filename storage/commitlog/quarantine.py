"""Moving a CommitLog's tail aside: what a replica's start-up does with a record lost under
later valid records (`LostRecord`), so it can recover without an operator.

`quarantine_tail(path, size, offset, dest_dir)`:
1. finds where the valid data ends (``old_end``: the last segment's records, scanned from the
   first valid record after the damage when the damage is in that segment);
2. copies every byte from ``offset`` to the end of the segment files (the damaged record, the
   valid records after it, the later segments) into one new file in ``dest_dir``, named
   ``<offset>-<old_end>`` (20 digits each; ``.N`` appended when that name exists: an earlier
   start-up that crashed before it cut), then fsyncs the file and the directory;
3. only then cuts the CommitLog at ``offset`` durably: later segments deleted last first, the
   segment holding ``offset`` truncated and fdatasynced, the directory fsynced (the order
   `SegmentFiles.truncate` keeps, so a crash in between leaves no gap `open` refuses).

The caller re-opens the store afterwards: recovery then finds a clean end at ``offset`` and
cuts the ConsumeQueues and the index above it, as after a torn tail. A crash at any step leaves
either the original segments (the next start-up quarantines again, into a new file) or the cut
log with the quarantine file durable: no byte is lost. The broker never deletes a quarantine
file; the operator does, after looking (docs/hardening.md#a-lost-page-under-valid-records).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import attrs

from rocketrio.storage.commitlog.segments import SegmentFiles, list_segments
from rocketrio.storage.durable import makedirs_synced, pwrite_all
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.record_scan import find_valid_record, scan_segment

QUARANTINE_DIR = "quarantine"
# bytes copied per read: bounded memory whatever the segment size
COPY_CHUNK = 1 << 20


@attrs.frozen
class Quarantined:
    """The tail from ``offset`` was copied to ``path`` (``bytes`` bytes) and cut from the log;
    the valid data had ended at ``old_end``."""

    path: str
    offset: int
    old_end: int
    bytes: int


def old_log_end(segments: SegmentFiles, offset: int, bases: list[int]) -> int:
    """Where the valid records of the last segment end (the damage at ``offset`` skipped)."""
    size = segments.segment_size
    last = bases[-1]
    with segments.mapped(last) as data:
        start = 0
        if last <= offset:
            after = find_valid_record(data, last, size, offset - last + 1)
            if after is None:
                return offset
            start = after - last
        scan = scan_segment(data, last, size, start=start)
        return last + (size if scan.blank else scan.end)


def _free_name(dest_dir: str, offset: int, old_end: int, fs: FileSystem) -> str:
    name = f"{offset:020d}-{old_end:020d}"
    path, n = os.path.join(dest_dir, name), 0
    while fs.exists(path):
        n += 1
        path = os.path.join(dest_dir, f"{name}.{n}")
    return path


def _copy_tail(
    segments: SegmentFiles, bases: list[int], offset: int, fd: int, fs: FileSystem
) -> int:
    size, written = segments.segment_size, 0
    for base in bases:
        pos = max(0, offset - base)
        src = fs.open(segments.file_of(base), os.O_RDONLY)
        try:
            end = fs.fsize(src)
            while pos < end:
                chunk = fs.pread(src, min(COPY_CHUNK, end - pos), pos)
                pwrite_all(fs, fd, chunk, written)
                written += len(chunk)
                pos += len(chunk)
        finally:
            fs.close(src)
        assert pos <= size
    return written


def quarantine_tail(
    path: str,
    segment_size: int,
    offset: int,
    dest_dir: str,
    *,
    fs: FileSystem = OS_FS,
    before_cut: Callable[[Quarantined], None] = lambda _q: None,
) -> Quarantined:
    """Copy the CommitLog at ``path`` from ``offset`` on into ``dest_dir``, durably, then cut
    it there (module docstring). ``before_cut`` runs between the two (the catch-up fence is
    written there, so no crash leaves a cut log without it)."""
    base = offset - offset % segment_size
    bases = [b for b in list_segments(path, fs) if b >= base]
    if not bases or bases[0] != base:
        raise ValueError(f"commitlog {path} has no segment holding offset {offset}")
    segments = SegmentFiles(path, segment_size, fs)
    segments.open_existing(bases)
    try:
        old_end = old_log_end(segments, offset, bases)
        makedirs_synced(dest_dir, fs=fs)
        dest = _free_name(dest_dir, offset, old_end, fs)
        fd = fs.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            copied = _copy_tail(segments, bases, offset, fd, fs)
            fs.fsync(fd)
        finally:
            fs.close(fd)
        fs.fsync_dir(dest_dir)
        done = Quarantined(dest, offset, old_end, copied)
        before_cut(done)
        segments.truncate(offset)  # only once the copy (and the fence) are durable
    finally:
        segments.close_all()
    return done
