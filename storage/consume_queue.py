"""ConsumeQueue: the per topic/queue index of 20-byte entries into the CommitLog (M2).

An entry is ``long commitLogOffset | int size | long tagsCode`` (upstream CQ_STORE_UNIT_SIZE =
20); entry number i is queue offset i. Files live in ``<store>/consumequeue/<topic>/<queueId>/``,
each holding ``mapped_file_size / 20`` entries (upstream mappedFileSizeConsumeQueue, default
300,000 entries) and named by the 20-digit byte offset of their first entry. Files grow by
append. A queue may start above 0 (retention, or re-dispatch into a fresh queue): the first
file is then written from the middle and its leading hole reads as zero entries, which are
never valid (size 0), so `open` finds the first entry with a binary search.

Entries are derived data: the CommitLog is the truth and the MessageStore re-dispatches what
a crash lost. So `append` never fsyncs; `flush` fdatasyncs the files written since the last
flush, and fsyncs the directories that hold names created since (new files, and the queue's
own directories when `append` created them: the store's dispatch checkpoint vouches for
everything a flush covered, so a crash must not take back a directory either). `open` drops
a torn tail (a partial entry, or zero entries where a page never reached the disk); the store
then cuts entries at or above its dispatch checkpoint with `truncate_by_phy` and re-dispatches
them. Files are deleted from the last one backwards, so a crash in between never leaves a gap
(which `open` refuses as corruption).

A failed `append` (ENOSPC) is cut back to the entry it started at, so the files never hold a
partial entry or entries past `max_offset` while the store runs (`_undo_partial_append`).

Threading contract: like the CommitLog, `flush` may run in a worker thread while the owner
appends or reads, never together with truncation, deletion or close.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
from collections.abc import Callable
from typing import Literal

from rocketrio.storage.commitlog import CorruptionError, list_segments, segment_name
from rocketrio.storage.durable import makedirs_unsynced, pwrite_all
from rocketrio.storage.fs import OS_FS, FileSystem

CQ_STORE_UNIT_SIZE = 20
ENTRY = struct.Struct(">qiq")  # commitLogOffset, size, tagsCode

CqEntry = tuple[int, int, int]  # (commitlog offset, size, tags code)
Boundary = Literal["LOWER", "UPPER"]


class ConsumeQueue:
    """One topic/queue's entries (see module docstring)."""

    def __init__(
        self,
        root: str,
        topic: str,
        queue_id: int,
        mapped_file_size: int = 300_000 * 20,
        *,
        fs: FileSystem = OS_FS,
    ) -> None:
        if mapped_file_size < CQ_STORE_UNIT_SIZE or mapped_file_size % CQ_STORE_UNIT_SIZE:
            raise ValueError(
                f"mappedFileSizeConsumeQueue must be a positive multiple of 20, got "
                f"{mapped_file_size}"
            )
        self.topic = topic
        self.queue_id = queue_id
        self.path = os.path.join(root, topic, str(queue_id))
        self.mapped_file_size = mapped_file_size
        self.entries_per_file = mapped_file_size // CQ_STORE_UNIT_SIZE
        self._fs = fs
        self._fds: dict[int, int] = {}  # file number -> fd
        # the queue's [min, max] as plain attributes, read without a call by whoever holds the
        # queue (an ACK's offset check, once per message: pop/ack.py); written only here.
        # max_offset is the number of the next entry (upstream getMaxOffsetInQueue)
        self.min_offset = 0
        self.max_offset = 0
        self._flushed = 0
        self._dir_dirty = False
        self._new_dirs: list[str] = []  # directories holding directories append created
        self._lock = threading.Lock()  # file table and dir flag, shared with a flush thread

    def offset_range(self) -> tuple[int, int]:
        """(`min_offset`, `max_offset`) in one call."""
        return self.min_offset, self.max_offset

    # ------------------------------------------------------------------ open / close

    def open(self) -> int:
        """Load the files; drop a torn tail. Returns the number of bytes dropped."""
        numbers = [b // self.mapped_file_size for b in list_segments(self.path, self._fs)]
        if not numbers:
            return 0
        for prev, nxt in itertools.pairwise(numbers):
            if nxt != prev + 1:
                raise CorruptionError(
                    f"consume queue {self.path}: file {segment_name(nxt * self.mapped_file_size)}"
                    f" does not follow {segment_name(prev * self.mapped_file_size)}"
                )
        for num in numbers:
            self._fds[num] = self._fs.open(self._file(num), os.O_RDWR)
        dropped = self._drop_torn_tail(numbers)
        last = max(self._fds)
        size = self._fs.fsize(self._fds[last])
        self.max_offset = last * self.entries_per_file + size // CQ_STORE_UNIT_SIZE
        self.min_offset = self._first_valid(min(self._fds) * self.entries_per_file, self.max_offset)
        # what a killed process left may still be only in the page cache: sync it all once
        self._flushed = self.min_offset
        return dropped

    def _drop_torn_tail(self, numbers: list[int]) -> int:
        fs = self._fs
        dropped = 0
        full = self.mapped_file_size
        # the first file that is not full ends the queue: later files lie past a hole
        for i, num in enumerate(numbers):
            if fs.fsize(self._fds[num]) < full or i == len(numbers) - 1:
                for later in reversed(numbers[i + 1 :]):  # last first: never leave a gap
                    fd = self._fds.pop(later)
                    dropped += fs.fsize(fd)
                    fs.close(fd)
                    fs.unlink(self._file(later))
                last = num
                break
        fd = self._fds[last]
        size = fs.fsize(fd)
        keep = size - size % CQ_STORE_UNIT_SIZE
        # zero entries at the end are pages that never reached the disk
        while keep >= CQ_STORE_UNIT_SIZE:
            chunk_start = max(0, keep - 4096 * CQ_STORE_UNIT_SIZE)
            chunk = fs.pread(fd, keep - chunk_start, chunk_start)
            stripped = len(chunk.rstrip(b"\x00"))
            new_keep = chunk_start + -(-stripped // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE
            if new_keep > chunk_start or chunk_start == 0:
                keep = new_keep
                break
            keep = chunk_start
        keep = self._trim_zero_size_tail(fd, keep)
        if keep != size:
            fs.ftruncate(fd, keep)
            fs.fdatasync(fd)
            dropped += size - keep
        return dropped

    def _trim_zero_size_tail(self, fd: int, keep: int) -> int:
        # an entry whose size field is 0 is a hole even if other bytes survived
        while keep >= CQ_STORE_UNIT_SIZE:
            _, size, _ = ENTRY.unpack(
                self._fs.pread(fd, CQ_STORE_UNIT_SIZE, keep - CQ_STORE_UNIT_SIZE)
            )
            if size > 0:
                break
            keep -= CQ_STORE_UNIT_SIZE
        return keep

    def _first_valid(self, lo: int, hi: int) -> int:
        """First entry index in [lo, hi) with a non-zero size (holes only lead the queue)."""
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.entry(mid, check_range=False)
            if entry is not None and entry[1] > 0:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def close(self) -> None:
        self.flush()
        self.close_files()

    def close_files(self) -> None:
        """Close without flushing (after a flush, or when giving up)."""
        for fd in self._fds.values():
            self._fs.close(fd)
        self._fds.clear()

    def destroy(self) -> None:
        """Close and delete every file of this queue."""
        for fd in self._fds.values():
            self._fs.close(fd)
        self._fds.clear()
        self._fs.rmtree(self.path)
        self.min_offset = self.max_offset = self._flushed = 0

    # ------------------------------------------------------------------ writes

    def append(self, entries: bytes, first_queue_offset: int) -> None:
        """Append packed entries (``ENTRY`` records) numbered from ``first_queue_offset``.

        An empty queue accepts any start; otherwise the first number must be max_offset, so a
        dispatch gap or replay is an error instead of a silently shifted queue.
        """
        count = len(entries) // CQ_STORE_UNIT_SIZE
        if count == 0:
            return
        if first_queue_offset != self.max_offset:
            if self.max_offset != self.min_offset:
                raise CorruptionError(
                    f"consume queue {self.topic}:{self.queue_id} expects entry {self.max_offset}, "
                    f"dispatch brought {first_queue_offset}"
                )
            self._restart_at(first_queue_offset)
        view = memoryview(entries)
        idx = first_queue_offset
        done = 0
        epf = self.entries_per_file
        try:
            while done < count:
                num, slot = divmod(idx, epf)
                n = min(count - done, epf - slot)
                chunk = view[done * CQ_STORE_UNIT_SIZE : (done + n) * CQ_STORE_UNIT_SIZE]
                pwrite_all(self._fs, self._fd_for_write(num), chunk, slot * CQ_STORE_UNIT_SIZE)
                done += n
                idx += n
        except BaseException:
            self._undo_partial_append(first_queue_offset)
            raise
        self.max_offset = idx

    def _undo_partial_append(self, index: int) -> None:
        """Cut what a failed `append` wrote from entry ``index`` on (files it created go, last
        first), so the files end where `max_offset` says. No fsync: entries are derived data
        and the store re-dispatches what a crash finds missing."""
        num, slot = divmod(index, self.entries_per_file)
        fs = self._fs
        for later in sorted((n for n in self._fds if n > num), reverse=True):
            with self._lock:
                fd = self._fds.pop(later)
            fs.close(fd)
            fs.unlink(self._file(later))
        fd = self._fds.get(num)
        if fd is not None and fs.fsize(fd) > slot * CQ_STORE_UNIT_SIZE:
            fs.ftruncate(fd, slot * CQ_STORE_UNIT_SIZE)

    def _restart_at(self, offset: int) -> None:
        for num in list(self._fds):
            self._fs.close(self._fds.pop(num))
            self._fs.unlink(self._file(num))
        self.min_offset = self.max_offset = self._flushed = offset

    def _fd_for_write(self, num: int) -> int:
        fd = self._fds.get(num)
        if fd is None:
            new_dirs = makedirs_unsynced(self.path, fs=self._fs)
            fd = self._fs.open(self._file(num), os.O_RDWR | os.O_CREAT, 0o644)
            with self._lock:
                self._fds[num] = fd
                self._dir_dirty = True
                self._new_dirs += new_dirs
        return fd

    def flush(self) -> None:
        with self._lock:
            target = self.max_offset
            lo_num = self._flushed // self.entries_per_file
            hi_num = (target - 1) // self.entries_per_file
            fds = [fd for num, fd in self._fds.items() if lo_num <= num <= hi_num]
            dir_dirty, self._dir_dirty = self._dir_dirty, False
            new_dirs, self._new_dirs = self._new_dirs, []
        try:
            for fd in fds if target > self._flushed else ():
                self._fs.fdatasync(fd)
            for directory in new_dirs:
                self._fs.fsync_dir(directory)
            if dir_dirty:
                self._fs.fsync_dir(self.path)
        except BaseException:
            with self._lock:
                self._dir_dirty = self._dir_dirty or dir_dirty
                self._new_dirs[:0] = new_dirs
            raise
        self._flushed = max(self._flushed, target)

    # ------------------------------------------------------------------ reads

    def _file(self, num: int) -> str:
        return os.path.join(self.path, segment_name(num * self.mapped_file_size))

    def read_raw(self, index: int, max_count: int) -> bytes:
        """Packed entries from ``index`` (at most ``max_count``), clipped to the valid range."""
        index = max(index, self.min_offset)
        end = min(self.max_offset, index + max_count)
        parts = []
        epf = self.entries_per_file
        while index < end:
            num, slot = divmod(index, epf)
            n = min(end - index, epf - slot)
            fd = self._fds.get(num)
            if fd is None:
                break
            parts.append(self._fs.pread(fd, n * CQ_STORE_UNIT_SIZE, slot * CQ_STORE_UNIT_SIZE))
            index += n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def get(self, index: int, max_count: int) -> list[CqEntry]:
        """Entries from ``index`` as (commitlog offset, size, tags code) tuples."""
        return list(ENTRY.iter_unpack(self.read_raw(index, max_count)))

    def entry(self, index: int, *, check_range: bool = True) -> CqEntry | None:
        if check_range and not self.min_offset <= index < self.max_offset:
            return None
        num, slot = divmod(index, self.entries_per_file)
        fd = self._fds.get(num)
        if fd is None:
            return None
        raw = self._fs.pread(fd, CQ_STORE_UNIT_SIZE, slot * CQ_STORE_UNIT_SIZE)
        return ENTRY.unpack(raw) if len(raw) == CQ_STORE_UNIT_SIZE else None

    def last_entry(self) -> CqEntry | None:
        return self.entry(self.max_offset - 1) if self.max_offset > self.min_offset else None

    # ------------------------------------------------------------------ truncation / retention

    def _first_at_or_above(self, phy_offset: int) -> int:
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.entry(mid)
            # a zero entry past the start is a hole left by a crash: it cuts like the tail
            if entry is None or entry[1] == 0 or entry[0] >= phy_offset:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def truncate_by_phy(self, phy_offset: int) -> int:
        """Drop the entries pointing at or above ``phy_offset``; returns how many."""
        cut = self._first_at_or_above(phy_offset)
        dropped = self.max_offset - cut
        if dropped == 0:
            return 0
        num, slot = divmod(cut, self.entries_per_file)
        fs = self._fs
        for later in sorted((n for n in self._fds if n > num), reverse=True):  # no gap
            fs.close(self._fds.pop(later))
            fs.unlink(self._file(later))
        fd = self._fds.get(num)
        if fd is not None:
            fs.ftruncate(fd, slot * CQ_STORE_UNIT_SIZE)
            fs.fdatasync(fd)
        self.max_offset = cut
        self._flushed = min(self._flushed, cut)
        return dropped

    def correct_min_offset(self, commitlog_min: int) -> None:
        """Skip entries whose messages were deleted from the CommitLog (retention)."""
        self.min_offset = self._first_at_or_above(commitlog_min)

    def delete_files_below_phy(self, commitlog_min: int) -> int:
        """Delete files whose every entry points below ``commitlog_min`` (never the last)."""
        deleted = 0
        for num in sorted(self._fds)[:-1]:
            last_index = (num + 1) * self.entries_per_file - 1
            entry = self.entry(last_index, check_range=False)
            if entry is None or entry[0] + entry[1] > commitlog_min:
                break
            self._fs.close(self._fds.pop(num))
            self._fs.unlink(self._file(num))
            deleted += 1
        if deleted:
            self.min_offset = max(self.min_offset, min(self._fds) * self.entries_per_file)
        self.correct_min_offset(commitlog_min)
        return deleted

    # ------------------------------------------------------------------ time lookup

    def search_by_timestamp(
        self,
        timestamp_ms: int,
        store_timestamp_of: Callable[[int, int], int | None],
        boundary: Boundary = "LOWER",
    ) -> int:
        """Queue offset for a store time, by binary search over the entries.

        ``store_timestamp_of(commitlog offset, size)`` reads the message's store time (None if
        gone). LOWER: the first entry stored at or after the time (max_offset if none); UPPER:
        the last entry stored at or before it (min_offset if none).
        """
        lo, hi = self.min_offset, self.max_offset
        if boundary == "LOWER":
            while lo < hi:
                mid = (lo + hi) // 2
                if self._ts(mid, store_timestamp_of) >= timestamp_ms:
                    hi = mid
                else:
                    lo = mid + 1
            return lo
        while lo < hi:
            mid = (lo + hi) // 2
            if self._ts(mid, store_timestamp_of) > timestamp_ms:
                hi = mid
            else:
                lo = mid + 1
        return max(lo - 1, self.min_offset)

    def _ts(self, index: int, store_timestamp_of: Callable[[int, int], int | None]) -> int:
        entry = self.entry(index)
        ts = store_timestamp_of(entry[0], entry[1]) if entry else None
        # a vanished message sorts first: it is older than anything still stored
        return -1 if ts is None else ts
