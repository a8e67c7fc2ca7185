"""The clean-up service: the broker task that carries out the retention policy (M1, M4).

Every ``cleanResourceInterval`` ms it gathers what `plan_clean` (clean_policy.py) needs: the
CommitLog segments and when each was closed, and the store's `dispatch_flushed` (both read in
one store-actor call, between puts), the disk usage the disk guard sampled last, the wall
clock, and the replica floor the broker computes (the lowest offset a slave still fetching
from this master has acknowledged; a forced round waits only for the SyncStateSet). It then
deletes the planned segments one store-actor call each, oldest first, pausing
``deleteCommitLogFilesInterval`` ms between two; each deletion also drops the ConsumeQueue
files and index records that only point below the new oldest data
(`MessageStore.delete_oldest_segment`), so consumers' min offsets move at once.

Deletion, truncation and flushes all run inside store-actor calls, which the actor serializes
and runs outside any off-loop read (`ReadGate.exclusive`), so they never race one another. A
deletion that cannot get its turn within ``destroyMapedFileIntervalForcibly`` ms (upstream's
wait for a mapped file's readers) gives the round up; the next round tries again.

Every key is read from the broker's config at each round, so UPDATE_BROKER_CONFIG changes take
effect at the next round. ``delete_files_manually`` is upstream's executeDeleteFilesManually
(the next 20 rounds run whatever the hour).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.store.clean_policy import (
    MANUAL_DELETE_ROUNDS,
    CleanConfig,
    CleanPlan,
    Segment,
    hour_of_day,
    plan_clean,
)
from rocketrio.actors.broker.store.disk_guard import warning_ratio
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.kernel.runtime import AskTimeout
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.storage.message_store import MessageStore


class StoreCalls(Protocol):
    async def call(
        self, fn: Callable[[MessageStore], Any], timeout: float = 30.0, *, exclusive: bool = True
    ) -> Any: ...


def clean_config(c: BrokerConfig) -> CleanConfig:
    return CleanConfig.of(
        file_reserved_hours=c.fileReservedTime,
        delete_when=c.deleteWhen,
        disk_max_used_space_ratio=c.diskMaxUsedSpaceRatio,
        disk_space_clean_forcibly_ratio=c.diskSpaceCleanForciblyRatio,
        warning_ratio=warning_ratio(c.diskSpaceWarningLevelRatio),
        clean_file_forcibly_enable=c.cleanFileForciblyEnable,
        delete_file_batch_max=c.deleteFileBatchMax,
    )


class CleanService:
    """Deletes expired CommitLog segments and what indexes them (module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        store: StoreCalls,
        *,
        usage: Callable[[], float | None],
        replica_floor: Callable[[bool], int | None],
        now_ms: Callable[[], int],
        log: Any = None,
    ) -> None:
        """``usage``: the highest used ratio of the store's disks (None: not sampled yet);
        ``replica_floor(forced)``: the lowest offset a replica still needs (None: none)."""
        self.config = config
        self.store = store
        self.usage = usage
        self.replica_floor = replica_floor
        self.now_ms = now_ms
        self.log = log or structlog.get_logger("broker").bind(actor="clean_service")
        self.manual_rounds = 0
        self.deleted_segments = 0  # every segment deleted since start
        self.last_plan = CleanPlan()
        self._held_logged: int | None = None  # the held segment last logged (once per hold)

    def delete_files_manually(self) -> None:
        """Upstream executeDeleteFilesManually: the next rounds run whatever the hour."""
        self.manual_rounds = MANUAL_DELETE_ROUNDS

    async def handle_delete_expired(self, ctx: RequestContext) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG (329, `admin deleteExpiredCommitLog`): as upstream, the
        next rounds delete expired segments whatever the hour; SUCCESS at once."""
        self.delete_files_manually()
        events.emit(self.log, events.DeleteFilesManually(rounds=self.manual_rounds))
        return ctx.cmd.make_response(ResponseCode.SUCCESS)

    async def run(self) -> None:
        while True:
            await trio.sleep(self.config.cleanResourceInterval / 1000)
            await self.round()

    async def round(self) -> CleanPlan:
        """One round: plan, then delete segment by segment; returns the plan."""
        c = self.config
        manual = self.manual_rounds > 0
        if manual:
            self.manual_rounds -= 1
        rows, durable = await self.store.call(
            lambda s: (s.retention_segments(), s.dispatch_flushed), exclusive=False
        )
        segments = [Segment(base, end, closed) for base, end, closed in rows]
        now = self.now_ms()
        safe_end = _lowest(durable, self.replica_floor(False))
        forced_safe_end = _lowest(durable, self.replica_floor(True))
        plan = plan_clean(
            segments,
            now_ms=now,
            hour=hour_of_day(now),
            usage=self.usage(),
            safe_end=safe_end,
            forced_safe_end=forced_safe_end,
            config=clean_config(c),
            manual=manual,
        )
        self.last_plan = plan
        if plan.held_at is not None and plan.held_at != self._held_logged:
            bound = forced_safe_end if plan.forced else safe_end
            events.emit(
                self.log,
                events.RetentionHeld(
                    segment_base=plan.held_at, safe_end=bound, dispatch_flushed=durable
                ),
            )
        self._held_logged = plan.held_at
        for i, base in enumerate(plan.delete):
            if i and c.deleteCommitLogFilesInterval:
                await trio.sleep(c.deleteCommitLogFilesInterval / 1000)
            try:
                deleted, min_offset = await self.store.call(
                    lambda s, b=base: (s.delete_oldest_segment(b), s.get_commitlog_min_offset()),
                    timeout=c.destroyMapedFileIntervalForcibly / 1000,
                )
            except AskTimeout:
                return plan  # readers held the store too long: try again next round
            if not deleted:
                break
            self.deleted_segments += len(deleted)
            events.emit(
                self.log,
                events.CommitLogDeleted(
                    segments=",".join(deleted),
                    min_offset=min_offset,
                    trigger=plan.trigger or "",
                    forced=plan.forced,
                ),
            )
        return plan


def _lowest(a: int, b: int | None) -> int:
    return a if b is None else min(a, b)
