"""CommitLog: the append-only message log in fixed-size segment files, and its recovery (M1).

Layout. ``<store>/commitlog/`` holds segments named by their 20-digit zero-padded start
offset; every segment covers ``mapped_file_size`` logical bytes (upstream
mappedFileSizeCommitLog). Files are not pre-allocated: a segment grows by append. A record
that does not fit in the rest of a segment (it must leave 8 bytes spare, upstream's
END_FILE_MIN_BLANK_LENGTH) is preceded by an 8-byte BLANK record (totalSize = bytes left,
magic BLANK) and goes to the next segment; the closed segment is then extended to its full
size with ``ftruncate`` (sparse, nothing written) so a file position always equals
``offset - segment base`` and raw byte ranges (replication) never meet a hole.

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
vouches for is durable, so whatever version survives a crash is a true lower bound).

Write faults (a full disk). A failed append is cut back (`_undo_partial_append`): the log ends
where it ended before. Two things leave bytes whose state on disk is unknown: an undo that
failed (the files may hold bytes past `max_offset`), and a failed fsync (Linux may have dropped
the pages it could not write and report the next fsync as a success, so nothing from the last
durable offset up is known to be on disk). Either one FENCES the log at that offset
(`unsafe_from`): every append raises `WritesFenced` until the fenced range is resolved, because
a record appended after bytes that may be missing would turn a torn tail into damage in the
middle that recovery refuses. `rewrite_fenced` resolves it without losing anything it can
prove: it checks every record of the range as read back (CRC, physical offset), writes the
range again and fsyncs it; `truncate_to` at or below the fence cuts it. `flush` never counts a
fenced byte as flushed. The flushed checkpoint file is never torn by a full disk
(`OffsetCheckpoint`).

Threading contract: `flush` may run in a worker thread while the owning thread appends or
reads; it must not overlap `truncate_to`, `delete_segments_below`, `open` or `close`. A lock
guards the segment table, which is all the two threads share.

Recovery (`open`) checks every record (CRC included: upstream checkCRCOnRecover) with the scan
of record_scan.py from the flushed checkpoint itself (a record boundary), clean shutdown or not,
so restart time grows with the unflushed tail (at most a flush interval of writes), never with
the store. It starts at the first segment only when asked (``verify_all``: benchmarks and
tools) or when the checkpoint is missing or fails its CRC. What lies below the checkpoint was
fsynced, and its records were checked when this or an earlier process appended them (or by an
earlier scan); an append-only segment below the flushed offset is never written again. A
segment that ends below the checkpoint is refused (fsynced data is missing). What recovery
does not check (bytes that rotted on disk since) the read check below and ``rocketrio admin
checkStore`` find: a damaged record is never served. At the first invalid record, offset P:
- P below the flushed checkpoint: fsynced data changed -> CorruptionError;
- a valid record (full CRC and matching physical offset) starts after P in the same segment:
  the damage is in the middle, not a torn tail -> CorruptionError naming file and offset;
- otherwise P starts a torn tail: the file is truncated at P (ftruncate + fdatasync) and later
  segments, which then hold only never-flushed bytes, are deleted, last first (as `truncate_to`
  does), so a crash in between never leaves the missing segment `open` refuses. The report
  says so.
The price of that rule: if a crash persisted a later unflushed page but not an earlier one,
open refuses rather than silently dropping the later, valid records. Across segments the rule
is not applied above the flushed checkpoint: a power cut may keep a later segment's unflushed
pages and lose the end of the one before (a BLANK record never written), which is a torn tail
of never-fsynced bytes; a segment that ends with its BLANK record and has a bad record before
it, though, always has a valid record after the damage and is refused.

Read check. `check_read` verifies a record before it is served (the pull path) unless a
watermark vouches for it: every byte at or above `verified_from` was appended by this process
(built and sealed, or checked in full by `append_raw`) or checked by recovery; below it, each
segment has a mark that sequential reads move past the records they checked.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from typing import Literal

import attrs

from rocketrio.protocol.message import (
    BLANK_MAGIC_CODE,
    CRC32_RESERVED_LEN,
    CRC32_TRAILER_PREFIX,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    PHY_POS_POSITION,
    MessageDecodeError,
    check_stored_record,
    checked_dispatch_fields,
    crc32,
    crc_digits,
)
from rocketrio.storage.durable import makedirs_synced, read_file
from rocketrio.storage.fs import OS_FS, FileSystem, ReadMap, WriteData
from rocketrio.storage.record_scan import (
    END_FILE_MIN_BLANK_LENGTH,
    crc_intact,
    find_valid_record,
    mapped,
    scan_segment,
)

CHECKPOINT_FILE = "flushed.checkpoint"

_HEAD = struct.Struct(">ii")
_PHY = struct.Struct(">q")
_CKPT = struct.Struct(">qI")
_REWRITE_CHUNK = 4 * 1024 * 1024  # bytes `rewrite_fenced` reads and writes back at a time
# a replicated record as `append_raw` found it: (offset, size, topic, queueId, queueOffset,
# sysFlag, storeTimestamp, encoded properties)
RecordFields = tuple[int, int, str, int, int, int, int, bytes]


class CorruptionError(Exception):
    """Stored data is damaged where it cannot be a torn tail; nothing was changed on disk."""


class RecordCorrupt(CorruptionError):
    """A record read to serve it failed its check (CRC or layout); it was not served."""

    def __init__(self, segment: str, offset: int, reason: str) -> None:
        self.segment = segment
        self.offset = offset
        self.reason = reason
        super().__init__(f"commitlog record at offset {offset} in {segment} is damaged: {reason}")


CheckpointState = Literal["ok", "missing", "corrupt"]


class RecordNotFound(LookupError):
    """No whole record at the requested offset."""


class WritesFenced(Exception):
    """The store takes no append now: what a failed write or fsync left from ``offset`` on
    must be resolved first (`CommitLog.rewrite_fenced`, `CommitLog.truncate_to`, or the
    store's repair); ``cause`` says what failed."""

    def __init__(self, offset: int, cause: str) -> None:
        self.offset = offset
        self.cause = cause
        super().__init__(f"writes are fenced from offset {offset}: {cause}")


def segment_name(base: int) -> str:
    return f"{base:020d}"


def list_segments(path: str, fs: FileSystem = OS_FS) -> list[int]:
    """Sorted start offsets of the 20-digit segment files in ``path``."""
    try:
        names = fs.listdir(path)
    except FileNotFoundError:
        return []
    return sorted(int(n) for n in names if len(n) == 20 and n.isdigit())


def pwrite_all(fs: FileSystem, fd: int, data: WriteData, pos: int) -> None:
    n = fs.pwrite(fd, data, pos)
    if n == len(data):  # nearly always: a short write only happens near a full disk
        return
    view = memoryview(data)[n:]
    pos += n
    while view:
        n = fs.pwrite(fd, view, pos)
        view = view[n:]
        pos += n


class OffsetCheckpoint:
    """One offset in a small file (offset + CRC32), rewritten in place.

    `store` does not fsync unless asked: callers write it only after the data it describes is
    durable, so a lost update leaves an older, still true, value. A torn or missing file loads
    as None. A full disk never tears it: the first version is written under a temporary name
    and renamed into place (the only write that allocates space), later ones overwrite the same
    12 bytes; when `store` raises, the file holds the previous version (or none).
    """

    def __init__(self, path: str, *, fs: FileSystem = OS_FS) -> None:
        self.path = path
        self._fs = fs
        self._fd: int | None = None

    def load(self) -> int | None:
        return self.load_state()[0]

    def load_state(self) -> tuple[int | None, CheckpointState]:
        """(offset or None, and why: "ok", "missing", or "corrupt" for a file of the wrong
        size, a CRC mismatch or a negative offset)."""
        try:
            raw = read_file(self.path, fs=self._fs)
        except FileNotFoundError:
            return None, "missing"
        if len(raw) != _CKPT.size:
            return None, "corrupt"
        offset, crc = _CKPT.unpack(raw)
        if zlib.crc32(raw[:8]) != crc or offset < 0:
            return None, "corrupt"
        return offset, "ok"

    def store(self, offset: int, *, sync: bool = False) -> None:
        head = _PHY.pack(offset)
        data = head + struct.pack(">I", zlib.crc32(head))
        fs = self._fs
        if self._fd is None:
            if fs.exists(self.path):
                self._fd = fs.open(self.path, os.O_RDWR, 0o644)
            else:
                self._create(data, sync)
                return
        pwrite_all(fs, self._fd, data, 0)
        if sync:
            fs.fsync(self._fd)

    def _create(self, data: bytes, sync: bool) -> None:
        fs = self._fs
        tmp = self.path + ".tmp"
        fd = fs.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            pwrite_all(fs, fd, data, 0)
            if sync:
                fs.fsync(fd)
            fs.replace(tmp, self.path)  # the fd follows the file to its name
        except BaseException:
            fs.close(fd)
            if fs.exists(tmp):
                fs.unlink(tmp)
            raise
        self._fd = fd
        if sync:
            fs.fsync_dir(os.path.dirname(self.path) or ".")

    def close(self) -> None:
        if self._fd is not None:
            self._fs.close(self._fd)
            self._fd = None


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
        self._fds: dict[int, int] = {}  # segment base -> fd (O_RDWR)
        self._lock = threading.Lock()
        self._checkpoint = OffsetCheckpoint(os.path.join(path, CHECKPOINT_FILE), fs=fs)
        self._min_offset = 0
        self._max_offset = 0
        self._flushed_offset = 0
        self._dir_dirty = False
        self._opened = False
        # write faults (module docstring): bytes from _unsafe_from on are in an unknown state
        self._unsafe_from: int | None = None
        self._fence_cause = ""
        # the read check's watermarks (`needs_check`): every byte at or above _verified_from
        # was appended by this process or checked by recovery; below it, a segment's bytes
        # under _verified_upto[base] were checked by an earlier read
        self._verified_from = 0
        self._verified_upto: dict[int, int] = {}

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
        with self._lock:
            return sorted(self._fds)

    @property
    def unsafe_from(self) -> int | None:
        """Where the fenced range starts (module docstring, "Write faults"); None: not fenced."""
        return self._unsafe_from

    @property
    def fence_cause(self) -> str:
        return self._fence_cause

    def _fence(self, offset: int, cause: str) -> None:
        if self._unsafe_from is None or offset < self._unsafe_from:
            self._unsafe_from = offset
            self._fence_cause = cause

    def _unfence_at_or_below(self, offset: int) -> None:
        if self._unsafe_from is not None and offset <= self._unsafe_from:
            self._unsafe_from = None
            self._fence_cause = ""

    def _check_writable(self) -> None:
        if self._unsafe_from is not None:
            raise WritesFenced(self._unsafe_from, self._fence_cause)

    @property
    def verified_from(self) -> int:
        """Every byte at or above this offset was appended by this process (its records built
        or checked here) or checked by recovery: a read there needs no record check."""
        return self._verified_from

    def segment_files(self) -> list[tuple[int, str]]:
        with self._lock:
            bases = sorted(self._fds)
        return [(b, os.path.join(self.path, segment_name(b))) for b in bases]

    def segment_base(self, offset: int) -> int:
        return offset - offset % self.mapped_file_size

    # ------------------------------------------------------------------ open / close

    def open(self, *, verify_all: bool = False, check_crc: bool = True) -> CommitLogRecovery:
        """Open the segments, check their records and cut a torn tail (module docstring).

        The scan starts at the segment holding the flushed checkpoint, or at the first segment
        when ``verify_all`` (the store's last shutdown was not clean) or when the checkpoint is
        missing or corrupt. ``check_crc`` is upstream's checkCRCOnRecover: off, records are
        checked for layout and physical offset only.
        """
        if self._opened:
            raise RuntimeError("commitlog already open")
        self._unsafe_from = None  # recovery checks the tail from the flushed checkpoint on
        makedirs_synced(self.path, fs=self._fs)  # flush's dir fsync needs a durable dir
        bases = list_segments(self.path, self._fs)
        size = self.mapped_file_size
        for prev, nxt in itertools.pairwise(bases):
            if nxt != prev + size:
                raise CorruptionError(
                    f"commitlog {self.path}: segment {segment_name(nxt)} does not follow "
                    f"{segment_name(prev)} (segment size {size}); a segment file is missing"
                )
        if bases and bases[0] % size:
            raise CorruptionError(
                f"commitlog {self.path}: segment {segment_name(bases[0])} is not aligned to "
                f"mappedFileSizeCommitLog={size}; was the store written with another size?"
            )
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
            for b in bases:
                self._fds[b] = self._fs.open(os.path.join(self.path, segment_name(b)), os.O_RDWR)
            start = bases[0]
            if ckpt is not None and not verify_all:
                # from the checkpoint itself (a record boundary): what lies below it is
                # fsynced and was checked when it was written; a checkpoint beyond the last
                # segment starts at that segment's end, where a missing-data check waits
                start = max(start, min(ckpt, bases[-1] + size))
            report = self._recover(bases, start, ckpt, check_crc)
        except BaseException:
            self._close_files()
            raise
        self._opened = True
        self._min_offset = bases[0]
        self._flushed_offset = min(ckpt or 0, self._max_offset)
        # a scan without CRC checks vouches for nothing a read may skip
        self._verified_from = min(start, self._max_offset) if check_crc else self._max_offset
        self._verified_upto.clear()
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
        with self._lock:
            for fd in self._fds.values():
                self._fs.close(fd)
            self._fds.clear()
        self._checkpoint.close()
        self._opened = False

    # ------------------------------------------------------------------ recovery

    def _recover(
        self, bases: list[int], start: int, ckpt: int | None, check_crc: bool
    ) -> CommitLogRecovery:
        size = self.mapped_file_size
        for base in (b for b in bases if b + size >= start):
            is_last = base == bases[-1]
            with mapped(self._fs, self._fds[base]) as data:
                at = max(0, start - base)
                if at >= size and len(data) < size:
                    at = 0  # a closed segment never extended: find its BLANK record again
                if at > len(data):
                    raise CorruptionError(
                        f"commitlog {self.path}: segment {segment_name(base)} ends at offset "
                        f"{base + len(data)}, below the flushed checkpoint {ckpt}: fsynced "
                        "data is missing (truncated or deleted file?)"
                    )
                if at >= size:  # the checkpoint is at this segment's very end
                    self._max_offset = base + size
                    if is_last:
                        break
                    continue
                scan = scan_segment(data, base, size, check_crc=check_crc, start=at)
                end, reason = scan.end, scan.reason
                if reason is None and scan.blank:
                    self._extend_closed_segment(base)
                    self._max_offset = base + size
                    continue
                if reason is None and is_last:
                    self._max_offset = base + end
                    break
                if reason is None:
                    reason = "segment ends without an end-of-file record"
                self._refuse_if_corrupt(base, end, data, reason, ckpt)
            return self._cut_torn_tail(base, end, bases, start, ckpt, reason)
        if ckpt is not None and ckpt > self._max_offset:
            raise CorruptionError(
                f"commitlog {self.path} ends at offset {self._max_offset}, below its flushed "
                f"checkpoint {ckpt}: fsynced data is missing (truncated or deleted file?)"
            )
        return CommitLogRecovery(start, self._max_offset, ckpt)

    def _refuse_if_corrupt(
        self, base: int, pos: int, data: ReadMap, reason: str, ckpt: int | None
    ) -> None:
        where = (
            f"{os.path.join(self.path, segment_name(base))} position {pos} (offset {base + pos})"
        )
        if ckpt is not None and base + pos < ckpt:
            raise CorruptionError(
                f"commitlog corruption in {where}: {reason}; this is below the flushed "
                f"checkpoint {ckpt}, so fsynced data changed. Refusing to truncate."
            )
        after = find_valid_record(data, base, self.mapped_file_size, pos + 1)
        if after is not None:
            raise CorruptionError(
                f"commitlog corruption in {where}: {reason}; a valid record follows at offset "
                f"{after}, so this is damage in the middle, not a torn tail. Refusing to truncate."
            )

    def _cut_torn_tail(
        self, base: int, pos: int, bases: list[int], start: int, ckpt: int | None, reason: str
    ) -> CommitLogRecovery:
        fs = self._fs
        fd = self._fds[base]
        dropped = fs.fsize(fd) - pos
        fs.ftruncate(fd, pos)
        fs.fdatasync(fd)
        deleted = []
        # last first: a crash in between leaves segments without a gap (open refuses a gap)
        for later in sorted((b for b in bases if b > base), reverse=True):
            later_fd = self._fds.pop(later)
            dropped += fs.fsize(later_fd)
            fs.close(later_fd)
            fs.unlink(os.path.join(self.path, segment_name(later)))
            deleted.insert(0, segment_name(later))
        if deleted:
            fs.fsync_dir(self.path)
        self._max_offset = base + pos
        return CommitLogRecovery(
            scanned_from=start,
            max_offset=self._max_offset,
            flushed_checkpoint=ckpt,
            truncated_at=base + pos,
            bytes_dropped=dropped,
            segment=os.path.join(self.path, segment_name(base)),
            reason=reason,
            deleted_segments=tuple(deleted),
        )

    def _extend_closed_segment(self, base: int) -> None:
        fd = self._fds[base]
        if self._fs.fsize(fd) < self.mapped_file_size:
            self._fs.ftruncate(fd, self.mapped_file_size)

    # ------------------------------------------------------------------ append / flush

    def append(self, records: Sequence[bytes]) -> list[int]:
        """Append whole records with one pwrite per touched segment; returns their offsets.

        Each record must carry the ``__CRC32#`` trailer ("reserve" or "seal" when built); its
        physical offset field is set here and its record CRC sealed. No fsync (see `flush`).
        On a write error the files are cut back to where they were and the error re-raised.
        """
        if not records:
            return []
        self._check_open()
        self._check_writable()
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
        self._check_writable()
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
        base = start - start % seg
        try:
            pwrite_all(self._fs, self._segment_fd(base), data, start - base)
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
        self._check_writable()
        if offset != self._max_offset:
            raise ValueError(
                f"replicated data at {offset}, but the commitlog ends at {self._max_offset}"
            )
        seg = self.mapped_file_size
        view = memoryview(data)
        n = len(view)
        # the record checks read a bytes object fastest (replicated data usually is one)
        raw = data if data.__class__ is bytes or records is None else bytes(data)
        found: list[RecordFields] = []
        pos = 0
        while pos < n:
            at = offset + pos
            room = seg - at % seg
            if n - pos < 8:
                raise ValueError(f"partial record header at {at}")
            total, magic = _HEAD.unpack_from(view, pos)
            if magic == BLANK_MAGIC_CODE:
                if total != room or pos + total > n:
                    raise ValueError(
                        f"blank record at {at} of {total} bytes, {room} left in segment"
                    )
            else:
                limit = pos + room - END_FILE_MIN_BLANK_LENGTH
                try:
                    if records is None:
                        check_stored_record(view, pos, expected_offset=at, limit=limit)
                    else:
                        fields = checked_dispatch_fields(raw, pos, expected_offset=at, limit=limit)
                        found.append((at, *fields))
                except MessageDecodeError as e:
                    raise ValueError(f"replicated record at {at}: {e}") from None
            pos += total
        try:
            pos = 0
            while pos < n:
                at = offset + pos
                base = at - at % seg
                chunk = min(n - pos, base + seg - at)
                pwrite_all(self._fs, self._segment_fd(base), view[pos : pos + chunk], at - base)
                pos += chunk
        except BaseException:
            self._undo_partial_append(offset)
            raise
        self._max_offset = offset + n
        if records is not None:
            records += found
        return self._max_offset

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
        with self._lock:
            doomed = sorted(self._fds, reverse=True)
            fds = [self._fds.pop(b) for b in doomed]
        for b, fd in zip(doomed, fds, strict=True):
            self._fs.close(fd)
            self._fs.unlink(os.path.join(self.path, segment_name(b)))
        self._fs.fsync_dir(self.path)
        self._min_offset = self._max_offset = self._flushed_offset = offset
        self._unsafe_from = None
        self._verified_from = offset
        self._verified_upto.clear()

    def scan_records(
        self, start: int, end: int, chunk_size: int = 4 * 1024 * 1024
    ) -> tuple[list[tuple[int, bytes]], int]:
        """The whole message records from ``start`` (a record boundary) that end at or below
        ``end``, and the position after the last whole unit read (a BLANK record and its fill
        count as one unit): (records, stop). Reads at most ``chunk_size`` at a time."""
        out: list[tuple[int, bytes]] = []
        offset = max(start, self._min_offset)
        end = min(end, self._max_offset)
        seg = self.mapped_file_size
        while offset < end:
            seg_end = offset - offset % seg + seg
            want = min(end, seg_end, offset + chunk_size) - offset
            chunk = self.read(offset, want)
            if len(chunk) >= 8:
                total, magic = _HEAD.unpack_from(chunk)
                if magic != BLANK_MAGIC_CODE and want < total <= min(end, seg_end) - offset:
                    chunk = self.read(offset, total)  # one record bigger than a chunk
            pos = 0
            stepped_blank = False
            while len(chunk) - pos >= 8:
                total, magic = _HEAD.unpack_from(chunk, pos)
                if magic == BLANK_MAGIC_CODE:
                    if seg_end <= end:
                        pos = seg_end - offset
                        stepped_blank = True
                    break
                if total <= 8:
                    raise CorruptionError(f"no record at commitlog offset {offset + pos}")
                if pos + total > len(chunk):
                    break
                out.append((offset + pos, chunk[pos : pos + total]))
                pos += total
            chunk_end = offset + len(chunk)
            offset += pos
            if pos == 0:
                break
            if not stepped_blank and pos < len(chunk) and chunk_end >= min(end, seg_end):
                break  # the last record crosses `end`
        return out, offset

    def _check_open(self) -> None:
        if not self._opened:
            raise RuntimeError(f"commitlog {self.path} is not open")

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
        view = memoryview(buf)
        positions: list[int] = []
        chunk_start = 0
        chunk_offset = offset
        start = offset
        p = 0
        for n in sizes:
            room = size - offset % size
            if n + END_FILE_MIN_BLANK_LENGTH > room:
                self._write(chunk_offset, view[chunk_start:p])
                self._write_blank(offset, room)
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
        self._write(chunk_offset, view[chunk_start:p])
        self._max_offset = offset
        return positions

    def _segment_fd(self, base: int) -> int:
        fd = self._fds.get(base)
        if fd is None:
            path = os.path.join(self.path, segment_name(base))
            fd = self._fs.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            with self._lock:
                self._fds[base] = fd
                self._dir_dirty = True
        return fd

    def _write(self, offset: int, data: memoryview) -> None:
        if data:
            base = self.segment_base(offset)
            pwrite_all(self._fs, self._segment_fd(base), data, offset - base)

    def _write_blank(self, offset: int, room: int) -> None:
        base = self.segment_base(offset)
        fd = self._segment_fd(base)
        pwrite_all(self._fs, fd, _HEAD.pack(room, BLANK_MAGIC_CODE), offset - base)
        self._fs.ftruncate(fd, self.mapped_file_size)

    def _undo_partial_append(self, offset: int) -> None:
        try:
            self._truncate_files(offset)
        except BaseException as e:
            # the files may hold part of the append past the end: nothing goes after it
            self._fence(offset, f"an append could not be undone: {e!r}")
            raise
        finally:
            self._max_offset = offset

    def flush(self) -> int:
        """fdatasync every segment with unflushed bytes; returns the new flushed offset.

        A failure fences the log at the flushed offset (module docstring, "Write faults"); a
        fenced byte is never counted as flushed."""
        with self._lock:
            target = self._max_offset
            if self._unsafe_from is not None:
                target = min(target, self._unsafe_from)
            low = self.segment_base(self._flushed_offset)
            fds = [fd for b, fd in self._fds.items() if low <= b < target]
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        if target <= self._flushed_offset and not dir_dirty:
            return self._flushed_offset
        try:
            for fd in fds:
                self._fs.fdatasync(fd)
            if dir_dirty:
                self._fs.fsync_dir(self.path)
        except BaseException as e:
            with self._lock:
                self._dir_dirty = self._dir_dirty or dir_dirty
                self._fence(self._flushed_offset, f"fsync failed: {e!r}")
            raise
        with self._lock:
            if target > self._flushed_offset:
                self._flushed_offset = target
                self._checkpoint.store(target)
        return self._flushed_offset

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``offset``, clipped to [min_offset, max_offset)."""
        end = min(offset + size, self._max_offset)
        if offset < self._min_offset or offset >= end:
            return b""
        seg = self.mapped_file_size
        parts = []
        while offset < end:
            base = offset - offset % seg
            fd = self._fds.get(base)
            if fd is None:
                break
            want = min(end, base + seg) - offset
            data = self._fs.pread(fd, want, offset - base)
            parts.append(data)
            if len(data) < want:
                break
            offset += want
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read_span(self, offset: int, size: int) -> bytes:
        """`read` for the pull hot path: one pread when the range sits in one segment."""
        base = offset - offset % self.mapped_file_size
        fd = self._fds.get(base)
        if (
            fd is None
            or offset < self._min_offset
            or offset + size > self._max_offset
            or offset + size > base + self.mapped_file_size
        ):
            return self.read(offset, size)
        return self._fs.pread(fd, size, offset - base)

    def check_read(self, offset: int, size: int, data: bytes, pos: int) -> None:
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
        base = offset - offset % self.mapped_file_size
        upto = self._verified_upto.get(base, base)
        if offset + size <= upto:
            return
        if crc_intact(data, pos, offset, pos + size) == size:
            if offset == upto:
                self._verified_upto[base] = offset + size
            return
        segment = os.path.join(self.path, segment_name(base))
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

    def read_record(self, offset: int) -> bytes:
        """The whole record starting at ``offset``; RecordNotFound if there is none."""
        head = self.read(offset, 8)
        if len(head) < 8:
            raise RecordNotFound(f"no record at commitlog offset {offset}")
        total, magic = _HEAD.unpack(head)
        if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2) or total <= 8:
            raise RecordNotFound(f"no message record at commitlog offset {offset}")
        data = self.read(offset, total)
        if len(data) != total:
            raise RecordNotFound(f"record at commitlog offset {offset} is cut short")
        return data

    def iter_records(
        self, start: int, chunk_size: int = 4 * 1024 * 1024
    ) -> Iterator[tuple[int, bytes]]:
        """(offset, record) for every message record from ``start`` (a record boundary)."""
        offset = max(start, self._min_offset)
        seg = self.mapped_file_size
        while offset < self._max_offset:
            chunk = self.read(offset, min(chunk_size, seg - offset % seg))
            if len(chunk) >= 8:
                total = _HEAD.unpack_from(chunk)[0]
                if total > len(chunk):  # a record bigger than the chunk: read it whole
                    chunk = self.read(offset, total)
            pos = 0
            while len(chunk) - pos >= 8:
                total, magic = _HEAD.unpack_from(chunk, pos)
                if magic == BLANK_MAGIC_CODE:
                    pos += total
                    break
                if total <= 8 or pos + total > len(chunk):
                    break
                yield offset + pos, chunk[pos : pos + total]
                pos += total
            if pos == 0:
                raise CorruptionError(f"cannot read a record at commitlog offset {offset}")
            offset += pos

    # ------------------------------------------------------------------ truncation / retention

    def truncate_to(self, offset: int) -> None:
        """Drop everything at and after ``offset`` (a record boundary), durably. A cut at or
        below the fence lifts it (and cuts the files even when ``offset`` is the end: a failed
        undo may have left bytes past it); a cut that fails fences the log at ``offset``."""
        if offset > self._max_offset or offset < self._min_offset:
            raise ValueError(
                f"truncate offset {offset} outside [{self._min_offset}, {self._max_offset}]"
            )
        fenced = self._unsafe_from is not None and offset <= self._unsafe_from
        if offset == self._max_offset and not fenced:
            return
        if self._flushed_offset > offset:
            # lower the checkpoint first: a crash must never find it above the data
            self._checkpoint.store(offset, sync=True)
            self._flushed_offset = offset
        try:
            self._truncate_files(offset)
        except BaseException as e:
            self._fence(offset, f"a cut to {offset} failed: {e!r}")
            raise
        finally:
            self._max_offset = offset
            # what is appended from here on is this process's own
            self._verified_from = min(self._verified_from, offset)
        self._unfence_at_or_below(offset)

    def rewrite_fenced(self) -> int | None:
        """Resolve the fenced range by writing it again (module docstring, "Write faults").

        Checks every record from `unsafe_from` to the end as read back now (a page the kernel
        dropped and read again from disk fails its CRC), writes the bytes up to the first bad
        record again, fsyncs them and moves the flushed offset there. Returns None when the
        whole range was good (the fence is lifted), else the offset of the first bad record:
        the fence moves there and only a cut (`truncate_to`) resolves it. Raises (the fence
        stays) when a write or fsync fails again."""
        start = self._unsafe_from
        if start is None:
            return None
        end = self._max_offset
        if start >= end:  # only bytes past the end (a failed undo): cut them
            self.truncate_to(end)
            return None
        bad = self._first_bad_record(start, end)
        good_end = end if bad is None else bad
        seg = self.mapped_file_size
        fds: dict[int, int] = {}
        offset = start
        while offset < good_end:
            base = offset - offset % seg
            upto = min(good_end, base + seg, offset + _REWRITE_CHUNK)
            fd = fds[base] = self._fds[base]
            # the same bytes again: their pages are dirty again, so the fsync writes them
            data = self._fs.pread(fd, upto - offset, offset - base)
            pwrite_all(self._fs, fd, data, offset - base)
            offset = upto
        for fd in fds.values():
            self._fs.fdatasync(fd)
        self._fs.fsync_dir(self.path)
        with self._lock:
            self._dir_dirty = False
            self._flushed_offset = max(self._flushed_offset, good_end)
            self._unsafe_from = None if bad is None else bad
        self._checkpoint.store(self._flushed_offset)
        return bad

    def _first_bad_record(self, start: int, end: int) -> int | None:
        """The offset of the first record in [start, end) that fails its full check."""
        seg = self.mapped_file_size
        offset = start
        while offset < end:
            base = offset - offset % seg
            upto = min(end, base + seg)
            data = self._fs.pread(self._fds[base], upto - offset, offset - base)
            # the rest of the segment from `offset`, scanned as if it were a segment of its own
            scan = scan_segment(data, offset, base + seg - offset)
            if scan.blank:
                upto = base + seg  # the BLANK record and its fill close the segment
            elif not scan.ok or offset + scan.end < upto:
                return offset + scan.end
            offset = upto
        return None

    def _truncate_files(self, offset: int) -> None:
        base = self.segment_base(offset)
        with self._lock:
            later = sorted((b for b in self._fds if b > base), reverse=True)  # last first
            later_fds = [self._fds.pop(b) for b in later]
        fs = self._fs
        for b, fd in zip(later, later_fds, strict=True):
            fs.close(fd)
            fs.unlink(os.path.join(self.path, segment_name(b)))
        fd = self._fds.get(base)
        if fd is not None:
            fs.ftruncate(fd, offset - base)
            fs.fdatasync(fd)
        fs.fsync_dir(self.path)

    def delete_segments_below(self, offset: int) -> list[str]:
        """Retention: delete segments lying wholly below ``offset``, never the last one."""
        seg = self.mapped_file_size
        with self._lock:
            bases = sorted(self._fds)
            doomed = [b for b in bases[:-1] if b + seg <= offset]
            fds = [self._fds.pop(b) for b in doomed]
            if doomed:
                self._min_offset = min(self._fds)
            for b in doomed:
                self._verified_upto.pop(b, None)
        for b, fd in zip(doomed, fds, strict=True):
            self._fs.close(fd)
            self._fs.unlink(os.path.join(self.path, segment_name(b)))
        if doomed:
            self._fs.fsync_dir(self.path)
        return [segment_name(b) for b in doomed]
