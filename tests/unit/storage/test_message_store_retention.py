"""The store's side of retention (MessageStore.retention_segments / delete_oldest_segment):
segment close times, the durable-dispatch bound, one segment at a time, and recovery after a
crash at any point of a deletion (on the simulated disk: what was not fsynced is lost)."""

from __future__ import annotations

import itertools
import os
import random

import pytest

from rocketrio.storage.commitlog import segment_name
from rocketrio.storage.message_store import (
    GetMessageStatus,
    MessageStore,
    MessageToStore,
    StoreConfig,
)
from tests.harness.disk_view import DiskView
from tests.harness.sim_disk import SimFileSystem

SEG = 4096
CFG = StoreConfig(mappedFileSizeCommitLog=SEG, mappedFileSizeConsumeQueue=100)
HOST = (b"\x0a\x00\x00\x09", 10911)
BIG = 1 << 30


def msg(i: int) -> MessageToStore:
    return MessageToStore(
        topic="T",
        queue_id=i % 2,
        body=b"b" * 200 + b"%05d" % i,
        properties={"KEYS": f"k{i}"},
        born_timestamp=i,
        born_host=(b"\x7f\x00\x00\x01", 40000),
    )


def filled(disk: DiskView, n: int = 100, **kw: object) -> MessageStore:
    store = MessageStore(disk.path("s"), CFG, store_host=HOST, fs=disk.fs, **kw)  # type: ignore[arg-type]
    store.open()
    for i in range(0, n, 5):
        store.put_messages([msg(j) for j in range(i, i + 5)], 1_000 + i)  # store time = 1000+i
    return store


def segments_on_disk(disk: DiskView) -> list[str]:
    return sorted(n for n in disk.fs.listdir(disk.path("s", "commitlog")) if n.isdigit())


def test_segments_report_when_they_closed(disk: DiskView) -> None:
    store = filled(disk)
    rows = store.retention_segments()
    assert [r[0] for r in rows] == [i * SEG for i in range(len(rows))]
    assert len(rows) >= 4 and rows[-1][2] is None
    assert rows[-1][1] == store.get_commitlog_max_offset()
    for (_, end, closed), (nxt, _, _) in itertools.pairwise(rows):
        assert end == nxt
        first = store.look_message_by_offset(nxt)
        assert first is not None and closed == first.store_timestamp


def test_nothing_goes_before_its_queue_entries_are_durable(disk: DiskView) -> None:
    store = filled(disk)
    assert store.dispatch_flushed == 0
    assert store.delete_oldest_segment(0) == []
    store.flush()
    assert store.dispatch_flushed == store.get_commitlog_max_offset()
    assert store.delete_oldest_segment(SEG) == []  # not the oldest
    assert store.delete_oldest_segment(0) == [segment_name(0)]
    assert store.delete_oldest_segment(0) == []  # gone already
    last = store.retention_segments()[-1][0]
    for base in range(SEG, last, SEG):
        assert store.delete_oldest_segment(base) == [segment_name(base)]
    assert store.delete_oldest_segment(last) == []  # never the last one
    assert segments_on_disk(disk) == [segment_name(last)]


def test_a_replicated_store_keeps_what_is_not_confirmed(disk: DiskView) -> None:
    store = filled(disk, replicated=True)
    store.flush()
    assert store.dispatch_flushed == 0  # nothing confirmed: nothing dispatched
    assert store.delete_oldest_segment(0) == []
    store.advance_confirm(3 * SEG + 10)  # into the fourth segment, not yet flushed
    assert store.delete_oldest_segment(0) == []
    store.flush()
    assert 2 * SEG < store.dispatch_flushed <= 3 * SEG + 10  # whole put batches
    assert store.delete_oldest_segment(0) == [segment_name(0)]
    assert store.delete_oldest_segment(SEG) == [segment_name(SEG)]
    keep = 2 * SEG if store.dispatch_flushed < 3 * SEG else 3 * SEG
    if keep == 3 * SEG:
        assert store.delete_oldest_segment(2 * SEG) == [segment_name(2 * SEG)]
    assert store.delete_oldest_segment(keep) == []  # its end is not confirmed yet


@pytest.mark.parametrize("lose", [True, False], ids=["lose-unsynced", "keep-unsynced"])
def test_a_crash_after_a_deletion_recovers_with_the_new_min_offsets(lose: bool) -> None:
    sim = SimFileSystem(random.Random(3))
    disk = DiskView(sim, "/sim/ret")
    store = filled(disk)
    store.flush()
    for base in (0, SEG):
        store.delete_oldest_segment(base)
    mins = {q: store.get_min_offset("T", q) for q in (0, 1)}
    maxs = {q: store.get_max_offset("T", q) for q in (0, 1)}
    # 20 more messages, never flushed, then the process dies
    for i in range(100, 120, 5):
        store.put_messages([msg(j) for j in range(i, i + 5)], 2_000 + i)
    sim.crash(lose_unsynced=lose, keep_unsynced=not lose)
    again = MessageStore(disk.path("s"), CFG, store_host=HOST, fs=sim)
    again.open()
    assert again.get_commitlog_min_offset() == 2 * SEG
    assert segment_name(0) not in segments_on_disk(disk)
    for q in (0, 1):
        low = again.get_min_offset("T", q)
        assert low == mins[q]
        assert again.get_max_offset("T", q) >= maxs[q]
        res = again.get_messages("T", q, 0, 4, BIG)
        assert (res.status, res.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, low)
        res = again.get_messages("T", q, low, 1000, BIG)
        assert res.status is GetMessageStatus.FOUND
        assert res.message_count == again.get_max_offset("T", q) - low
    assert again.query_by_key("T", "k0") == []
    assert [m.body[-5:] for m in again.query_by_key("T", "k99")] == [b"00099"]


def test_crash_between_segment_and_queue_deletion(disk: DiskView) -> None:
    """The CommitLog segment is gone but the process died before the ConsumeQueue files and
    index records were cut: recovery moves the min offsets itself."""
    store = filled(disk)
    store.flush()
    mins_before = {q: store.get_min_offset("T", q) for q in (0, 1)}
    store.commitlog.delete_segments_below(2 * SEG)  # only the CommitLog part
    store.close_files()  # no clean close: the abort marker stays
    again = MessageStore(disk.path("s"), CFG, store_host=HOST, fs=disk.fs)
    report = again.open()
    assert report.unclean_shutdown
    for q in (0, 1):
        low = again.get_min_offset("T", q)
        assert low > mins_before[q]
        entry = again.consume_queue("T", q).entry(low)
        assert entry is not None and entry[0] >= 2 * SEG
    assert os.path.basename(again.commitlog.path) == "commitlog"


def test_recovery_reports_progress_while_it_rebuilds(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rocketrio.storage import store_dispatch

    store = filled(disk)
    end = store.get_commitlog_max_offset()
    store.close()
    disk.fs.rmtree(disk.path("s", "index"))  # the index is rebuilt from the oldest record
    monkeypatch.setattr(store_dispatch, "PROGRESS_EVERY", 2 * SEG)
    seen: list[tuple[str, int, int]] = []
    again = MessageStore(disk.path("s"), CFG, store_host=HOST, fs=disk.fs)
    again.on_progress = lambda phase, done, total: seen.append((phase, done, total))
    report = again.open()
    assert report.index_rebuilt
    assert len(seen) >= 2 and all(p == "redispatch" and t == end for p, _, t in seen)
    dones = [d for _, d, _ in seen]
    assert dones == sorted(dones) and dones[0] >= 2 * SEG and dones[-1] < end
