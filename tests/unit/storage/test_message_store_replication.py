"""The MessageStore's replication side: dispatch gated by confirmOffset (H4), replicated appends
on a slave, epochs kept with the log (H3), durable truncation and reset (upstream #10666), and
recovery that never goes past confirmOffset nor reuses a queue offset (#7689 / #6609).

Crash tests cut the power of the simulated disk at EVERY file call of an operation and check
the reopened store against what the operation promised.
"""

from __future__ import annotations

import os
import random

import pytest

from rocketrio.storage.commitlog import CommitLog
from rocketrio.storage.epoch_file import EpochRecord
from rocketrio.storage.message_store import (
    GetMessageStatus,
    MessageStore,
    MessageToStore,
    StoreConfig,
)
from tests.harness.disk_view import DiskView
from tests.harness.sim_disk import PowerCut, SimFileSystem, cut_power_after

SEG = 4096
# a small index geometry: its files roll (the default's 20 MB slot table per file is slow on
# the simulated disk, which keeps whole files in memory)
CFG = StoreConfig(
    mappedFileSizeCommitLog=SEG,
    mappedFileSizeConsumeQueue=20 * 64,
    maxHashSlotNum=64,
    maxIndexNum=64,
)
HOST = (b"\x0a\x00\x00\x01", 10911)


def store(disk: DiskView, name: str, *, replicated: bool = True) -> MessageStore:
    s = MessageStore(
        disk.path(name), CFG, store_host=HOST, fs=disk.fs, replicated=replicated,
        epoch_file_path=disk.path(name, "epochFileCheckpoint") if replicated else None,
    )  # fmt: skip
    s.open()
    return s


def msgs(n: int, rng: random.Random, queues: int = 2) -> list[MessageToStore]:
    return [
        MessageToStore(
            "T",
            rng.randrange(queues),
            rng.randbytes(rng.randint(10, 300)),
            properties={"KEYS": f"k{rng.randrange(1000)}"},
        )
        for _ in range(n)
    ]


def visible(s: MessageStore, queue: int) -> int:
    return s.get_max_offset("T", queue)


def test_gated_puts_become_visible_only_up_to_confirm(disk: DiskView) -> None:
    rng = random.Random(1)
    s = store(disk, "m")
    s.begin_epoch(1)
    first = s.put_messages(msgs(5, rng, queues=1), 1)
    end_first = s.get_commitlog_max_offset()
    s.put_messages(msgs(5, rng, queues=1), 2)
    assert visible(s, 0) == 0 and s.take_arrivals() == {}
    assert s.query_by_key("T", "k1") == []  # the index is gated too
    s.advance_confirm(end_first)
    assert visible(s, 0) == 5 and s.take_arrivals() == {("T", 0): 5}
    assert [r.queue_offset for r in first] == [0, 1, 2, 3, 4]
    s.advance_confirm(10**9)  # clipped to the log end
    assert visible(s, 0) == 10 and s.confirm_offset == s.get_commitlog_max_offset()
    s.close()


def test_an_unreplicated_store_dispatches_at_put_time(disk: DiskView) -> None:
    s = store(disk, "m", replicated=False)
    s.put_messages(msgs(3, random.Random(2), queues=1), 1)
    assert visible(s, 0) == 3
    s.close()


def classic_sync_flush_store(disk: DiskView, name: str) -> MessageStore:
    s = MessageStore(disk.path(name), CFG, store_host=HOST, fs=disk.fs, dispatch_after_flush=True)
    s.open()
    return s


