"""CommitLog: the append-only message log in fixed-size segment files (M1).

It owns the log's offsets (`min_offset`, `max_offset`, `flushed_offset` and the
``flushed.checkpoint`` file) and composes the parts that own the rest: the segment files
(`SegmentFiles`, segments.py), the write fence (`WriteFence`, fence.py) and the read check's
watermarks (`ReadCheck`, read_check.py); recovery is recovery.py.

Layout. Files are not pre-allocated: a segment grows by append. A record that does not fit in
the rest of a segment (it must leave 8 bytes spare, upstream's END_FILE_MIN_BLANK_LENGTH) is
preceded by an 8-byte BLANK record (totalSize = bytes left, magic BLANK) and goes to the next
segment; the closed segment is then extended to its full size with ``ftruncate`` (sparse,
nothing written) so a file position always equals ``offset - segment base`` and raw byte ranges
(replication) never meet a hole.

Records are the stored-message layout of `rocketrio.protocol.message` and must carry the
``__CRC32#`` record-CRC trailer; `append` patches each record's physical offset and seals
that CRC, so a record on disk is checked end to end (size, magic, inner lengths, physical
offset, CRC) by `check_stored_record`. `append_sealed` is the put hot path: the caller has
already sealed the records for consecutive offsets from `max_offset` (one CRC pass per
record, no patching), and only records moved to a new segment are patched and resealed.

Durability. `open` creates the directory durably (`makedirs_synced`: the directory fsyncs below
are worth nothing if the directory's own name can vanish). `append` writes with ``pwrite`` and
never fsyncs. `flush` fdatasyncs every segment holding unflushed bytes (and the directory when
a segment was created), then records the flushed offset in ``flushed.checkpoint`` (12 bytes:
offset + CRC32, rewritten in place and not fsynced: it is written only after the data it
vouches for is durable, so whatever version survives a crash is a true lower bound). What a
failed write or fsync leaves, and how it is resolved: fence.py.

Threading contract: `flush` may run in a worker thread while the owning thread appends or
reads; it must not overlap `truncate_to`, `delete_segments_below`, `open` or `close`. The
segment table is guarded by its own lock (segments.py); the flushed offset and the fence, which
`flush` and `rewrite_fenced` update, by the log's.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
from collections.abc import Iterator, Sequence

import attrs

from rocketrio.protocol.message import (
    CRC32_RESERVED_LEN,
    CRC32_TRAILER_PREFIX,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    PHY_POS_POSITION,
    crc32,
    crc_digits,
)
from rocketrio.storage.commitlog import records as _records
from rocketrio.storage.commitlog.checkpoint import OffsetCheckpoint
from rocketrio.storage.commitlog.errors import CorruptionError, RecordNotFound
from rocketrio.storage.commitlog.fence import WriteFence, first_bad_record, rewrite_range
from rocketrio.storage.commitlog.read_check import ReadCheck
from rocketrio.storage.commitlog.records import RecordFields
from rocketrio.storage.commitlog.recovery import CommitLogRecovery, check_sequence, recover
from rocketrio.storage.commitlog.segments import SegmentFiles, list_segments, segment_name
from rocketrio.storage.durable import makedirs_synced
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.record_scan import END_FILE_MIN_BLANK_LENGTH

CHECKPOINT_FILE = "flushed.checkpoint"

_HEAD = struct.Struct(">ii")
RECORD_READ_GUESS = 4096  # read_record's first read: a 1 KiB message and its properties
_PHY = struct.Struct(">q")


class CommitLog:
    """Segmented append-only log of stored-message records (see module docstring)."""

    def __init__(
        self, path: str, mapped_file_size: int = 1024 * 1024 * 1024, *, fs: FileSystem = OS_FS
    ) -> None:
        if mapped_file_size < 1024:
            raise ValueError(f"mappedFileSizeCommitLog must be >= 1024, got {mapped_file_size}")
        self.path = path
        self.mapped_file_size = mapped_file_size
        self._fs = fs
        self._segments = SegmentFiles(path, mapped_file_size, fs)
        self._fence = WriteFence()
        self._read_check = ReadCheck(path, mapped_file_size)
        self._lock = threading.Lock()  # the flushed offset and the fence (module docstring)
        self._checkpoint = OffsetCheckpoint(os.path.join(path, CHECKPOINT_FILE), fs=fs)
        self._min_offset = 0
        self._max_offset = 0
        self._flushed_offset = 0
        self._opened = False

    # ------------------------------------------------------------------ properties

    @property
    def min_offset(self) -> int:
        return self._min_offset

    @property
    def max_offset(self) -> int:
        """End of written data: the offset the next record gets (before any roll)."""
        return self._max_offset

    @property
    def flushed_offset(self) -> int:
        return self._flushed_offset

    def segment_bases(self) -> list[int]:
        """The start offsets of the segments, oldest first."""
        return self._segments.bases()

    @property
    def fence(self) -> WriteFence:
        """The write fence (fence.py): where bytes in an unknown state start, and why."""
        return self._fence

    @property
    def unsafe_from(self) -> int | None:
        """Where the fenced range starts (fence.py); None: not fenced."""
        return self._fence.unsafe_from

    @property
    def fence_cause(self) -> str:
        return self._fence.cause

    @property
    def verified_from(self) -> int:
        """Every byte at or above this offset was appended by this process (its records built
        or checked here) or checked by recovery: a read there needs no record check."""
        return self._read_check.verified_from

    def segment_files(self) -> list[tuple[int, str]]:
        return [(b, self._segments.file_of(b)) for b in self._segments.bases()]

    def segment_base(self, offset: int) -> int:
        return offset - offset % self.mapped_file_size

    # ------------------------------------------------------------------ open / close

    def open(self, *, verify_all: bool = False, check_crc: bool = True) -> CommitLogRecovery:
        """Open the segments, check their records and cut a torn tail (recovery.py).

        The scan starts at the segment holding the flushed checkpoint, or at the first segment
        when ``verify_all`` (the store's last shutdown was not clean) or when the checkpoint is
        missing or corrupt. ``check_crc`` is upstream's checkCRCOnRecover: off, records are
        checked for layout and physical offset only.
        """
        if self._opened:
            raise RuntimeError("commitlog already open")
        self._fence.lift()  # recovery checks the tail from the flushed checkpoint on
        makedirs_synced(self.path, fs=self._fs)  # flush's dir fsync needs a durable dir
        bases = list_segments(self.path, self._fs)
        size = self.mapped_file_size
        check_sequence(self.path, bases, size)
        ckpt, ckpt_state = self._checkpoint.load_state()
        if not bases:
            if ckpt:
                raise CorruptionError(
                    f"commitlog {self.path} has no segment files but a flushed checkpoint "
                    f"{ckpt}: fsynced data is missing"
                )
            self._opened = True
            return CommitLogRecovery(0, 0, ckpt, checkpoint_state=ckpt_state, full_scan=True)
        try:
            self._segments.open_existing(bases)
            start = bases[0]
            if ckpt is not None and not verify_all:
                # from the checkpoint itself (a record boundary): what lies below it is
                # fsynced and was checked when it was written; a checkpoint beyond the last
                # segment starts at that segment's end, where a missing-data check waits
                start = max(start, min(ckpt, bases[-1] + size))
            report = recover(self._segments, bases, start, ckpt, check_crc)
        except BaseException:
            self._close_files()
            raise
        self._max_offset = report.max_offset
        self._opened = True
        self._min_offset = bases[0]
        self._flushed_offset = min(ckpt or 0, self._max_offset)
        # a scan without CRC checks vouches for nothing a read may skip
        self._read_check.restart_at(min(start, self._max_offset) if check_crc else self._max_offset)
        return attrs.evolve(
            report,
            checkpoint_state=ckpt_state,
            full_scan=start == bases[0],
            bytes_scanned=max(0, self._max_offset - start),
        )

    def close(self) -> None:
        """Flush and close; the object can be opened again afterwards."""
        if not self._opened:
            return
        self.flush()
        self._close_files()

    def _close_files(self) -> None:
        self._segments.close_all()
        self._checkpoint.close()
        self._opened = False

    def _check_open(self) -> None:
        if not self._opened:
            raise RuntimeError(f"commitlog {self.path} is not open")

    # ------------------------------------------------------------------ append

    def append(self, records: Sequence[bytes]) -> list[int]:
        """Append whole records with one pwrite per touched segment; returns their offsets.

        Each record must carry the ``__CRC32#`` trailer ("reserve" or "seal" when built); its
        physical offset field is set here and its record CRC sealed. No fsync (see `flush`).
        On a write error the files are cut back to where they were and the error re-raised.
        """
        if not records:
            return []
        self._check_open()
        self._fence.check()
        limit = self.mapped_file_size - END_FILE_MIN_BLANK_LENGTH
        for rec in records:
            n = len(rec)
            if n > limit:
                raise ValueError(
                    f"record of {n} bytes cannot fit a {self.mapped_file_size}-byte segment"
                )
            if not rec.startswith(CRC32_TRAILER_PREFIX, n - CRC32_RESERVED_LEN):
                raise ValueError("commitlog records must carry the __CRC32# trailer")
        return self._append(bytearray().join(records), [len(r) for r in records], reseal_all=True)

    def append_sealed(self, data: bytes | bytearray, sizes: Sequence[int]) -> list[int]:
        """Append records already sealed for consecutive offsets from `max_offset`.

        The put hot path: ``data`` holds the records back to back, each with its physical
        offset and ``__CRC32#`` trailer written as if the batch started at `max_offset`, and
        ``sizes`` gives their lengths. When the batch fits the current segment (nearly always)
        it is one pwrite; when a record must roll to the next segment, that record and the
        ones after it get their physical offset patched and CRC resealed here. Returns the
        offsets; same durability and error handling as `append`.
        """
        if not sizes:
            return []
        self._check_open()
        self._fence.check()
        start = self._max_offset
        seg = self.mapped_file_size
        if max(sizes) > seg - END_FILE_MIN_BLANK_LENGTH:
            raise ValueError(f"a record of {max(sizes)} bytes cannot fit a {seg}-byte segment")
        if (
            sum(sizes) != len(data)
            or len(data) < PHY_POS_POSITION + 8
            or _PHY.unpack_from(data, PHY_POS_POSITION)[0] != start
        ):
            raise ValueError("sealed records do not match their sizes or the commitlog end")
        end = start + len(data)
        if end + END_FILE_MIN_BLANK_LENGTH > start - start % seg + seg:
            return self._append(bytearray(data), sizes, reseal_all=False)
        try:
            self._segments.write(start, data)
        except BaseException:
            self._undo_partial_append(start)
            raise
        self._max_offset = end
        positions = list(itertools.accumulate(sizes, initial=start))
        positions.pop()
        return positions

    def append_raw(
        self,
        offset: int,
        data: bytes | bytearray | memoryview,
        records: list[RecordFields] | None = None,
    ) -> int:
        """Append replicated bytes at ``offset`` (== `max_offset`); returns the new end.

        ``data`` must be whole records exactly as the master's CommitLog holds them: every
        message record is checked in full (sizes, magic, inner lengths, physical offset = its
        position, CRC) and must not cross a segment; a BLANK record must cover the rest of its
        segment (its fill bytes follow it). ValueError (nothing written) otherwise. The bytes
        may span segments. No fsync (see `flush`). With ``records``, the dispatch fields of
        every message record found by the check are added to it (`checked_dispatch_fields`:
        size, topic, queueId, queueOffset, sysFlag, storeTimestamp, properties), each with its
        offset first; only once the bytes are written.
        """
        self._check_open()
        self._fence.check()
        if offset != self._max_offset:
            raise ValueError(
                f"replicated data at {offset}, but the commitlog ends at {self._max_offset}"
            )
        seg = self.mapped_file_size
        found = _records.check_replicated(offset, data, seg, records is not None)
        view = memoryview(data)
        n = len(view)
        try:
            pos = 0
            while pos < n:
                at = offset + pos
                chunk = min(n - pos, at - at % seg + seg - at)
                self._segments.write(at, view[pos : pos + chunk])
                pos += chunk
        except BaseException:
            self._undo_partial_append(offset)
            raise
        self._max_offset = offset + n
        if records is not None:
            records += found
        return self._max_offset

    def _append(self, buf: bytearray, sizes: Sequence[int], *, reseal_all: bool) -> list[int]:
        start_offset = self._max_offset
        try:
            return self._place_and_write(buf, sizes, start_offset, reseal_all)
        except BaseException:
            self._undo_partial_append(start_offset)
            raise

    def _place_and_write(
        self, buf: bytearray, sizes: Sequence[int], offset: int, reseal_all: bool
    ) -> list[int]:
        """Write the records, moving any that does not fit its segment to the next one.

        A moved record (or every record with ``reseal_all``) gets its physical offset set and
        its CRC sealed: records sealed for consecutive offsets stay valid up to the first roll.
        """
        size = self.mapped_file_size
        segments = self._segments
        view = memoryview(buf)
        positions: list[int] = []
        chunk_start = 0
        chunk_offset = offset
        start = offset
        p = 0
        for n in sizes:
            room = size - offset % size
            if n + END_FILE_MIN_BLANK_LENGTH > room:
                segments.write(chunk_offset, view[chunk_start:p])
                segments.write_blank(offset, room)
                offset += room
                chunk_start, chunk_offset = p, offset
            end = p + n
            if reseal_all or offset != start + p:
                _PHY.pack_into(buf, p + PHY_POS_POSITION, offset)
                crc = crc32(view[p : end - CRC32_RESERVED_LEN]) & 0x7FFFFFFF
                buf[end - 11 : end - 1] = crc_digits(crc)
            positions.append(offset)
            offset += n
            p = end
        segments.write(chunk_offset, view[chunk_start:p])
        self._max_offset = offset
        return positions

    def _undo_partial_append(self, offset: int) -> None:
        try:
            self._segments.truncate(offset)
        except BaseException as e:
            # the files may hold part of the append past the end: nothing goes after it
            self._fence.fence(offset, f"an append could not be undone: {e!r}")
            raise
        finally:
            self._max_offset = offset

    # ------------------------------------------------------------------ flush

    def flush(self) -> int:
        """fdatasync every segment with unflushed bytes; returns the new flushed offset.

        A failure fences the log at the flushed offset (fence.py); a fenced byte is never
        counted as flushed."""
        segments = self._segments
        with self._lock:
            target = self._max_offset
            unsafe_from = self._fence.unsafe_from
            if unsafe_from is not None:
                target = min(target, unsafe_from)
            low = self.segment_base(self._flushed_offset)
            fds, dir_dirty = segments.take_unsynced(low, target)
        if target <= self._flushed_offset and not dir_dirty:
            return self._flushed_offset
        try:
            segments.sync(fds, dir_dirty)
        except BaseException as e:
            with self._lock:
                segments.give_back_dir(dir_dirty)
                self._fence.fence(self._flushed_offset, f"fsync failed: {e!r}")
            raise
        with self._lock:
            if target > self._flushed_offset:
                self._flushed_offset = target
                self._checkpoint.store(target)
        return self._flushed_offset

    def flush_recovered(self) -> int:
        """fsync what `open` found past the flushed checkpoint (a kill -9 leaves it in the
        page cache, in segment files whose directory entries may be unsynced too)."""
        if self._max_offset > self._flushed_offset:
            self._segments.give_back_dir(True)
        return self.flush()

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``offset``, clipped to [min_offset, max_offset)."""
        end = min(offset + size, self._max_offset)
        if offset < self._min_offset or offset >= end:
            return b""
        return self._segments.read(offset, end)

    def read_span(self, offset: int, size: int) -> bytes:
        """`read` for the pull hot path: one pread when the range sits in one segment."""
        base = offset - offset % self.mapped_file_size
        if (
            not self._segments.has(base)
            or offset < self._min_offset
            or offset + size > self._max_offset
            or offset + size > base + self.mapped_file_size
        ):
            return self.read(offset, size)
        return self._segments.pread(base, size, offset - base)

    def check_read(self, offset: int, size: int, data: bytes, pos: int) -> None:
        """Check the record at CommitLog ``offset``, read as ``data[pos : pos + size]``, before
        it is served (`ReadCheck.check`, read_check.py); RecordCorrupt when it fails."""
        self._read_check.check(offset, size, data, pos)

    def distrust(self, offset: int) -> None:
        """A record below `verified_from` found damaged (the scrub): its reads check it again
        (`ReadCheck.distrust`)."""
        self._read_check.distrust(offset)

    def read_record(self, offset: int) -> bytes:
        """The whole record starting at ``offset``; RecordNotFound if there is none. One read
        of RECORD_READ_GUESS bytes holds most records; a longer one takes a second read."""
        data = self.read(offset, RECORD_READ_GUESS)
        if len(data) < 8:
            raise RecordNotFound(f"no record at commitlog offset {offset}")
        total, magic = _HEAD.unpack_from(data)
        if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2) or total <= 8:
            raise RecordNotFound(f"no message record at commitlog offset {offset}")
        if total > len(data):
            data = self.read(offset, total)
        elif total < len(data):
            data = data[:total]
        if len(data) != total:
            raise RecordNotFound(f"record at commitlog offset {offset} is cut short")
        return data

    def iter_records(
        self, start: int, chunk_size: int = 4 * 1024 * 1024
    ) -> Iterator[tuple[int, bytes]]:
        """(offset, record) for every message record from ``start`` (a record boundary)."""
        return _records.iter_records(self, start, chunk_size)

    def scan_records(
        self, start: int, end: int, chunk_size: int = 4 * 1024 * 1024
    ) -> tuple[list[tuple[int, bytes]], int]:
        """The whole message records from ``start`` (a record boundary) that end at or below
        ``end``, and the position after the last whole unit read (a BLANK record and its fill
        count as one unit): (records, stop). Reads at most ``chunk_size`` at a time."""
        return _records.scan_records(self, start, end, chunk_size)

    # ------------------------------------------------------------------ truncation / retention

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and after ``offset`` (a record boundary), durably. A cut at or
        below the fence lifts it (and cuts the files even when ``offset`` is the end: a failed
        undo may have left bytes past it); a cut that fails fences the log at ``offset``."""
        if offset > self._max_offset or offset < self._min_offset:
            raise ValueError(
                f"truncate offset {offset} outside [{self._min_offset}, {self._max_offset}]"
            )
        unsafe_from = self._fence.unsafe_from
        fenced = unsafe_from is not None and offset <= unsafe_from
        if offset == self._max_offset and not fenced:
            return
        if self._flushed_offset > offset:
            # lower the checkpoint first: a crash must never find it above the data
            self._checkpoint.store(offset, sync=True)
            self._flushed_offset = offset
        try:
            self._segments.truncate(offset)
        except BaseException as e:
            self._fence.fence(offset, f"a cut to {offset} failed: {e!r}")
            raise
        finally:
            self._max_offset = offset
            # what is appended from here on is this process's own
            self._read_check.lower_to(offset)
        self._fence.lift_at_or_below(offset)

    def rewrite_fenced(self) -> int | None:
        """Resolve the fenced range by writing it again (fence.py).

        Checks every record from `unsafe_from` to the end as read back now (a page the kernel
        dropped and read again from disk fails its CRC), writes the bytes up to the first bad
        record again, fsyncs them and moves the flushed offset there. Returns None when the
        whole range was good (the fence is lifted), else the offset of the first bad record:
        the fence moves there and only a cut (`truncate_to`) resolves it. Raises (the fence
        stays) when a write or fsync fails again."""
        start = self._fence.unsafe_from
        if start is None:
            return None
        end = self._max_offset
        if start >= end:  # only bytes past the end (a failed undo): cut them
            self.truncate_to(end)
            return None
        bad = first_bad_record(self._segments, start, end)
        good_end = end if bad is None else bad
        rewrite_range(self._segments, start, good_end)
        with self._lock:
            self._segments.mark_dir_synced()
            self._flushed_offset = max(self._flushed_offset, good_end)
            self._fence.move_to(bad)
        self._checkpoint.store(self._flushed_offset)
        return bad

    def delete_segments_below(self, offset: int) -> list[str]:
        """Retention: delete segments lying wholly below ``offset``, never the last one."""
        segments = self._segments
        doomed = segments.detach_below(offset)
        if doomed:
            self._min_offset = segments.bases()[0]
        self._read_check.forget(b for b, _ in doomed)
        segments.remove(doomed)
        if doomed:
            segments.sync_dir()
        return [segment_name(b) for b, _ in doomed]

    def reset_to(self, offset: int) -> None:
        """Delete every segment, durably; the empty log continues at ``offset`` (a segment
        boundary): a slave re-syncing from its master's oldest data."""
        self._check_open()
        if offset % self.mapped_file_size:
            raise ValueError(
                f"a reset offset must be a segment boundary (mappedFileSizeCommitLog="
                f"{self.mapped_file_size}), got {offset}"
            )
        # the checkpoint first: a crash must never find it above the (deleted) data
        self._checkpoint.store(0, sync=True)
        segments = self._segments
        segments.remove(segments.detach_all())
        segments.sync_dir()
        self._min_offset = self._max_offset = self._flushed_offset = offset
        self._fence.lift()
        self._read_check.restart_at(offset)
