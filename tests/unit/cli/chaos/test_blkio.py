"""The slow-disk fault's pure part (`cli/chaos/blkio.py`) on a fake /proc and /sys tree: which
hierarchy is used and why none is, which whole disk holds a store (a partition maps to its
disk; tmpfs/overlay have none, said so), where a process sits, and the exact throttle lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from rocketrio.cli.chaos import blkio
from rocketrio.cli.chaos.blkio import Device, Hierarchy, Sys, Throttle, Version
from rocketrio.cli.chaos.faults import Injector
from rocketrio.cli.chaos.schedule import FaultKind, FaultStep, Role
from rocketrio.cli.chaos.targets import Cluster, Proc

MOUNTINFO_V1 = """\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 27 8:17 / /data rw - xfs /dev/sdb1 rw
51 27 0:40 / /mnt/ram\\040disk rw - tmpfs tmpfs rw,size=4k
52 27 0:41 / /var/lib/btr rw - btrfs /dev/sdc rw
"""
MOUNTINFO_V2 = """\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
"""


def _file(root: Path, path: str, text: str = "") -> None:
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


def _sysfs(root: Path) -> None:
    """vda (254:0, a whole disk), sdb (8:16) with partition sdb1 (8:17), sdc (8:32)."""
    for name, dev, parts in (("vda", "254:0", ()), ("sdb", "8:16", (("sdb1", "8:17"),)),
                             ("sdc", "8:32", ())):  # fmt: skip
        disk = root / "sys/devices/virtual/block" / name
        _file(root, f"/sys/devices/virtual/block/{name}/dev", dev)
        links = root / "sys/dev/block"
        links.mkdir(parents=True, exist_ok=True)
        (links / dev).symlink_to(disk)
        for pname, pdev in parts:
            _file(root, f"/sys/devices/virtual/block/{name}/{pname}/dev", pdev)
            _file(root, f"/sys/devices/virtual/block/{name}/{pname}/partition", "1")
            (links / pdev).symlink_to(disk / pname)


@pytest.fixture
def v1(tmp_path: Path) -> Sys:
    _file(tmp_path, "/proc/self/mountinfo", MOUNTINFO_V1)
    for f in blkio.V1_FILES:
        _file(tmp_path, f"/sys/fs/cgroup/blkio/{f}")
    _sysfs(tmp_path)
    return Sys(str(tmp_path))


def _dev(major: int, minor: int) -> int:
    return os.makedev(major, minor)


def test_v1_blkio_is_found_first_and_v2_when_it_is_all_there_is(v1: Sys, tmp_path: Path) -> None:
    assert blkio.find_hierarchy(v1, v1.mounts()) == Hierarchy(Version.V1, "/sys/fs/cgroup/blkio")
    v2_root = tmp_path / "v2"
    _file(v2_root, "/proc/self/mountinfo", MOUNTINFO_V2)
    _file(v2_root, "/sys/fs/cgroup/cgroup.subtree_control", "cpu io memory pids\n")
    v2 = Sys(str(v2_root))
    assert blkio.find_hierarchy(v2, v2.mounts()) == Hierarchy(Version.V2, "/sys/fs/cgroup")


def test_no_hierarchy_says_exactly_what_is_missing(tmp_path: Path) -> None:
    no_io = tmp_path / "a"
    _file(no_io, "/proc/self/mountinfo", MOUNTINFO_V2)
    _file(no_io, "/sys/fs/cgroup/cgroup.subtree_control", "cpu memory\n")
    s = Sys(str(no_io))
    why = blkio.find_hierarchy(s, s.mounts())
    assert isinstance(why, str)
    assert "io controller is not enabled in /sys/fs/cgroup/cgroup.subtree_control" in why
    no_throttle = tmp_path / "b"
    _file(no_throttle, "/proc/self/mountinfo", MOUNTINFO_V1)
    _file(no_throttle, "/sys/fs/cgroup/blkio/cgroup.procs")
    s = Sys(str(no_throttle))
    why = blkio.find_hierarchy(s, s.mounts())
    assert isinstance(why, str) and "CONFIG_BLK_DEV_THROTTLING" in why
    none = tmp_path / "c"
    _file(none, "/proc/self/mountinfo", "27 1 254:0 / / rw - ext4 /dev/vda rw\n")
    s = Sys(str(none))
    assert blkio.find_hierarchy(s, s.mounts()) == (
        "no cgroup blkio (v1) or cgroup2 hierarchy is mounted"
    )


def test_a_store_maps_to_its_whole_disk(v1: Sys) -> None:
    mounts = v1.mounts()

    def no_rdev(_path: str) -> int | None:
        return None

    assert blkio.resolve_device(v1, "/tmp/s", _dev(254, 0), mounts, no_rdev) == Device(254, 0)
    # a partition is throttled on its disk: sdb1 (8:17) -> sdb (8:16)
    assert blkio.resolve_device(v1, "/data/s", _dev(8, 17), mounts, no_rdev) == Device(8, 16)


def test_an_anonymous_device_is_found_by_its_mount_source(v1: Sys) -> None:
    """btrfs reports an anonymous st_dev (0:41); its mount's source /dev/sdc is the disk."""
    rdevs = {"/dev/sdc": _dev(8, 32)}
    got = blkio.resolve_device(v1, "/var/lib/btr/s", _dev(0, 41), v1.mounts(), rdevs.get)
    assert got == Device(8, 32)


