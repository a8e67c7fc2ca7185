"""The clean-up service's shell (clean_service.py) against a store stand-in: it bounds every
round by the replica floor and the durable dispatch, deletes one segment per store call with
the configured pause, gives a round up when the store does not answer in time, and reads its
keys from the live config at each round."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import structlog.testing
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.store.clean_service import CleanService
from rocketrio.actors.kernel.runtime import AskTimeout

SEG = 1000
HOUR = 3_600_000
NOW = 1_800_000_000_000


class FakeStore:
    """Segments 0..n-1 closed long ago plus the open last one; records the calls."""

    def __init__(self, n: int, durable: int) -> None:
        self.bases = [i * SEG for i in range(n + 1)]
        self.durable = durable
        self.deleted_at: list[tuple[int, float]] = []
        self.hang = False

    def retention_segments(self) -> list[tuple[int, int, int | None]]:
        rows: list[tuple[int, int, int | None]] = [
            (b, b + SEG, NOW - 100 * HOUR) for b in self.bases[:-1]
        ]
        return [*rows, (self.bases[-1], self.bases[-1] + 10, None)]

    @property
    def dispatch_flushed(self) -> int:
        return self.durable

    def delete_oldest_segment(self, base: int) -> list[str]:
        assert base == self.bases[0] and len(self.bases) > 1
        self.bases.pop(0)
        self.deleted_at.append((base, trio.current_time()))
        return [str(base)]

    def get_commitlog_min_offset(self) -> int:
        return self.bases[0]

    async def call(
        self, fn: Callable[[Any], Any], timeout: float = 30.0, *, exclusive: bool = True
    ) -> Any:
        if self.hang:
            await trio.sleep(timeout)
            raise AskTimeout("store did not answer")
        await trio.lowlevel.checkpoint()
        return fn(self)


def service(
    store: FakeStore, floor: Callable[[bool], int | None], **cfg: Any
) -> tuple[CleanService, BrokerConfig]:
    config = BrokerConfig(
        deleteWhen=";".join(f"{h:02d}" for h in range(24)),
        deleteCommitLogFilesInterval=100,
        **cfg,
    )
    svc = CleanService(config, store, usage=lambda: 0.5, replica_floor=floor, now_ms=lambda: NOW)
    return svc, config


async def test_a_round_stops_at_the_replica_floor_and_logs_the_hold_once(
    mock_clock: trio.testing.MockClock,
) -> None:
    store = FakeStore(6, durable=10**9)
    asked: list[bool] = []

    def floor(in_sync_only: bool) -> int | None:
        asked.append(in_sync_only)
        return 2 * SEG + 5  # a slave acknowledged into the third segment

    svc, _ = service(store, floor)
    with structlog.testing.capture_logs() as logs:
        plan = await svc.round()
        await svc.round()
    assert plan.delete == (0, SEG) and plan.held_at == 2 * SEG
    assert [b for b, _ in store.deleted_at] == [0, SEG]
    assert set(asked) == {False, True}
    held = [e for e in logs if e["event"] == "retention_held"]
    assert len(held) == 1 and held[0]["safe_end"] == 2 * SEG + 5
    deleted = [e for e in logs if e["event"] == "commitlog_deleted"]
    assert [e["min_offset"] for e in deleted] == [SEG, 2 * SEG]


async def test_durable_dispatch_bounds_and_segments_are_paced(
    mock_clock: trio.testing.MockClock,
) -> None:
    store = FakeStore(6, durable=4 * SEG)
    svc, config = service(store, lambda _: None)
    plan = await svc.round()
    assert plan.delete == (0, SEG, 2 * SEG, 3 * SEG)
    times = [t for _, t in store.deleted_at]
    assert all(b - a >= 0.1 for a, b in itertools.pairwise(times))
    # deleteFileBatchMax changed live: the next round takes at most one
    store.durable = 10**9
    config.deleteFileBatchMax = 1
    assert (await svc.round()).delete == (4 * SEG,)


async def test_a_store_that_does_not_answer_gives_the_round_up(
    mock_clock: trio.testing.MockClock,
) -> None:
    store = FakeStore(3, durable=10**9)
    svc, _ = service(store, lambda _: None, destroyMapedFileIntervalForcibly=2000)
    calls = 0
    real_call = store.call

    async def first_answers(fn: Callable[[Any], Any], timeout: float = 30.0, **kw: Any) -> Any:
        nonlocal calls
        calls += 1
        store.hang = calls > 1  # the listing answers, the deletion hangs
        return await real_call(fn, timeout, **kw)

    store.call = first_answers  # type: ignore[method-assign]
    started = trio.current_time()
    plan = await svc.round()
    assert plan.delete == (0, SEG, 2 * SEG) and store.deleted_at == []
    assert trio.current_time() - started == 2.0
