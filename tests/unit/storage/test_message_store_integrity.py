"""Corruption is found, never served (issue 7): recovery after an unclean shutdown checks every
segment, the checkpoint is checked, the pull path checks records this process did not write,
`check_store` finds planted damage, and a store is locked by one broker at a time.

Every test runs on the real disk and on the simulated one (the ``disk`` fixture).
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.message_format import _FIXED
from rocketrio.storage.commitlog import CHECKPOINT_FILE, CorruptionError, segment_name
from rocketrio.storage.commitlog import read_check as commitlog_module
from rocketrio.storage.consume_queue import ENTRY
from rocketrio.storage.message_store import (
    ABORT_FILE,
    MessageStore,
    MessageToStore,
    PutResult,
    RecordCorrupt,
    StoreConfig,
)
from rocketrio.storage.record_scan import scan_segment
from rocketrio.storage.store_check import check_store
from rocketrio.storage.store_lock import LockOwner, StoreLock, StoreLocked, read_owner
from tests.harness.disk_view import DiskView

SEG = 4096
CFG = StoreConfig(mappedFileSizeCommitLog=SEG, mappedFileSizeConsumeQueue=200, maxMessageSize=1024)
HOST = (b"\x0a\x00\x00\x09", 10911)
BIG = 1 << 30
N = 60  # about 17 records per segment: four segments


def msg(i: int, queue_id: int) -> MessageToStore:
    return MessageToStore(
        topic="T",
        queue_id=queue_id,
        body=f"body-{i:04d}-".encode().ljust(80, b"b"),
        properties={"TAGS": "t", "KEYS": f"k{i}", "UNIQ_KEY": f"U{i:04d}"},
        born_timestamp=i,
    )


def filled(disk: DiskView, queues: int = 2) -> tuple[MessageStore, str, list[PutResult]]:
    """A store holding N messages over three segments, left open (the caller decides how the
    process ends): the store, its path and the put results."""
    path = disk.path("s")
    store = MessageStore(path, CFG, store_host=HOST, fs=disk.fs)
    store.open()
    results = [store.put_messages([msg(i, i % queues)], 1000 + i)[0] for i in range(N)]
    assert results[-1].commitlog_offset >= 3 * SEG, "the test needs four segments"
    return store, path, results


def reopen(disk: DiskView, path: str, cfg: StoreConfig = CFG) -> MessageStore:
    """Open the store at ``path`` again (the first one may still be open: a killed process)."""
    store = MessageStore(path, cfg, store_host=HOST, fs=disk.fs)
    store.open()
    return store


def in_segment(results: list[PutResult], segment: int) -> PutResult:
    """A record in the middle of the segment: valid records follow it in the same segment."""
    mine = [r for r in results if r.commitlog_offset // SEG == segment]
    return mine[len(mine) // 2]


def flip(disk: DiskView, path: str, offset: int) -> None:
    """Flip one bit of the CommitLog byte at ``offset``, behind the store's back."""
    seg = os.path.join(path, "commitlog", segment_name(offset - offset % SEG))
    pos = offset % SEG
    byte = disk.read(seg)[pos]
    disk.patch(seg, pos, bytes([byte ^ 0x01]))


def record_bytes(disk: DiskView, path: str, r: PutResult) -> bytes:
    seg = os.path.join(
        path, "commitlog", segment_name(r.commitlog_offset - r.commitlog_offset % SEG)
    )
    pos = r.commitlog_offset % SEG
    return disk.read(seg)[pos : pos + r.size]


# where in a record a byte is flipped: the fixed header (queueId), totalSize itself, the body,
# the properties and the record CRC's own digits
FIELDS: dict[str, Callable[[bytes], int]] = {
    "header": lambda rec: 12,
    "total_size": lambda rec: 3,
    "body": lambda rec: _FIXED[(4, 4)].size + 3,
    "properties": lambda rec: rec.index(b"KEYS") + 1,
    "crc": lambda rec: len(rec) - 4,
}


