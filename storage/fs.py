"""The one file-system interface every storage module does its file I/O through.

`FileSystem` is fd-based and mirrors the few ``os`` calls the storage code makes, so a
simulation can run the real storage code on a simulated disk (tests/sim/sim_disk.py) that
loses un-fsynced writes on a crash, tears the last write and fails an fsync when told to.
`OsFileSystem` is the production implementation and `OS_FS` its shared instance, the default
of every storage constructor's ``fs`` keyword.

Durability contract both implementations share (and the storage code relies on):
- ``pwrite`` / ``write`` / ``ftruncate`` change what reads see at once, and are durable only
  after ``fsync`` / ``fdatasync`` of an fd of that file;
- creating, renaming (``replace``) and deleting a name (``unlink``, ``rmtree``, ``makedirs``)
  are durable only after ``fsync_dir`` of the directory holding the name.

Performance: the put path calls ``pwrite`` once per batch and the pull path ``pread`` once per
read, so `OsFileSystem` binds the ``os`` functions themselves as instance attributes: a call
costs one attribute lookup more than calling ``os`` directly.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import shutil
from collections.abc import Callable
from typing import Protocol

WriteData = bytes | bytearray | memoryview
# a read-only view of a whole file: an mmap in production, a bytes snapshot in the simulation
ReadMap = mmap.mmap | bytes


class FileSystem(Protocol):
    """What storage code may do with files and directories (see module docstring)."""

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """An fd for ``path``; ``flags`` are ``os.O_*`` (RDONLY, WRONLY, RDWR, CREAT, EXCL,
        TRUNC, APPEND). Raises FileNotFoundError / FileExistsError like ``os.open``."""
        ...

    def close(self, fd: int) -> None: ...

    def pread(self, fd: int, size: int, offset: int, /) -> bytes:
        """Up to ``size`` bytes at ``offset``; short (or empty) past the end of the file."""
        ...

    def pwrite(self, fd: int, data: WriteData, offset: int, /) -> int:
        """Write at ``offset`` (a gap past the end reads as zeros); returns bytes written."""
        ...

    def write(self, fd: int, data: WriteData, /) -> int:
        """Write at the end of a file opened with O_APPEND; returns bytes written."""
        ...

    def fsync(self, fd: int, /) -> None:
        """Make the file's content durable; raises OSError (EIO) when the disk fails."""
        ...

    def fdatasync(self, fd: int, /) -> None:
        """`fsync` without metadata that reading does not need (``fsync`` where os has none)."""
        ...

    def ftruncate(self, fd: int, size: int, /) -> None:
        """Cut the file to ``size``, or grow it with zeros."""
        ...

    def fsize(self, fd: int) -> int:
        """The file's current size (st_size)."""
        ...

    def map_read(self, fd: int) -> ReadMap:
        """The whole file, read-only, for recovery scans: the caller closes an mmap."""
        ...

    def listdir(self, path: str) -> list[str]: ...

    def exists(self, path: str) -> bool: ...

    def isdir(self, path: str) -> bool: ...

    def makedirs(self, path: str, exist_ok: bool = False) -> None: ...

    def unlink(self, path: str) -> None: ...

    def replace(self, src: str, dst: str) -> None:
        """Atomic rename, replacing ``dst``."""
        ...

    def rmtree(self, path: str) -> None:
        """Delete ``path`` and everything under it; best effort: errors are ignored, like
        ``shutil.rmtree(path, ignore_errors=True)``."""
        ...

    def fsync_dir(self, path: str) -> None:
        """Make the creations, renames and deletions of names in directory ``path`` durable."""
        ...

    def flock(self, fd: int) -> None:
        """Take an exclusive advisory lock on the open file, held until ``fd`` is closed;
        BlockingIOError when another fd holds it."""
        ...


class OsFileSystem:
    """The real disk: thin wrappers, and the ``os`` functions bound as attributes."""

    close: Callable[[int], None]
    pread: Callable[[int, int, int], bytes]
    pwrite: Callable[[int, WriteData, int], int]
    write: Callable[[int, WriteData], int]
    fsync: Callable[[int], None]
    fdatasync: Callable[[int], None]
    ftruncate: Callable[[int, int], None]
    listdir: Callable[[str], list[str]]
    exists: Callable[[str], bool]
    isdir: Callable[[str], bool]
    unlink: Callable[[str], None]
    replace: Callable[[str, str], None]

    def __init__(self) -> None:
        self.close = os.close
        self.pread = os.pread
        self.pwrite = os.pwrite
        self.write = os.write
        self.fsync = os.fsync
        self.fdatasync = getattr(os, "fdatasync", os.fsync)
        self.ftruncate = os.ftruncate
        self.listdir = os.listdir
        self.exists = os.path.exists
        self.isdir = os.path.isdir
        self.unlink = os.unlink
        self.replace = os.replace

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags, mode)

    def fsize(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def map_read(self, fd: int) -> ReadMap:
        # mmap refuses an empty file; it is lazy, so a scan reads only the pages it touches
        if os.fstat(fd).st_size == 0:
            return b""
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        os.makedirs(path, exist_ok=exist_ok)

    def rmtree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def flock(self, fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


OS_FS: FileSystem = OsFileSystem()
