"""CommitLog: append, roll with BLANK, flush checkpoint, recovery of torn tails vs corruption."""

from __future__ import annotations

import os
import struct
import threading

import pytest

from rocketrio.protocol.message import (
    BLANK_MAGIC_CODE,
    build_stored_message,
    check_stored_record,
    decode_stored,
    seal_record_crc,
)
from rocketrio.storage.commitlog import (
    CHECKPOINT_FILE,
    CommitLog,
    CorruptionError,
    OffsetCheckpoint,
    RecordNotFound,
    segment_name,
)
from rocketrio.storage.commitlog import segments as commitlog_mod
from rocketrio.storage.commitlog.log import RECORD_READ_GUESS
from rocketrio.storage.fs import FileSystem, WriteData
from tests.harness.disk_view import DiskView

SEG = 4096
HOST = (b"\x7f\x00\x00\x01", 10911)


def rec(i: int, body_len: int = 100) -> bytes:
    return build_stored_message(
        topic="T",
        queue_id=0,
        body=bytes([i % 256]) * body_len,
        flag=0,
        properties=f"UNIQ_KEY\x01M{i:06d}\x02",  # fixed size
        sys_flag=0,
        born_timestamp=i,
        born_host=HOST,
        store_timestamp=1000 + i,
        store_host=HOST,
        queue_offset=i,
        record_crc="reserve",
    )


def opened(disk: DiskView, path: str, size: int = SEG) -> CommitLog:
    log = CommitLog(path, size, fs=disk.fs)
    log.open()
    return log


def seg_path(path: str, base: int) -> str:
    return os.path.join(path, segment_name(base))


