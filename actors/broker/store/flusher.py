"""The store's flushes, one at a time (the store allows a flush beside appends and reads, not
beside another flush, a truncation or a deletion: every such mutation takes `lock`).

- `commitlog`: the SYNC_FLUSH group commit, one fsync of the CommitLog for every put of a
  turn (or every replicated append of a turn on a slave); it returns how long it took, so the
  actor answers FLUSH_DISK_TIMEOUT past syncFlushTimeout;
- `full`: CommitLog, ConsumeQueues, index and the dispatch checkpoint, every
  flushIntervalCommitLog (`periodically`) and at shutdown.

Every flush runs in a worker thread (``run_blocking``); one that takes over a second is logged
(flush_slow).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.observe import events
from rocketrio.storage.message_store import MessageStore

SLOW_FLUSH_MS = 1000


class Flusher:
    def __init__(
        self,
        store: MessageStore,
        run_blocking: RunBlocking,
        log: Any,
        *,
        flush_interval_ms: int,
        sync_flush_timeout_ms: int,
    ) -> None:
        self.store = store
        self.run_blocking = run_blocking
        self.log = log
        self.lock = trio.Lock()
        self.flush_count = 0  # every flush, periodic or group commit
        self.sync_flush_count = 0  # group-commit flushes only (SYNC_FLUSH)
        self.set_limits(flush_interval_ms, sync_flush_timeout_ms)

    def set_limits(self, flush_interval_ms: int, sync_flush_timeout_ms: int) -> None:
        """The flush period (from the next periodic flush) and the sync-flush wait."""
        self.interval_s = flush_interval_ms / 1000
        self.sync_timeout_s = sync_flush_timeout_ms / 1000

    async def commitlog(self, *, group_commit: bool) -> float:
        """fsync the CommitLog now; the seconds it took (lock wait included)."""
        started = trio.current_time()
        async with self.lock:
            await self.in_thread(self.store.flush_commitlog)
            if group_commit:
                self.sync_flush_count += 1
        return trio.current_time() - started

    async def full(self) -> None:
        """Full flush now (serialized with other flushes): periodic task and shutdown."""
        async with self.lock:
            await self.in_thread(self.store.flush)

    async def periodically(self, on_error: Callable[[OSError], None]) -> None:
        """`full` every flush interval; a failure goes to ``on_error`` (which may raise)."""
        while True:
            await trio.sleep(self.interval_s)
            try:
                await self.full()
            except OSError as e:
                on_error(e)

    async def in_thread(self, flush: Callable[[], int]) -> None:
        started = trio.current_time()
        await self.run_blocking(flush)
        self.flush_count += 1
        took_ms = (trio.current_time() - started) * 1000
        if took_ms > SLOW_FLUSH_MS:
            events.emit(self.log, events.FlushSlow(duration_ms=round(took_ms)))
