"""The chaos slow-disk fault against a real broker (`rocketrio up --mode 2m-noslave`: SYNC_FLUSH,
so every acknowledgement waits for an fdatasync of the commitlog). Needs root and a writable I/O
cgroup (v1 blkio or v2 io) over a store on a block device; skipped with the reason otherwise.

Before / during / after the fault, sequential sync sends to a one-queue topic on the target
broker: with the throttle at `IOPS` write I/Os per second, each synced send needs at least one
write I/O of its own, so during the fault a send cannot take less than about 1/IOPS (less a
slice of the kernel's throttle accounting: `FLOOR_S`); healed, sends are back under that floor.
The heal must put every thread of the broker back into the cgroup it came from and remove the
fault's cgroup (a heal that forgets the move cannot remove it: `tests/hand_mutants.py`).

Marked long (`--long`): chaos drawing slowdisk in a random schedule (about 45 s) and Ctrl-C in
the middle of a slowdisk fault (about 30 s; the heal it runs is the one the first test proves,
reached through the shielded ``finally`` the other faults' Ctrl-C test proves).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.cli.chaos import blkio
from rocketrio.cli.chaos.faults import Injector, slowdisk_unavailable, unavailable_kinds
from rocketrio.cli.chaos.schedule import (
    RANDOM_POOL,
    FaultKind,
    FaultStep,
    Role,
    Timing,
    plan,
    usable,
)
from rocketrio.cli.chaos.targets import Proc, current_pid, from_up_dir
from tests.harness.system import UpProcess, start_up

pytestmark = pytest.mark.system

IOPS = 10
FLOOR_S = 0.8 / IOPS  # the least a synced send can take throttled (a 20 % slice of slack)
SENDS = 8
TOPIC = "SlowDiskTopic"


def _cgroups(h: blkio.Hierarchy) -> list[str]:
    return [n for n in os.listdir(h.mount) if n.startswith(blkio.CGROUP_PREFIX)]


@pytest.fixture
def up(tmp_path: Path) -> Iterator[UpProcess]:
    if os.geteuid() != 0:
        pytest.skip("moving a process into an I/O cgroup needs root")
    sys_ = blkio.Sys()
    h = blkio.find_hierarchy(sys_, sys_.mounts())
    if isinstance(h, str):
        pytest.skip(f"no I/O cgroup here: {h}")
    up = start_up(str(tmp_path / "up"), "2m-noslave", "--no-console")
    try:
        yield up
    finally:
        up.stop()
        for name in _cgroups(h):  # a broken heal's leftovers (its threads are gone now)
            if name.startswith(f"{blkio.CGROUP_PREFIX}{os.getpid()}-"):
                os.rmdir(os.path.join(h.mount, name))


async def _latencies(ns: str, n: int, failed: list[str]) -> list[float]:
    """Seconds per sequential sync send; a send that failed (its retries timed out) counts
    with the time it took and is named in ``failed``."""
    out = []
    async with Producer("slow_disk_producer", ns) as producer:
        for i in range(n):
            t = trio.current_time()
            try:
                await producer.send(Message(TOPIC, f"m{i}".encode() * 64))
            except MQClientError as e:
                failed.append(str(e))
            out.append(trio.current_time() - t)
    return out


def _where(pid: int, version: blkio.Version) -> dict[int, str]:
    return {int(t): blkio.cgroup_of(Path(f"/proc/{pid}/task/{t}/cgroup").read_text(), version)
            for t in os.listdir(f"/proc/{pid}/task")}  # fmt: skip


async def test_a_slow_disk_slows_synced_sends_and_healing_restores_them(up: UpProcess) -> None:
    cluster = from_up_dir(up.base_dir)
    if (why := slowdisk_unavailable(cluster, blkio.Sys())) is not None:
        pytest.skip(why)
    said: list[str] = []
    throttle = blkio.Throttle(write_bps=1024 * 1024, write_iops=IOPS)
    inj = Injector(cluster, 256, said.append, throttle)
    step = FaultStep(FaultKind.SLOW_DISK, Role.MASTER)
    target = await inj.resolve_step(step)
    assert isinstance(target, Proc), target
    async with MQAdmin(up.namesrv) as admin:
        await admin.update_topic(TOPIC, broker_addr=target.addr, read_queues=1, write_queues=1)
    failed: list[str] = []
    await _latencies(up.namesrv, 3, failed)  # the route, the connection, the first segment
    # a fresh broker has just created its files and directories; the first sync under the
    # throttle would pay for all of them (3.6 s once: docs/chaos.md): on the disk first
    await trio.sleep(1.5)
    await trio.to_thread.run_sync(os.sync)
    before = await _latencies(up.namesrv, SENDS, failed)
    assert not failed, failed

    sys_ = blkio.Sys()
    h = blkio.find_hierarchy(sys_, sys_.mounts())
    assert isinstance(h, blkio.Hierarchy)
    pid = inj.pid_of(target)
    assert pid is not None
    home = _where(pid, h.version)
    dead = next(p for p in range(4_000_000, 4_100_000) if not os.path.exists(f"/proc/{p}"))
    left = os.path.join(h.mount, f"{blkio.CGROUP_PREFIX}{dead}-1")  # by a chaos killed with -9
    os.mkdir(left)
    async with trio.open_nursery() as n:
        done = await inj.inject(step, n, target)
    assert not isinstance(done, str), done
    assert not os.path.exists(left), said  # removed by the next slowdisk fault
    assert done.slow is not None
    fault_cgroup = "/" + os.path.basename(done.slow.directory)
    assert set(_where(pid, h.version).values()) == {fault_cgroup}  # every thread moved
    during = await _latencies(up.namesrv, SENDS, failed)
    inj.heal(done)
    slow_failed = list(failed)
    after = await _latencies(up.namesrv, SENDS, failed)
    assert failed == slow_failed, failed  # healed: no send fails

    figures = (f"send latency median before {statistics.median(before) * 1e3:.1f} ms, during "
               f"{statistics.median(during) * 1e3:.1f} ms, after "
               f"{statistics.median(after) * 1e3:.1f} ms; sends failed during "
               f"{len(slow_failed)}")  # fmt: skip
    print(figures)
    assert statistics.median(during) >= FLOOR_S, figures
    assert statistics.median(before) < FLOOR_S and statistics.median(after) < FLOOR_S, figures
    now = _where(pid, h.version)
    assert all(now[t] == home.get(t, home[pid]) for t in now), (now, home, said)
    assert not os.path.exists(done.slow.directory), said
    assert not _cgroups(h) or all(not c.startswith(f"{blkio.CGROUP_PREFIX}{os.getpid()}-")
                                  for c in _cgroups(h))  # fmt: skip


def _seed_drawing_only(names: tuple[str, ...], timing: Timing, fault: str) -> int:
    """The first seed whose random schedule over ``names`` is ``fault`` every time."""
    for seed in range(1, 100_000):
        planned = plan(timing, names, seed)
        if planned and all(p.name == fault for p in planned):
            return seed
    raise AssertionError(f"no seed draws only {fault}")


@pytest.mark.long
def test_chaos_draws_slowdisk_in_a_random_schedule_and_leaves_no_cgroup(
    up: UpProcess, tmp_path: Path
) -> None:
    """`rocketrio chaos --seed N` (the random pool, where slowdisk is available) against the
    SYNC_FLUSH cluster: the slowdisk faults are injected, nothing acknowledged is lost, the
    sends begun during them are slower than those outside, no cgroup is left."""
    cluster = from_up_dir(up.base_dir)
    if (why := slowdisk_unavailable(cluster, blkio.Sys())) is not None:
        pytest.skip(why)
    timing = Timing(duration_s=36, warmup_s=5, drain_s=10, every_s=8, hold_s=5)
    names = usable(RANDOM_POOL, frozenset(unavailable_kinds(cluster)))
    assert "slowdisk-master" in names
    seed = _seed_drawing_only(names, timing, "slowdisk-master")
    out = tmp_path / "chaos"
    r = subprocess.run(
        [sys.executable, "-m", "rocketrio.cli.main", "chaos", "--dir", up.base_dir, "--out",
         str(out), "--seed", str(seed), "--duration", "36s", "--warmup", "5s", "--drain", "10s",
         "--every", "8s", "--hold", "5s", "--drain-timeout", "30s"],
        capture_output=True, text=True, timeout=150, check=False,
    )  # fmt: skip
    text = r.stdout + r.stderr
    res = json.loads((out / "result.json").read_text())
    assert r.returncode == 0, text
    assert res["faults"] and {f["name"] for f in res["faults"]} == {"slowdisk-master"}, text
    assert res["checks"]["lost"]["count"] == 0
    lat = res["latency_by_kind"]["slowdisk-master"]
    assert lat["during_p99_ms"] >= FLOOR_S * 1000 > lat["outside_p50_ms"], lat
    sys_ = blkio.Sys()
    h = blkio.find_hierarchy(sys_, sys_.mounts())
    assert isinstance(h, blkio.Hierarchy)
    assert not _cgroups(h), text


@pytest.mark.long
def test_ctrl_c_mid_slowdisk_moves_the_broker_back_and_removes_the_cgroup(
    up: UpProcess, tmp_path: Path
) -> None:
    """`rocketrio chaos --fault slowdisk-master --hold 30s`, interrupted while the broker is in
    the fault's cgroup: exit 130, every thread of the broker back where it was, no cgroup."""
    cluster = from_up_dir(up.base_dir)
    if (why := slowdisk_unavailable(cluster, blkio.Sys())) is not None:
        pytest.skip(why)
    sys_ = blkio.Sys()
    h = blkio.find_hierarchy(sys_, sys_.mounts())
    assert isinstance(h, blkio.Hierarchy)
    pids = {p.name: pid for p in cluster.procs if (pid := current_pid(cluster, p)) is not None}
    home = {name: _where(pid, h.version) for name, pid in pids.items()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketrio.cli.main", "chaos", "--dir", up.base_dir, "--out",
         str(tmp_path / "chaos"), "--fault", "slowdisk-master", "--duration", "60s", "--hold",
         "30s", "--every", "35s", "--warmup", "3s", "--drain", "5s"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 40
        while not _cgroups(h) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _cgroups(h), "the broker never entered a cgroup"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        text, _ = proc.communicate(timeout=60)
        assert proc.returncode == 130, text
        assert not _cgroups(h), text
        for name, pid in pids.items():
            now = _where(pid, h.version)
            assert all(now[t] == home[name].get(t, home[name][pid]) for t in now), (name, text)
    finally:
        if proc.poll() is None:
            proc.kill()
