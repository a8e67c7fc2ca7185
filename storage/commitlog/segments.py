"""The CommitLog's segment files: the table of open segments and every file call on them.

``<store>/commitlog/`` holds segments named by their 20-digit zero-padded start offset (the
segment's base); every segment covers ``segment_size`` logical bytes (upstream
mappedFileSizeCommitLog), so a byte at CommitLog offset ``o`` lives in the segment at
``o - o % segment_size``, at file position ``o - base``. `SegmentFiles` owns the base -> fd
table, the flag saying a segment was created since the directory was last fsynced, and the
lock that guards both: `CommitLog.flush` reads them from a worker thread while the owning thread
appends (which may create a segment). Every other method runs on the owning thread.

It knows nothing of records, offsets in use or durability rules: the CommitLog (log.py),
its recovery (recovery.py) and its fence repair (fence.py) decide what to write, cut and
fsync, in which order; this class carries it out.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from collections.abc import Iterator, Sequence

from rocketrio.protocol.message import BLANK_MAGIC_CODE
from rocketrio.storage.durable import pwrite_all
from rocketrio.storage.fs import OS_FS, FileSystem, ReadMap, WriteData
from rocketrio.storage.record_scan import mapped

_HEAD = struct.Struct(">ii")


def segment_name(base: int) -> str:
    return f"{base:020d}"


def list_segments(path: str, fs: FileSystem = OS_FS) -> list[int]:
    """Sorted start offsets of the 20-digit segment files in ``path``."""
    try:
        names = fs.listdir(path)
    except FileNotFoundError:
        return []
    return sorted(int(n) for n in names if len(n) == 20 and n.isdigit())


class SegmentFiles:
    """The open segment files of one CommitLog directory (module docstring)."""

    def __init__(self, path: str, segment_size: int, fs: FileSystem) -> None:
        self.path = path
        self.segment_size = segment_size
        self._fs = fs
        self._fds: dict[int, int] = {}  # segment base -> fd (O_RDWR)
        self._lock = threading.Lock()
        self._dir_dirty = False  # a segment was created since the last directory fsync

    def file_of(self, base: int) -> str:
        return os.path.join(self.path, segment_name(base))

    def bases(self) -> list[int]:
        """The bases of the open segments, oldest first."""
        with self._lock:
            return sorted(self._fds)

    def has(self, base: int) -> bool:
        return base in self._fds

    # ------------------------------------------------------------------ open / close

    def open_existing(self, bases: Sequence[int]) -> None:
        """Open the segment files at ``bases`` (they exist)."""
        for b in bases:
            self._fds[b] = self._fs.open(self.file_of(b), os.O_RDWR)

    def close_all(self) -> None:
        with self._lock:
            for fd in self._fds.values():
                self._fs.close(fd)
            self._fds.clear()

    @contextlib.contextmanager
    def mapped(self, base: int) -> Iterator[ReadMap]:
        """The segment's bytes, mapped read-only for a scan."""
        with mapped(self._fs, self._fds[base]) as data:
            yield data

    # ------------------------------------------------------------------ writes

    def _create(self, base: int) -> int:
        fd = self._fs.open(self.file_of(base), os.O_RDWR | os.O_CREAT, 0o644)
        with self._lock:
            self._fds[base] = fd
            self._dir_dirty = True
        return fd

    def write(self, offset: int, data: WriteData) -> None:
        """Write ``data`` at CommitLog ``offset`` (it must not cross a segment), creating the
        segment when it is new. No fsync."""
        if data:
            base = offset - offset % self.segment_size
            fd = self._fds.get(base)
            if fd is None:
                fd = self._create(base)
            pwrite_all(self._fs, fd, data, offset - base)

    def write_blank(self, offset: int, room: int) -> None:
        """The BLANK record closing a segment at ``offset`` (``room`` bytes left in it), then
        the segment extended to its full size (sparse: nothing is written)."""
        base = offset - offset % self.segment_size
        fd = self._fds.get(base)
        if fd is None:
            fd = self._create(base)
        pwrite_all(self._fs, fd, _HEAD.pack(room, BLANK_MAGIC_CODE), offset - base)
        self._fs.ftruncate(fd, self.segment_size)

    def rewrite(self, base: int, pos: int, size: int) -> None:
        """Read ``size`` bytes at ``pos`` of the segment and write them back: their pages are
        dirty again, so the next fsync writes them (fence.py)."""
        fd = self._fds[base]
        pwrite_all(self._fs, fd, self._fs.pread(fd, size, pos), pos)

    def extend(self, base: int) -> None:
        """Extend a closed segment to its full size (sparse) when it is shorter."""
        fd = self._fds[base]
        if self._fs.fsize(fd) < self.segment_size:
            self._fs.ftruncate(fd, self.segment_size)

    # ------------------------------------------------------------------ fsync

    def take_unsynced(self, low: int, high: int) -> tuple[list[int], bool]:
        """(fds of the segments with a base in [low, high), whether the directory needs an
        fsync); the directory flag is cleared: a caller whose fsync fails gives it back
        (`give_back_dir`)."""
        with self._lock:
            fds = [fd for b, fd in self._fds.items() if low <= b < high]
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        return fds, dir_dirty

    def give_back_dir(self, dir_dirty: bool) -> None:
        with self._lock:
            self._dir_dirty = self._dir_dirty or dir_dirty

    def fds_of(self, bases: Sequence[int]) -> list[int]:
        return [self._fds[b] for b in bases]

    def sync(self, fds: Sequence[int], directory: bool) -> None:
        """fdatasync ``fds``, then the directory when ``directory``."""
        for fd in fds:
            self._fs.fdatasync(fd)
        if directory:
            self._fs.fsync_dir(self.path)

    def sync_dir(self) -> None:
        self._fs.fsync_dir(self.path)

    def mark_dir_synced(self) -> None:
        with self._lock:
            self._dir_dirty = False

    # ------------------------------------------------------------------ reads

    def read(self, offset: int, end: int) -> bytes:
        """The bytes in [offset, end) (already clipped to the log by the caller); short when a
        segment is missing or shorter than its range."""
        seg = self.segment_size
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

    def pread(self, base: int, size: int, pos: int) -> bytes:
        """``size`` bytes at ``pos`` of the open segment at ``base``."""
        return self._fs.pread(self._fds[base], size, pos)

    # ------------------------------------------------------------------ cut / delete

    def cut(self, base: int, pos: int) -> int:
        """Cut the segment at ``pos`` durably (ftruncate + fdatasync); returns the bytes cut."""
        fs = self._fs
        fd = self._fds[base]
        dropped = fs.fsize(fd) - pos
        fs.ftruncate(fd, pos)
        fs.fdatasync(fd)
        return dropped

    def delete(self, base: int) -> int:
        """Close and unlink one segment (no directory fsync); returns its size."""
        with self._lock:
            fd = self._fds.pop(base)
        fs = self._fs
        size = fs.fsize(fd)
        fs.close(fd)
        fs.unlink(self.file_of(base))
        return size

    def truncate(self, offset: int) -> None:
        """Drop every byte at and after CommitLog ``offset``, durably: the later segments are
        deleted last first, the one holding ``offset`` cut (ftruncate + fdatasync), then the
        directory fsynced."""
        base = offset - offset % self.segment_size
        with self._lock:
            later = sorted((b for b in self._fds if b > base), reverse=True)  # last first
            later_fds = [self._fds.pop(b) for b in later]
        fs = self._fs
        for b, fd in zip(later, later_fds, strict=True):
            fs.close(fd)
            fs.unlink(self.file_of(b))
        fd = self._fds.get(base)
        if fd is not None:
            fs.ftruncate(fd, offset - base)
            fs.fdatasync(fd)
        fs.fsync_dir(self.path)

    def detach_below(self, offset: int) -> list[tuple[int, int]]:
        """Take the segments lying wholly below ``offset`` out of the table, never the last
        one: (base, fd) each, for `remove`."""
        seg = self.segment_size
        with self._lock:
            bases = sorted(self._fds)
            doomed = [b for b in bases[:-1] if b + seg <= offset]
            return [(b, self._fds.pop(b)) for b in doomed]

    def detach_all(self) -> list[tuple[int, int]]:
        """Take every segment out of the table, last first: (base, fd) each, for `remove`."""
        with self._lock:
            doomed = sorted(self._fds, reverse=True)
            return [(b, self._fds.pop(b)) for b in doomed]

    def remove(self, detached: Sequence[tuple[int, int]]) -> None:
        """Close and unlink detached segments, in order (no directory fsync)."""
        for b, fd in detached:
            self._fs.close(fd)
            self._fs.unlink(self.file_of(b))
