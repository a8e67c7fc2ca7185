"""A broker store on a disk that fills up: the simulated disk with a settable capacity."""

from __future__ import annotations

from rocketrio.actors.broker.stats.runtime_info import DiskSpace

GiB = 1024**3


class Disk:
    """A file system of 100 GiB whose used share (whole percent) the test sets."""

    def __init__(self, used_percent: int) -> None:
        self.used_percent = used_percent

    def __call__(self, path: str) -> DiskSpace:
        free = (100 - self.used_percent) * GiB
        return DiskSpace(100 * GiB, free, free)