def test_a_classic_sync_flush_store_dispatches_a_put_once_its_fsync_passes_it() -> None:
    """Cluster simulation seed 303252: a classic master (never replaced) dispatched a put
    before its SYNC_FLUSH fsync; a consumer read it, a power cut took it back and the restarted
    master gave its queue offset to another message. The put now waits for the fsync, keeping
    the queue offsets its put gave it."""
    fs = SimFileSystem(random.Random(31))
    disk = DiskView(fs, "/sim")
    rng = random.Random(32)
    s = classic_sync_flush_store(disk, "m")
    first = s.put_messages(msgs(3, rng, queues=1), 1)
    second = s.put_messages(msgs(2, rng, queues=1), 1)
    assert [r.queue_offset for r in first + second] == [0, 1, 2, 3, 4]
    assert visible(s, 0) == 0 and s.take_arrivals() == {}
    assert s.query_by_key("T", "k1") == []  # nor indexed
    s.release_flushed()  # nothing fsynced yet: nothing released
    assert visible(s, 0) == 0
    fs.crash(lose_unsynced=True)  # the power goes before the fsync
    again = classic_sync_flush_store(disk, "m")
    assert again.get_commitlog_max_offset() == 0 and visible(again, 0) == 0
    put = again.put_messages(msgs(2, rng, queues=1), 1)
    assert [r.queue_offset for r in put] == [0, 1]  # offsets nobody has read
    again.flush_commitlog()
    again.release_flushed()
    assert visible(again, 0) == 2 and again.take_arrivals() == {("T", 0): 2}
    got = again.get_messages("T", 0, 0, 10, 10**9)
    assert got.message_count == 2 and all(got.buffers)
    again.close()


def test_a_classic_sync_flush_store_fsyncs_what_a_kill_left_before_it_dispatches_it() -> None:
    """After a kill -9 the page cache still holds records never fsynced: recovery fsyncs them
    before re-dispatch makes them visible, so a later power cut cannot take a read one back."""
    fs = SimFileSystem(random.Random(41))
    disk = DiskView(fs, "/sim")
    s = classic_sync_flush_store(disk, "m")
    s.put_messages(msgs(4, random.Random(42), queues=1), 1)
    end = s.get_commitlog_max_offset()
    fs.crash(keep_unsynced=True)  # kill -9: the unsynced records survive
    r = classic_sync_flush_store(disk, "m")
    assert r.flushed_offset == r.get_commitlog_max_offset() == end
    assert visible(r, 0) == 4
    fs.crash(lose_unsynced=True)  # the power goes: what was read stays
    again = classic_sync_flush_store(disk, "m")
    assert again.get_commitlog_max_offset() == end and visible(again, 0) == 4
    again.close()


def replicate(master: MessageStore, slave: MessageStore, upto: int, chunk: int) -> None:
    """Copy the master's bytes the way the HA client does: whole records only."""
    from rocketrio.actors.broker.ha.slave_core import whole_records_length

    while slave.get_commitlog_max_offset() < upto:
        at = slave.get_commitlog_max_offset()
        data = master.commitlog.read(at, min(chunk, upto - at))
        n = whole_records_length(data, at, SEG)
        if n == 0:
            data = master.commitlog.read(at, upto - at)
            n = whole_records_length(data, at, SEG)
        slave.append_replicated(at, data[:n])


def test_a_slave_holds_the_masters_bytes_and_dispatches_up_to_confirm(disk: DiskView) -> None:
    rng = random.Random(3)
    m, sl = store(disk, "m"), store(disk, "s")
    m.begin_epoch(1)
    sl.record_epoch(1, 0)
    for _ in range(6):  # enough to roll several segments (BLANK records included)
        m.put_messages(msgs(8, rng), 1)
    end = m.get_commitlog_max_offset()
    assert end > 2 * SEG
    replicate(m, sl, end, chunk=700)
    assert sl.commitlog.read(0, end) == m.commitlog.read(0, end)
    half = m.commitlog.segment_base(end)  # a segment start is a record boundary
    sl.advance_confirm(half)
    m.advance_confirm(half)
    for q in (0, 1):
        # never past confirm; the slave dispatches record by record, the master put by put
        for st in (m, sl):
            got = st.get_messages("T", q, 0, 1000, 10**9)
            assert all(o + n <= half for o, n in _entries(st, q))
            assert got.message_count == visible(st, q)
        assert visible(sl, q) >= visible(m, q) > 0
    sl.advance_confirm(end)
    m.advance_confirm(end)
    for q in (0, 1):
        a = m.get_messages("T", q, 0, 1000, 10**9)
        b = sl.get_messages("T", q, 0, 1000, 10**9)
        assert a.buffers == b.buffers and b.status is GetMessageStatus.FOUND
    m.close()
    sl.close()


def _entries(s: MessageStore, q: int) -> list[tuple[int, int]]:
    cq = s.consume_queue("T", q)
    return [] if cq is None else [(o, n) for o, n, _ in cq.get(0, 10**6)]


