"""The two durability primitives every storage module uses.

- `fsync_dir`: make a directory entry change (create, rename, unlink) durable.
- `write_file_atomic`: temp file in the same directory, fsync, ``os.replace``, directory fsync;
  readers and a crash see the old file or the new one, never a mix.
"""

from __future__ import annotations

import os


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_synced(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` (created or truncated) and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomic(path: str, data: bytes, *, tmp_suffix: str = ".tmp") -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = path + tmp_suffix
    write_synced(tmp, data)
    os.replace(tmp, path)
    fsync_dir(directory)
