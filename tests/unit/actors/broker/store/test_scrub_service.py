"""The background scrub on the simulated disk under MockClock (issue 26): a byte flipped below
the checkpoint is found by the scrub, without any read of that record, within the time its
rate implies; the finding is logged once, counted in the runtime keys, and from then on every
read of the record is refused, even one a read-check watermark had vouched for."""

from __future__ import annotations

import os
import random

import pytest
import structlog
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.store.scrub_service import ScrubService
from rocketrio.actors.broker.store.view import ReadGate, StoreView
from rocketrio.storage.commitlog import segment_name
from rocketrio.storage.message_store import (
    MessageStore,
    MessageToStore,
    PutResult,
    RecordCorrupt,
    StoreConfig,
)
from tests.harness.blocking import inline_blocking
from tests.harness.disk_view import DiskView
from tests.harness.sim_disk import SimFileSystem

SEG = 4096
CFG = StoreConfig(mappedFileSizeCommitLog=SEG, mappedFileSizeConsumeQueue=200, maxMessageSize=1024)
HOST = (b"\x0a\x00\x00\x09", 10911)
RATE = 2048  # bytes/s
CHUNK = 512
N = 80  # five segments of ~150-byte records
BIG = 1 << 30
PATH = "/sim/s"


def filled(seed: int) -> tuple[DiskView, list[PutResult]]:
    disk = DiskView(SimFileSystem(random.Random(seed)), "/sim")
    store = MessageStore(PATH, CFG, store_host=HOST, fs=disk.fs)
    store.open()
    rows = []
    for i in range(N):
        m = MessageToStore(topic="T", queue_id=0, body=f"b{i}".encode().ljust(80, b"b"))
        rows.append(store.put_messages([m], 1000 + i)[0])
    store.close()  # a clean shutdown: the checkpoint covers all but the last segment
    return disk, rows


def flip(disk: DiskView, offset: int) -> None:
    seg = os.path.join(PATH, "commitlog", segment_name(offset - offset % SEG))
    pos = offset % SEG
    disk.patch(seg, pos, bytes([disk.read(seg)[pos] ^ 0x01]))


def scrub_of(disk: DiskView) -> tuple[MessageStore, ScrubService]:
    store = MessageStore(PATH, CFG, store_host=HOST, fs=disk.fs)
    store.open()
    gate = ReadGate(inline_blocking)
    config = BrokerConfig(storePathRootDir=PATH, scrubBytesPerSecond=RATE)
    commitlog_dir = os.path.join(PATH, "commitlog")
    return store, ScrubService(
        config, StoreView(store, gate), gate, commitlog_dir, chunk_bytes=CHUNK
    )


