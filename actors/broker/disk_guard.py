"""Disk-space protection (upstream CleanCommitLogService.isSpaceFull and the DISK_FULL running
flag): once the disk holding the CommitLog is used above ``diskSpaceWarningLevelRatio`` percent
(clamped to 35..90, as upstream clamps it), every send is refused with SERVICE_NOT_AVAILABLE and
upstream's remark, which names the usage of the CommitLog, ConsumeQueue and index disks; a
later check that finds the usage at or below the limit lets writes in again. Pulls go on.

`DiskGuard` is the pure part (fed usages, it answers `write_refusal`); the broker samples the
disk every ``cleanResourceInterval`` ms (and once before it serves) and feeds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from rocketrio.actors.broker.outcomes import Refusal
from rocketrio.protocol.codes import ResponseCode

MIN_WARNING_RATIO = 0.35
MAX_WARNING_RATIO = 0.90


@attrs.frozen
class DiskUsage:
    """Used ratios (0..1; -1 unknown) of the disks holding the CommitLog (the smallest over
    its paths, as upstream), the ConsumeQueues and the index."""

    commitlog: float
    consume_queue: float
    index: float

    def describe(self) -> str:
        """Upstream SendMessageProcessor.diskUtil's text."""
        return f"CL: {self.commitlog:5.2f} CQ: {self.consume_queue:5.2f} INDEX: {self.index:5.2f}"


def warning_ratio(percent: int) -> float:
    """diskSpaceWarningLevelRatio (percent) as the ratio upstream uses: clamped to 0.35..0.90."""
    return min(MAX_WARNING_RATIO, max(MIN_WARNING_RATIO, percent / 100.0))


class DiskGuard:
    """Whether the CommitLog's disk is full, from the last usage seen (module docstring)."""

    def __init__(self, warning_percent: int) -> None:
        self.limit = warning_ratio(warning_percent)
        self.usage: DiskUsage | None = None
        self.full = False

    def observe(self, usage: DiskUsage) -> bool | None:
        """Take a new sample; True when the disk just became full, False when it just
        recovered, None when nothing changed. An unknown usage (-1) is not full."""
        self.usage = usage
        full = usage.commitlog > self.limit
        if full == self.full:
            return None
        self.full = full
        return full

    def write_refusal(self) -> Refusal | None:
        if not self.full or self.usage is None:
            return None
        return Refusal(
            ResponseCode.SERVICE_NOT_AVAILABLE,
            "service not available now. It may be caused by one of the following reasons: "
            f"the broker's disk is full [{self.usage.describe()}], messages are put to the "
            "slave, message store has been shut down, etc.",
        )


class WriteGate(Protocol):
    def write_refusal(self) -> Refusal | None: ...


class FirstRefusal:
    """Several write gates as one: the first refusal wins (the disk before the role)."""

    def __init__(self, gates: Sequence[WriteGate]) -> None:
        self.gates = tuple(gates)

    def write_refusal(self) -> Refusal | None:
        for gate in self.gates:
            refusal = gate.write_refusal()
            if refusal is not None:
                return refusal
        return None
