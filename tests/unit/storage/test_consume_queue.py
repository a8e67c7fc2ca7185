"""ConsumeQueue: 20-byte entries across files, torn tails, truncation, min offset, time lookup."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rocketrio.storage.commitlog import CorruptionError, segment_name
from rocketrio.storage.consume_queue import ENTRY, Boundary, ConsumeQueue
from tests.harness.disk_view import DiskView

FILE = 100  # five entries per file


def entries(first: int, count: int) -> bytes:
    # entry i points at commitlog offset 1000*i, size 100+i, tags code -i
    return b"".join(ENTRY.pack(1000 * i, 100 + i, -i) for i in range(first, first + count))


def cq_at(disk: DiskView) -> ConsumeQueue:
    cq = ConsumeQueue(disk.root, "TopicA", 3, FILE, fs=disk.fs)
    cq.open()
    return cq


def files(disk: DiskView) -> list[str]:
    return disk.listdir(disk.path("TopicA", "3"))


def test_append_and_get_across_files(disk: DiskView) -> None:
    cq = cq_at(disk)
    cq.append(entries(0, 7), 0)
    cq.append(entries(7, 6), 7)
    assert (cq.min_offset, cq.max_offset) == (0, 13)
    assert files(disk) == [segment_name(0), segment_name(100), segment_name(200)]
    assert cq.get(3, 4) == [(1000 * i, 100 + i, -i) for i in range(3, 7)]
    assert cq.get(11, 10) == [(1000 * i, 100 + i, -i) for i in (11, 12)]
    assert cq.get(13, 5) == []
    assert cq.entry(12) == (12000, 112, -12)
    assert cq.entry(13) is None
    assert cq.last_entry() == (12000, 112, -12)
    cq.close()
    again = cq_at(disk)
    assert again.get(0, 100) == [(1000 * i, 100 + i, -i) for i in range(13)]


def test_dispatch_gap_is_refused(disk: DiskView) -> None:
    cq = cq_at(disk)
    cq.append(entries(0, 3), 0)
    with pytest.raises(CorruptionError, match="expects entry 3"):
        cq.append(entries(5, 1), 5)
    assert cq.max_offset == 3


def test_empty_queue_can_start_above_zero(disk: DiskView) -> None:
    cq = cq_at(disk)
    cq.append(entries(12, 4), 12)
    assert (cq.min_offset, cq.max_offset) == (12, 16)
    assert cq.get(0, 10) == [(1000 * i, 100 + i, -i) for i in range(12, 16)]
    cq.close()
    again = cq_at(disk)
    # the leading hole of the first file is found again after a restart
    assert (again.min_offset, again.max_offset) == (12, 16)


def _cut7(disk: DiskView, path: str) -> None:
    disk.truncate(path, disk.size(path) - 7)


@pytest.mark.parametrize(
    ("damage", "max_after", "dropped"),
    [
        (_cut7, 12, 13),  # a partial entry
        (lambda disk, f: disk.append(f, bytes(40)), 13, 40),  # pages of zeros
        (lambda disk, f: disk.append(f, ENTRY.pack(99, 0, 5)), 13, 20),  # an entry of size 0
    ],
)
def test_torn_tail_is_dropped(
    disk: DiskView, damage: Callable[[DiskView, str], None], max_after: int, dropped: int
) -> None:
    cq = cq_at(disk)
    cq.append(entries(0, 13), 0)
    cq.close()
    damage(disk, disk.path("TopicA", "3", segment_name(200)))
    cq = ConsumeQueue(disk.root, "TopicA", 3, FILE, fs=disk.fs)
    assert cq.open() == dropped
    assert cq.max_offset == max_after
    assert cq.get(0, 100) == [(1000 * i, 100 + i, -i) for i in range(max_after)]
    cq.append(entries(max_after, 1), max_after)
    assert cq.last_entry() == (1000 * max_after, 100 + max_after, -max_after)


def test_short_middle_file_ends_the_queue(disk: DiskView) -> None:
    cq = cq_at(disk)
    cq.append(entries(0, 13), 0)
    cq.close()
    disk.truncate(disk.path("TopicA", "3", segment_name(100)), 60)
    cq = ConsumeQueue(disk.root, "TopicA", 3, FILE, fs=disk.fs)
    cq.open()
    assert cq.max_offset == 8
    assert files(disk) == [segment_name(0), segment_name(100)]


def test_missing_middle_file_is_corruption(disk: DiskView) -> None:
    cq = cq_at(disk)
    cq.append(entries(0, 13), 0)
    cq.close()
    disk.unlink(disk.path("TopicA", "3", segment_name(100)))
    with pytest.raises(CorruptionError, match="does not follow"):
        cq_at(disk)


class Killed(Exception):
    pass


def test_kill9_while_truncating_leaves_no_gap(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Truncation deletes later files last first: killed after one unlink, the queue still
    opens (a gap would be refused as corruption) and the cut can be made again."""
    cq = cq_at(disk)
    cq.append(entries(0, 13), 0)
    real_unlink = disk.fs.unlink

    def killed_after_unlink(path: str) -> None:
        real_unlink(path)
        raise Killed

    monkeypatch.setattr(disk.fs, "unlink", killed_after_unlink)
    with pytest.raises(Killed):
        cq.truncate_by_phy(1000)
    monkeypatch.undo()
    cq.close_files()
    again = cq_at(disk)
    assert files(disk) == [segment_name(0), segment_name(100)]
    assert again.truncate_by_phy(1000) == 9
    assert again.get(0, 100) == [(0, 100, 0)]


