"""SimFileSystem: POSIX behaviour like the real disk, and what a crash keeps, loses and tears."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pytest

from rocketrio.storage.fs import OS_FS, FileSystem
from tests.harness.sim_disk import PowerCut, SimFileSystem, cut_power_after

RW_CREATE = os.O_RDWR | os.O_CREAT
SEEDS = range(200)


def write_file(fs: FileSystem, path: str, data: bytes, *, sync: bool = False) -> None:
    fd = fs.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    fs.pwrite(fd, data, 0)
    if sync:
        fs.fsync(fd)
    fs.close(fd)


def read_file(fs: FileSystem, path: str) -> bytes:
    fd = fs.open(path, os.O_RDONLY)
    try:
        return fs.pread(fd, fs.fsize(fd), 0)
    finally:
        fs.close(fd)


# --------------------------------------------------------------------------- same as the real disk


def script(fs: FileSystem, root: str) -> list[object]:
    """Calls the storage code makes, with what each returns or raises."""
    out: list[object] = []

    def note(call: object) -> None:
        try:
            out.append(call() if callable(call) else call)
        except OSError as e:
            out.append(type(e).__name__)

    p = os.path.join
    fs.makedirs(p(root, "a", "b"), exist_ok=True)
    note(lambda: fs.makedirs(p(root, "a"), exist_ok=False))
    note(lambda: fs.makedirs(p(root, "a"), exist_ok=True))
    fd = fs.open(p(root, "a", "f"), RW_CREATE, 0o644)
    note(fs.pwrite(fd, b"hello", 0))
    note(fs.pwrite(fd, memoryview(b"xy"), 8))  # past the end: a zero-filled gap
    note(fs.pread(fd, 100, 0))
    note(fs.pread(fd, 4, 8))
    note(fs.pread(fd, 4, 50))
    fs.ftruncate(fd, 12)
    note(fs.fsize(fd))
    note(bytes(fs.map_read(fd)))
    fs.ftruncate(fd, 3)
    note(fs.pread(fd, 100, 0))
    fs.fdatasync(fd)
    fs.fsync(fd)
    fs.close(fd)
    note(lambda: fs.open(p(root, "a", "f"), RW_CREATE | os.O_EXCL))
    note(lambda: fs.open(p(root, "a", "missing"), os.O_RDONLY))
    note(lambda: fs.open(p(root, "nodir", "f"), RW_CREATE))
    fd = fs.open(p(root, "a", "log"), os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o644)
    note(fs.write(fd, b"one"))
    note(fs.write(fd, b"two"))
    note(fs.pread(fd, 10, 0))
    fs.close(fd)
    fd = fs.open(p(root, "a", "log"), os.O_WRONLY | os.O_TRUNC)
    note(fs.fsize(fd))
    fs.close(fd)
    fd = fs.open(p(root, "a", "log"), os.O_RDONLY)
    note(bytes(fs.map_read(fd)))
    fs.close(fd)
    note(sorted(fs.listdir(p(root, "a"))))
    note(lambda: fs.listdir(p(root, "nope")))
    note([fs.exists(p(root, "a", "f")), fs.isdir(p(root, "a", "f")), fs.isdir(p(root, "a"))])
    fs.replace(p(root, "a", "f"), p(root, "a", "g"))
    note([fs.exists(p(root, "a", "f")), read_file(fs, p(root, "a", "g"))])
    write_file(fs, p(root, "a", "h"), b"new")
    fs.replace(p(root, "a", "h"), p(root, "a", "g"))
    note(read_file(fs, p(root, "a", "g")))
    note(lambda: fs.unlink(p(root, "a", "h")))
    note(lambda: fs.unlink(p(root, "a", "b")))
    note(lambda: fs.replace(p(root, "a", "h"), p(root, "a", "i")))
    fs.fsync_dir(p(root, "a"))
    note(lambda: fs.fsync_dir(p(root, "nope")))
    write_file(fs, p(root, "a", "b", "deep"), b"d")
    fs.rmtree(p(root, "a", "b"))
    fs.rmtree(p(root, "a", "b"))  # missing: no error
    note(sorted(fs.listdir(p(root, "a"))))
    fs.unlink(p(root, "a", "g"))
    note(fs.exists(p(root, "a", "g")))
    a = fs.open(p(root, "a", "LOCK"), RW_CREATE)
    b = fs.open(p(root, "a", "LOCK"), RW_CREATE)
    fs.flock(a)
    note(lambda: fs.flock(b))
    fs.close(a)
    fs.flock(b)  # closing the holder released it
    fs.close(b)
    note(lambda: fs.close(b))
    return out


def test_sim_answers_like_the_real_disk(tmp_path: Path) -> None:
    real = script(OS_FS, str(tmp_path))
    assert script(SimFileSystem(), "/sim/x") == real
    assert "FileExistsError" in real and "BlockingIOError" in real  # the script does probe errors


# --------------------------------------------------------------------------- what a crash keeps


def appended(fs: SimFileSystem, path: str, chunks: list[bytes], synced: int) -> int:
    """Append the chunks with pwrite, fsync after the first ``synced``; returns the fd."""
    fd = fs.open(path, RW_CREATE)
    pos = 0
    for i, chunk in enumerate(chunks):
        pos += fs.pwrite(fd, chunk, pos)
        if i + 1 == synced:
            fs.fsync(fd)
    return fd


def durable_dir(fs: SimFileSystem, path: str) -> None:
    """makedirs, and fsync every directory from the root down, so ``path`` itself is durable."""
    fs.makedirs(path, exist_ok=True)
    parts = path.strip("/").split("/")
    for i in range(len(parts)):
        fs.fsync_dir("/" + "/".join(parts[:i]))


CHUNKS = [bytes([65 + i]) * (10 + i) for i in range(8)]
FULL = b"".join(CHUNKS)
SYNCED = len(b"".join(CHUNKS[:3]))


@pytest.mark.parametrize("seed", SEEDS)
def test_fsynced_bytes_survive_and_the_rest_is_a_torn_prefix(seed: int) -> None:
    fs = SimFileSystem(random.Random(seed))
    durable_dir(fs, "/sim/d")
    appended(fs, "/sim/d/f", CHUNKS, synced=3)
    fs.fsync_dir("/sim/d")
    fs.crash()
    got = fs.visible_bytes("/sim/d/f")
    assert FULL.startswith(got) and len(got) >= SYNCED
    assert fs.durable_bytes("/sim/d/f") == got  # what a crash left is durable


def test_crashes_lose_keep_and_tear_unsynced_writes() -> None:
    boundaries = {len(b"".join(CHUNKS[:i])) for i in range(len(CHUNKS) + 1)}
    lengths = set()
    for seed in SEEDS:
        fs = SimFileSystem(random.Random(seed))
        durable_dir(fs, "/sim/d")
        appended(fs, "/sim/d/f", CHUNKS, synced=3)
        fs.fsync_dir("/sim/d")
        fs.crash()
        lengths.add(len(fs.visible_bytes("/sim/d/f")))
    assert SYNCED in lengths and len(FULL) in lengths  # all lost, all kept
    assert lengths - boundaries  # some crash tore a write
    assert len(lengths & boundaries) > 2  # and others kept a prefix of whole writes


def test_a_reordering_crash_keeps_any_subset_of_the_unsynced_writes() -> None:
    """`crash(reorder=True)`: a later write may survive an earlier one (not a prefix)."""
    seen = set()
    for seed in range(60):
        fs = SimFileSystem(random.Random(seed))
        durable_dir(fs, "/sim/d")
        fd = fs.open("/sim/d/f", RW_CREATE)
        fs.pwrite(fd, b"....", 0)
        fs.fsync(fd)
        fs.fsync_dir("/sim/d")
        for i, ch in enumerate(b"abcd"):
            fs.pwrite(fd, bytes([ch]), i)
        fs.crash(reorder=True)
        seen.add(fs.visible_bytes("/sim/d/f"))
    assert b"...d" in seen and b"a.c." in seen  # no prefix of the four writes
    assert b"...." in seen and b"abcd" in seen
    assert all(len(got) == 4 for got in seen)


def test_lose_unsynced_keeps_exactly_the_durable_state() -> None:
    fs = SimFileSystem(random.Random(1))
    durable_dir(fs, "/sim/d")
    fd = appended(fs, "/sim/d/f", CHUNKS, synced=3)
    fs.ftruncate(fd, 5)
    with pytest.raises(FileNotFoundError):
        fs.durable_bytes("/sim/d/f")  # fsynced, but its name is not durable yet
    fs.fsync_dir("/sim/d")
    assert fs.durable_bytes("/sim/d/f") == FULL[:SYNCED]
    write_file(fs, "/sim/d/late", b"synced data", sync=True)  # the name is never fsynced
    assert fs.listdir_durable("/sim/d") == ["f"]
    fs.crash(lose_unsynced=True)
    assert fs.listdir("/sim/d") == ["f"]
    assert fs.visible_bytes("/sim/d/f") == FULL[:SYNCED]


def test_a_crash_truncating_or_growing_replays_truncates_in_order() -> None:
    seen = set()
    for seed in range(50):
        fs = SimFileSystem(random.Random(seed))
        durable_dir(fs, "/sim/d")
        fd = fs.open("/sim/d/f", RW_CREATE)
        fs.pwrite(fd, b"abcdef", 0)
        fs.fsync(fd)
        fs.fsync_dir("/sim/d")
        fs.ftruncate(fd, 2)
        fs.ftruncate(fd, 4)
        fs.crash()
        seen.add(fs.visible_bytes("/sim/d/f"))
    assert seen == {b"abcdef", b"ab", b"ab\0\0"}


def test_name_durability_is_per_directory() -> None:
    fs = SimFileSystem(random.Random(2))
    fs.makedirs("/sim/a/b")
    write_file(fs, "/sim/a/b/f", b"data", sync=True)
    fs.fsync_dir("/sim/a/b")  # f's entry is durable in b, but b's entry in a is not
    with pytest.raises(FileNotFoundError):
        fs.listdir_durable("/sim/a/b")  # so b is not reachable after a crash
    fs.crash(lose_unsynced=True)
    assert not fs.exists("/sim")
    fs.makedirs("/sim/a/b")
    write_file(fs, "/sim/a/b/f", b"data", sync=True)
    for d in ("/sim/a/b", "/sim/a", "/sim", "/"):
        fs.fsync_dir(d)
    fs.crash(lose_unsynced=True)
    assert fs.visible_bytes("/sim/a/b/f") == b"data"


def test_unlink_and_rmtree_without_a_directory_fsync_may_be_undone() -> None:
    fs = SimFileSystem(random.Random(3))
    durable_dir(fs, "/sim/d")
    fs.makedirs("/sim/d/sub")
    write_file(fs, "/sim/d/f", b"old", sync=True)
    write_file(fs, "/sim/d/sub/g", b"gg", sync=True)
    fs.fsync_dir("/sim/d/sub")
    fs.fsync_dir("/sim/d")
    fd = fs.open("/sim/d/f", os.O_RDWR)
    fs.pwrite(fd, b"new", 0)  # never fsynced
    fs.unlink("/sim/d/f")
    fs.rmtree("/sim/d/sub")
    assert fs.listdir("/sim/d") == []
    fs.crash(lose_unsynced=True)
    assert fs.visible_bytes("/sim/d/f") == b"old"
    assert fs.visible_bytes("/sim/d/sub/g") == b"gg"
    fs.unlink("/sim/d/f")
    fs.rmtree("/sim/d/sub")
    fs.fsync_dir("/sim/d")
    fs.crash()
    assert fs.listdir("/sim/d") == []


def test_rmtree_torn_by_a_crash_removes_a_prefix() -> None:
    outcomes = set()
    for seed in range(100):
        fs = SimFileSystem(random.Random(seed))
        durable_dir(fs, "/sim/d")
        fs.makedirs("/sim/d/q")
        for name in "abc":
            write_file(fs, f"/sim/d/q/{name}", name.encode(), sync=True)
        fs.fsync_dir("/sim/d/q")
        fs.fsync_dir("/sim/d")
        fs.rmtree("/sim/d/q")
        fs.crash()
        outcomes.add(tuple(fs.listdir("/sim/d/q")) if fs.exists("/sim/d/q") else None)
    assert outcomes == {("a", "b", "c"), ("b", "c"), ("c",), (), None}


@pytest.mark.parametrize("seed", range(50))
def test_replace_is_atomic_old_or_new(seed: int) -> None:
    fs = SimFileSystem(random.Random(seed))
    durable_dir(fs, "/sim/d")
    write_file(fs, "/sim/d/cfg", b"old", sync=True)
    fs.fsync_dir("/sim/d")
    write_file(fs, "/sim/d/cfg.tmp", b"new", sync=True)
    fs.replace("/sim/d/cfg.tmp", "/sim/d/cfg")
    fs.crash()
    assert fs.visible_bytes("/sim/d/cfg") in (b"old", b"new")


def test_fds_and_locks_do_not_survive_a_crash() -> None:
    fs = SimFileSystem(random.Random(4))
    durable_dir(fs, "/sim/d")
    fd = fs.open("/sim/d/LOCK", RW_CREATE)
    fs.flock(fd)
    fs.crash()
    for call in (lambda: fs.pread(fd, 1, 0), lambda: fs.fsync(fd), lambda: fs.close(fd)):
        with pytest.raises(OSError) as err:
            call()
        assert err.value.errno == errno.EBADF
    assert fs.open_fds == 0
    again = fs.open("/sim/d/LOCK", RW_CREATE)
    fs.flock(again)  # the dead process's lock is gone
    assert again != fd  # fd numbers are not reused, so a stale fd never hits a new file


# --------------------------------------------------------------------------- fsync failures


def test_failed_fsync_raises_eio_and_makes_nothing_durable() -> None:
    fs = SimFileSystem(random.Random(5))
    durable_dir(fs, "/sim/d")
    fs.makedirs("/sim/other")
    fd = fs.open("/sim/d/f", RW_CREATE)
    fs.pwrite(fd, b"data", 0)
    fs.fail_fsync("/sim/d", count=2)
    for call in (lambda: fs.fdatasync(fd), lambda: fs.fsync_dir("/sim/d")):
        with pytest.raises(OSError) as err:
            call()
        assert err.value.errno == errno.EIO
    assert fs.listdir_durable("/sim/d") == []
    fs.fsync_dir("/sim")  # another path: not affected
    fs.fsync(fd)  # the two failures are used up
    fs.fsync_dir("/sim/d")
    assert fs.durable_bytes("/sim/d/f") == b"data"
    fs.fail_fsync()  # any path
    with pytest.raises(OSError, match="simulated fsync failure"):
        fs.fsync_dir("/sim/other")


def test_failed_fsync_then_crash_loses_the_unsynced_data() -> None:
    fs = SimFileSystem(random.Random(6))
    durable_dir(fs, "/sim/d")
    write_file(fs, "/sim/d/f", b"v1", sync=True)
    fs.fsync_dir("/sim/d")
    fd = fs.open("/sim/d/f", os.O_RDWR)
    fs.pwrite(fd, b"v2", 0)
    fs.fail_fsync("/sim/d/f")
    with pytest.raises(OSError):
        fs.fsync(fd)
    fs.crash(lose_unsynced=True)
    assert fs.visible_bytes("/sim/d/f") == b"v1"


def test_an_fsync_failure_may_carry_another_errno() -> None:
    fs = SimFileSystem(random.Random(6))
    durable_dir(fs, "/sim/d")
    fd = fs.open("/sim/d/f", RW_CREATE)
    fs.pwrite(fd, b"data", 0)
    fs.fail_fsync("/sim/d", err=errno.ENOSPC)
    with pytest.raises(OSError) as err:
        fs.fdatasync(fd)
    assert err.value.errno == errno.ENOSPC
    fs.fdatasync(fd)  # without lose_writeback the pending writes are still there to sync
    fs.fsync_dir("/sim/d")
    assert fs.durable_bytes("/sim/d/f") == b"data"


def test_lost_writeback_is_never_made_durable_by_a_later_fsync() -> None:
    """Linux after a failed writeback: the later fsync succeeds, reads still see the bytes, and
    a power cut shows they never reached the disk, while what was written after them did."""
    fs = SimFileSystem(random.Random(6))
    durable_dir(fs, "/sim/d")
    write_file(fs, "/sim/d/f", b"v1", sync=True)
    fs.fsync_dir("/sim/d")
    fd = fs.open("/sim/d/f", os.O_RDWR)
    fs.pwrite(fd, b"lost", 2)
    fs.fail_fsync("/sim/d/f", err=errno.ENOSPC, lose_writeback=True)
    with pytest.raises(OSError):
        fs.fsync(fd)
    fs.pwrite(fd, b"kept", 6)
    fs.fsync(fd)
    assert fs.visible_bytes("/sim/d/f") == b"v1lostkept"
    assert fs.durable_bytes("/sim/d/f") == b"v1\0\0\0\0kept"
    fs.crash()
    assert fs.visible_bytes("/sim/d/f") == b"v1\0\0\0\0kept"


def test_a_full_disk_writes_short_then_refuses_and_takes_writes_again_when_raised() -> None:
    fs = SimFileSystem(random.Random(9))
    durable_dir(fs, "/sim/d")
    fd = fs.open("/sim/d/a", RW_CREATE)
    fs.pwrite(fd, b"x" * 60, 0)
    fs.set_capacity(100)
    assert fs.used_bytes == 60
    other = fs.open("/sim/d/b", RW_CREATE)
    assert fs.pwrite(other, b"y" * 50, 0) == 40  # a short write: what still fits
    assert fs.used_bytes == 100
    for call in (
        lambda: fs.pwrite(other, b"z", 40),
        lambda: fs.pwrite(fd, b"z", 70),  # a gap past the end takes room too
        lambda: fs.ftruncate(fd, 61),  # no sparse files: growing takes room
        lambda: fs.write(fs.open("/sim/d/c", RW_CREATE | os.O_APPEND), b"z"),
    ):
        with pytest.raises(OSError) as err:
            call()
        assert err.value.errno == errno.ENOSPC
    assert fs.pwrite(fd, b"O" * 60, 0) == 60  # overwriting what a file holds always works
    fs.ftruncate(other, 30)  # shrinking frees room
    assert fs.pwrite(fd, b"z" * 20, 60) == 10
    fs.unlink("/sim/d/b")
    with pytest.raises(OSError):  # b is still open: its bytes still count
        fs.pwrite(fd, b"z", 70)
    fs.close(other)  # the last fd of an unlinked file: its room comes back
    assert fs.pwrite(fd, b"z" * 30, 70) == 30
    fs.set_capacity(None)
    assert fs.pwrite(fd, b"w" * 1000, 100) == 1000
    assert fs.visible_bytes("/sim/d/a") == b"O" * 60 + b"z" * 40 + b"w" * 1000


def test_heal_disarms_unused_fsync_failures() -> None:
    fs = SimFileSystem(random.Random(6))
    durable_dir(fs, "/sim/d")
    fs.fail_fsync(count=3)
    fs.heal()
    fs.fsync_dir("/sim/d")


# --------------------------------------------------------------------------- power cuts


def test_power_cut_crashes_at_the_chosen_call_and_kills_every_later_one() -> None:
    fs = SimFileSystem(random.Random(8))
    durable_dir(fs, "/sim/d")
    with cut_power_after(fs, 2, lose_unsynced=True) as cut:
        fd = fs.open("/sim/d/f", RW_CREATE)  # call 0
        fs.pwrite(fd, b"x", 0)  # call 1
        assert not cut.fired
        with pytest.raises(PowerCut, match="fsync"):
            fs.fsync(fd)  # call 2: the power fails before it does anything
        assert cut.fired
        with pytest.raises(PowerCut):
            fs.close(fd)  # the process is dead: even cleanup fails
    assert fs.listdir("/sim/d") == []  # the unsynced name was lost
    fs.open("/sim/d/g", RW_CREATE)  # power is back once the block is left
    with cut_power_after(fs, 100) as cut:
        fs.listdir("/sim/d")
    assert not cut.fired and fs.crashes == 1


# --------------------------------------------------------------------------- determinism


def run_and_crash(seed: int) -> dict[str, bytes]:
    fs = SimFileSystem(random.Random(seed))
    durable_dir(fs, "/sim/d")
    for n in range(6):
        appended(fs, f"/sim/d/f{n}", CHUNKS, synced=n)
        if n % 2:
            fs.fsync_dir("/sim/d")
    fs.crash()
    return {path: fs.visible_bytes(path) for path in fs.files()}


def test_same_seed_same_disk_after_a_crash() -> None:
    assert run_and_crash(7) == run_and_crash(7)
    assert len({tuple(sorted(run_and_crash(s).items())) for s in range(10)}) > 1


def test_a_process_kill_keeps_the_page_cache_but_closes_every_fd() -> None:
    """`crash(keep_unsynced=True)`: kill -9, not a power cut: nothing written is lost (still
    unsynced: a later power cut may lose it), but the dead process's fds and locks are gone."""
    fs = SimFileSystem(random.Random(0))
    fs.makedirs("/d")
    fd = fs.open("/d/f", os.O_CREAT | os.O_RDWR)
    fs.flock(fd)
    fs.pwrite(fd, b"written", 0)
    fs.crash(keep_unsynced=True)
    assert fs.open_fds == 0 and fs.visible_bytes("/d/f") == b"written"
    with pytest.raises(OSError):
        fs.pread(fd, 1, 0)
    fs.flock(fs.open("/d/f", os.O_RDWR))  # the lock went with the process
    fs.crash(lose_unsynced=True)
    assert not fs.exists("/d/f")