def test_a_store_without_a_block_device_is_refused_with_the_reason(v1: Sys) -> None:
    got = blkio.resolve_device(v1, "/mnt/ram disk/s", _dev(0, 40), v1.mounts(), lambda _p: None)
    assert got == (
        "the store /mnt/ram disk/s is on tmpfs (tmpfs, device 0:40), which has no block "
        "device to throttle"
    )


def test_the_throttle_lines_name_the_device_and_each_limit() -> None:
    h1 = Hierarchy(Version.V1, "/sys/fs/cgroup/blkio")
    t = Throttle(write_bps=1048576, write_iops=10, read_bps=0, read_iops=20)
    assert blkio.throttle_files(h1, Device(254, 0), t) == {
        "blkio.throttle.write_bps_device": "254:0 1048576",
        "blkio.throttle.write_iops_device": "254:0 10",
        "blkio.throttle.read_iops_device": "254:0 20",
    }
    h2 = Hierarchy(Version.V2, "/sys/fs/cgroup")
    assert blkio.throttle_files(h2, Device(8, 16), t) == {
        "io.max": "8:16 rbps=max wbps=1048576 riops=20 wiops=10"
    }
    with pytest.raises(ValueError, match="nothing would be slowed"):
        Throttle(0, 0, 0, 0).check()
    with pytest.raises(ValueError, match=">= 0"):
        Throttle(-1).check()


def test_where_a_process_sits_and_where_the_fault_puts_it() -> None:
    text = "9:name=systemd:/\n7:blkio:/user.slice/a\n4:memory:/x\n0::/user.slice/b\n"
    assert blkio.cgroup_of(text, Version.V1) == "/user.slice/a"
    assert blkio.cgroup_of(text, Version.V2) == "/user.slice/b"
    assert blkio.cgroup_of("7:cpu,blkio:/\n", Version.V1) == "/"
    h = Hierarchy(Version.V1, "/sys/fs/cgroup/blkio")
    assert blkio.cgroup_dir(h, "/") == "/sys/fs/cgroup/blkio"
    assert blkio.cgroup_dir(h, "/user.slice/a") == "/sys/fs/cgroup/blkio/user.slice/a"
    assert blkio.chaos_cgroup(10, 20) == "/rocketrio-chaos-10-20"
    assert blkio.members_file(h) == "tasks"
    assert blkio.members_file(Hierarchy(Version.V2, "/sys/fs/cgroup")) == "cgroup.threads"


def test_only_the_cgroups_of_a_chaos_that_is_gone_are_stale() -> None:
    names = ["rocketrio-chaos-10-20", "rocketrio-chaos-11-21", "user.slice", "blkio.x"]
    assert blkio.stale(names, lambda pid: pid == 11) == ["rocketrio-chaos-10-20"]


def test_mountinfo_unescapes_paths_and_finds_the_innermost_mount(v1: Sys) -> None:
    mounts = v1.mounts()
    assert any(m.mount_point == "/mnt/ram disk" for m in mounts)
    m = blkio.mount_of("/data/broker-a/commitlog", mounts)
    assert m is not None and (m.source, m.fstype) == ("/dev/sdb1", "xfs")
    m = blkio.mount_of("/database", mounts)  # not under /data
    assert m is not None and m.mount_point == "/"


async def test_a_process_without_a_store_is_skipped_with_the_reason_and_nothing_stays() -> None:
    ns = Proc("namesrv", "namesrv", "127.0.0.1:9876", (9876,))
    inj = Injector(Cluster("127.0.0.1:9876", (ns,), pids={"namesrv": os.getpid()}), 256,
                   lambda _line: None)  # fmt: skip
    for kind in (FaultKind.SLOW_DISK, FaultKind.DISK_FULL):
        async with trio.open_nursery() as n:
            got = await inj.inject(FaultStep(kind, Role.NAMESRV), n)
        assert got == f"{kind.value}-namesrv on namesrv failed: namesrv has no store"
        assert not inj.active