def _cq(s: MessageStore, q: int) -> list[tuple[int, int, int]]:
    cq = s.consume_queue("T", q)
    return [] if cq is None else list(cq.get(0, 10**6))


@pytest.mark.parametrize("seed", range(12))
def test_a_slave_dispatches_exactly_what_confirm_allows(
    disk: DiskView, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slave keeps what its append parsed of every record and releases it as confirmOffset
    moves, record by record (a confirm inside an append releases part of it); past the bound
    on held records it scans the CommitLog instead, and picks the held data up again once
    dispatch has caught up. Whatever the mix, after every step the slave's ConsumeQueues and
    index hold exactly the master's entries that end at or below min(confirm, its log end)."""
    from rocketrio.actors.broker.ha.slave_core import whole_records_length
    from rocketrio.storage import dispatch_gate

    rng = random.Random(seed)
    monkeypatch.setattr(dispatch_gate, "REPLICA_HELD_MAX", rng.choice([3, 12, 40, 65536]))
    m, sl = store(disk, "m"), store(disk, "s")
    m.begin_epoch(1)
    sl.record_epoch(1, 0)
    for _ in range(8):  # several segments, so BLANK records close some appends
        m.put_messages(msgs(rng.randint(1, 10), rng), 1)
    end = m.get_commitlog_max_offset()
    m.advance_confirm(end)  # the master's queues are the reference
    want = {q: _cq(m, q) for q in (0, 1)}
    keys = [f"k{i}" for i in range(1000)]
    confirm = 0
    while sl.get_commitlog_max_offset() < end or confirm < end:
        at = sl.get_commitlog_max_offset()
        if at < end and rng.random() < 0.6:
            data = m.commitlog.read(at, min(rng.randint(100, 1500), end - at))
            n = whole_records_length(data, at, SEG) or whole_records_length(
                m.commitlog.read(at, end - at), at, SEG
            )
            sl.append_replicated(at, m.commitlog.read(at, n))
        else:
            confirm = min(end, confirm + rng.randint(0, 1200))
        sl.advance_confirm(confirm)  # the store actor does so after every turn
        limit = min(confirm, sl.get_commitlog_max_offset())
        for q in (0, 1):
            assert _cq(sl, q) == [e for e in want[q] if e[0] + e[1] <= limit]
    for k in keys[::37]:
        assert sl.query_by_key("T", k) == m.query_by_key("T", k)
    m.close()
    sl.close()


def test_replicated_data_is_checked_record_by_record(disk: DiskView) -> None:
    rng = random.Random(4)
    m, sl = store(disk, "m"), store(disk, "s")
    m.begin_epoch(1)
    m.put_messages(msgs(4, rng), 1)
    data = bytearray(m.commitlog.read(0, m.get_commitlog_max_offset()))
    data[60] ^= 0xFF
    with pytest.raises(ValueError, match="CRC"):
        sl.append_replicated(0, bytes(data))
    with pytest.raises(ValueError, match="ends at 0"):
        sl.append_replicated(100, m.commitlog.read(0, 50))
    assert sl.get_commitlog_max_offset() == 0
    m.close()
    sl.close()


def test_truncation_cuts_log_queues_index_epochs_and_confirm(disk: DiskView) -> None:
    rng = random.Random(5)
    s = store(disk, "s")
    s.record_epoch(1, 0)
    s.put_messages(msgs(10, rng, queues=1), 1)  # (a slave writes by replication; same bytes)
    cut = s.get_commitlog_max_offset()
    s.record_epoch(2, cut)
    s.put_messages(msgs(10, rng, queues=1), 1)
    s.advance_confirm(s.get_commitlog_max_offset())
    assert visible(s, 0) == 20
    s.truncate_to(cut)
    assert s.get_commitlog_max_offset() == cut and s.confirm_offset == cut
    assert visible(s, 0) == 10 and s.epoch_records() == [EpochRecord(1, 0)]
    s.close()
    again = store(disk, "s")
    assert again.get_commitlog_max_offset() == cut and visible(again, 0) == 10
    assert again.epoch_records() == [EpochRecord(1, 0)]
    again.close()


def _build_replica(fs: SimFileSystem, rng: random.Random) -> tuple[int, int]:
    disk = DiskView(fs, "/sim")
    s = store(disk, "s")
    s.record_epoch(1, 0)
    s.put_messages(msgs(12, rng), 1)
    cut = s.get_commitlog_max_offset()
    s.record_epoch(2, cut)
    s.put_messages(msgs(30, rng), 1)  # crosses segments
    s.advance_confirm(s.get_commitlog_max_offset())
    s.flush()
    end = s.get_commitlog_max_offset()
    s.close()
    return cut, end


@pytest.mark.parametrize("seed", range(3))
def test_truncation_is_crash_safe_at_every_file_call(seed: int) -> None:
    """#10666: whatever instant the power goes, the reopened store never holds a confirm
    or an epoch beyond its log, never serves an entry past the log, and a retried truncation
    ends exactly where the first one should have."""
    calls = 0
    while True:
        rng = random.Random(seed)
        fs = SimFileSystem(random.Random(seed * 1000 + calls))
        cut, end = _build_replica(fs, rng)
        disk = DiskView(fs, "/sim")
        s = store(disk, "s")
        with cut_power_after(fs, calls) as switch:
            try:
                s.truncate_to(cut)
            except PowerCut:
                pass
        if not switch.fired:
            s.close()
            break
        calls += 1
        r = store(disk, "s")
        mx = r.get_commitlog_max_offset()
        assert mx in (cut, end) or cut <= mx <= end
        assert r.confirm_offset <= mx
        assert all(e.start_offset <= mx for e in r.epoch_records())
        for q in (0, 1):
            got = r.get_messages("T", q, 0, 1000, 10**9)
            assert all(len(b) > 0 for b in got.buffers)  # every entry points at a record
        # the handshake repeats the same cut: it now ends where it should
        r.truncate_to(cut)
        assert r.get_commitlog_max_offset() == cut
        assert r.epoch_records() == [EpochRecord(1, 0)]
        r.close()
        final = store(disk, "s")
        assert final.get_commitlog_max_offset() == cut
        final.close()
    assert calls > 10  # the operation really spans many file calls


def test_recovery_stays_below_confirm_and_never_reuses_a_queue_offset(disk: DiskView) -> None:
    """#7689: records in the log above confirmOffset stay invisible after a restart, and a new
    write as master gets a queue offset past them."""
    rng = random.Random(6)
    s = store(disk, "m")
    s.begin_epoch(1)
    s.put_messages(msgs(4, rng, queues=1), 1)
    s.advance_confirm(s.get_commitlog_max_offset())
    s.put_messages(msgs(3, rng, queues=1), 1)  # stored, never confirmed
    s.flush()
    s.close()
    r = store(disk, "m")
    assert visible(r, 0) == 4 and r.confirm_offset < r.get_commitlog_max_offset()
    r.begin_epoch(2)
    res = r.put_messages(msgs(1, rng, queues=1), 2)
    assert res[0].queue_offset == 7
    r.advance_confirm(r.get_commitlog_max_offset())
    assert visible(r, 0) == 8
    r.close()


def test_a_recovery_that_cuts_the_queues_lowers_the_dispatch_checkpoint_first() -> None:
    """Cluster simulation seed 300301 (an acknowledged message gone from its queue): a kill -9
    left both checkpoints unreadable in the page cache, their old values still on the disk, so
    the restart trusted nothing and cut every ConsumeQueue entry; the slave dispatched them again
    as confirmOffset came back, and the power went in a flush that had synced queue 0's entries,
    not queue 1's. The next restart read the old dispatch checkpoint again: it vouched for queue
    1's entries, cut since, so re-dispatch began past them and they were never rebuilt (the
    records stay in the CommitLog, unreachable). The cut must lower the checkpoint durably
    first: queue 1 is then rebuilt whole."""
    fs = SimFileSystem(random.Random(11))
    disk = DiskView(fs, "/sim")
    rng = random.Random(12)
    s = store(disk, "s")
    s.begin_epoch(1)
    s.put_messages(msgs(40, rng), 1)
    end = s.get_commitlog_max_offset()
    s.advance_confirm(end)
    s.flush()
    counts = [visible(s, q) for q in (0, 1)]
    s.close()
    for name in ("dispatch.checkpoint", "confirm.checkpoint"):
        fd = fs.open(disk.path("s", name), os.O_RDWR)
        fs.fsync(fd)  # long written back: both say ``end`` on the disk
        fs.close(fd)
        disk.patch(disk.path("s", name), 0, b"\xff" * 4)  # torn, in the page cache only
    fs.crash(keep_unsynced=True)  # kill -9
    r = store(disk, "s")
    assert [visible(r, q) for q in (0, 1)] == [0, 0]  # nothing vouched for: every entry cut
    r.advance_confirm(end)  # the master's confirmOffset: every entry dispatched again
    assert [visible(r, q) for q in (0, 1)] == counts
    fd = fs.open(disk.path("s", "consumequeue", "T", "0", "00000000000000000000"), os.O_RDWR)
    fs.fsync(fd)  # a flush got as far as queue 0 ...
    fs.crash(lose_unsynced=True)  # ... when the power went
    again = store(disk, "s")
    again.advance_confirm(end)  # as the master says again (the stale confirm is not trusted)
    assert [visible(again, q) for q in (0, 1)] == counts
    for q in (0, 1):
        got = again.get_messages("T", q, 0, 1000, 10**9)
        assert got.message_count == counts[q] and all(got.buffers)
    again.close()


def test_a_recovery_lowers_a_persisted_confirm_offset_above_its_log() -> None:
    """The same rule for confirm.checkpoint: a restart whose log ends below the persisted
    confirmOffset (a damaged last record cut at open) lowers it durably, so records the broker
    writes afterwards, not yet confirmed, never become visible through the old value after a
    later kill -9."""
    fs = SimFileSystem(random.Random(21))
    disk = DiskView(fs, "/sim")
    rng = random.Random(22)
    s = store(disk, "s")
    s.begin_epoch(1)
    s.put_messages(msgs(10, rng, queues=1), 1)
    last = s.put_messages(msgs(1, rng, queues=1), 1)[0]
    end = s.get_commitlog_max_offset()
    s.advance_confirm(end)
    s.flush()
    s.close()
    for name in ("confirm.checkpoint", "dispatch.checkpoint"):
        fd = fs.open(disk.path("s", name), os.O_RDWR)
        fs.fsync(fd)  # long written back
        fs.close(fd)
    # the last record's body damaged, and the CommitLog checked whole at open: the log ends
    # before that record, below the persisted confirmOffset
    disk.patch(disk.path("s", "commitlog", "00000000000000000000"), end - 8, b"\xff")
    disk.patch(disk.path("s", "commitlog", "flushed.checkpoint"), 0, b"\xff" * 4)
    r = store(disk, "s")
    assert r.get_commitlog_max_offset() == last.commitlog_offset < end
    assert visible(r, 0) == 10
    r.begin_epoch(2)
    r.put_messages(msgs(3, rng, queues=1), 2)  # as master; no slave confirms them
    assert visible(r, 0) == 10
    fs.crash(keep_unsynced=True)  # kill -9 before any flush
    again = store(disk, "s")
    assert visible(again, 0) == 10  # the unconfirmed records stay invisible
    again.close()


def test_reset_drops_everything_and_restarts_at_a_segment(disk: DiskView) -> None:
    rng = random.Random(7)
    s = store(disk, "s")
    s.record_epoch(1, 0)
    s.put_messages(msgs(20, rng), 1)
    s.advance_confirm(10**9)
    s.reset_to(3 * SEG)
    assert s.get_commitlog_min_offset() == s.get_commitlog_max_offset() == 3 * SEG
    assert s.epoch_records() == [] and visible(s, 0) == 0
    with pytest.raises(ValueError, match="segment boundary"):
        s.reset_to(5)
    s.close()


def test_scan_records_steps_over_blanks_and_stops_at_partial_records(tmp_path) -> None:
    rng = random.Random(8)
    s = MessageStore(str(tmp_path / "m"), CFG, store_host=HOST)
    s.open()
    for _ in range(5):
        s.put_messages(msgs(7, rng), 1)
    clog: CommitLog = s.commitlog
    end = clog.max_offset
    records, reached = clog.scan_records(0, end, chunk_size=256)
    assert reached == end
    assert sum(len(r) for _, r in records) < end  # blank fills are not records
    offsets = [o for o, _ in records]
    mid = offsets[len(offsets) // 2] + 5  # inside a record
    part, stop = clog.scan_records(0, mid)
    assert stop == offsets[len(offsets) // 2] and len(part) == len(offsets) // 2
    s.close()