@pytest.mark.parametrize(
    ("phy", "max_after", "file_count"),
    [
        (13000, 13, 3),
        (12000, 12, 3),
        (9500, 10, 3),
        (10000, 10, 3),
        (4500, 5, 2),
        (1, 1, 1),
        (0, 0, 1),
    ],
)
def test_truncate_by_phy(disk: DiskView, phy: int, max_after: int, file_count: int) -> None:
    cq = cq_at(disk)
    cq.append(entries(0, 13), 0)
    assert cq.truncate_by_phy(phy) == 13 - max_after
    assert cq.max_offset == max_after
    assert len(files(disk)) == file_count
    cq.close()
    again = cq_at(disk)
    assert again.max_offset == max_after
    assert all(e[0] < phy for e in again.get(0, 100))


def test_retention_moves_min_offset(disk: DiskView) -> None:
    cq = cq_at(disk)
    cq.append(entries(0, 13), 0)
    cq.correct_min_offset(2500)
    assert cq.min_offset == 3
    assert cq.get(0, 2) == [(3000, 103, -3), (4000, 104, -4)]
    assert cq.delete_files_below_phy(7000) == 1  # file 0 (entries 0..4) only
    assert files(disk) == [segment_name(100), segment_name(200)]
    assert cq.min_offset == 7
    # the last file is kept even when everything is below
    assert cq.delete_files_below_phy(10**9) == 1
    assert files(disk) == [segment_name(200)]
    assert cq.min_offset == cq.max_offset == 13


@pytest.mark.parametrize(
    ("ts", "boundary", "expected"),
    [
        (0, "LOWER", 0),
        (100, "LOWER", 0),
        (105, "LOWER", 1),
        (110, "LOWER", 1),
        (220, "LOWER", 12),
        (221, "LOWER", 13),  # after everything: max offset
        (0, "UPPER", 0),  # before everything: min offset
        (100, "UPPER", 0),
        (105, "UPPER", 0),
        (110, "UPPER", 1),
        (10**6, "UPPER", 12),
    ],
)
def test_search_by_timestamp(disk: DiskView, ts: int, boundary: Boundary, expected: int) -> None:
    cq = cq_at(disk)
    cq.append(entries(0, 13), 0)
    store_time = {1000 * i: 100 + 10 * i for i in range(13)}
    got = cq.search_by_timestamp(ts, lambda phy, _size: store_time[phy], boundary)
    assert got == expected


def test_destroy_removes_files(disk: DiskView) -> None:
    cq = cq_at(disk)
    cq.append(entries(0, 3), 0)
    cq.destroy()
    assert not disk.exists(disk.path("TopicA", "3"))
    assert cq.max_offset == 0


def test_bad_file_size_is_refused(disk: DiskView) -> None:
    with pytest.raises(ValueError, match="multiple of 20"):
        ConsumeQueue(disk.root, "T", 0, 30, fs=disk.fs)