# ------------------------------------------------------------------------------ recovery


@pytest.mark.parametrize("field", list(FIELDS))
@pytest.mark.parametrize("segment", [0, 1, 2])
def test_flipped_byte_above_the_checkpoint_is_found_after_unclean_shutdown(
    disk: DiskView, segment: int, field: str
) -> None:
    _, path, results = filled(disk)  # never flushed: no checkpoint vouches for anything
    # the process dies with the store open: the abort marker stays
    assert disk.exists(os.path.join(path, ABORT_FILE))
    victim = in_segment(results, segment)
    flip(disk, path, victim.commitlog_offset + FIELDS[field](record_bytes(disk, path, victim)))
    with pytest.raises(CorruptionError) as err:
        reopen(disk, path)
    text = str(err.value)
    assert segment_name(segment * SEG) in text
    assert f"offset {victim.commitlog_offset}" in text
    assert "Refusing to truncate" in text
    if field in ("header", "body", "properties", "crc"):
        assert "CRC" in text


@pytest.mark.parametrize("field", list(FIELDS))
@pytest.mark.parametrize("segment", [0, 1, 2])
def test_flipped_byte_below_the_checkpoint_is_never_served_and_check_store_finds_it(
    disk: DiskView, segment: int, field: str
) -> None:
    """Recovery trusts the fsynced part (restart time does not grow with the store); the
    record is checked when read instead, and checkStore finds it."""
    store, path, results = filled(disk)
    store.flush()
    victim = in_segment(results, segment)
    flip(disk, path, victim.commitlog_offset + FIELDS[field](record_bytes(disk, path, victim)))
    again = reopen(disk, path)  # kill -9 after the flush: unclean, but nothing to scan
    qid = results.index(victim) % 2  # filled() puts message i in queue i % 2
    with pytest.raises(RecordCorrupt) as err:
        again.get_messages("T", qid, 0, 100, BIG)
    assert err.value.offset == victim.commitlog_offset
    # the records before it are served one by one, the damaged one never
    res = again.get_messages("T", qid, 0, victim.queue_offset, BIG)
    assert res.message_count == victim.queue_offset
    assert all(m.queue_offset < victim.queue_offset for m in iter_stored(res.body))
    again.close_files()
    problems = [f for f in check_store(path, fs=disk.fs).problems if "commitlog" in f.file]
    assert problems and problems[0].file.endswith(segment_name(segment * SEG))
    assert f"commitlog offset {victim.commitlog_offset}," in problems[0].what


def test_restarts_scan_only_what_the_checkpoint_does_not_cover(disk: DiskView) -> None:
    store, path, results = filled(disk)
    store.flush()
    flushed_end = results[-1].commitlog_offset + results[-1].size
    tail = [store.put_messages([msg(i, 0)], 2000 + i)[0] for i in range(N, N + 5)]
    end = tail[-1].commitlog_offset + tail[-1].size
    # kill -9: the first store is never closed, its abort marker stays
    again = MessageStore(path, CFG, store_host=HOST, fs=disk.fs)
    rep = again.open()
    assert rep.unclean_shutdown and not rep.commitlog.full_scan
    assert rep.commitlog.scanned_from == flushed_end
    assert rep.commitlog.bytes_scanned == end - flushed_end  # the unflushed tail only
    assert again.commitlog.verified_from == flushed_end
    again.close()
    assert not disk.exists(os.path.join(path, ABORT_FILE)), "close removes the abort marker"
    clean = MessageStore(path, CFG, store_host=HOST, fs=disk.fs)
    rep = clean.open()
    assert disk.exists(os.path.join(path, ABORT_FILE)), "open puts it back"
    assert not rep.unclean_shutdown and not rep.commitlog.full_scan
    assert rep.commitlog.scanned_from == end and rep.commitlog.bytes_scanned == 0
    assert clean.commitlog.verified_from == end
    clean.close()


