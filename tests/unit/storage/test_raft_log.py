"""RaftLog: segments, torn tails vs corruption, hard state, snapshots, crash points, model."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import random
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.protocol.raft import Entry, HardState, SnapshotMeta
from rocketrio.storage import raft_segments
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.raft_log import HEADER_SIZE, RaftLog, RaftLogCompacted, RaftLogCorruption
from tests.harness.disk_view import DiskView
from tests.harness.sim_disk import SimFileSystem

DATA = 40
REC = HEADER_SIZE + DATA  # every entry made by ents() has this on-disk size


def ents(lo: int, hi: int, term: int = 1, tag: str = "") -> list[Entry]:
    """Entries lo..hi-1 whose data (DATA bytes) names index, term and tag."""
    return [Entry(i, term, f"{tag}{i}/{term}".encode().ljust(DATA, b".")) for i in range(lo, hi)]


def segments(disk: DiskView, path: str) -> list[str]:
    return [n for n in disk.listdir(path) if n.isdigit()]


def open_log(disk: DiskView, path: str, segment_size: int = 1 << 20) -> RaftLog:
    return RaftLog.open(path, segment_size=segment_size, fs=disk.fs)


@contextlib.contextmanager
def filled(
    disk: DiskView, path: str, entries: list[Entry], segment_size: int = 1 << 20
) -> Iterator[RaftLog]:
    with open_log(disk, path, segment_size) as log:
        log.append(entries)
        log.sync()
        yield log


# ---------------------------------------------------------------------------- append / read


def test_roundtrip_segments_named_by_first_index(disk: DiskView) -> None:
    with filled(disk, disk.root, ents(1, 11), segment_size=3 * REC) as log:
        assert log.recovery_report.clean
        assert segments(disk, disk.root) == [f"{i:020d}" for i in (1, 4, 7, 10)]
        assert (log.first_index, log.last_index) == (1, 10)
    with open_log(disk, disk.root, 3 * REC) as log:
        assert log.recovery_report.clean
        assert log.all_entries() == ents(1, 11)
        assert log.entries(3, 8) == ents(3, 8)
        assert [log.term_at(i) for i in range(0, 11)] == [0] + [1] * 10
        with pytest.raises(IndexError):
            log.term_at(11)


def record(index: int, term: int, data: bytes) -> bytes:
    """The documented layout: int32 length | uint32 crc32(index, term, data) | int64 | int64."""
    body = struct.pack(">qq", index, term) + data
    return struct.pack(">iI", len(data), zlib.crc32(body)) + body


def test_on_disk_records_have_the_documented_layout(disk: DiskView) -> None:
    with filled(disk, disk.root, [Entry(1, 1, b"abc"), Entry(2, 4, b""), Entry(3, 4, b"x" * 300)]):
        pass
    raw = disk.read(disk.path(f"{1:020d}"))
    assert raw == record(1, 1, b"abc") + record(2, 4, b"") + record(3, 4, b"x" * 300)


def test_crc_valid_record_with_a_lower_term_is_corruption(disk: DiskView) -> None:
    with filled(disk, disk.root, ents(1, 4, term=3)):
        pass
    disk.append(disk.path(f"{1:020d}"), record(4, 2, b"old term"))
    with pytest.raises(RaftLogCorruption, match="term 2 below earlier term 3") as err:
        open_log(disk, disk.root)
    assert err.value.offset == 3 * REC


def test_oversized_entry_gets_its_own_segment(disk: DiskView) -> None:
    big = [Entry(1, 1, b"a" * 10), Entry(2, 1, b"b" * 500), Entry(3, 1, b"c")]
    with filled(disk, disk.root, big, segment_size=100) as log:
        assert segments(disk, disk.root) == [f"{i:020d}" for i in (1, 2, 3)]
    with open_log(disk, disk.root, 100) as log:
        assert log.all_entries() == big


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([Entry(7, 2)], "gap"),
        ([Entry(6, 2), Entry(8, 2)], "not contiguous"),
        ([Entry(4, 1)], "term goes backwards"),
        ([Entry(6, 3), Entry(7, 2)], "term goes backwards"),
        ([Entry(0, 2)], "start at 1"),
        ([Entry(3, 2)], "at or below snapshot"),
    ],
)
def test_bad_appends_are_refused_and_change_nothing(
    disk: DiskView, batch: list[Entry], message: str
) -> None:
    with filled(disk, disk.root, ents(1, 6, term=2)) as log:
        if message == "at or below snapshot":
            log.save_snapshot(3, 2, b"s")
        before = (log.first_index, log.last_index, log.all_entries())
        with pytest.raises(ValueError, match=message):
            log.append(batch)
        assert (log.first_index, log.last_index, log.all_entries()) == before


def test_entries_max_bytes_and_bounds(disk: DiskView) -> None:
    with filled(disk, disk.root, ents(1, 11), segment_size=3 * REC) as log:
        assert log.entries(2, 11, max_bytes=3 * DATA) == ents(2, 5)
        assert log.entries(2, 11, max_bytes=3 * DATA + DATA - 1) == ents(2, 5)
        assert log.entries(2, 11, max_bytes=1) == ents(2, 3)  # always at least one
        assert log.entries(5, 5) == []
        with pytest.raises(IndexError):
            log.entries(5, 12)
        log.save_snapshot(4, 1, b"")
        with pytest.raises(RaftLogCompacted):
            log.entries(4, 6)
        with pytest.raises(RaftLogCompacted):
            log.term_at(3)


def test_append_of_10k_entries_takes_a_handful_of_writes_and_syncs(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What keeps a big append fast, counted instead of timed (bench/ measures the time): the
    batch goes to the file with a handful of writes and one sync, not one per entry."""
    batch = [Entry(i, 1, os.urandom(256)) for i in range(1, 10_001)]
    calls: dict[str, int] = {"write": 0, "sync": 0}
    fs = disk.fs
    for name, kind in (
        ("pwrite", "write"), ("write", "write"), ("fsync", "sync"), ("fdatasync", "sync"),
    ):  # fmt: skip
        real = getattr(fs, name)

        def counting(*args: object, _real: object = real, _kind: str = kind) -> object:
            calls[_kind] += 1
            return _real(*args)  # type: ignore[operator]

        monkeypatch.setattr(fs, name, counting)
    with open_log(disk, disk.path("big")) as log:
        calls.update(write=0, sync=0)
        log.append(batch)
        log.sync()
        assert calls["write"] <= 4 and 1 <= calls["sync"] <= 4, calls
        assert log.entries(9_990, 10_001) == batch[-11:]


