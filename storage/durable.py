"""The durability primitives every storage module uses, on a `FileSystem` (storage/fs.py).

- `fsync_dir`: make a directory entry change (create, rename, unlink) durable.
- `write_synced`: write a whole file and fsync it.
- `write_file_atomic`: temp file in the same directory, fsync, ``replace``, directory fsync
  (creating the directory with `makedirs_synced`); readers and a crash see the old file or
  the new one, never a mix.
- `makedirs_synced`: ``makedirs(exist_ok=True)`` whose directories survive a crash: the parent
  of each directory of the path is fsynced, also when the directory exists (a kill -9 during a
  store's first open may have left it in the page cache only; a store's open is the place to
  make it durable, and an fsync of a clean directory costs next to nothing).
  ``sync_existing=False`` fsyncs only the parents of the directories it creates (for a
  directory its owner already made durable at open). A new file's directory fsync makes the
  file's name durable only if the directory's own name is durable.
  `makedirs_unsynced` creates them and returns the parents to fsync, for a caller that fsyncs
  them later, before it claims anything under them is durable.
- `read_file`: a whole file's bytes (FileNotFoundError when it does not exist).
- `pwrite_all`: ``pwrite`` until every byte is written (a short write happens near a full disk).
"""

from __future__ import annotations

import os

from rocketrio.storage.fs import OS_FS, FileSystem, WriteData


def fsync_dir(path: str, *, fs: FileSystem = OS_FS) -> None:
    fs.fsync_dir(path)


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


def read_file(path: str, *, fs: FileSystem = OS_FS) -> bytes:
    fd = fs.open(path, os.O_RDONLY)
    try:
        size = fs.fsize(fd)
        parts: list[bytes] = []
        pos = 0
        while pos < size:  # one pread nearly always; a huge file may come back in pieces
            chunk = fs.pread(fd, size - pos, pos)
            if not chunk:
                break
            parts.append(chunk)
            pos += len(chunk)
        return b"".join(parts)
    finally:
        fs.close(fd)


def makedirs_unsynced(path: str, *, fs: FileSystem = OS_FS) -> list[str]:
    """Create ``path`` and its missing parents; returns the directories holding the new
    entries (outermost first), which need an fsync; empty when nothing was created."""
    missing: list[str] = []
    p = os.path.abspath(path)
    while not fs.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    if not missing:
        return []
    fs.makedirs(path, exist_ok=True)
    return [os.path.dirname(d) for d in reversed(missing)]


def makedirs_synced(path: str, *, fs: FileSystem = OS_FS, sync_existing: bool = True) -> None:
    """``makedirs(path, exist_ok=True)``; then a crash cannot take back ``path`` or any of its
    parents (module docstring: ``sync_existing``)."""
    created = makedirs_unsynced(path, fs=fs)
    if not sync_existing:
        for parent in created:
            fs.fsync_dir(parent)
        return
    for parent in _ancestors(os.path.abspath(path)):
        fs.fsync_dir(parent)


def _ancestors(path: str) -> list[str]:
    """Every directory holding a component of ``path``, outermost first ("/" included)."""
    out: list[str] = []
    p = path
    while True:
        parent = os.path.dirname(p)
        if parent == p:
            break
        out.append(parent)
        p = parent
    return list(reversed(out))


def write_synced(path: str, data: bytes, *, fs: FileSystem = OS_FS) -> None:
    """Write ``data`` to ``path`` (created or truncated) and fsync it."""
    fd = fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        pos = 0
        while pos < len(view):
            pos += fs.pwrite(fd, view[pos:], pos)
        fs.fsync(fd)
    finally:
        fs.close(fd)


def write_file_atomic(
    path: str, data: bytes, *, tmp_suffix: str = ".tmp", fs: FileSystem = OS_FS
) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    makedirs_synced(directory, fs=fs, sync_existing=False)  # its owner made it durable at open
    tmp = path + tmp_suffix
    write_synced(tmp, data, fs=fs)
    fs.replace(tmp, path)
    fs.fsync_dir(directory)
