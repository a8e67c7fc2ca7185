"""Events of the broker's message store: CommitLog recovery and corruption, disk space, retention
(the clean service), flushes, and what the store actor acknowledged or refused.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("checkpoint_corrupt", "warning")
@attrs.frozen(kw_only=True)
class CheckpointCorrupt(LogEvent):
    """Checkpoint corrupt: a checkpoint failed its CRC; full scan done."""

    path: str
    remark: str


@event("commitlog_record_corrupt", "error")
@attrs.frozen(kw_only=True)
class CommitlogRecordCorrupt(LogEvent):
    """A record failed its check on the read path and was not served."""

    segment: str
    offset: int
    reason: str
    topic: str
    queue_id: int
    queue_offset: int
    group: str


@event("commitlog_recovered")
@attrs.frozen(kw_only=True)
class CommitlogRecovered(LogEvent):
    """Commitlog recovered."""

    max_offset: int
    dropped_bytes: int
    redispatched: int
    cq_entries_dropped: int
    took_ms: int
    confirm_offset: int
    epochs: list[str]
    unclean_shutdown: bool
    scanned_from: int
    bytes_scanned: int
    checkpoint: str
    truncated_at: int | None = None
    segment: str | None = None
    reason: str | None = None


@event("disk_full", "error")
@attrs.frozen(kw_only=True)
class DiskFull(LogEvent):
    """The CommitLog's disk is used above diskSpaceWarningLevelRatio, or (``reason`` set) a
    store write or fsync failed on a full disk (ENOSPC): sends are refused until it is not
    (``disk_usage``: upstream's "CL: .. CQ: .. INDEX: .." ratios)."""

    disk_usage: str
    warning_ratio: float
    reason: str | None = None


@event("store_fenced_until_restart", "critical")
@attrs.frozen(kw_only=True)
class StoreFencedUntilRestart(LogEvent):
    """A master's CommitLog holds a record from ``offset`` that a failed fsync on a full disk
    lost with its page (its check failed when it was read back): its slaves may hold those
    bytes, so the master takes no writes until it restarts (store_actor.py)."""

    offset: int
    reason: str


@event("store_recovery_progress")
@attrs.frozen(kw_only=True)
class StoreRecoveryProgress(LogEvent):
    """Recovery is still running (logged every 64 MiB of CommitLog it re-dispatches into the
    ConsumeQueues and the index, e.g. when the index is rebuilt): ``done_bytes`` of
    ``total_bytes``, ``phase`` names the step."""

    phase: str
    done_bytes: int
    total_bytes: int
    percent: int


@event("commitlog_deleted")
@attrs.frozen(kw_only=True)
class CommitLogDeleted(LogEvent):
    """Retention deleted CommitLog segments (and the ConsumeQueue files and index records that
    only pointed into them); ``min_offset`` is the new oldest CommitLog offset. ``trigger``:
    time (deleteWhen), space (diskMaxUsedSpaceRatio), forced (diskSpaceCleanForciblyRatio) or
    manual."""

    segments: str
    min_offset: int
    trigger: str
    forced: bool


@event("delete_files_manually", "warning")
@attrs.frozen(kw_only=True)
class DeleteFilesManually(LogEvent):
    """An operator asked for retention now (`admin deleteExpiredCommitLog`): the next
    ``rounds`` clean-up rounds delete expired segments whatever deleteWhen says."""

    rounds: int


@event("retention_held", "warning")
@attrs.frozen(kw_only=True)
class RetentionHeld(LogEvent):
    """An expired segment is kept because a reader still needs it: the store has not made its
    ConsumeQueue entries durable yet, or a replica fetching from this master has not
    acknowledged it (``safe_end``: the offset deletion may not pass). Logged once per hold."""

    segment_base: int
    safe_end: int
    dispatch_flushed: int


@event("store_scrub_damage", "error")
@attrs.frozen(kw_only=True)
class StoreScrubDamage(LogEvent):
    """The background scrub found a damaged CommitLog record below the checkpoint (segment
    file, offset, reason); reads of it are refused from then on, nothing is deleted. Logged
    once per record."""

    segment: str
    offset: int
    reason: str


@event("disk_space_recovered")
@attrs.frozen(kw_only=True)
class DiskSpaceRecovered(LogEvent):
    """The CommitLog's disk is back at or below diskSpaceWarningLevelRatio: sends go in again."""

    disk_usage: str
    warning_ratio: float


@event("consume_queue_rebuilt")
@attrs.frozen(kw_only=True)
class ConsumeQueueRebuilt(LogEvent):
    """Consume queue rebuilt."""


@event("epoch_file_loaded_from_backup", "warning")
@attrs.frozen(kw_only=True)
class EpochFileLoadedFromBackup(LogEvent):
    """Epoch file loaded from backup."""

    path: str


@event("flush_slow", "warning")
@attrs.frozen(kw_only=True)
class FlushSlow(LogEvent):
    """Flush slow."""

    duration_ms: int


@event("put_failed", "error")
@attrs.frozen(kw_only=True)
class PutFailed(LogEvent):
    """Put failed."""

    topic: str


@event("send_acked")
@attrs.frozen(kw_only=True)
class SendAcked(LogEvent):
    """Send acked: topic, queue_id, offset, count."""

    topic: str
    queue_id: int
    offset: int
    commitlog_offset: int
    count: int


@event("send_not_acked", "warning")
@attrs.frozen(kw_only=True)
class SendNotAcked(LogEvent):
    """Send not acked: reason, count."""

    reason: str
    count: int
    epoch: int


@event("store_corrupt", "error")
@attrs.frozen(kw_only=True)
class StoreCorrupt(LogEvent):
    """Store corrupt: recovery found damage it must not cut; start refused."""

    store: Json
    error: str
    remark: str


@event("truncating_below_confirm_offset", "error")
@attrs.frozen(kw_only=True)
class TruncatingBelowConfirmOffset(LogEvent):
    """Truncating below confirm offset."""

    offset: int
    confirm_offset: int
    reason: str


@event("commitlog_quarantined", "warning")
@attrs.frozen(kw_only=True)
class CommitlogQuarantined(LogEvent):
    """A replica's recovery moved the CommitLog from a record lost under valid records to its end
    into a quarantine file (kept, never deleted by the broker) and cut the log there."""

    store: str
    offset: int
    old_end: int
    dropped_bytes: int
    quarantine: str
    fenced: bool
    error: str