def test_corrupt_checkpoint_means_a_full_scan_not_a_crash(disk: DiskView) -> None:
    store, path, results = filled(disk)
    store.close()
    ckpt = os.path.join(path, "commitlog", CHECKPOINT_FILE)
    disk.patch(ckpt, 2, b"\xff")  # the offset no longer matches its CRC
    store = MessageStore(path, CFG, store_host=HOST, fs=disk.fs)
    rep = store.open()
    assert rep.commitlog.checkpoint_state == "corrupt"
    assert rep.commitlog.full_scan and rep.commitlog.scanned_from == 0
    store.close()
    # and with damage in the first segment, that full scan finds it
    disk.patch(ckpt, 2, b"\xff")
    flip(disk, path, in_segment(results, 0).commitlog_offset + 40)
    with pytest.raises(CorruptionError, match=segment_name(0)):
        MessageStore(path, CFG, store_host=HOST, fs=disk.fs).open()


def test_checkcrconrecover_off_checks_layout_only(disk: DiskView) -> None:
    _, path, results = filled(disk)
    victim = in_segment(results, 0)
    flip(disk, path, victim.commitlog_offset + FIELDS["body"](b""))
    lax = StoreConfig(
        mappedFileSizeCommitLog=SEG, mappedFileSizeConsumeQueue=200, checkCRCOnRecover=False
    )
    store = reopen(disk, path, lax)  # the body flip passes a layout-only scan
    assert store.get_commitlog_max_offset() == results[-1].commitlog_offset + results[-1].size
    with pytest.raises(RecordCorrupt):  # and the pull check still refuses to serve it
        store.get_messages("T", results.index(victim) % 2, 0, 100, BIG)


def test_scan_segment_reports_the_first_bad_record(disk: DiskView) -> None:
    _, path, results = filled(disk)
    victim = in_segment(results, 1)
    flip(disk, path, victim.commitlog_offset + 50)
    data = disk.read(os.path.join(path, "commitlog", segment_name(SEG)))
    scan = scan_segment(data, SEG, SEG)
    assert (scan.end, scan.reason) == (victim.commitlog_offset - SEG, "record CRC mismatch")
    assert scan.records == sum(
        1 for r in results if SEG <= r.commitlog_offset < victim.commitlog_offset
    )
    lax = scan_segment(data, SEG, SEG, check_crc=False)
    assert lax.ok and lax.blank


# ------------------------------------------------------------------------------ pull path


def test_pull_never_serves_a_damaged_record_of_an_old_segment(disk: DiskView) -> None:
    store, path, results = filled(disk)
    store.close()
    victim = in_segment(results, 0)  # queue (index) of the victim: index % 2
    qid = results.index(victim) % 2
    flip(disk, path, victim.commitlog_offset + FIELDS["body"](b""))
    store = reopen(disk, path)  # a clean start checks only the checkpoint's segment
    with pytest.raises(RecordCorrupt) as err:
        store.get_messages("T", qid, 0, 100, BIG)
    assert err.value.offset == victim.commitlog_offset
    assert err.value.segment == os.path.join(path, "commitlog", segment_name(0))
    assert err.value.reason == "record CRC mismatch"
    # everything before it is served, and the other queue entirely
    before = victim.queue_offset
    got = store.get_messages("T", qid, 0, before, BIG)
    assert [m.queue_offset for m in iter_stored(got.body)] == list(range(before))
    other = store.get_messages("T", 1 - qid, 0, 100, BIG)
    assert other.message_count == N // 2
    # with the key off, the damaged body reaches the reader: what the check prevents
    lax = StoreConfig(
        mappedFileSizeCommitLog=SEG, mappedFileSizeConsumeQueue=200, checkCRCOnPull=False
    )
    store.close()
    served = reopen(disk, path, lax).get_messages("T", qid, 0, 100, BIG)
    bodies = [m.body for m in iter_stored(served.body)]
    assert bodies[victim.queue_offset] != msg(results.index(victim), qid).body


