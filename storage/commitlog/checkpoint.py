"""`OffsetCheckpoint`: one offset in a small file (offset + CRC32), rewritten in place.

The CommitLog keeps its flushed offset in one (``flushed.checkpoint``), the store its dispatch
checkpoint and the `DispatchGate` its confirmOffset. 12 bytes: a big-endian int64 offset and
the CRC32 of those 8 bytes.
"""

from __future__ import annotations

import os
import struct
import zlib
from typing import Literal

from rocketrio.storage.durable import pwrite_all, read_file
from rocketrio.storage.fs import OS_FS, FileSystem

_PHY = struct.Struct(">q")
_CKPT = struct.Struct(">qI")

CheckpointState = Literal["ok", "missing", "corrupt"]


class OffsetCheckpoint:
    """One offset in a small file (offset + CRC32), rewritten in place.

    `store` does not fsync unless asked: callers write it only after the data it describes is
    durable, so a lost update leaves an older, still true, value; and before cutting data it
    describes they lower it with ``sync=True``, so no older value can come back. A torn or
    missing file loads as None. A full disk never tears it: the first version is written under a
    temporary name and renamed into place (the only write that allocates space), later ones
    overwrite the same 12 bytes; when `store` raises, the file holds the previous version (or
    none).
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
