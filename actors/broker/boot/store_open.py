"""Opening the broker's store at boot: the store lock, then recovery in a worker thread.

The lock (``storePathRootDir/lock``, storage/store_lock.py) refuses a second broker on the same
store, naming the first. Recovery is logged as ``commitlog_recovered`` (with progress lines on a
big store); a cut tail is also a WARN ``commitlog_truncated`` naming segment, offset and bytes
cut; damage recovery must not cut is an ERROR events.StoreCorrupt.NAME with what to do, and the
start fails (CorruptionError) with nothing changed on disk and the lock released. One exception
(store/lost_page.py): a record lost under later valid records (`LostRecord`) in controller mode
or on a classic SLAVE is moved with the rest of the log into ``<store>/quarantine`` (WARN
events.CommitlogQuarantined), the log is cut there, and the store opens again; in controller
mode the catch-up fence (storage/catch_up_fence.py) then keeps the broker from being master
until it caught up.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import trio

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.store.lost_page import Quarantine, Refuse, on_lost_record, role_mode
from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.observe import events
from rocketrio.storage.catch_up_fence import quarantine_lost_tail
from rocketrio.storage.commitlog import CorruptionError, LostRecord
from rocketrio.storage.fs import FileSystem
from rocketrio.storage.message_store import COMMITLOG_DIR, MessageStore, RecoveryReport
from rocketrio.storage.store_lock import LockOwner, StoreLock

STORE_CORRUPT_REMARK = (
    "the store is damaged where recovery must not cut (acknowledged data would be lost); nothing "
    "was changed on disk. List every problem with `rocketrio admin checkStore --store {store}`. "
    "Then rebuild this broker's store from a healthy replica (stop it, move {store} aside, start "
    "it again as a slave of its master so it copies the CommitLog) or restore {store} from a "
    "backup"
)


async def open_store(
    config: BrokerConfig,
    store: MessageStore,
    *,
    fs: FileSystem,
    run_blocking: RunBlocking,
    wall_now_ms: Callable[[], int],
    log: Any,
) -> tuple[StoreLock, RecoveryReport]:
    """Lock and recover the store. StoreLocked when another broker holds it; CorruptionError
    (after an ERROR line) when recovery found damage it must not cut. Either way nothing stays
    open."""
    started_at = datetime.fromtimestamp(wall_now_ms() / 1000, UTC)
    owner = LockOwner(os.getpid(), config.brokerName, started_at.isoformat(timespec="milliseconds"))
    lock = StoreLock.acquire(config.storePathRootDir, owner, fs=fs)
    try:
        report = await _recover(config, store, run_blocking, log)
    except BaseException:
        lock.release()
        raise
    return lock, report


async def _recover(
    config: BrokerConfig, store: MessageStore, run_blocking: RunBlocking, log: Any
) -> RecoveryReport:
    started = trio.current_time()

    def progress(phase: str, done: int, total: int) -> None:
        percent = 100 * done // total if total else 100
        events.emit(
            log,
            events.StoreRecoveryProgress(
                phase=phase, done_bytes=done, total_bytes=total, percent=percent
            ),
        )

    store.on_progress = progress
    root = config.storePathRootDir
    try:
        try:
            report = await run_blocking(store.open)
        except LostRecord as e:
            await _quarantine(config, store, e, run_blocking, log)
            report = await run_blocking(store.open)
    except CorruptionError as e:
        events.emit(
            log,
            events.StoreCorrupt(
                store=root, error=str(e), remark=STORE_CORRUPT_REMARK.format(store=root)
            ),
        )
        raise
    _log_recovery(config, store, report, round((trio.current_time() - started) * 1000), log)
    return report


async def _quarantine(
    config: BrokerConfig, store: MessageStore, e: LostRecord, run_blocking: RunBlocking, log: Any
) -> None:
    """Move the lost record's tail aside when the broker's mode allows it (lost_page.py);
    re-raise ``e`` (nothing changed) when it does not."""
    mode = role_mode(
        controller_mode=config.enableControllerMode, slave=config.brokerRole is BrokerRole.SLAVE
    )
    match on_lost_record(mode, e.offset, e.valid_after):
        case Refuse():
            raise e
        case Quarantine(fence=fence):
            root = config.storePathRootDir
            done = await run_blocking(
                lambda: quarantine_lost_tail(
                    root,
                    os.path.join(store.store_path, COMMITLOG_DIR),
                    store.config.mappedFileSizeCommitLog,
                    e.offset,
                    epoch_file_path=config.epoch_file_path if fence else None,
                    fence=fence,
                    fs=store.fs,
                )
            )
            events.emit(
                log,
                events.CommitlogQuarantined(
                    store=root,
                    offset=done.offset,
                    old_end=done.old_end,
                    dropped_bytes=done.bytes,
                    quarantine=done.path,
                    fenced=fence,
                    error=str(e),
                ),
            )


def _log_recovery(
    config: BrokerConfig, store: MessageStore, report: RecoveryReport, took_ms: int, log: Any
) -> None:
    clog = report.commitlog
    events.emit(
        log,
        events.CommitlogRecovered(
            max_offset=clog.max_offset,
            truncated_at=clog.truncated_at,
            dropped_bytes=clog.bytes_dropped,
            segment=clog.segment,
            reason=clog.reason or None,
            redispatched=report.redispatched,
            cq_entries_dropped=report.cq_entries_dropped,
            took_ms=took_ms,
            confirm_offset=report.confirm_offset,
            epochs=[f"{r.epoch}-{r.start_offset}" for r in store.epoch_records()],
            unclean_shutdown=report.unclean_shutdown,
            scanned_from=clog.scanned_from,
            bytes_scanned=clog.bytes_scanned,
            checkpoint=clog.checkpoint_state,
        ),
    )
    if clog.truncated_at is not None:
        events.emit(
            log,
            events.CommitlogTruncated(
                segment=clog.segment,
                offset=clog.truncated_at,
                dropped_bytes=clog.bytes_dropped,
                reason=clog.reason,
                deleted_segments=list(clog.deleted_segments),
            ),
        )
    if clog.checkpoint_state == "corrupt":
        events.emit(
            log,
            events.CheckpointCorrupt(
                path=os.path.join(config.storePathRootDir, "commitlog", "flushed.checkpoint"),
                remark="every CommitLog segment was checked instead",
            ),
        )
    if store.epochs is not None and store.epochs.loaded_from_backup:
        events.emit(log, events.EpochFileLoadedFromBackup(path=store.epochs.path))