async def found_within(scrub: ScrubService, bound_s: float) -> float:
    """Run the scrub until it finds something; the mock seconds it took (fails past bound)."""
    t0 = trio.current_time()
    with trio.fail_after(bound_s):
        async with trio.open_nursery() as n:
            n.start_soon(scrub.run)
            while not scrub.cursor.found:
                await trio.sleep(0.01)
            n.cancel_scope.cancel()
    return trio.current_time() - t0


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_scrub_finds_a_flipped_byte_below_the_checkpoint_within_its_rate(
    seed: int, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk, rows = filled(seed)
    rng = random.Random(seed)
    victim = rng.choice([r for r in rows if r.commitlog_offset < 3 * SEG])
    flip(disk, victim.commitlog_offset + rng.randrange(victim.size))
    store, scrub = scrub_of(disk)
    assert store.commitlog.verified_from > victim.commitlog_offset  # below the checkpoint
    reads: list[int] = []
    check = type(store.commitlog).check_read
    monkeypatch.setattr(
        type(store.commitlog),
        "check_read",
        lambda self, offset, *a: (reads.append(offset), check(self, offset, *a))[1],
    )
    # the rate implies: every byte before the victim, plus the chunk holding it, at RATE
    bound = (victim.commitlog_offset + CHUNK) / RATE + 0.05
    with structlog.testing.capture_logs() as logs:
        took = await found_within(scrub, bound)
    assert took <= bound
    assert reads == []  # nobody read it: the scrub found it
    damage = [e for e in logs if e["event"] == "store_scrub_damage"]
    segment = os.path.join(PATH, "commitlog", segment_name(victim.commitlog_offset // SEG * SEG))
    assert [(d["segment"], d["offset"]) for d in damage] == [(segment, victim.commitlog_offset)]
    assert damage[0]["reason"] and damage[0]["log_level"] == "error"
    keys = scrub.runtime_keys()
    assert keys["scrubDamageFound"] == "1" and int(keys["scrubVerifiedBytes"]) > 0
    with pytest.raises(RecordCorrupt) as err:  # and it is never served
        store.get_messages("T", 0, 0, N, BIG)
    assert err.value.offset == victim.commitlog_offset


async def test_damage_after_a_read_vouched_for_it_is_never_served_once_scrubbed(
    mock_clock: trio.testing.MockClock,
) -> None:
    disk, rows = filled(7)
    store, scrub = scrub_of(disk)
    assert store.get_messages("T", 0, 0, N, BIG).message_count == N  # marks pass every record
    victim = rows[len(rows) // 4]
    assert victim.commitlog_offset < store.commitlog.verified_from
    flip(disk, victim.commitlog_offset + 40)  # the body rots after it was read and checked
    bound = (victim.commitlog_offset + CHUNK) / RATE + 0.05
    await found_within(scrub, bound)
    with pytest.raises(RecordCorrupt) as err:
        store.get_messages("T", 0, 0, N, BIG)
    assert err.value.offset == victim.commitlog_offset
    before = store.get_messages("T", 0, 0, victim.queue_offset, BIG)
    assert before.message_count == victim.queue_offset  # what precedes it is still served


async def test_scrub_off_reads_nothing_and_a_clean_store_finds_nothing(
    mock_clock: trio.testing.MockClock,
) -> None:
    disk, _ = filled(3)
    store, scrub = scrub_of(disk)
    scrub.config = BrokerConfig(storePathRootDir=PATH, scrubBytesPerSecond=0)
    with trio.move_on_after(60):
        await scrub.run()
    assert scrub.cursor.verified_bytes == 0
    scrub.config = BrokerConfig(
        storePathRootDir=PATH, scrubBytesPerSecond=RATE, scrubLapIntervalSeconds=0
    )  # live, laps back to back
    sizes: list[int] = []
    read = scrub.view.read_commitlog
    scrub.view.read_commitlog = lambda o, n: (sizes.append(n), read(o, n))[1]  # type: ignore[method-assign]
    below = store.commitlog.verified_from - store.commitlog.min_offset
    with trio.move_on_after(2 * below / RATE + 1):
        await scrub.run()
    assert scrub.cursor.laps >= 2 and scrub.cursor.found == {}
    assert scrub.cursor.verified_bytes >= below
    assert max(sizes) <= CHUNK  # the store is never held for more than a chunk


async def test_laps_start_an_interval_apart_whatever_the_rate(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A lap that ends early waits out the rest of ``scrubLapIntervalSeconds``: a small log is
    verified once per interval, not re-read at the full rate for ever; a live cut of the
    interval is heard within IDLE_S."""
    disk, _ = filled(4)
    store, scrub = scrub_of(disk)
    interval = 600
    scrub.config = BrokerConfig(
        storePathRootDir=PATH, scrubBytesPerSecond=RATE, scrubLapIntervalSeconds=interval
    )
    below = store.commitlog.verified_from - store.commitlog.min_offset
    lap_s = below / RATE
    assert lap_s < interval / 10
    with trio.move_on_after(2 * interval + lap_s / 2):
        await scrub.run()
    assert scrub.cursor.laps == 3  # at 0, interval, 2 * interval
    # bytes verified: two whole laps and part of the third, nowhere near the rate's budget
    assert 2 * below <= scrub.cursor.verified_bytes < 3 * below
    assert scrub.runtime_keys()["scrubLapIntervalSeconds"] == str(interval)
    scrub.config = BrokerConfig(
        storePathRootDir=PATH, scrubBytesPerSecond=RATE, scrubLapIntervalSeconds=0
    )
    with trio.move_on_after(lap_s + 11):  # the rest of lap 3, then laps back to back
        await scrub.run()
    assert scrub.cursor.laps >= 4