def test_append_read_round_trip(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    records = [rec(i) for i in range(5)]
    positions = log.append(records)
    assert positions == [sum(len(r) for r in records[:i]) for i in range(5)]
    assert log.max_offset == sum(len(r) for r in records)
    for pos, r in zip(positions, records, strict=True):
        stored = log.read_record(pos)
        assert len(stored) == len(r)
        assert check_stored_record(stored, 0, expected_offset=pos) == len(r)
        msg, _ = decode_stored(stored)
        assert msg.commitlog_offset == pos
    assert log.read(positions[1], 10) == log.read_record(positions[1])[:10]
    with pytest.raises(RecordNotFound):
        log.read_record(log.max_offset)
    log.close()


def test_read_record_of_a_record_longer_than_the_first_read(disk: DiskView) -> None:
    """read_record reads RECORD_READ_GUESS bytes first: a longer record takes a second read and
    comes back whole, a shorter one is cut at its end (not the next record's bytes)."""
    log = opened(disk, disk.path("cl"), size=4 * RECORD_READ_GUESS)
    records = [rec(0, 50), rec(1, RECORD_READ_GUESS + 500), rec(2, 50)]
    positions = log.append(records)
    for i, (pos, r) in enumerate(zip(positions, records, strict=True)):
        stored = log.read_record(pos)
        assert len(stored) == len(r)
        assert check_stored_record(stored, 0, expected_offset=pos) == len(r)
        assert decode_stored(stored)[0].body == bytes([i]) * (len(decode_stored(r)[0].body))
    log.close()


def test_roll_writes_blank_and_full_size_segment(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    size = len(rec(0))
    per_segment = (SEG - 8) // size
    positions = log.append([rec(i) for i in range(per_segment + 2)])
    assert positions[per_segment] == SEG  # first record of the second segment
    blank_at = positions[per_segment - 1] + size
    first = seg_path(disk.path("cl"), 0)
    assert disk.size(first) == SEG
    total, magic = struct.unpack_from(">ii", disk.read(first), blank_at)
    assert (total, magic) == (SEG - blank_at, BLANK_MAGIC_CODE)
    got = [off for off, _ in log.iter_records(0)]
    assert got == positions
    log.close()
    log = opened(disk, disk.path("cl"))
    assert log.max_offset == positions[-1] + size
    assert [off for off, _ in log.iter_records(0)] == positions


def test_refuses_records_without_trailer_or_too_big(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    plain = build_stored_message(
        topic="T", queue_id=0, body=b"x", flag=0, properties="", sys_flag=0,
        born_timestamp=0, born_host=HOST, store_timestamp=0, store_host=HOST, record_crc="none",
    )  # fmt: skip
    with pytest.raises(ValueError, match="__CRC32#"):
        log.append([rec(0), plain])
    with pytest.raises(ValueError, match="cannot fit"):
        log.append([rec(0, body_len=SEG)])
    assert log.max_offset == 0
    assert log.append([rec(1)]) == [0]


def test_flush_records_checkpoint(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    log.append([rec(i) for i in range(3)])
    assert log.flushed_offset == 0
    end = log.flush()
    assert end == log.max_offset == log.flushed_offset
    assert OffsetCheckpoint(disk.path("cl", CHECKPOINT_FILE), fs=disk.fs).load() == end
    log.append([rec(3)])
    log.close()
    log = opened(disk, disk.path("cl"))
    assert log.flushed_offset == log.max_offset


def test_flush_in_a_thread_while_appending(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"), 64 * 1024)
    stop = threading.Event()

    def flusher() -> None:
        while not stop.is_set():
            log.flush()

    t = threading.Thread(target=flusher)
    t.start()
    try:
        positions = [p for i in range(200) for p in log.append([rec(i), rec(i + 1)])]
    finally:
        stop.set()
        t.join()
    log.close()
    log = opened(disk, disk.path("cl"), 64 * 1024)
    assert [off for off, _ in log.iter_records(0)] == positions


def _crash_image(disk: DiskView, n: int, flush_before_last: bool = True) -> tuple[str, int, int]:
    """A commitlog dir copied while open: n-1 records flushed, the last one not."""
    src = disk.path("src")
    log = opened(disk, src)
    log.append([rec(i) for i in range(n - 1)])
    if flush_before_last:
        log.flush()
    start = log.append([rec(n - 1)])[0]
    image = disk.path("image")
    disk.copytree(src, image)
    log.close()
    return image, start, start + len(rec(n - 1))


def test_cut_inside_last_record_at_every_byte(disk: DiskView) -> None:
    image, start, end = _crash_image(disk, 6)
    assert start // SEG == (end - 1) // SEG
    base = start - start % SEG
    work = disk.path("work")
    for cut in range(start + 1, end):
        disk.copytree(image, work)  # rewrites in place: unlink is slow with discard
        disk.truncate(seg_path(work, base), cut - base)
        log = CommitLog(work, SEG, fs=disk.fs)
        report = log.open()
        assert report.truncated_at == start, cut
        assert report.bytes_dropped == cut - start
        assert report.segment == seg_path(work, base)
        assert log.max_offset == start
        assert disk.size(seg_path(work, base)) == start - base
        assert len(list(log.iter_records(0))) == 5
        log.close()


def test_zero_filled_tail_is_torn(disk: DiskView) -> None:
    image, start, end = _crash_image(disk, 4)
    disk.patch(seg_path(image, 0), start, bytes(end - start + 500))
    log = CommitLog(image, SEG, fs=disk.fs)
    report = log.open()
    assert report.truncated_at == start
    assert "bad magic" in report.reason


def test_garbage_in_flushed_middle_is_corruption(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    positions = log.append([rec(i) for i in range(6)])
    log.close()
    disk.patch(seg_path(disk.path("cl"), 0), positions[2] + 90, b"\xde\xad\xbe\xef")
    # a default open trusts the fsynced part: nothing below the checkpoint is scanned
    log = CommitLog(disk.path("cl"), SEG, fs=disk.fs)
    report = log.open()
    assert report.bytes_scanned == 0 and log.verified_from == log.max_offset
    log.close()
    # a full scan finds the damage, names it and refuses to truncate fsynced data
    with pytest.raises(CorruptionError, match=rf"{segment_name(0)} position {positions[2]}"):
        CommitLog(disk.path("cl"), SEG, fs=disk.fs).open(verify_all=True)


def test_garbage_before_valid_unflushed_records_is_corruption(disk: DiskView) -> None:
    image, _, _ = _crash_image(disk, 6, flush_before_last=False)
    size = len(rec(0))
    disk.patch(seg_path(image, 0), 2 * size + 10, b"garbage!")
    with pytest.raises(CorruptionError, match=f"valid record follows at offset {3 * size}"):
        CommitLog(image, SEG, fs=disk.fs).open()
    # nothing was cut
    assert disk.size(seg_path(image, 0)) == 6 * size


def test_missing_flushed_bytes_is_corruption(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    positions = log.append([rec(i) for i in range(3)])
    log.close()
    disk.truncate(seg_path(disk.path("cl"), 0), positions[2] + 5)
    with pytest.raises(CorruptionError, match="below the flushed checkpoint"):
        CommitLog(disk.path("cl"), SEG, fs=disk.fs).open()
    disk.truncate(seg_path(disk.path("cl"), 0), positions[2])
    with pytest.raises(CorruptionError, match="fsynced data is missing"):
        CommitLog(disk.path("cl"), SEG, fs=disk.fs).open()


def test_torn_segment_end_drops_later_unflushed_segments(disk: DiskView) -> None:
    src = disk.path("src")
    log = opened(disk, src)
    size = len(rec(0))
    per_segment = (SEG - 8) // size
    log.append([rec(i) for i in range(per_segment - 2)])
    log.flush()
    positions = log.append([rec(i) for i in range(per_segment)])  # ends in segment 2
    image = disk.path("image")
    disk.copytree(src, image)
    log.close()
    # the crash kept the second segment but lost the end of the first (blank included)
    cut = positions[1]
    disk.truncate(seg_path(image, 0), cut + 7)
    log = CommitLog(image, SEG, fs=disk.fs)
    report = log.open()
    assert report.truncated_at == cut
    assert report.deleted_segments == (segment_name(SEG),)
    assert not disk.exists(seg_path(image, SEG))
    assert log.max_offset == cut


class Killed(Exception):
    pass


def test_kill9_while_deleting_later_segments_leaves_no_gap(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery deletes the segments after a torn tail last first: killed after one unlink,
    the next start finds no missing segment and finishes the cut."""
    log = opened(disk, disk.path("src"))
    per_segment = (SEG - 8) // len(rec(0))
    positions = log.append([rec(i) for i in range(3 * per_segment + 2)])  # four segments
    image = disk.path("image")
    disk.copytree(disk.path("src"), image)  # nothing flushed
    log.close()
    disk.truncate(seg_path(image, 0), positions[1] + 7)
    real_unlink = disk.fs.unlink

    def killed_after_unlink(path: str) -> None:
        real_unlink(path)
        raise Killed

    monkeypatch.setattr(disk.fs, "unlink", killed_after_unlink)
    with pytest.raises(Killed):
        CommitLog(image, SEG, fs=disk.fs).open()
    monkeypatch.undo()
    assert disk.listdir(image) == [segment_name(b) for b in (0, SEG, 2 * SEG)]
    log = CommitLog(image, SEG, fs=disk.fs)
    report = log.open()
    assert report.truncated_at == log.max_offset == positions[1]
    assert report.deleted_segments == (segment_name(SEG), segment_name(2 * SEG))
    assert disk.listdir(image) == [segment_name(0)]


def test_missing_middle_segment_is_corruption(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    log.append([rec(i) for i in range(60)])
    log.close()
    assert disk.exists(seg_path(disk.path("cl"), 2 * SEG))
    disk.unlink(seg_path(disk.path("cl"), SEG))
    with pytest.raises(CorruptionError, match="missing"):
        CommitLog(disk.path("cl"), SEG, fs=disk.fs).open()


def test_truncate_to_is_durable_and_lowers_checkpoint(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    positions = log.append([rec(i) for i in range(40)])
    log.flush()
    cut = positions[20]
    log.truncate_to(cut)
    assert log.max_offset == log.flushed_offset == cut
    assert log.read(cut, 10) == b""
    assert OffsetCheckpoint(disk.path("cl", CHECKPOINT_FILE), fs=disk.fs).load() == cut
    assert log.append([rec(99)]) == [cut]
    log.close()
    log = opened(disk, disk.path("cl"))
    assert [off for off, _ in log.iter_records(0)] == [*positions[:20], cut]
    with pytest.raises(ValueError, match="outside"):
        log.truncate_to(log.max_offset + 1)


def test_delete_segments_below(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    positions = log.append([rec(i) for i in range(80)])
    last = log.segment_base(log.max_offset)
    assert last >= 4 * SEG
    assert log.delete_segments_below(2 * SEG + 1) == [segment_name(0), segment_name(SEG)]
    assert log.min_offset == 2 * SEG
    assert log.read(positions[0], 10) == b""
    assert [off for off, _ in log.iter_records(0)] == [p for p in positions if p >= 2 * SEG]
    # the segment being written is never deleted
    expected = [segment_name(b) for b in range(2 * SEG, last, SEG)]
    assert log.delete_segments_below(10**9) == expected
    assert log.min_offset == last
    log.close()
    assert opened(disk, disk.path("cl")).min_offset == last


def test_failed_write_is_rolled_back(disk: DiskView, monkeypatch: pytest.MonkeyPatch) -> None:
    log = opened(disk, disk.path("cl"))
    size = len(rec(0))
    per_segment = (SEG - 8) // size
    log.append([rec(i) for i in range(per_segment - 1)])
    before = log.max_offset
    calls = []
    real = commitlog_mod.pwrite_all

    def failing(fs: FileSystem, fd: int, data: WriteData, pos: int) -> None:
        calls.append(pos)
        if len(calls) == 3:  # first chunk, blank, then the new segment's chunk fails
            raise OSError(28, "No space left on device")
        real(fs, fd, data, pos)

    monkeypatch.setattr(commitlog_mod, "pwrite_all", failing)
    with pytest.raises(OSError, match="No space"):
        log.append([rec(i) for i in range(3)])
    monkeypatch.undo()
    assert log.max_offset == before
    assert disk.size(seg_path(disk.path("cl"), 0)) == before
    assert not disk.exists(seg_path(disk.path("cl"), SEG))
    assert log.append([rec(7)]) == [before]
    log.close()
    assert opened(disk, disk.path("cl")).max_offset == before + size


def sealed(records: list[bytes], start: int) -> bytes:
    """The records back to back, sealed for consecutive offsets from ``start``."""
    buf = bytearray().join(records)
    pos = 0
    for r in records:
        struct.pack_into(">q", buf, pos + 28, start + pos)
        seal_record_crc(buf, pos, len(r))
        pos += len(r)
    return bytes(buf)


def test_append_sealed_is_one_write_within_a_segment(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = opened(disk, disk.path("cl"))
    log.append([rec(0)])
    start = log.max_offset
    records = [rec(i) for i in range(1, 4)]
    writes: list[int] = []
    real = commitlog_mod.pwrite_all

    def counting(fs: FileSystem, fd: int, data: WriteData, pos: int) -> None:
        writes.append(pos)
        real(fs, fd, data, pos)

    monkeypatch.setattr(commitlog_mod, "pwrite_all", counting)
    positions = log.append_sealed(sealed(records, start), [len(r) for r in records])
    assert writes == [start]
    assert positions == [start + sum(len(r) for r in records[:i]) for i in range(3)]
    log.close()
    log = opened(disk, disk.path("cl"))  # recovery validates every record: offsets and CRCs
    assert [off for off, _ in log.iter_records(0)] == [0, *positions]


def test_append_sealed_reseals_records_moved_to_the_next_segment(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    size = len(rec(0))
    per_segment = (SEG - 8) // size
    log.append([rec(i) for i in range(per_segment - 1)])
    start = log.max_offset
    records = [rec(i) for i in range(3)]
    positions = log.append_sealed(sealed(records, start), [size] * 3)
    assert positions == [start, SEG, SEG + size]
    for pos in positions:
        check_stored_record(log.read_record(pos), 0, expected_offset=pos)
    log.close()
    log = opened(disk, disk.path("cl"))
    assert log.max_offset == SEG + 2 * size
    assert [off for off, _ in log.iter_records(start)] == positions


def test_append_sealed_refuses_a_mismatch(disk: DiskView) -> None:
    log = opened(disk, disk.path("cl"))
    records = [rec(i) for i in range(2)]
    data = sealed(records, 0)
    sizes = [len(r) for r in records]
    with pytest.raises(ValueError, match="do not match"):
        log.append_sealed(data, [sizes[0]])
    with pytest.raises(ValueError, match="do not match"):
        log.append_sealed(sealed(records, 64), sizes)  # sealed for another offset
    with pytest.raises(ValueError, match="cannot fit"):
        log.append_sealed(bytes(SEG), [SEG])
    assert log.max_offset == 0
    assert log.append_sealed(data, sizes) == [0, sizes[0]]
    assert log.append_sealed(b"", []) == []


def test_a_checkpoint_at_the_end_of_a_full_last_segment_opens(disk: DiskView) -> None:
    """The flushed checkpoint sits exactly at the end of the last segment (the next one was
    cut, or never made durable): recovery starts past every segment and must still find the
    log's end there (a power-cut seed found this)."""
    log = opened(disk, disk.path("cl"))
    positions = log.append([rec(i, 300) for i in range(40)])
    assert positions[-1] >= 2 * SEG
    log.flush()
    log.truncate_to(2 * SEG)  # a segment boundary: segment 1 keeps its BLANK record
    log.flush()
    log.close()
    empty = seg_path(disk.path("cl"), 2 * SEG)  # the next one's creation never became durable
    if disk.exists(empty):
        disk.unlink(empty)
    again = CommitLog(disk.path("cl"), SEG, fs=disk.fs)
    report = again.open()
    assert again.max_offset == 2 * SEG and report.bytes_scanned == 0
    again.append([rec(99)])  # and it goes on in a new segment
    assert again.segment_bases()[-1] == 2 * SEG
    again.close()