def test_read_check_skips_what_this_process_wrote_or_checked(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks: list[int] = []
    real = commitlog_module.crc_intact

    def counting(*args: object, **kw: object) -> int:
        checks.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(commitlog_module, "crc_intact", counting)
    store, path, _ = filled(disk, queues=1)
    assert store.get_messages("T", 0, 0, 100, BIG).message_count == N
    assert checks == [], "records appended by this process are not checked again"
    store.close()
    store = reopen(disk, path)
    first = sum(1 for _ in iter_stored(store.get_messages("T", 0, 0, 100, BIG).body))
    assert first == N
    old = len(checks)
    assert old == N, "every record below the checkpoint is checked once when read"
    store.get_messages("T", 0, 0, 100, BIG)
    assert len(checks) == old, "a sequential read moved the watermark: no second check"


def test_a_message_looked_up_by_offset_is_never_a_damaged_old_record(disk: DiskView) -> None:
    """look_message_by_offset (an END_TRANSACTION's half, viewMessage, a schedule re-put) checks
    the CRC of a record below verified_from, like the pull path; one this process appended is
    served without a second CRC pass (issue 28 item 5) and is intact."""
    store, path, results = filled(disk)
    store.close()
    victim = in_segment(results, 0)
    flip(disk, path, victim.commitlog_offset + FIELDS["body"](b""))
    store = reopen(disk, path)
    assert victim.commitlog_offset < store.commitlog.verified_from
    assert store.look_message_by_offset(victim.commitlog_offset) is None
    neighbour = results[results.index(victim) - 1]
    found = store.look_message_by_offset(neighbour.commitlog_offset)
    assert found is not None and found.body == msg(results.index(neighbour), 0).body
    fresh = store.put_messages([msg(N, 0)], 1000 + N)[0]
    assert fresh.commitlog_offset >= store.commitlog.verified_from
    got = store.look_message_by_offset(fresh.commitlog_offset)
    assert got is not None and got.body == msg(N, 0).body


# ------------------------------------------------------------------------------ checkStore


def test_check_store_passes_a_clean_store(disk: DiskView) -> None:
    store, path, _ = filled(disk)
    store.close()
    report = check_store(path, fs=disk.fs)
    assert report.ok and report.findings == []
    assert report.segments == 4 and report.records == N and report.cq_entries == N
    assert report.segment_size == SEG  # inferred from the segment names


def _problem_files(path: str, disk: DiskView) -> list[tuple[str, int | None, str]]:
    report = check_store(path, fs=disk.fs)
    return [(os.path.relpath(f.file, path), f.offset, f.what) for f in report.problems]


def test_check_store_finds_a_damaged_record_in_an_old_segment(disk: DiskView) -> None:
    store, path, results = filled(disk)
    store.close()
    victim = in_segment(results, 0)
    flip(disk, path, victim.commitlog_offset + FIELDS["body"](b""))
    problems = _problem_files(path, disk)
    assert problems[0][:2] == (f"commitlog/{segment_name(0)}", victim.commitlog_offset)
    assert "record CRC mismatch" in problems[0][2] and "below the flushed" in problems[0][2]
    # the entry of the damaged record points at no valid record either
    assert any("consumequeue/T/" in p[0] for p in problems)


def test_check_store_finds_bad_consume_queue_entries(disk: DiskView) -> None:
    store, path, results = filled(disk)
    store.close()
    cq = os.path.join(path, "consumequeue", "T", "0", segment_name(0))
    r0, r1 = results[0], results[1]  # queue 0 entry 0, queue 1 entry 0
    disk.patch(cq, 20, ENTRY.pack(r1.commitlog_offset, r1.size, 0))  # entry 1 -> queue 1's record
    disk.patch(cq, 40, ENTRY.pack(r0.commitlog_offset + 1, r0.size, 0))  # entry 2: not a start
    disk.patch(cq, 60, ENTRY.pack(results[6].commitlog_offset, results[6].size + 4, 0))  # size
    found = {(f, off): what for f, off, what in _problem_files(path, disk)}
    rel = f"consumequeue/T/0/{segment_name(0)}"
    assert "belongs to T:1" in found[(rel, 20)]
    assert "not the start of a record" in found[(rel, 40)]
    assert "is " in found[(rel, 60)] and "bytes" in found[(rel, 60)]


def test_check_store_finds_checkpoint_epoch_and_missing_segment_damage(disk: DiskView) -> None:
    store, path, _ = filled(disk)
    store.close()
    disk.patch(os.path.join(path, "dispatch.checkpoint"), 0, b"\x7f")
    disk.write(os.path.join(path, "epochFileCheckpoint"), b"1\n1-0\ncrc=00000000\n")
    disk.unlink(os.path.join(path, "commitlog", segment_name(SEG)))
    report = check_store(path, segment_size=SEG, fs=disk.fs)
    whats = "\n".join(f.line() for f in report.problems)
    assert "dispatch.checkpoint: checkpoint fails its CRC" in whats
    assert "epochFileCheckpoint: " in whats and "checksum mismatch" in whats
    assert f"{segment_name(2 * SEG)}: does not follow {segment_name(0)}" in whats


def test_check_store_calls_a_torn_tail_a_warning(disk: DiskView) -> None:
    _, path, results = filled(disk)  # the process dies: nothing flushed, the tail torn below
    last = results[-1]
    base = last.commitlog_offset // SEG * SEG
    disk.truncate(
        os.path.join(path, "commitlog", segment_name(base)),
        last.commitlog_offset - base + last.size // 2,
    )
    report = check_store(path, fs=disk.fs)
    assert report.warnings[0].what.startswith("torn tail")
    assert not [p for p in report.problems if "commitlog/" in p.file]


# ------------------------------------------------------------------------------ store lock


def test_a_second_lock_on_a_store_is_refused_naming_the_holder(disk: DiskView) -> None:
    store = disk.path("store")
    first = StoreLock.acquire(
        store, LockOwner(4242, "broker-a", "2026-01-01T00:00:00.000+00:00"), fs=disk.fs
    )
    with pytest.raises(StoreLocked) as err:
        StoreLock.acquire(store, LockOwner(1, "broker-b", "now"), fs=disk.fs)
    assert "broker broker-a (pid 4242, started 2026-01-01" in str(err.value)
    assert str(err.value).startswith("Lock failed, MQ already started")
    assert read_owner(store, fs=disk.fs) == first.owner
    first.release()
    second = StoreLock.acquire(store, LockOwner(1, "broker-b", "now"), fs=disk.fs)
    assert read_owner(store, fs=disk.fs) == second.owner
    second.release()


def test_a_dead_holder_does_not_block_the_store() -> None:
    import random

    from tests.harness.sim_disk import SimFileSystem

    fs = SimFileSystem(random.Random(1))
    StoreLock.acquire("/sim/s", LockOwner(1, "a", "t"), fs=fs)
    fs.crash(keep_unsynced=True)  # the process is killed: the kernel drops its locks
    StoreLock.acquire("/sim/s", LockOwner(2, "a", "t"), fs=fs).release()


def test_check_store_command_exit_codes(
    tmp_path: os.PathLike[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from rocketrio.cli.main import main
    from rocketrio.storage.fs import OS_FS

    disk = DiskView(OS_FS, str(tmp_path))
    store, path, results = filled(disk)
    store.close()
    assert main(["admin", "checkStore", "--store", path]) == 0
    out = capsys.readouterr().out
    assert "OK: 0 problem(s)" in out and f"{N} records checked" in out
    victim = in_segment(results, 1)
    flip(disk, path, victim.commitlog_offset + FIELDS["body"](b""))
    assert main(["admin", "checkStore", "--store", path]) == 1
    out = capsys.readouterr().out
    seg = os.path.join(path, "commitlog", segment_name(SEG))
    assert f"PROBLEM {seg} @ {victim.commitlog_offset - SEG}: record CRC mismatch" in out
    assert out.strip().splitlines()[-1].startswith("DAMAGED: ")
    assert main(["admin", "checkStore"]) == 2
