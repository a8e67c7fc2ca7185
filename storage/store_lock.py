"""The broker store's lock: ``<storePathRootDir>/lock``, so two brokers never share one store.

Upstream's DefaultMessageStore locks the same file at start and refuses with "Lock failed, MQ
already started". Here the lock is an exclusive ``flock`` through the `FileSystem` interface
(`FileSystem.flock`): on the real disk the kernel drops it when the holder's fd closes, which
includes the process dying in any way (kill -9 too), so a stale lock file never blocks a
restart; the simulated disk models the same (a crash or process kill drops its locks). Two
brokers of one test process on distinct store directories never meet.

The file holds its owner as one JSON line (pid, brokerName, startTime): written after the lock
is taken, not fsynced (it only names the holder for the refusal message; the lock itself is
kernel state). A second broker is refused with `StoreLocked`, whose message names that owner.
"""

from __future__ import annotations

import json
import os

import attrs

from rocketrio.storage.durable import makedirs_synced, read_file
from rocketrio.storage.fs import OS_FS, FileSystem

LOCK_FILE = "lock"  # upstream StorePathConfigHelper.getLockFile


@attrs.frozen
class LockOwner:
    """Who holds a store: process id, broker name, start time (UTC ISO-8601)."""

    pid: int
    broker_name: str
    start_time: str

    def describe(self) -> str:
        return f"broker {self.broker_name} (pid {self.pid}, started {self.start_time})"

    def encode(self) -> bytes:
        data = {"pid": self.pid, "brokerName": self.broker_name, "startTime": self.start_time}
        return (json.dumps(data) + "\n").encode()

    @classmethod
    def decode(cls, raw: bytes) -> LockOwner | None:
        """The owner a lock file names, or None when it names none (empty, torn, foreign)."""
        try:
            data = json.loads(raw.decode())
            return cls(int(data["pid"]), str(data["brokerName"]), str(data["startTime"]))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            return None


class StoreLocked(Exception):
    """Another process holds the store's lock; ``holder`` is what its lock file says."""

    def __init__(self, store_path: str, holder: LockOwner | None) -> None:
        self.store_path = store_path
        self.holder = holder
        who = holder.describe() if holder else "another process (its lock file names no owner)"
        super().__init__(
            f"Lock failed, MQ already started: store {store_path} is in use by {who}; "
            "stop that broker first, or give this one another storePathRootDir"
        )


def read_owner(store_path: str, *, fs: FileSystem = OS_FS) -> LockOwner | None:
    """The owner named in ``<store_path>/lock`` (None when there is no such file or owner)."""
    try:
        return LockOwner.decode(read_file(os.path.join(store_path, LOCK_FILE), fs=fs))
    except FileNotFoundError:
        return None


class StoreLock:
    """A held store lock; `release` (or the process's death) gives it up."""

    def __init__(self, path: str, fd: int, owner: LockOwner, fs: FileSystem) -> None:
        self.path = path
        self.owner = owner
        self._fd: int | None = fd
        self._fs = fs

    @classmethod
    def acquire(cls, store_path: str, owner: LockOwner, *, fs: FileSystem = OS_FS) -> StoreLock:
        """Lock ``<store_path>/lock`` (creating the directory) and write ``owner`` into it;
        StoreLocked naming the holder when another open file holds it."""
        makedirs_synced(store_path, fs=fs)
        path = os.path.join(store_path, LOCK_FILE)
        fd = fs.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fs.flock(fd)
        except BlockingIOError:
            fs.close(fd)
            raise StoreLocked(store_path, read_owner(store_path, fs=fs)) from None
        try:
            data = owner.encode()
            fs.ftruncate(fd, 0)
            fs.pwrite(fd, data, 0)
        except BaseException:
            fs.close(fd)
            raise
        return cls(path, fd, owner, fs)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Close the fd, which drops the lock; the file stays (its content is stale)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._fs.close(fd)
