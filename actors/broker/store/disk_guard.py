"""Disk-space protection (upstream CleanCommitLogService.isSpaceFull and the DISK_FULL running
flag): once the disk holding the CommitLog is used above ``diskSpaceWarningLevelRatio`` percent
(clamped to 35..90, as upstream clamps it), every send is refused with SERVICE_NOT_AVAILABLE and
upstream's remark, which names the usage of the CommitLog, ConsumeQueue and index disks; a
later check that finds the usage at or below the limit lets writes in again. Pulls go on.

The same refusal follows a write the disk really refused: when the store actor reports that a
write or fsync failed with ENOSPC (store_actor.py, `store_failed`), sends are refused with the
same code and remark (the cause joins the usage in the brackets), whatever the ratio says, until
the store reports that its probe wrote again; the ratio must then allow writes too.

`DiskGuard` is the pure part (fed usages and store reports, it answers `write_refusal`); the
broker samples the disk every ``cleanResourceInterval`` ms (and once before it serves) and
feeds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.store.disk_faults import refusal_remark
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
        self.above_limit = False
        self.store_fault: str | None = None  # why the store refuses writes (None: it does not)

    @property
    def full(self) -> bool:
        return self.above_limit or self.store_fault is not None

    def observe(self, usage: DiskUsage) -> bool | None:
        """Take a new sample; True when the disk just became full, False when it just
        recovered, None when nothing changed. An unknown usage (-1) is not full."""
        was = self.full
        self.usage = usage
        self.above_limit = usage.commitlog > self.limit
        return None if self.full == was else self.full

    def store_failed(self, cause: str | None) -> bool | None:
        """The store refuses writes because ``cause`` (None: it takes them again); the same
        transitions as `observe`."""
        was = self.full
        self.store_fault = cause
        return None if self.full == was else self.full

    def describe(self) -> str:
        usage = self.usage.describe() if self.usage is not None else "usage not sampled yet"
        return usage if self.store_fault is None else f"{usage}; {self.store_fault}"

    def write_refusal(self) -> Refusal | None:
        # `full` inline: this runs for every send
        if not self.above_limit and self.store_fault is None:
            return None
        return Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, refusal_remark(self.describe()))


class WriteGate(Protocol):
    def write_refusal(self) -> Refusal | None: ...


def first_refusal(gates: Sequence[WriteGate]) -> WriteGate:
    """One gate over several (the one gate itself when there is only one)."""
    return gates[0] if len(gates) == 1 else FirstRefusal(gates)


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
