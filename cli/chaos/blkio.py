"""The slow-disk fault's cgroup knowledge (pure-ish: it only reads ``/proc`` and ``/sys``, under
a root that tests point at a fake tree): which I/O cgroup hierarchy this machine has, which block
device holds a store, where a process sits now, and the exact lines that throttle a device.

A broker is slowed by moving every thread of its process into a cgroup of its own whose I/O
throttle limits the store's *whole disk* (a partition's throttle is set on the disk it belongs
to: the kernel throttles at the disk's request queue):

- cgroup v1: the ``blkio`` hierarchy, ``blkio.throttle.{write,read}_{bps,iops}_device`` lines
  ``"<major>:<minor> <limit>"``; the process joins by ``cgroup.procs`` (every thread at once) and
  ``tasks`` lists the threads that are in;
- cgroup v2: the unified hierarchy with the ``io`` controller enabled for the root's children,
  one ``io.max`` line ``"<major>:<minor> rbps=.. wbps=.. riops=.. wiops=.."`` (``max``: none).

What it does to a broker: in v1, buffered writes are throttled only when the writer itself
writes them back; the kernel's background flusher is not in the cgroup. fsync/fdatasync and
O_DIRECT are issued by the broker's threads and are throttled: that is what a SYNC_FLUSH
broker waits on for every acknowledgement (and what flushes, checkpoints and config writes
wait on in any mode). v2 also charges the flusher's writeback to the cgroup that dirtied the pages.

Not throttled, and said so (`resolve_device` returns the reason): a store on a file system
without a block device (tmpfs, overlay without one, a network file system).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable

import attrs

CGROUP_PREFIX = "rocketrio-chaos-"
JOIN_FILE = "cgroup.procs"  # a pid written here moves its whole process (every thread)
V1_FILES = {  # throttle file -> which Throttle field it carries
    "blkio.throttle.write_bps_device": "write_bps",
    "blkio.throttle.write_iops_device": "write_iops",
    "blkio.throttle.read_bps_device": "read_bps",
    "blkio.throttle.read_iops_device": "read_iops",
}


@attrs.frozen
class Throttle:
    """Limits per second on the store's disk; 0 leaves that one unlimited. The defaults make a
    4 KiB write + fdatasync (one to three I/Os on ext4) take about 100-300 ms."""

    write_bps: int = 1024 * 1024
    write_iops: int = 10
    read_bps: int = 1024 * 1024
    read_iops: int = 10

    def check(self) -> None:
        if min(self.write_bps, self.write_iops, self.read_bps, self.read_iops) < 0:
            raise ValueError("a slow-disk limit must be >= 0 (0: unlimited)")
        if not any((self.write_bps, self.write_iops, self.read_bps, self.read_iops)):
            raise ValueError("every slow-disk limit is 0: nothing would be slowed")


@attrs.frozen
class Device:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}:{self.minor}"


class Version(enum.Enum):
    V1 = "v1"  # the blkio hierarchy
    V2 = "v2"  # the unified hierarchy's io controller


@attrs.frozen
class Hierarchy:
    version: Version
    mount: str  # where it is mounted (a real path, without the test root)


@attrs.frozen
class Mount:
    """One line of /proc/self/mountinfo (the fields this module needs)."""

    dev: str  # "major:minor" of the file system
    mount_point: str
    fstype: str
    source: str
    super_options: tuple[str, ...]


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        f, r = left.split(), right.split()
        if not sep or len(f) < 5 or len(r) < 3:
            continue
        out.append(Mount(f[2], _unescape(f[4]), r[0], _unescape(r[1]), tuple(r[2].split(","))))
    return out


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding ``path`` (an absolute, resolved path): the longest mount point above
    it; the last one mounted there wins (mountinfo lists mounts in order)."""
    best: Mount | None = None
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        if path == mp or path.startswith(mp if mp == "/" else mp + "/"):
            if best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/"):
                best = m
    return best


class Sys:
    """Reads ``/proc`` and ``/sys`` below ``root`` (``/`` on a machine, a tmp tree in tests)."""

    def __init__(self, root: str = "/") -> None:
        self.root = root

    def path(self, p: str) -> str:
        return os.path.join(self.root, p.lstrip("/"))

    def read(self, p: str) -> str:
        with open(self.path(p), encoding="utf-8") as f:
            return f.read()

    def exists(self, p: str) -> bool:
        return os.path.exists(self.path(p))

    def writable(self, p: str) -> bool:
        return os.access(self.path(p), os.W_OK)

    def mounts(self) -> list[Mount]:
        return parse_mountinfo(self.read("/proc/self/mountinfo"))


