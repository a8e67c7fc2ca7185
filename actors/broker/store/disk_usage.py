"""The store's disks: how full they are, sampled for the disk guard (disk_guard.py).

`DiskMonitor.sample` reads the used ratio of the disks holding the CommitLog, the
ConsumeQueues and the index (statvfs, or an injected function in tests) every
cleanResourceInterval and once before the broker serves, feeds the guard and logs a change
(disk_full / disk_space_recovered). `store_write_fault` is the store actor's listener: a write
or fsync the disk refused makes the guard refuse sends the same way, until the store's probe
writes again. `store_usage` is what the clean-up service reads (the fuller of the CommitLog's
and the ConsumeQueues' disks).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import attrs

from rocketrio.actors.broker.store.disk_guard import DiskGuard, DiskUsage
from rocketrio.actors.observe import events
from rocketrio.storage.index_file import INDEX_DIR
from rocketrio.storage.message_store import COMMITLOG_DIR, CONSUME_QUEUE_DIR


@attrs.frozen
class DiskSpace:
    """A file system's size in bytes (java.io.File getTotalSpace / getFreeSpace /
    getUsableSpace)."""

    total: int
    free: int
    usable: int


def disk_space(path: str) -> DiskSpace | None:
    """The space of the file system holding ``path``; None when the path does not exist."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return DiskSpace(st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize, st.f_bavail * st.f_frsize)


def used_ratio(space: DiskSpace | None) -> float:
    """upstream UtilAll.getDiskPartitionSpaceUsedPercent: used / (used + usable), rounded up
    to whole percent; -1 when unknown."""
    if space is None or space.total <= 0:
        return -1.0
    used = space.total - space.free
    entire = used + space.usable
    if entire <= 0:
        return -1.0
    result = used * 100 // entire + (1 if used * 100 % entire else 0)
    return result / 100.0


class DiskMonitor:
    """Feeds the disk guard from the store's disks and the store actor's write faults."""

    def __init__(
        self,
        store_root: str,
        guard: DiskGuard,
        *,
        disk: Callable[[str], DiskSpace | None] = disk_space,
        log: Any,
    ) -> None:
        self.root = store_root
        self.guard = guard
        self.disk = disk
        self.log = log

    def sample(self) -> None:
        """Sample the store's disks for the disk guard; log a change."""
        usage = DiskUsage(
            commitlog=used_ratio(self.disk(os.path.join(self.root, COMMITLOG_DIR))),
            consume_queue=used_ratio(self.disk(os.path.join(self.root, CONSUME_QUEUE_DIR))),
            index=used_ratio(self.disk(os.path.join(self.root, INDEX_DIR))),
        )
        changed = self.guard.observe(usage)
        if changed is not None:
            record = events.DiskFull if changed else events.DiskSpaceRecovered
            events.emit(
                self.log, record(disk_usage=usage.describe(), warning_ratio=self.guard.limit)
            )

    def store_usage(self) -> float | None:
        """The fuller of the CommitLog's and the ConsumeQueues' disks, as last sampled."""
        usage = self.guard.usage
        if usage is None:
            return None
        if usage.commitlog < 0 or usage.consume_queue < 0:
            return -1.0
        return max(usage.commitlog, usage.consume_queue)

    def store_write_fault(self, cause: str | None) -> None:
        """The store actor refuses writes because a write or fsync failed on a full disk
        (None: its probe wrote again): the disk guard refuses sends the same way."""
        changed = self.guard.store_failed(cause)
        if changed is None:
            return
        usage = self.guard.usage
        described = usage.describe() if usage is not None else ""
        limit = self.guard.limit
        if changed:
            ev: events.LogEvent = events.DiskFull(
                disk_usage=described, warning_ratio=limit, reason=cause
            )
        else:
            ev = events.DiskSpaceRecovered(disk_usage=described, warning_ratio=limit)
        events.emit(self.log, ev)
