"""Durable storage of the controller's Raft node: log segments, term/vote, snapshots.

Everything lives in one directory:

  ``int32 length | uint32 crc32 | int64 index | int64 term | data`` (see raft_segments.py, which
  also owns the recovery scan). A segment rolls when the next record would make it exceed
  ``segment_size`` (a record larger than that gets a segment of its own).
  make it exceed ``segment_size`` (a record larger than that gets a segment of its own).
- ``hard_state.json``: current term and vote, replaced atomically.
- ``snapshot``: the latest snapshot, ``magic | uint32 crc | int64 index | int64 term | data``,
  replaced atomically.
- ``LOCK``: an flock so two processes never share one store.

Durability points. ``append`` only writes (page cache); ``sync`` fsyncs the last segment and, when
segments were created, the directory: one fsync for many appends. Rolling to a new segment fsyncs
the old one first, so every segment that is not the last is complete on disk; that invariant is
what lets recovery be strict about them. ``save_hard_state`` and ``save_snapshot`` write a temp
file, fsync it, rename it over the old one and fsync the directory before returning. Suffix
truncation and compaction fsync the directory and the truncated file before returning.

Torn tail or corruption? Recovery checks every record (raft_segments.py says how). A torn tail
in the last segment is cut, fsynced and described in ``recovery_report``; anything else stops
start-up with ``RaftLogCorruption`` naming the file and offset. Repairs are made only after every
check passed, so a refused start-up leaves the files as it found them. A crc-valid record with an
unexpected index, a gap between segments or between the snapshot and the log, or a bad
hard-state/snapshot file are always corruption: silent loss is never an option.


Crash consistency of the multi-step operations:

- suffix truncation deletes later segments from the last one backwards, fsyncs the directory,
  then cuts the segment holding the first dropped index: a crash leaves a prefix of the old log
  that still holds everything before that index (its leftover conflicting entries are cut again
  when the leader resends);
- compaction deletes whole segments from the oldest forwards: a crash leaves a suffix that still
  starts at or below ``snapshot.index + 1``;
- a snapshot the log does not match (a follower installing the leader's snapshot: the log does
  not reach its index or has another term there) makes the whole log obsolete; the snapshot file
  is made durable first, then the segments are deleted. Recovery applies the same rule, so a
  crash in between ends the same way.

``append`` skips leading entries the log already holds (same index and term) and truncates only
from the first conflict, as Raft's receiver rule says. Entries at or below the snapshot index are
hidden even while their segment still exists: ``first_index`` is ``snapshot.index + 1``. Not
thread-safe: the owner (one actor) may run ``sync`` in a worker thread but must not call anything
else until it returns.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Sequence
from types import TracebackType

import attrs

from rocketrio.protocol.raft import Entry, HardState, SnapshotMeta
from rocketrio.storage.durable import makedirs_synced, read_file, write_file_atomic
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.raft_segments import (
    HEADER_SIZE,
    MAX_ENTRY_BYTES,
    RECORD_CRC,
    RECORD_HEADER,
    RaftLogCorruption,
    Segment,
    TornTail,
    check_log_start,
    cut_file,
    decode_records,
    load_segments,
)

# the record format and recovery scan moved to raft_segments.py; callers keep importing here
__all__ = [
    "DEFAULT_SEGMENT_SIZE",
    "HARD_STATE_FILE",
    "HEADER_SIZE",
    "LOCK_FILE",
    "MAX_ENTRY_BYTES",
    "SNAPSHOT_FILE",
    "RaftLog",
    "RaftLogCompacted",
    "RaftLogCorruption",
    "RecoveryReport",
    "TornTail",
]

DEFAULT_SEGMENT_SIZE = 64 * 1024 * 1024
_INDEX_TERM = struct.Struct(">qq")
_SNAP_MAGIC = b"RRSNAP01"
_SNAP_HDR = struct.Struct(">8sIqq")

HARD_STATE_FILE = "hard_state.json"
SNAPSHOT_FILE = "snapshot"
LOCK_FILE = "LOCK"
_TMP_SUFFIX = ".tmp"


class RaftLogCompacted(LookupError):
    """The index is covered by the snapshot: its entry is gone, use the snapshot instead."""


@attrs.frozen
class RecoveryReport:
    """What ``RaftLog.open`` had to repair; the owner logs it."""

    torn_tail: TornTail | None = None
    removed_files: tuple[str, ...] = ()
    log_discarded_for_snapshot: bool = False

    @property
    def clean(self) -> bool:
        return (
            self.torn_tail is None
            and not self.removed_files
            and not self.log_discarded_for_snapshot
        )


def _write_file_atomically(fs: FileSystem, directory: str, name: str, payload: bytes) -> None:
    """temp + fsync + rename + directory fsync: readers see the old or the new file, never a mix."""
    write_file_atomic(os.path.join(directory, name), payload, tmp_suffix=_TMP_SUFFIX, fs=fs)


class RaftLog:
    """The controller Raft node's log, hard state and snapshot in one directory."""

    def __init__(
        self, path: str, segment_size: int, lock_fd: int, *, fs: FileSystem = OS_FS
    ) -> None:
        self._fs = fs
        self._dir = path
        self._segment_size = segment_size
        self._lock_fd = lock_fd
        self._hard_state = HardState(0, None)
        self._snapshot: SnapshotMeta | None = None
        self._segments: list[Segment] = []
        self._firsts: list[int] = []
        self._fd: int | None = None  # append fd of self._segments[-1], opened lazily
        self._unsynced = False
        self._dir_unsynced = False
        self._closed = False
        self.recovery_report = RecoveryReport()

    # ----------------------------------------------------------------- open / close

    @classmethod
    def open(
        cls, path: str, segment_size: int = DEFAULT_SEGMENT_SIZE, *, fs: FileSystem = OS_FS
    ) -> RaftLog:
        """Open (creating if needed) and recover the store at ``path``."""
        if segment_size <= HEADER_SIZE:
            raise ValueError(f"segment_size must exceed {HEADER_SIZE} bytes, got {segment_size}")
        makedirs_synced(path, fs=fs)  # the directory fsyncs below need a durable directory
        lock_fd = fs.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fs.flock(lock_fd)
        except BlockingIOError:
            fs.close(lock_fd)
            raise RuntimeError(f"raft store {path} is in use by another RaftLog") from None
        log = cls(path, segment_size, lock_fd, fs=fs)
        try:
            log._recover()
        except BaseException:
            log._release()
            raise
        return log

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.sync()
        finally:
            self._release()

    def __enter__(self) -> RaftLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _release(self) -> None:
        self._closed = True
        self._close_fd()
        self._fs.close(self._lock_fd)  # closing the fd drops the flock

    # ----------------------------------------------------------------- recovery

    def _recover(self) -> None:
        fs = self._fs
        removed: list[str] = []
        for name in sorted(fs.listdir(self._dir)):
            if name.endswith(_TMP_SUFFIX):  # an atomic write that never reached its rename
                fs.unlink(os.path.join(self._dir, name))
                removed.append(name)
        self._hard_state = self._load_hard_state()
        self._snapshot = self._load_snapshot_meta()
        self._segments, torn, empty_last = load_segments(fs, self._dir)
        self._firsts = [seg.first_index for seg in self._segments]
        check_log_start(self._segments, self._snapshot)
        # every check passed: only now repair, so a refused start-up leaves the files as found
        if torn is not None:
            cut_file(fs, torn.file, torn.offset)
        if empty_last is not None:
            fs.unlink(empty_last)  # a roll that never wrote its first record, or a torn one
            removed.append(os.path.basename(empty_last))
        discarded = not self._log_matches_snapshot()
        if discarded:
            self._discard_log()
        if removed:
            fs.fsync_dir(self._dir)
        self.recovery_report = RecoveryReport(torn, tuple(removed), discarded)

    def _load_hard_state(self) -> HardState:
        file = os.path.join(self._dir, HARD_STATE_FILE)
        try:
            raw = read_file(file, fs=self._fs)
        except FileNotFoundError:
            return HardState(0, None)
        try:
            doc = json.loads(raw)
            term, voted_for = doc["term"], doc["voted_for"]
        except (ValueError, TypeError, KeyError) as exc:
            raise RaftLogCorruption(file, 0, f"unreadable hard state: {exc}") from None
        if not isinstance(term, int) or term < 0 or not isinstance(voted_for, str | None):
            raise RaftLogCorruption(file, 0, f"bad hard state values {doc!r}")
        return HardState(term, voted_for)

    def _read_snapshot_file(self) -> tuple[SnapshotMeta, bytes] | None:
        file = os.path.join(self._dir, SNAPSHOT_FILE)
        try:
            raw = read_file(file, fs=self._fs)
        except FileNotFoundError:
            return None
        if len(raw) < _SNAP_HDR.size:
            raise RaftLogCorruption(file, 0, "snapshot file shorter than its header")
        magic, crc, index, term = _SNAP_HDR.unpack_from(raw)
        if magic != _SNAP_MAGIC or zlib.crc32(memoryview(raw)[12:]) != crc:
            raise RaftLogCorruption(file, 0, "snapshot magic or crc mismatch")
        return SnapshotMeta(index, term), raw[_SNAP_HDR.size :]

    def _load_snapshot_meta(self) -> SnapshotMeta | None:
        loaded = self._read_snapshot_file()
        return None if loaded is None else loaded[0]

    # ----------------------------------------------------------------- queries

    @property
    def hard_state(self) -> HardState:
        return self._hard_state

    @property
    def snapshot_meta(self) -> SnapshotMeta | None:
        return self._snapshot

    @property
    def first_index(self) -> int:
        if self._snapshot is not None:
            return self._snapshot.index + 1
        return self._segments[0].first_index if self._segments else 1

    @property
    def last_index(self) -> int:
        if self._segments:
            return self._segments[-1].last_index
        return self._snapshot.index if self._snapshot is not None else 0

    def term_at(self, index: int) -> int:
        """Term of ``index``; the snapshot's index answers with the snapshot term, 0 answers 0."""
        snap = self._snapshot
        if snap is not None and index == snap.index:
            return snap.term
        if snap is None and index == 0:
            return 0
        if index < self.first_index:
            raise RaftLogCompacted(f"index {index} is compacted (first index {self.first_index})")
        if index > self.last_index:
            raise IndexError(f"index {index} is past the last index {self.last_index}")
        seg = self._segments[bisect_right(self._firsts, index) - 1]
        return seg.terms[index - seg.first_index]

    def entries(self, lo: int, hi: int, max_bytes: int | None = None) -> list[Entry]:
        """Entries ``lo <= index < hi``, cut once their data exceeds ``max_bytes``.

        At least one entry comes back when ``lo < hi``, however large, so callers always progress.
        """
        if lo < self.first_index:
            raise RaftLogCompacted(f"index {lo} is compacted (first index {self.first_index})")
        if hi > self.last_index + 1 or lo > hi:
            raise IndexError(f"range [{lo}, {hi}) outside the log ..{self.last_index}")
        out: list[Entry] = []
        budget = max_bytes
        index = lo
        while index < hi:
            seg = self._segments[bisect_right(self._firsts, index) - 1]
            stop = min(hi, seg.last_index + 1)
            if budget is not None:
                stop, budget = self._cut_by_bytes(seg, index, stop, budget, not out)
                if stop == index:
                    break
            start = seg.offset_of(index)
            raw = self._read(seg, start, seg.end_of(stop - 1) - start)
            out.extend(decode_records(raw, index, stop - index, seg.path, start))
            index = stop
        return out

    @staticmethod
    def _cut_by_bytes(
        seg: Segment, index: int, stop: int, budget: int, must_take_one: bool
    ) -> tuple[int, int]:
        pos = index
        while pos < stop:
            size = seg.end_of(pos) - seg.offset_of(pos) - HEADER_SIZE
            if size > budget and not (must_take_one and pos == index):
                break
            budget -= size
            pos += 1
        return pos, max(budget, 0)

    def all_entries(self) -> list[Entry]:
        """Every entry after the snapshot, for start-up."""
        return self.entries(self.first_index, self.last_index + 1)

    def load_snapshot(self) -> tuple[SnapshotMeta, bytes] | None:
        return self._read_snapshot_file()

    def _read(self, seg: Segment, offset: int, length: int) -> bytes:
        fs = self._fs
        if seg is self._segments[-1]:
            raw = fs.pread(self._active_fd(), length, offset)
        else:
            fd = fs.open(seg.path, os.O_RDONLY)
            try:
                raw = fs.pread(fd, length, offset)
            finally:
                fs.close(fd)
        if len(raw) != length:
            raise RaftLogCorruption(seg.path, offset, f"file shrank: read {len(raw)} of {length}")
        return raw

    # ----------------------------------------------------------------- hard state

    def save_hard_state(self, term: int, voted_for: str | None) -> None:
        """Persist term and vote durably before returning (no-op when unchanged).

        Refuses a lower term and a changed vote within one term: both would break Raft safety.
        """
        old = self._hard_state
        if term < old.term:
            raise ValueError(f"term must not go backwards: {old.term} -> {term}")
        if term == old.term and old.voted_for not in (None, voted_for):
            raise ValueError(f"term {term} already voted for {old.voted_for}, not {voted_for}")
        new = HardState(term, voted_for)
        if new == old:
            return
        payload = json.dumps({"term": term, "voted_for": voted_for}).encode()
        _write_file_atomically(self._fs, self._dir, HARD_STATE_FILE, payload)
        self._hard_state = new

    # ----------------------------------------------------------------- append / sync

    def append(self, entries: Sequence[Entry]) -> None:
        """Write contiguous entries, first dropping the log's suffix that conflicts with them.

        Leading entries the log already holds (same index and term, hence the same entry by
        Raft's Log Matching property) are skipped rather than truncated and rewritten: a rewrite
        would open a window in which durable, possibly acknowledged entries are missing on disk.
        No fsync: call ``sync`` once for a batch of appends before acknowledging them.
        """
        if not entries:
            return
        self._check_batch(entries)
        skip = 0
        last_index = self.last_index
        while skip < len(entries) and entries[skip].index <= last_index:
            if self.term_at(entries[skip].index) != entries[skip].term:
                break
            skip += 1
        if skip:
            entries = entries[skip:]
            if not entries:
                return
        if entries[0].index <= last_index:
            self._truncate_from(entries[0].index)
        i = 0
        while i < len(entries):
            j = self._write_into_last(entries, i) if self._segments else i
            if j == i:  # no segment yet, or the next record does not fit into the last one
                self._roll(entries[i].index)
            i = j

    def _check_batch(self, entries: Sequence[Entry]) -> None:
        head = entries[0].index
        snap = self._snapshot
        if snap is not None and head <= snap.index:
            raise ValueError(f"cannot append at index {head}: at or below snapshot {snap.index}")
        if head < 1:
            raise ValueError(f"log indexes start at 1, got {head}")
        if head > self.last_index + 1:
            raise ValueError(f"gap: append at index {head} after last index {self.last_index}")
        prev_term = self.term_at(head - 1)
        expected = head
        for entry in entries:
            if entry.index != expected:
                raise ValueError(f"entries not contiguous: index {entry.index}, want {expected}")
            if entry.term < prev_term:
                raise ValueError(f"term goes backwards at index {entry.index}: {entry.term}")
            if len(entry.data) > MAX_ENTRY_BYTES:
                raise ValueError(f"entry {entry.index} has {len(entry.data)} bytes, too large")
            prev_term = entry.term
            expected += 1

    def _write_into_last(self, entries: Sequence[Entry], i: int) -> int:
        """Encode and write entries[i:j] that fit into the last segment; returns j.

        An empty segment takes at least one record, however large, so a roll always progresses.
        """
        seg = self._segments[-1]
        room = self._segment_size - seg.size
        total = 0
        j = i
        while j < len(entries):
            size = HEADER_SIZE + len(entries[j].data)
            if total + size > room and (total or seg.size):
                break
            total += size
            j += 1
        if j == i:
            return i
        buf = bytearray(total)
        view = memoryview(buf)
        offsets = array("q")
        terms = array("q")
        pos = 0
        for k in range(i, j):
            entry = entries[k]
            end = pos + HEADER_SIZE + len(entry.data)
            RECORD_HEADER.pack_into(buf, pos, len(entry.data), 0, entry.index, entry.term)
            buf[pos + HEADER_SIZE : end] = entry.data
            RECORD_CRC.pack_into(buf, pos + 4, zlib.crc32(view[pos + 8 : end]))
            offsets.append(seg.size + pos)
            terms.append(entry.term)
            pos = end
        self._write_all(seg, view)
        seg.offsets.extend(offsets)
        seg.terms.extend(terms)
        seg.size += total
        self._unsynced = True
        return j

    def _write_all(self, seg: Segment, view: memoryview) -> None:
        fs = self._fs
        fd = self._active_fd()
        try:
            while view:
                view = view[fs.write(fd, view) :]
        except BaseException:
            # a half-written record followed by later appends would read as mid-log corruption
            fs.ftruncate(fd, seg.size)
            raise

    def sync(self) -> None:
        """Make every appended entry durable: fsync the last segment (and the directory)."""
        if self._unsynced and self._fd is not None:
            self._fs.fsync(self._fd)
        self._unsynced = False
        if self._dir_unsynced:
            self._fs.fsync_dir(self._dir)
            self._dir_unsynced = False

    def _active_fd(self) -> int:
        if self._fd is None:
            self._fd = self._fs.open(self._segments[-1].path, os.O_RDWR | os.O_APPEND)
        return self._fd

    def _close_fd(self) -> None:
        if self._fd is not None:
            self._fs.close(self._fd)
            self._fd = None

    def _roll(self, first_index: int) -> None:
        if self._segments:
            self._fs.fsync(self._active_fd())  # only the last segment may ever be incomplete
            self._close_fd()
            self._unsynced = False
        path = os.path.join(self._dir, f"{first_index:020d}")
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL
        self._fd = self._fs.open(path, flags, 0o644)
        self._segments.append(Segment(first_index, path))
        self._firsts.append(first_index)
        self._dir_unsynced = True

    # ----------------------------------------------------------------- truncation

    def _truncate_from(self, index: int) -> None:
        """Drop entries ``>= index``: later segments last-first, then cut the one holding index."""
        k = bisect_right(self._firsts, index) - 1
        target = self._segments[k]
        removed = False
        while len(self._segments) > k + 1:
            self._remove_last_segment()
            removed = True
        if index == target.first_index:
            self._remove_last_segment()
            removed = True
        if removed:
            self._fs.fsync_dir(self._dir)
        if index == target.first_index:
            return
        cut = target.offset_of(index)
        fd = self._active_fd()
        self._fs.ftruncate(fd, cut)
        self._fs.fsync(fd)
        keep = index - target.first_index
        del target.offsets[keep:]
        del target.terms[keep:]
        target.size = cut

    def _remove_last_segment(self) -> None:
        seg = self._segments[-1]
        self._close_fd()
        self._fs.unlink(seg.path)
        self._segments.pop()
        self._firsts.pop()
        self._unsynced = False

    # ----------------------------------------------------------------- snapshots

    def save_snapshot(self, index: int, term: int, data: bytes) -> None:
        """Store a snapshot durably; a log that does not match it is discarded afterwards."""
        snap = self._snapshot
        if index < 1:
            raise ValueError(f"snapshot index must be >= 1, got {index}")
        if snap is not None and (index < snap.index or (index == snap.index and term != snap.term)):
            raise ValueError(
                f"snapshot ({index}, {term}) older than stored ({snap.index}, {snap.term})"
            )
        crc = zlib.crc32(data, zlib.crc32(_INDEX_TERM.pack(index, term)))
        payload = _SNAP_HDR.pack(_SNAP_MAGIC, crc, index, term) + data
        _write_file_atomically(self._fs, self._dir, SNAPSHOT_FILE, payload)
        self._snapshot = SnapshotMeta(index, term)
        if not self._log_matches_snapshot():
            self._discard_log()

    def _log_matches_snapshot(self) -> bool:
        """Whether the physical log may stay next to the snapshot (Raft's InstallSnapshot rule)."""
        snap = self._snapshot
        if snap is None or not self._segments:
            return True
        first, last = self._segments[0].first_index, self._segments[-1].last_index
        if first == snap.index + 1:
            return True
        if not first <= snap.index <= last:
            return False
        seg = self._segments[bisect_right(self._firsts, snap.index) - 1]
        return seg.terms[snap.index - seg.first_index] == snap.term

    def _discard_log(self) -> None:
        while self._segments:
            self._remove_last_segment()
        self._fs.fsync_dir(self._dir)

    def compact(self, upto_index: int) -> None:
        """Delete segment files whose entries are all ``<= upto_index`` (oldest first)."""
        snap = self._snapshot
        if snap is None or upto_index > snap.index:
            raise ValueError(f"cannot compact to {upto_index}: no snapshot covers it")
        removed = False
        while self._segments and self._segments[0].last_index <= upto_index:
            if len(self._segments) == 1:
                self._close_fd()
                self._unsynced = False
            self._fs.unlink(self._segments[0].path)
            del self._segments[0]
            del self._firsts[0]
            removed = True
        if removed:
            self._fs.fsync_dir(self._dir)