def find_hierarchy(sys_: Sys, mounts: list[Mount]) -> Hierarchy | str:
    """The writable I/O cgroup hierarchy (v1 blkio with throttling first, then v2 with io
    enabled for the root's children), or why there is none, naming what is missing."""
    why = []
    for m in mounts:
        if m.fstype == "cgroup" and "blkio" in m.super_options:
            probe = f"{m.mount_point}/blkio.throttle.write_bps_device"
            if not sys_.exists(probe):
                why.append(f"{m.mount_point} has no blkio.throttle files (a kernel without "
                           "CONFIG_BLK_DEV_THROTTLING)")  # fmt: skip
            elif not sys_.writable(m.mount_point):
                why.append(f"{m.mount_point} is not writable (run chaos as root)")
            else:
                return Hierarchy(Version.V1, m.mount_point)
    for m in mounts:
        if m.fstype != "cgroup2":
            continue
        ctl = f"{m.mount_point}/cgroup.subtree_control"
        enabled = sys_.read(ctl).split() if sys_.exists(ctl) else []
        if "io" not in enabled:
            listed = f"{m.mount_point}/cgroup.controllers"
            why.append(f"the io controller is not enabled in {ctl} (if {listed} lists io: "
                       f"echo +io > {ctl})")  # fmt: skip
        elif not sys_.writable(m.mount_point):
            why.append(f"{m.mount_point} is not writable (run chaos as root)")
        else:
            return Hierarchy(Version.V2, m.mount_point)
    if not why:
        return "no cgroup blkio (v1) or cgroup2 hierarchy is mounted"
    return "; ".join(why)


def _whole_disk(sys_: Sys, dev: Device) -> Device:
    """A partition's disk (``/sys/dev/block/M:m`` has a ``partition`` file; its disk is the
    parent directory of the resolved link); any other device is itself."""
    link = f"/sys/dev/block/{dev}"
    if not sys_.exists(f"{link}/partition"):
        return dev
    parent = os.path.dirname(os.path.realpath(sys_.path(link)))
    major, _, minor = open(os.path.join(parent, "dev"), encoding="utf-8").read().partition(":")
    return Device(int(major), int(minor))


def resolve_device(
    sys_: Sys, store: str, st_dev: int, mounts: list[Mount], rdev_of: Callable[[str], int | None]
) -> Device | str:
    """The whole block device under ``store`` (whose ``os.stat().st_dev`` is ``st_dev``), or
    why there is none. A file system with an anonymous device number (btrfs, overlay) is looked
    up by its mount's source when that is a device node (``rdev_of``: its ``st_rdev``)."""
    dev = Device(os.major(st_dev), os.minor(st_dev))
    if sys_.exists(f"/sys/dev/block/{dev}"):
        return _whole_disk(sys_, dev)
    m = mount_of(store, mounts)
    fstype, source = (m.fstype, m.source) if m is not None else ("an unknown file system", "?")
    rdev = rdev_of(source) if source.startswith("/dev/") else None
    if rdev is not None:
        node = Device(os.major(rdev), os.minor(rdev))
        if sys_.exists(f"/sys/dev/block/{node}"):
            return _whole_disk(sys_, node)
    return (f"the store {store} is on {fstype} ({source}, device {dev}), which has no block "
            "device to throttle")  # fmt: skip


def cgroup_of(proc_cgroup: str, version: Version) -> str:
    """Where a process (or thread) sits, from its ``/proc/<pid>/cgroup``: the blkio line's path
    (v1) or the unified ``0::`` line's (v2); ``/`` if the hierarchy is not listed."""
    for line in proc_cgroup.splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if version is Version.V1 and "blkio" in controllers.split(","):
            return path or "/"
        if version is Version.V2 and hid == "0" and controllers == "":
            return path or "/"
    return "/"


def cgroup_dir(h: Hierarchy, path: str) -> str:
    """The directory of cgroup ``path`` (as /proc/<pid>/cgroup names it) in ``h``."""
    return h.mount.rstrip("/") + ("/" + path.strip("/") if path.strip("/") else "")


def chaos_cgroup(chaos_pid: int, target_pid: int) -> str:
    return f"/{CGROUP_PREFIX}{chaos_pid}-{target_pid}"


def throttle_files(h: Hierarchy, dev: Device, t: Throttle) -> dict[str, str]:
    """File name (in the fault's cgroup) -> the line to write there."""
    if h.version is Version.V1:
        return {f: f"{dev} {getattr(t, field)}" for f, field in V1_FILES.items()
                if getattr(t, field)}  # fmt: skip

    def v(x: int) -> str:
        return str(x) if x else "max"

    line = f"{dev} rbps={v(t.read_bps)} wbps={v(t.write_bps)} riops={v(t.read_iops)} " \
        f"wiops={v(t.write_iops)}"  # fmt: skip
    return {"io.max": line}


def members_file(h: Hierarchy) -> str:
    """The file listing every thread in a cgroup."""
    return "tasks" if h.version is Version.V1 else "cgroup.threads"


def parse_ids(text: str) -> set[int]:
    return {int(x) for x in text.split() if x.isdigit()}


def stale(names: list[str], alive: Callable[[int], bool]) -> list[str]:
    """Fault cgroups (by directory name) left by a chaos process that is gone (a chaos killed
    with -9 could not heal): ``rocketrio-chaos-<chaos pid>-<target pid>``."""
    out = []
    for n in names:
        if not n.startswith(CGROUP_PREFIX):
            continue
        owner = n[len(CGROUP_PREFIX) :].partition("-")[0]
        if owner.isdigit() and not alive(int(owner)):
            out.append(n)
    return out
