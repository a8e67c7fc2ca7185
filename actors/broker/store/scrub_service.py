"""The background scrub: the broker task that verifies CommitLog records below the checkpoint
at a bounded rate, so damage there is found before a reader asks for it (issue 26).

The policy is storage/scrub.py's (`ScrubCursor`): which range next, what a chunk's check
finds, where to resume. This shell only runs it. Each chunk (at most ``SCRUB_CHUNK_BYTES``, or
one bigger record) is read and checked in a worker thread behind the `ReadGate`, the same gate
big pulls use: a deletion, truncation or role change (``ReadGate.exclusive``) waits for at most
one chunk, and the bounds are read in that same thread, so a chunk never reads a segment that
retention removed meanwhile. After each chunk the task sleeps ``verified / scrubBytesPerSecond``
seconds (the rate budget: the bytes a lap verifies take at least that long; a chunk also reads
the head of the record its end cuts, which the next chunk reads again, so reads exceed the
budget by at most one record per chunk, under 1% with 1 MiB chunks and KiB records, and a
record bigger than a chunk is read whole at once); with nothing below the checkpoint, or
``scrubBytesPerSecond`` = 0 (off), it looks again every ``IDLE_S``. A lap starts at most once
per ``scrubLapIntervalSeconds`` (default an hour; 0: laps back to back): a lap that ended early
waits out the rest of the interval. The keys are read before every chunk, so
UPDATE_BROKER_CONFIG changes them live.

A finding is logged once per record as ``store_scrub_damage`` (segment, offset, reason),
counted in the runtime-info key ``scrubDamageFound`` (records found since start), and handed to
the read check (`StoreView.distrust`): every later read of that record runs the pull path's
check and is refused (``commitlog_record_corrupt``), as if the pull had found it. No data is
deleted.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.observe import events
from rocketrio.storage.commitlog import segment_name
from rocketrio.storage.scrub import (
    ChunkResult,
    LapWait,
    ScrubBounds,
    ScrubCursor,
    ScrubRange,
    pause_s,
    verify_chunk,
)

T = TypeVar("T")
SCRUB_CHUNK_BYTES = 1024 * 1024
IDLE_S = 10.0


class ScrubView(Protocol):
    """What the scrub reads (`StoreView`)."""

    def scrub_bounds(self) -> ScrubBounds: ...

    def read_commitlog(self, offset: int, size: int) -> bytes: ...

    def distrust(self, offset: int) -> None: ...


class OffLoop(Protocol):
    """Runs a read in a worker thread, never beside an exclusive store mutation (`ReadGate`)."""

    def read(self, fn: Callable[[], T]) -> Awaitable[T]: ...


class ScrubService:
    """Verifies the CommitLog below the checkpoint, chunk by chunk (module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        view: ScrubView,
        gate: OffLoop,
        commitlog_dir: str,
        *,
        chunk_bytes: int = SCRUB_CHUNK_BYTES,
        log: Any = None,
    ) -> None:
        self.config = config
        self.view = view
        self.gate = gate
        self.commitlog_dir = commitlog_dir
        self.cursor = ScrubCursor(chunk_bytes)
        self.log = log or structlog.get_logger("broker").bind(actor="scrub_service")

    async def run(self) -> None:
        while True:
            rate = self.config.scrubBytesPerSecond
            verified = await self.step() if rate > 0 else None
            match verified:
                case None:
                    await trio.sleep(IDLE_S)
                case LapWait(seconds=seconds):
                    await trio.sleep(min(seconds, IDLE_S))  # an interval cut live is heard
                case int():
                    await trio.sleep(pause_s(verified, rate))

    async def step(self) -> int | LapWait | None:
        """Verify one chunk; the bytes it verified (None: nothing below the checkpoint; a
        `LapWait`: the next lap may not start yet)."""
        now = trio.current_time()
        interval = float(self.config.scrubLapIntervalSeconds)
        done = await self.gate.read(lambda: self._verify_next(now, interval))
        if done is None or isinstance(done, LapWait):
            return done
        _, result = done
        finding = self.cursor.advance(result)
        if finding is not None:
            self.view.distrust(finding.offset)
            events.emit(
                self.log,
                events.StoreScrubDamage(
                    segment=os.path.join(self.commitlog_dir, segment_name(finding.segment_base)),
                    offset=finding.offset,
                    reason=finding.reason,
                ),
            )
        return result.verified_bytes

    def _verify_next(
        self, now: float, lap_interval_s: float
    ) -> tuple[ScrubRange, ChunkResult] | LapWait | None:
        """In the worker thread: the bounds, the read and the check, under one gate pass."""
        bounds = self.view.scrub_bounds()
        rng = self.cursor.next(bounds, now, lap_interval_s)
        if rng is None or isinstance(rng, LapWait):
            return rng
        data = self.view.read_commitlog(rng.start, rng.size)
        return rng, verify_chunk(data, rng, bounds.segment_size)

    def runtime_keys(self) -> dict[str, str]:
        """The runtime-info keys of the scrub (stats/feature.py adds them)."""
        c = self.cursor
        return {
            "scrubBytesPerSecond": str(self.config.scrubBytesPerSecond),
            "scrubLapIntervalSeconds": str(self.config.scrubLapIntervalSeconds),
            "scrubVerifiedBytes": str(c.verified_bytes),
            "scrubOffset": str(max(c.cursor, 0)),
            "scrubLaps": str(c.laps),
            "scrubDamageFound": str(c.damage_found),
        }
