"""DiskView: what storage tests do to files behind the code's back, on any `FileSystem`.

Storage tests damage files (truncate, patch, append garbage), copy a store as a kill -9 leaves
it, and look at sizes and names. Written against the `FileSystem` interface, the same test runs
on the real disk (`OS_FS` under pytest's tmp_path) and on `SimFileSystem` (the ``disk`` fixture
in tests/conftest.py gives both). None of these helpers fsyncs: they model what another process
or a kill -9 leaves, not a durable write.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import attrs

from rocketrio.storage.fs import FileSystem
from tests.harness.sim_disk import SimFileSystem


@attrs.frozen
class DiskView:
    fs: FileSystem
    root: str

    @property
    def sim(self) -> SimFileSystem | None:
        return self.fs if isinstance(self.fs, SimFileSystem) else None

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def read(self, path: str) -> bytes:
        fd = self.fs.open(path, os.O_RDONLY)
        try:
            return self.fs.pread(fd, self.fs.fsize(fd), 0)
        finally:
            self.fs.close(fd)

    def write(self, path: str, data: bytes) -> None:
        """Create or replace the content of ``path``, in place: rewriting is fast on a disk
        mounted with ``discard``, freeing blocks (unlink, O_TRUNC) is not."""

        def rewrite(fd: int) -> None:
            self._put(fd, data, 0)
            self.fs.ftruncate(fd, len(data))

        self._at(path, os.O_WRONLY | os.O_CREAT, rewrite)

    def patch(self, path: str, offset: int, data: bytes) -> None:
        """Overwrite bytes of an existing file in place."""
        self._at(path, os.O_WRONLY, lambda fd: self._put(fd, data, offset))

    def append(self, path: str, data: bytes) -> None:
        self._at(path, os.O_WRONLY, lambda fd: self._put(fd, data, self.fs.fsize(fd)))

    def truncate(self, path: str, size: int) -> None:
        self._at(path, os.O_WRONLY, lambda fd: self.fs.ftruncate(fd, size))

    def size(self, path: str) -> int:
        fd = self.fs.open(path, os.O_RDONLY)
        try:
            return self.fs.fsize(fd)
        finally:
            self.fs.close(fd)

    def exists(self, path: str) -> bool:
        return self.fs.exists(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(self.fs.listdir(path))

    def unlink(self, path: str) -> None:
        self.fs.unlink(path)

    def rmtree(self, path: str) -> None:
        self.fs.rmtree(path)

    def files(self, path: str) -> list[str]:
        """Paths of the files under directory ``path``, relative to it, sorted."""
        out = []
        for name in sorted(self.fs.listdir(path)):
            full = os.path.join(path, name)
            if self.fs.isdir(full):
                out += [os.path.join(name, f) for f in self.files(full)]
            else:
                out.append(name)
        return out

    def copytree(self, src: str, dst: str) -> None:
        """Copy what reads see now, like ``shutil.copytree`` of a killed process's store."""
        self.fs.makedirs(dst, exist_ok=True)
        for name in self.fs.listdir(src):
            s, d = os.path.join(src, name), os.path.join(dst, name)
            if self.fs.isdir(s):
                self.copytree(s, d)
            else:
                self.write(d, self.read(s))

    def _at(self, path: str, flags: int, action: Callable[[int], object]) -> None:
        fd = self.fs.open(path, flags, 0o644)
        try:
            action(fd)
        finally:
            self.fs.close(fd)

    def _put(self, fd: int, data: bytes, offset: int) -> None:
        view = memoryview(data)
        while view:
            n = self.fs.pwrite(fd, view, offset)
            view = view[n:]
            offset += n
