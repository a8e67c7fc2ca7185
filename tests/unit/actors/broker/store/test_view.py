"""StoreView and ReadGate: big reads off the loop, never beside a mutation other than appends.

A "slow read" is a runner that parks the off-loop read on an event, so a test decides when the
read in the worker thread finishes and can watch what the store actor does meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.broker.store.view import ReadGate, StoreView
from rocketrio.storage.message_store import (
    GetMessageStatus,
    MessageStore,
    MessageToStore,
    PutResult,
    StoreConfig,
)

NOW_MS = 1_700_000_000_000


class SlowReads:
    """A run_blocking whose calls wait for `release` (one event per call, in order)."""

    def __init__(self) -> None:
        self.started = 0
        self.finished = 0
        self._release: list[trio.Event] = []

    async def __call__(self, fn: Callable[[], Any]) -> Any:
        gate = trio.Event()
        self._release.append(gate)
        self.started += 1
        await gate.wait()
        result = fn()
        self.finished += 1
        return result

    def release(self) -> None:
        self._release.pop(0).set()


def open_store(tmp_path: Path) -> MessageStore:
    store = MessageStore(str(tmp_path), StoreConfig(mappedFileSizeCommitLog=64 * 1024))
    store.open()
    store.put_messages([MessageToStore("T", 0, b"m%d" % i) for i in range(4)], NOW_MS)
    return store


async def test_a_mutation_waits_for_running_reads_and_holds_off_new_ones() -> None:
    reads = SlowReads()
    gate = ReadGate(reads)
    log: list[str] = []

    async def reader(name: str) -> None:
        await gate.read(lambda: log.append(name))

    async def mutation() -> None:
        async with gate.exclusive():
            log.append("mutation")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader, "read-1")
        await trio.testing.wait_all_tasks_blocked()
        assert gate.readers == 1
        nursery.start_soon(mutation)
        await trio.testing.wait_all_tasks_blocked()
        assert log == []  # the mutation waits for read-1
        nursery.start_soon(reader, "read-2")
        await trio.testing.wait_all_tasks_blocked()
        assert reads.started == 1  # read-2 waits behind the mutation: the gate is closed
        reads.release()
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["read-1", "mutation"]
        assert reads.started == 2 and gate.readers == 1  # read-2 started once it was done
        reads.release()
    assert log == ["read-1", "mutation", "read-2"]
    assert gate.readers == 0 and gate.off_loop_reads == 2


async def test_reads_run_side_by_side() -> None:
    reads = SlowReads()
    gate = ReadGate(reads)
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(gate.read, lambda: None)
        await trio.testing.wait_all_tasks_blocked()
        assert gate.readers == 3
        for _ in range(3):
            reads.release()
    assert gate.readers == 0


async def test_off_loop_read_in_a_real_thread_matches_the_inline_read(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    view = StoreView(store, ReadGate(), off_loop_read_bytes=1024)
    inline = view.get_messages("T", 0, 0, 32, 4096)
    off_loop = await view.read_messages("T", 0, 0, 32, 4096)
    assert off_loop.status is GetMessageStatus.FOUND and view.gate.off_loop_reads == 1
    assert off_loop.buffers == inline.buffers and off_loop.message_count == 4
    small = await view.read_messages("T", 0, 0, 32, 1024)
    assert small.message_count == 4 and view.gate.off_loop_reads == 1


async def test_store_actor_deletes_a_topic_only_after_off_loop_reads_but_appends_beside_them(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path)
    reads = SlowReads()
    gate = ReadGate(reads)
    view = StoreView(store, gate, off_loop_read_bytes=1024)

    async def no_thread(fn: Callable[[], Any]) -> Any:
        return fn()

    actor = StoreActor(
        store,
        sync_flush=False,
        flush_interval_ms=60_000,
        sync_flush_timeout_ms=5000,
        now_ms=lambda: NOW_MS,
        run_blocking=no_thread,
        read_gate=gate,
    )
    acked: list[PutStatus] = []
    deleted: list[int] = []

    def on_put(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        acked.append(status)

    async def big_read() -> None:
        result = await view.read_messages("T", 0, 0, 32, 4096)
        assert result.message_count == 4  # the queue was intact for the whole read

    async def delete() -> None:
        deleted.append(await actor.delete_topic("T"))

    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        nursery.start_soon(big_read)
        await trio.testing.wait_all_tasks_blocked()
        assert gate.readers == 1
        await actor.put([MessageToStore("U", 0, b"beside the read")], on_put)
        await trio.testing.wait_all_tasks_blocked()
        assert acked == [PutStatus.PUT_OK]  # an append does not wait for the read
        nursery.start_soon(delete)
        await trio.testing.wait_all_tasks_blocked()
        assert deleted == [] and store.get_max_offset("T", 0) == 4
        reads.release()
        await trio.testing.wait_all_tasks_blocked()
        assert deleted == [1] and store.get_max_offset("T", 0) == 0
        assert await actor.commitlog_max_offset() == store.get_commitlog_max_offset()
        nursery.cancel_scope.cancel()


async def test_runtime_figures_of_the_send_and_pull_queues(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """GET_BROKER_RUNTIME_INFO's queue keys (runtime_info.py): pageCacheLockTimeMills is how long
    the current write (here a SYNC_FLUSH fsync that hangs) has held the store actor; the send
    queue counts the puts waiting behind it and its head wait bounds their wait; the pull queue
    counts off-loop reads and the oldest one's age. Each is 0 once idle."""
    store = open_store(tmp_path)
    fsyncs = SlowReads()
    stats = BrokerStats("C")
    actor = StoreActor(
        store,
        sync_flush=True,
        flush_interval_ms=600_000,
        sync_flush_timeout_ms=60_000,
        now_ms=lambda: NOW_MS,
        run_blocking=fsyncs,
        stats=stats,
    )
    reads = SlowReads()
    gate = ReadGate(reads)
    view = StoreView(store, gate, off_loop_read_bytes=0)
    acked: list[PutStatus] = []

    def on_put(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        acked.append(status)

    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        assert (actor.write_held_ms(), actor.queued(), actor.queue_head_wait_ms()) == (0, 0, 0)
        await actor.put([MessageToStore("T", 0, b"x")], on_put)
        await trio.testing.wait_all_tasks_blocked()
        assert fsyncs.started == 1  # the write waits for its fsync
        await trio.sleep(1.5)
        await actor.put([MessageToStore("T", 0, b"y")], on_put)
        await actor.put([MessageToStore("T", 0, b"z")], on_put)
        assert actor.write_held_ms() == 1500 and actor.queued() == 2
        assert actor.queue_head_wait_ms() == 1500
        nursery.start_soon(view.read_messages, "T", 0, 0, 32, 4096)
        await trio.sleep(0.25)
        assert (gate.pending(), gate.oldest_wait_ms()) == (1, 250)
        reads.release()
        fsyncs.release()
        await trio.testing.wait_all_tasks_blocked()
        fsyncs.release()  # the second turn's fsync
        await trio.testing.wait_all_tasks_blocked()
        assert acked == [PutStatus.PUT_OK] * 3
        assert (actor.write_held_ms(), actor.queued(), actor.queue_head_wait_ms()) == (0, 0, 0)
        assert (gate.pending(), gate.oldest_wait_ms()) == (0, 0)
        # the puts were timed per turn: the first until its fsync returned (1.75 s)
        assert stats.store.put_time_max_ms == 1750
        assert stats.items.topic_put["T"][:2] == [3, 3]  # 3 messages in 3 requests
        nursery.cancel_scope.cancel()


def test_the_kept_queue_range_reader_reads_the_range_live(tmp_path: Path) -> None:
    """An ACK's offset check keeps `queue_range_reader` (one call per ACK, not three): it must
    read each queue's [min, max] at each call, as `queue_range` does, never a copy."""
    store = open_store(tmp_path)
    view = StoreView(store, ReadGate())
    reader = view.queue_range_reader()
    assert reader("T", 0) == view.queue_range("T", 0) == (0, 4)
    assert reader("T", 1) == view.queue_range("T", 1) == (0, 0)  # a queue the store lacks
    store.put_messages([MessageToStore("T", 0, b"n"), MessageToStore("T", 1, b"o")], NOW_MS)
    assert reader("T", 0) == view.queue_range("T", 0) == (0, 5)
    assert reader("T", 1) == view.queue_range("T", 1) == (0, 1)
    store.delete_topic("T")
    assert reader("T", 0) == view.queue_range("T", 0) == (0, 0)


def test_the_kept_live_queues_table_is_the_stores_own(tmp_path: Path) -> None:
    """An ACK's offset check keeps `live_queues` and reads a queue's range from it per message:
    what it holds after puts and a topic's deletion is what `queue_range` says, never a copy
    taken when it was asked for."""
    store = open_store(tmp_path)
    view = StoreView(store, ReadGate())
    kept = view.live_queues()

    def ranges() -> dict[tuple[str, int], tuple[int, int]]:
        return {k: (cq.min_offset, cq.max_offset) for k, cq in kept.items()}

    assert ranges() == {("T", 0): view.queue_range("T", 0)} == {("T", 0): (0, 4)}
    store.put_messages([MessageToStore("T", 0, b"n"), MessageToStore("T", 1, b"o")], NOW_MS)
    assert ranges() == {("T", 0): (0, 5), ("T", 1): (0, 1)}
    store.delete_topic("T")
    assert ranges() == {} and view.queue_range("T", 0) == (0, 0)