def test_second_open_of_a_store_is_refused(disk: DiskView) -> None:
    with open_log(disk, disk.root), pytest.raises(RuntimeError, match="in use"):
        open_log(disk, disk.root)
    open_log(disk, disk.root).close()


# ---------------------------------------------------------------------------- suffix truncation


@pytest.mark.parametrize("conflict_at", [2, 4, 6, 9, 10])
def test_conflicting_append_truncates_suffix_across_segments(
    disk: DiskView, conflict_at: int
) -> None:
    seg = 3 * REC
    with filled(disk, disk.root, ents(1, 11), segment_size=seg) as log:
        log.append(ents(conflict_at, conflict_at + 2, term=2))
        expected = ents(1, conflict_at) + ents(conflict_at, conflict_at + 2, term=2)
        assert log.all_entries() == expected
        assert log.last_index == conflict_at + 1
        log.append(ents(conflict_at + 2, conflict_at + 4, term=2))  # append after truncation
        expected += ents(conflict_at + 2, conflict_at + 4, term=2)
    with open_log(disk, disk.root, seg) as log:
        assert log.recovery_report.clean
        assert log.all_entries() == expected
        names = segments(disk, disk.root)
        assert int(names[-1]) <= log.last_index  # no stale later segment survived


def test_append_skips_entries_the_log_already_holds(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    with filled(disk, disk.root, ents(1, 11), segment_size=3 * REC) as log:
        # a leader's retransmission overlapping the log: nothing may be cut, only 11 added
        assert not run_until_crash(monkeypatch, disk.fs, lambda: log.append(ents(4, 12)), step=0)
        assert log.all_entries() == ents(1, 12)
        # the conflict is at 8, in the middle of the batch: the cut starts there, not at 5
        log.append(ents(5, 8) + ents(8, 9, term=2))
        assert log.all_entries() == ents(1, 8) + ents(8, 9, term=2)


# ---------------------------------------------------------------------------- kill -9: torn tails


@pytest.mark.parametrize("segment_size", [1 << 20, 3 * REC], ids=["mid-segment", "own-segment"])
def test_kill9_inside_last_entry_keeps_everything_before(disk: DiskView, segment_size: int) -> None:
    src = disk.path("src")
    with filled(disk, src, ents(1, 11), segment_size):
        pass
    last_file = segments(disk, src)[-1]
    end = disk.size(os.path.join(src, last_file))
    start = end - REC
    for cut in range(start, end):
        dst = disk.path(f"cut{cut}")
        disk.copytree(src, dst)
        disk.truncate(os.path.join(dst, last_file), cut)
        with open_log(disk, dst, segment_size) as log:
            assert log.all_entries() == ents(1, 10)
            report = log.recovery_report
            if cut == start:
                assert report.torn_tail is None
                assert report.removed_files == ((last_file,) if start == 0 else ())
            else:
                assert report.torn_tail is not None
                assert (report.torn_tail.offset, report.torn_tail.dropped_bytes) == (
                    start,
                    cut - start,
                )
            log.append(ents(10, 12, term=2))
        with open_log(disk, dst, segment_size) as log:
            assert log.recovery_report.clean
            assert log.all_entries() == ents(1, 10) + ents(10, 12, term=2)


GARBLED_TAILS: dict[str, Callable[[bytes], bytes]] = {
    "zeros-over-last": lambda b: b[:-REC] + bytes(REC),
    "random-over-last": lambda b: b[:-REC] + random.Random(1).randbytes(REC),
    "flipped-crc-last": lambda b: b[: -REC + 4] + bytes([b[-REC + 4] ^ 1]) + b[-REC + 5 :],
    "huge-length-last": lambda b: b[:-REC] + b"\x7f\xff\xff\xff" + b[-REC + 4 :],
    "negative-length-last": lambda b: b[:-REC] + b"\xff\xff\xff\xf0" + b[-REC + 4 :],
    "zero-fill-after": lambda b: b + bytes(4096),
    "random-after": lambda b: b + random.Random(2).randbytes(64 * 1024),
}


@pytest.mark.parametrize("kind", GARBLED_TAILS)
def test_garbled_tail_is_dropped_not_fatal(disk: DiskView, kind: str) -> None:
    with filled(disk, disk.root, ents(1, 11)):
        pass
    file = disk.path(segments(disk, disk.root)[0])
    good = disk.read(file)
    disk.write(file, GARBLED_TAILS[kind](good))
    keep = 9 if kind.endswith("last") else 10
    with open_log(disk, disk.root) as log:
        assert log.all_entries() == ents(1, keep + 1)
        assert log.recovery_report.torn_tail is not None
        assert log.recovery_report.torn_tail.offset == keep * REC
    assert disk.read(file) == good[: keep * REC]  # the cut was made on disk


def _flip(offset: int) -> Callable[[bytes], bytes]:
    return lambda b: b[:offset] + bytes([b[offset] ^ 0x40]) + b[offset + 1 :]


MIDDLE_DAMAGE: dict[str, tuple[Callable[[bytes], bytes], int]] = {
    "data-byte": (_flip(3 * REC + HEADER_SIZE + 5), 3 * REC),
    "crc-byte": (_flip(3 * REC + 6), 3 * REC),
    "index-byte": (_flip(3 * REC + 15), 3 * REC),
    "length-huge": (lambda b: b[: 3 * REC] + b"\x7f\xff\xff\xff" + b[3 * REC + 4 :], 3 * REC),
    "length-off-by-one": (_flip(3 * REC + 3), 3 * REC),
    "first-record": (_flip(HEADER_SIZE + 1), 0),
    "stale-copy-at-tail": (lambda b: b + b[:REC], 10 * REC),
}


@pytest.mark.parametrize("kind", MIDDLE_DAMAGE)
def test_damage_followed_by_valid_records_stops_startup(disk: DiskView, kind: str) -> None:
    with filled(disk, disk.root, ents(1, 11)):
        pass
    name = segments(disk, disk.root)[0]
    damage, offset = MIDDLE_DAMAGE[kind]
    file = disk.path(name)
    before = damage(disk.read(file))
    disk.write(file, before)
    with pytest.raises(RaftLogCorruption) as err:
        open_log(disk, disk.root)
    assert err.value.file.endswith(name)
    assert err.value.offset == offset
    assert name in str(err.value) and f"offset {offset}" in str(err.value)
    assert disk.read(file) == before  # nothing was cut
    lock = disk.fs.open(disk.path("LOCK"), os.O_RDONLY)
    disk.fs.flock(lock)  # the failed open released its lock
    disk.fs.close(lock)


@pytest.mark.parametrize(
    "damage", ["truncate-first-segment", "flip-first-segment-tail", "delete-middle-segment"]
)
def test_damage_in_a_segment_that_is_not_the_last_is_corruption(
    disk: DiskView, damage: str
) -> None:
    with filled(disk, disk.root, ents(1, 11), segment_size=3 * REC):
        pass
    first, second = (disk.path(n) for n in segments(disk, disk.root)[:2])
    if damage == "truncate-first-segment":
        disk.truncate(first, 3 * REC - 1)
    elif damage == "flip-first-segment-tail":
        disk.patch(first, 3 * REC - 1, b"!")
    else:
        disk.unlink(second)
    reason = "not the last" if damage != "delete-middle-segment" else "should start at index 4"
    with pytest.raises(RaftLogCorruption, match=reason):
        open_log(disk, disk.root, 3 * REC)


def test_missing_first_segment_without_snapshot_is_corruption(disk: DiskView) -> None:
    with filled(disk, disk.root, ents(1, 11), segment_size=3 * REC):
        pass
    disk.unlink(disk.path(segments(disk, disk.root)[0]))
    with pytest.raises(RaftLogCorruption, match="no snapshot"):
        open_log(disk, disk.root, 3 * REC)


def test_refused_startup_leaves_the_torn_tail_uncut(disk: DiskView) -> None:
    with filled(disk, disk.root, ents(1, 11), segment_size=3 * REC):
        pass
    names = segments(disk, disk.root)
    disk.unlink(disk.path(names[0]))
    last = disk.path(names[-1])
    disk.truncate(last, REC - 3)
    with pytest.raises(RaftLogCorruption, match="no snapshot"):
        open_log(disk, disk.root, 3 * REC)
    assert disk.size(last) == REC - 3


def test_large_garbage_tail_recovers_quickly(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What keeps recovery from a 1 MiB garbage tail fast, counted instead of timed: looking
    for a valid record after the tear runs the record check (crc) only where an index field is
    plausible, not at each of the million offsets."""
    with filled(disk, disk.root, ents(1, 11)):
        pass
    disk.append(disk.path(segments(disk, disk.root)[0]), random.Random(3).randbytes(1 << 20))
    checks = 0
    real = raft_segments._record_problem

    def counting(buf: bytes, pos: int) -> str | None:
        nonlocal checks
        checks += 1
        return real(buf, pos)

    monkeypatch.setattr(raft_segments, "_record_problem", counting)
    with open_log(disk, disk.root) as log:
        assert log.last_index == 10
        assert log.recovery_report.torn_tail is not None
    # the 10 good records, the torn one, and (random int64 index fields are almost never in
    # range) next to nothing after it
    assert checks <= 10 + 1 + 4, checks


# ---------------------------------------------------------------------------- hard state


def test_hard_state_survives_reopen_and_guards_safety(disk: DiskView) -> None:
    with open_log(disk, disk.root) as log:
        assert log.hard_state == HardState(0, None)
        log.save_hard_state(3, None)
        log.save_hard_state(3, "n1")
        with pytest.raises(ValueError, match="already voted"):
            log.save_hard_state(3, "n2")
        with pytest.raises(ValueError, match="backwards"):
            log.save_hard_state(2, None)
    with open_log(disk, disk.root) as log:
        assert log.hard_state == HardState(3, "n1")
        log.save_hard_state(4, None)
    with open_log(disk, disk.root) as log:
        assert log.hard_state == HardState(4, None)


def test_hard_state_leftover_temp_is_ignored_and_bad_file_is_corruption(disk: DiskView) -> None:
    with open_log(disk, disk.root) as log:
        log.save_hard_state(5, "n0")
    disk.write(disk.path("hard_state.json.tmp"), b'{"term": 9, "vot')
    with open_log(disk, disk.root) as log:
        assert log.hard_state == HardState(5, "n0")
        assert "hard_state.json.tmp" in log.recovery_report.removed_files
    disk.write(disk.path("hard_state.json"), b'{"term": -1, "voted_for": null}')
    with pytest.raises(RaftLogCorruption, match="hard state"):
        open_log(disk, disk.root)


# ---------------------------------------------------------------------------- snapshots


def test_snapshot_compaction_and_reopen(disk: DiskView) -> None:
    seg = 3 * REC
    with filled(disk, disk.root, ents(1, 21), segment_size=seg) as log:
        with pytest.raises(ValueError, match="no snapshot"):
            log.compact(5)
        log.save_snapshot(11, 1, b"state@11")
        with pytest.raises(ValueError, match="no snapshot"):
            log.compact(12)
        log.compact(11)
        # segments 1-3, 4-6, 7-9 are gone; 10-12 still holds 10 and 11 physically
        assert segments(disk, disk.root)[0] == f"{10:020d}"
        assert (log.first_index, log.last_index, log.term_at(11)) == (12, 20, 1)
        with pytest.raises(RaftLogCompacted):
            log.term_at(10)
        with pytest.raises(ValueError, match="older"):
            log.save_snapshot(10, 1, b"")
    with open_log(disk, disk.root, seg) as log:
        assert log.recovery_report.clean
        assert log.snapshot_meta == SnapshotMeta(11, 1)
        assert log.load_snapshot() == (SnapshotMeta(11, 1), b"state@11")
        assert (log.first_index, log.last_index) == (12, 20)
        assert log.all_entries() == ents(12, 21)
        log.append(ents(12, 14, term=2))  # conflict right after the snapshot
        assert log.all_entries() == ents(12, 14, term=2)
        log.save_snapshot(13, 2, b"state@13")
        log.compact(13)
        assert segments(disk, disk.root) == []
        assert (log.first_index, log.last_index) == (14, 13)
        log.append(ents(14, 15, term=2))
    with open_log(disk, disk.root, seg) as log:
        assert log.all_entries() == ents(14, 15, term=2)
        assert log.term_at(13) == 2


@pytest.mark.parametrize(
    ("index", "term", "keeps_log"),
    [(30, 2, False), (5, 2, False), (5, 1, True), (10, 1, True)],
    ids=["beyond-log", "term-mismatch", "matches", "matches-last"],
)
def test_installed_snapshot_discards_a_log_that_does_not_match(
    disk: DiskView, index: int, term: int, keeps_log: bool
) -> None:
    with filled(disk, disk.root, ents(1, 11)) as log:
        log.save_snapshot(index, term, b"leader state")
        expected = ents(index + 1, 11) if keeps_log else []
        assert log.all_entries() == expected
        assert (log.first_index, log.last_index) == (index + 1, max(index, 10 if keeps_log else 0))
        log.append([Entry(log.last_index + 1, 3, b"next")])
    with open_log(disk, disk.root) as log:
        assert log.all_entries() == [*expected, Entry(log.last_index, 3, b"next")]


def test_damaged_snapshot_file_is_corruption(disk: DiskView) -> None:
    with open_log(disk, disk.root) as log:
        log.save_snapshot(4, 1, b"abcdef")
    disk.patch(disk.path("snapshot"), 30, b"X")
    with pytest.raises(RaftLogCorruption, match="snapshot"):
        open_log(disk, disk.root)


# ---------------------------------------------------------------------------- crash points


class SimulatedCrash(Exception):
    pass


def run_until_crash(
    monkeypatch: pytest.MonkeyPatch, fs: FileSystem, op: Callable[[], None], step: int
) -> bool:
    """Run op, dying just before its step-th unlink/ftruncate/replace; True if it died."""
    calls = itertools.count()

    def crashing(real: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object) -> object:
            if next(calls) == step:
                raise SimulatedCrash
            return real(*args)

        return call

    with monkeypatch.context() as m:
        for name in ("unlink", "ftruncate", "replace"):
            m.setattr(fs, name, crashing(getattr(fs, name)))
        try:
            op()
        except SimulatedCrash:
            return True
    return False


def crash_each_step(
    disk: DiskView,
    monkeypatch: pytest.MonkeyPatch,
    setup: Callable[[RaftLog], None],
    op: Callable[[RaftLog], None],
    check: Callable[[RaftLog, bool, str], None],
) -> int:
    """For every crash point of op: copy the store as a kill -9 would leave it, reopen, check."""
    for step in itertools.count():
        live = disk.path(f"live{step}")
        log = open_log(disk, live, 3 * REC)
        setup(log)
        crashed = run_until_crash(monkeypatch, disk.fs, functools.partial(op, log), step)
        dead = disk.path(f"dead{step}")
        disk.copytree(live, dead)
        with contextlib.suppress(Exception):
            log.close()
        with open_log(disk, dead, 3 * REC) as back:
            check(back, crashed, dead)
        if not crashed:
            return step


def test_crash_during_cross_segment_truncation_leaves_a_prefix(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = ents(1, 21), ents(5, 7, term=2)

    def check(log: RaftLog, crashed: bool, path: str) -> None:
        got = log.all_entries()
        if crashed:
            assert len(got) >= 4 and got == old[: len(got)]
        else:
            assert got == old[:4] + new

    steps = crash_each_step(
        disk, monkeypatch, lambda g: g.append(old), lambda g: g.append(new), check
    )
    assert steps == 6  # five later segments unlinked, then the cut


def test_crash_during_compaction_keeps_the_log_consistent(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    def setup(log: RaftLog) -> None:
        log.append(ents(1, 21))
        log.save_snapshot(15, 1, b"s")

    def check(log: RaftLog, crashed: bool, path: str) -> None:
        assert log.snapshot_meta == SnapshotMeta(15, 1)
        assert log.all_entries() == ents(16, 21)
        assert int(segments(disk, path)[0]) <= 16

    steps = crash_each_step(disk, monkeypatch, setup, lambda g: g.compact(15), check)
    assert steps == 5


def test_crash_during_snapshot_install_ends_old_or_new(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    def check(log: RaftLog, crashed: bool, path: str) -> None:
        if log.snapshot_meta is None:
            assert crashed and log.all_entries() == ents(1, 11)
            assert "snapshot.tmp" in log.recovery_report.removed_files
        else:
            assert log.load_snapshot() == (SnapshotMeta(30, 2), b"new")
            assert (log.first_index, log.last_index, log.all_entries()) == (31, 30, [])
            assert log.recovery_report.log_discarded_for_snapshot == crashed

    steps = crash_each_step(
        disk,
        monkeypatch,
        lambda g: g.append(ents(1, 11)),
        lambda g: g.save_snapshot(30, 2, b"new"),
        check,
    )
    assert steps == 5  # replace, then four segments unlinked


def test_crash_during_hard_state_save_keeps_the_old_one(
    disk: DiskView, monkeypatch: pytest.MonkeyPatch
) -> None:
    def check(log: RaftLog, crashed: bool, path: str) -> None:
        assert log.hard_state == (HardState(2, "n1") if crashed else HardState(3, "n2"))

    steps = crash_each_step(
        disk,
        monkeypatch,
        lambda g: g.save_hard_state(2, "n1"),
        lambda g: g.save_hard_state(3, "n2"),
        check,
    )
    assert steps == 1


# ---------------------------------------------------------------------------- model-based


class Model:
    """The log as a dict: what RaftLog must agree with after any sequence of operations."""

    def __init__(self) -> None:
        self.snap: SnapshotMeta | None = None
        self.log: dict[int, Entry] = {}

    @property
    def first(self) -> int:
        return self.snap.index + 1 if self.snap else 1

    @property
    def last(self) -> int:
        return max(self.log) if self.log else (self.snap.index if self.snap else 0)

    def term(self, index: int) -> int:
        if self.snap and index == self.snap.index:
            return self.snap.term
        return self.log[index].term if index in self.log else 0

    def max_term(self) -> int:
        return max([e.term for e in self.log.values()] + [self.snap.term if self.snap else 0])


OPS = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 5), st.integers(1, 6), st.integers(0, 2)),
    st.tuples(st.just("sync")),
    st.tuples(st.just("snapshot"), st.integers(0, 100), st.integers(0, 4)),
    st.tuples(st.just("install"), st.integers(0, 4), st.integers(1, 2)),
    st.tuples(st.just("reopen")),
    st.tuples(st.just("kill")),
)


def raft_entry(index: int, term: int) -> Entry:
    """Same index and term, same entry (Log Matching); sizes vary from 0 to 60 bytes."""
    return Entry(index, term, f"{index}/{term}".encode().ljust((index * 7 + term * 13) % 61, b"#"))


def apply_op(log: RaftLog, model: Model, op: tuple) -> None:
    kind = op[0]
    if kind == "append":
        _, back, count, bump = op
        start = max(model.first, model.last + 1 - back)
        term = model.term(start - 1) + bump
        batch = [raft_entry(start + k, term) for k in range(count)]
        log.append(batch)
        for pos, e in enumerate(batch):  # Raft's rule: drop the suffix only from a conflict
            if e.index in model.log and model.log[e.index].term == e.term:
                continue
            model.log = {i: old for i, old in model.log.items() if i < e.index}
            model.log.update((n.index, n) for n in batch[pos:])
            break
    elif kind == "sync":
        log.sync()
    elif kind == "snapshot":
        _, frac, keep = op
        low = max(1, model.snap.index if model.snap else 1)
        if low > model.last:
            return
        index = low + (model.last - low) * frac // 100
        log.save_snapshot(index, model.term(index), b"snap")
        log.compact(max(0, index - keep))
        model.snap = SnapshotMeta(index, model.term(index))
        model.log = {i: e for i, e in model.log.items() if i > index}
    elif kind == "install":
        _, ahead, bump = op
        index = max(model.last + ahead, model.snap.index + 1 if model.snap else 1)
        log.save_snapshot(index, model.max_term() + bump, b"installed")
        model.snap = SnapshotMeta(index, model.max_term() + bump)
        model.log = {}


def assert_matches(log: RaftLog, model: Model) -> None:
    assert (log.first_index, log.last_index) == (model.first, model.last)
    assert log.snapshot_meta == model.snap
    assert log.all_entries() == [model.log[i] for i in range(model.first, model.last + 1)]
    low = model.first - 1 if model.snap or model.first > 1 else 0
    assert [log.term_at(i) for i in range(low, model.last + 1)] == [
        model.term(i) for i in range(low, model.last + 1)
    ]


@contextlib.contextmanager
def model_disk(on_sim: bool) -> Iterator[DiskView]:
    if on_sim:
        yield DiskView(SimFileSystem(random.Random(0)), "/sim/model")
    else:
        with tempfile.TemporaryDirectory() as root:
            yield DiskView(OS_FS, root)


@pytest.mark.parametrize("on_sim", [False, True], ids=["os", "sim"])
@settings(max_examples=60, deadline=None)
@given(ops=st.lists(OPS, max_size=25), segment_size=st.sampled_from([90, 200, 1000]))
def test_random_operations_match_the_model(
    on_sim: bool, ops: list[tuple], segment_size: int
) -> None:
    with model_disk(on_sim) as disk:
        dirs = (disk.path(str(n)) for n in itertools.count())
        path = next(dirs)
        log = open_log(disk, path, segment_size)
        model = Model()
        try:
            for op in ops:
                if op[0] == "reopen":
                    log.close()
                    log = open_log(disk, path, segment_size)
                elif op[0] == "kill":  # the page cache survives kill -9: copy the files as they are
                    dead = next(dirs)
                    disk.copytree(path, dead)
                    log.close()
                    path = dead
                    log = open_log(disk, path, segment_size)
                    assert log.recovery_report.torn_tail is None
                else:
                    apply_op(log, model, op)
                assert_matches(log, model)
        finally:
            log.close()
