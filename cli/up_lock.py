"""The cluster-directory lock of `rocketrio up`: one `up` per ``--dir``.

``<dir>/up.lock`` is held with ``fcntl.flock`` for the whole life of `up`; the kernel releases it
when the process dies, kill -9 included, so a stale file never blocks a restart. While holding it,
`up` writes who it is (pid, start time, mode, ports, command line) into the file, so a second `up`
on the same directory can refuse with one line naming the running one. The second one only opens
the file to try the lock: it writes nothing, so the running cluster is left untouched.

The file is never deleted (unlinking a flock'd file lets two processes hold "the" lock on two
different inodes); its content is only read while someone holds the lock. The descriptor is not
inherited by the children (Python opens files close-on-exec), so a child that outlives `up` cannot
keep the directory locked.
"""

from __future__ import annotations

import fcntl
import json
import os
from typing import Any

import attrs

LOCK_FILE = "up.lock"


@attrs.frozen
class LockInfo:
    pid: int
    started_at: str  # UTC ISO-8601
    mode: str
    ports: dict[str, int]  # "<process> <key>" -> port
    command: str

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> LockInfo | None:
        try:
            d: Any = json.loads(text)
            return cls(
                int(d["pid"]), str(d["started_at"]), str(d["mode"]), dict(d["ports"]), d["command"]
            )
        except (ValueError, KeyError, TypeError):
            return None


class ClusterBusy(Exception):
    """Another `up` holds the directory."""

    def __init__(self, base_dir: str, holder: LockInfo | None) -> None:
        self.base_dir, self.holder = base_dir, holder
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = self.base_dir
        h = self.holder
        if h is None:
            return (
                f"{where} is in use by another rocketrio up (it has not written its details to "
                f"{os.path.join(where, LOCK_FILE)} yet); stop it first or choose another --dir"
            )
        return (
            f"{where} is in use by rocketrio up pid {h.pid} (mode {h.mode}, running since "
            f"{h.started_at}: {h.command}); stop it first (Ctrl-C in its terminal, or "
            f"kill -TERM {h.pid}) or choose another --dir"
        )


class ClusterLock:
    """A held lock; `release` (or process death) frees it."""

    def __init__(self, fd: int, path: str) -> None:
        self.fd, self.path = fd, path

    def publish(self, info: LockInfo) -> None:
        """Write the holder's details into the lock file (only ever done while holding it)."""
        data = info.to_json().encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        if self.fd >= 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = -1


def acquire(base_dir: str) -> ClusterLock:
    """Take ``<base_dir>/up.lock`` without waiting; `ClusterBusy` names the holder if taken."""
    path = os.path.join(base_dir, LOCK_FILE)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(fd, 64 * 1024, 0).decode("utf-8", "replace")
        os.close(fd)
        raise ClusterBusy(base_dir, LockInfo.from_json(text)) from None
    except BaseException:
        os.close(fd)
        raise
    return ClusterLock(fd, path)
