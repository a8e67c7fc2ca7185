"""The cluster-directory lock of `up` and the child side of its parent-death binding."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rocketrio.cli import up_lock

INFO = up_lock.LockInfo(4242, "2026-01-02T03:04:05Z", "single", {"namesrv listenPort": 9876}, "x")


def test_second_holder_is_refused_with_the_first_ones_details_and_writes_nothing(
    tmp_path: Path,
) -> None:
    first = up_lock.acquire(str(tmp_path))
    first.publish(INFO)
    lock_file = tmp_path / up_lock.LOCK_FILE
    before = (lock_file.read_bytes(), lock_file.stat().st_mtime_ns)
    with pytest.raises(up_lock.ClusterBusy) as e:
        up_lock.acquire(str(tmp_path))  # flock is per open file: refused in-process too
    line = e.value.one_line()
    assert "pid 4242" in line and "since 2026-01-02T03:04:05Z" in line and ": x)" in line
    assert "\n" not in line
    assert (lock_file.read_bytes(), lock_file.stat().st_mtime_ns) == before
    first.release()
    again = up_lock.acquire(str(tmp_path))  # free again after release
    again.release()


def test_a_holder_without_details_yet_is_still_refused(tmp_path: Path) -> None:
    first = up_lock.acquire(str(tmp_path))
    with pytest.raises(up_lock.ClusterBusy, match="in use by another rocketrio up"):
        up_lock.acquire(str(tmp_path))
    first.release()


@pytest.mark.system  # real processes
def test_the_lock_dies_with_its_holder(tmp_path: Path) -> None:
    """kill -9 of the holder frees the directory: a stale up.lock never blocks a restart."""
    code = (
        "import sys, time; from rocketrio.cli import up_lock; "
        f"up_lock.acquire({str(tmp_path)!r}); print('held', flush=True); time.sleep(60)"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        with pytest.raises(up_lock.ClusterBusy):
            up_lock.acquire(str(tmp_path))
    finally:
        p.kill()
        p.wait()
    up_lock.acquire(str(tmp_path)).release()


def test_lock_info_round_trip() -> None:
    assert up_lock.LockInfo.from_json(INFO.to_json()) == INFO
    assert up_lock.LockInfo.from_json("") is None
    assert up_lock.LockInfo.from_json('{"pid": 1}') is None
