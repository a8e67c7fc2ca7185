"""Retention policy: which CommitLog segments a clean-up round deletes (upstream
CleanCommitLogService.deleteExpiredFiles and MappedFileQueue.deleteExpiredFileByTime).

Pure: fed the segments, the time, the disk usage and the offset every reader still needs, it
answers a `CleanPlan`. The clean-up service (clean_service.py) gathers those inputs every
``cleanResourceInterval`` ms and carries the plan out one segment at a time.

A round runs when one of upstream's triggers holds:
- the hour of day (local time) is one of ``deleteWhen`` ("04", or "04;16" for several);
- the disk holding the CommitLog (or the ConsumeQueues) is used above ``diskMaxUsedSpaceRatio``
  percent (75; clamped to 10..95 as upstream);
- the usage is above ``diskSpaceCleanForciblyRatio`` (85, clamped to 30..85) or above the
  disk-full ratio (``diskSpaceWarningLevelRatio``): then, with ``cleanFileForciblyEnable``,
  the round is forced ("clean immediately"): segments go whatever their age;
- an operator asked for it (upstream executeDeleteFilesManually: the next 20 rounds run).

A round walks the segments oldest first and deletes each one that has expired (it was closed
more than ``fileReservedTime`` hours ago) or, in a forced round, any; it stops at the first
that may not go (upstream never deletes in the middle), at ``deleteFileBatchMax`` segments,
and always before the last (current) segment. Two bounds upstream does not have keep every
acknowledged message readable by whoever still needs it: a segment goes only when it ends at
or below ``safe_end``, the lowest of what the store has dispatched and made durable and what
every replica still fetching from this master has acknowledged (clean_service.py computes it).

A segment's age is measured from when it was closed: the store time of the first record of
the next segment (upstream uses the file's mtime, which is that moment too). Replicas hold the
same records with the same store times, so a master and its slaves expire the same segments.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal

import attrs

MANUAL_DELETE_ROUNDS = 20  # upstream MAX_MANUAL_DELETE_FILE_TIMES
HOUR_MS = 3_600_000

Trigger = Literal["time", "space", "forced", "manual"]


def parse_delete_when(text: str) -> frozenset[int]:
    """``deleteWhen`` ("04", "04;16") as hours of the day; ValueError naming the bad part."""
    hours: set[int] = set()
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or not 0 <= int(part) <= 23:
            raise ValueError(
                f"deleteWhen must be hours of the day 00..23 separated by ';' (e.g. 04;16), "
                f"got {text!r}"
            )
        hours.add(int(part))
    if not hours:
        raise ValueError(f"deleteWhen names no hour: {text!r}")
    return frozenset(hours)


def clean_forcibly_ratio(percent: int) -> float:
    """diskSpaceCleanForciblyRatio as upstream uses it: clamped to 0.30..0.85."""
    return min(0.85, max(0.30, percent / 100.0))


def max_used_ratio(percent: int) -> float:
    """diskMaxUsedSpaceRatio as upstream reads it: clamped to 10..95 percent."""
    return min(95, max(10, percent)) / 100.0


@attrs.frozen
class CleanConfig:
    """The retention keys (upstream MessageStoreConfig names and defaults)."""

    file_reserved_ms: float = 72 * HOUR_MS
    delete_when: frozenset[int] = frozenset({4})
    disk_max_used_ratio: float = 0.75
    clean_forcibly_ratio: float = 0.85
    warning_ratio: float = 0.90
    clean_file_forcibly_enable: bool = True
    delete_file_batch_max: int = 10

    @classmethod
    def of(
        cls,
        *,
        file_reserved_hours: float,
        delete_when: str,
        disk_max_used_space_ratio: int,
        disk_space_clean_forcibly_ratio: int,
        warning_ratio: float,
        clean_file_forcibly_enable: bool,
        delete_file_batch_max: int,
    ) -> CleanConfig:
        return cls(
            file_reserved_ms=file_reserved_hours * HOUR_MS,
            delete_when=parse_delete_when(delete_when),
            disk_max_used_ratio=max_used_ratio(disk_max_used_space_ratio),
            clean_forcibly_ratio=clean_forcibly_ratio(disk_space_clean_forcibly_ratio),
            warning_ratio=warning_ratio,
            clean_file_forcibly_enable=clean_file_forcibly_enable,
            delete_file_batch_max=delete_file_batch_max,
        )


@attrs.frozen
class Segment:
    """One CommitLog segment: [base, end) and when it was closed (store time, ms, of the next
    segment's first record); None for the last segment, which is still written."""

    base: int
    end: int
    closed_ms: int | None


@attrs.frozen
class CleanPlan:
    """What a round deletes: segment bases, oldest first, and why. ``held_at`` is the base of
    the first expired segment kept because a reader still needs it (None: nothing held)."""

    delete: tuple[int, ...] = ()
    trigger: Trigger | None = None
    forced: bool = False
    held_at: int | None = None


@attrs.frozen
class ReplicaLink:
    """A slave fetching from this master: its id (None before its handshake), the offset it
    acknowledged (-1: none yet) and the next offset the master sends it (-1: not fixed yet)."""

    slave_id: int | None
    ack_offset: int
    transfer_from: int


def replica_floor(
    links: Sequence[ReplicaLink], sync_state_set: frozenset[int], *, in_sync_only: bool
) -> int | None:
    """The lowest CommitLog offset a connected slave still needs (retention keeps it); with
    ``in_sync_only``, SyncStateSet members only (a forced round lets a lagging slave that is
    out of the set fall behind the oldest data: it then re-syncs from it). A slave that has
    not acknowledged anything yet holds everything (0). None: no such slave."""
    floor: int | None = None
    for link in links:
        if in_sync_only and link.slave_id not in sync_state_set:
            continue
        at = link.ack_offset if link.ack_offset >= 0 else max(link.transfer_from, 0)
        floor = at if floor is None else min(floor, at)
    return floor


def hour_of_day(now_ms: int) -> int:
    """Local hour of ``now_ms`` (upstream compares deleteWhen with Calendar's HOUR_OF_DAY)."""
    return time.localtime(now_ms / 1000).tm_hour


def plan_clean(
    segments: Sequence[Segment],
    *,
    now_ms: int,
    hour: int,
    usage: float | None,
    safe_end: int,
    config: CleanConfig,
    forced_safe_end: int | None = None,
    manual: bool = False,
) -> CleanPlan:
    """The segments one round deletes (module docstring). ``usage``: the highest used ratio of
    the CommitLog's and the ConsumeQueues' disks (None or negative: unknown, as full as can be,
    which upstream also treats as a reason to reclaim space). ``safe_end`` bounds what a round
    deletes; a forced round is bounded by ``forced_safe_end`` instead when given."""
    unknown = usage is None or usage < 0
    over_forcibly = unknown or (
        usage is not None and (usage > config.clean_forcibly_ratio or usage > config.warning_ratio)
    )
    over_max = unknown or (usage is not None and usage > config.disk_max_used_ratio)
    trigger: Trigger | None = None
    if hour in config.delete_when:
        trigger = "time"
    elif over_forcibly or over_max:
        trigger = "space"
    elif manual:
        trigger = "manual"
    if trigger is None:
        return CleanPlan()
    forced = config.clean_file_forcibly_enable and over_forcibly and not unknown
    if forced:
        trigger = "forced"
    bound = safe_end if not forced or forced_safe_end is None else forced_safe_end
    doomed: list[int] = []
    held_at: int | None = None
    for seg in segments[:-1]:  # never the last (current) segment
        if seg.closed_ms is None:
            break
        expired = now_ms >= seg.closed_ms + config.file_reserved_ms
        if not (expired or forced):
            break  # upstream: never delete in the middle
        if seg.end > bound:
            held_at = seg.base
            break
        doomed.append(seg.base)
        if len(doomed) >= config.delete_file_batch_max:
            break
    return CleanPlan(tuple(doomed), trigger, forced, held_at)
