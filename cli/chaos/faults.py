"""The fault shell: resolves a role to a process now, injects a step, heals it, and heals
everything still injected when the run ends or is interrupted (`heal_all`, called from a
shielded ``finally``).

- **kill**: SIGKILL; `up` restarts the process (its supervisor), a config-file process is
  restarted by chaos with its ``restart`` command after `RESTART_AFTER_S`.
- **suspend**: SIGSTOP; healed by SIGCONT.
- **partition** / **delay**: tc on lo (`lonet`), healed by deleting the fault's filters.
- **disk** (full disk): a ballast file filling the filesystem of the process's store, healed by
  deleting it; only when the store is on a filesystem of its own (a mount point below ``/``):
  filling the machine's root filesystem would break every other program on it.
- **slowdisk**: every thread of the process moved into an I/O cgroup of its own that throttles
  its store's disk (`blkio`: the paths, lines and device resolution; cgroup v1 blkio or v2
  io.max), healed by moving each thread back to the cgroup it came from and removing the cgroup;
  unavailable, with the reason, when no I/O cgroup is writable or the store has no block device.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

import attrs
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.controller_admin import ControllerAdmin
from rocketrio.cli.chaos import blkio, lonet
from rocketrio.cli.chaos.schedule import FaultKind, FaultStep, Role
from rocketrio.cli.chaos.targets import Cluster, Proc, current_pid, zombie

RESTART_AFTER_S = 1.0
BALLAST = ".rocketrio-chaos-ballast"


def mount_point(path: str) -> str:
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        path = os.path.dirname(path)
    return path


def disk_unavailable(cluster: Cluster) -> str | None:
    stores = [p.store_dir for p in cluster.procs if p.role == "broker" and p.store_dir]
    if not stores:
        return "no broker store directory is known"
    shared = [s for s in stores if mount_point(s) == "/"]
    if shared:
        return (
            f"the store {shared[0]} is on the root filesystem (shared with everything on this "
            "machine); put the stores on their own mount to allow full-disk faults"
        )
    return None


def _rdev(path: str) -> int | None:
    try:
        return os.stat(path).st_rdev
    except OSError:
        return None


def store_device(sys_: blkio.Sys, store: str, mounts: list[blkio.Mount]) -> blkio.Device | str:
    try:
        st_dev = os.stat(store).st_dev
    except OSError as e:
        return f"the store {store} cannot be read ({e.strerror})"
    return blkio.resolve_device(sys_, os.path.realpath(store), st_dev, mounts, _rdev)


def slowdisk_unavailable(cluster: Cluster, sys_: blkio.Sys) -> str | None:
    stores = [p.store_dir for p in cluster.procs if p.role == "broker" and p.store_dir]
    if not stores:
        return "no broker store directory is known"
    try:
        mounts = sys_.mounts()
    except OSError as e:
        return f"slow disk cannot read /proc/self/mountinfo ({e.strerror})"
    h = blkio.find_hierarchy(sys_, mounts)
    if isinstance(h, str):
        return f"slow disk needs a writable I/O cgroup: {h}"
    for store in stores:
        if isinstance(dev := store_device(sys_, store, mounts), str):
            return f"slow disk: {dev}"
    return None


def unavailable_kinds(cluster: Cluster, sys_: blkio.Sys | None = None) -> dict[FaultKind, str]:
    """Every fault kind that cannot run against ``cluster`` here, with the reason."""
    out: dict[FaultKind, str] = {}
    if (why := slowdisk_unavailable(cluster, sys_ or blkio.Sys())) is not None:
        out[FaultKind.SLOW_DISK] = why
    if (why := lonet.unavailable()) is not None:
        out[FaultKind.PARTITION] = out[FaultKind.DELAY] = why
    if (why := disk_unavailable(cluster)) is not None:
        out[FaultKind.DISK_FULL] = why
    return out


@attrs.define
class Injected:
    step: FaultStep
    proc: Proc
    pid: int
    prio: int | None = None  # tc filters of a network fault
    ballast: str | None = None
    healed: bool = False
    peer: Proc | None = None  # a partition from this process only
    slow: SlowCgroup | None = None  # a slow disk's cgroup


@attrs.define
class SlowCgroup:
    hierarchy: blkio.Hierarchy
    directory: str  # the fault's cgroup (real path)
    origins: dict[int, str]  # thread id -> its cgroup before the fault


class Injector:
    def __init__(
        self, cluster: Cluster, slow_kbit: int, say: Callable[[str], None],
        throttle: blkio.Throttle | None = None, sys_: blkio.Sys | None = None,
    ) -> None:  # fmt: skip
        self.cluster = cluster
        self.throttle = throttle or blkio.Throttle()
        self.sys = sys_ or blkio.Sys()
        self.net = lonet.LoopbackNet(slow_kbit)
        self.say = say
        self.active: list[Injected] = []
        self.restarted: dict[str, int] = {}

    # ------------------------------------------------------------------ roles

    async def resolve(self, role: Role) -> Proc | None:
        """The process playing ``role`` now (asked of the NameServer / controllers)."""
        c = self.cluster
        if role is Role.NAMESRV:
            return next((p for p in c.procs if p.role == "namesrv"), None)
        if role is Role.CONTROLLER_LEADER:
            if not c.controllers:
                return None
            async with ControllerAdmin(c.controllers, timeout=2.0) as ca:
                meta = await ca.get_controller_metadata()
            addr = meta.controllerLeaderAddress
            return c.by_addr(addr) if addr else None
        addrs = await self._from_controllers(role) if c.controllers else []
        if not addrs:  # classic modes, or the controllers do not know yet: the NameServer
            async with MQAdmin(c.namesrv) as admin:
                info = await admin.cluster_info()
            for bd in sorted(info.brokerAddrTable.values(), key=lambda b: b.brokerName):
                for bid, addr in sorted(bd.brokerAddrs.items()):
                    if (bid == 0) == (role is Role.MASTER):
                        addrs.append(addr)
        procs = [p for a in addrs if (p := c.by_addr(a)) is not None]
        return procs[0] if procs else None

    async def _from_controllers(self, role: Role) -> list[str]:
        """Masters (or live replicas that are not master) by the controllers' SyncStateSet
        data: right after a NameServer restart the brokers have not registered again yet."""
        names = sorted({p.broker_name for p in self.cluster.procs if p.broker_name})
        try:
            async with ControllerAdmin(self.cluster.controllers, timeout=2.0) as ca:
                table = (await ca.get_sync_state_set(names)).replicasInfoTable
        except Exception:  # no controller leader right now: the NameServer's view
            return []
        out = []
        for name in sorted(table):
            info = table[name]
            if role is Role.MASTER:
                out += [info.masterAddress] if info.masterAddress else []
                continue
            for r in [*info.inSyncReplicas, *info.notInSyncReplicas]:
                if r.alive and r.brokerAddress and r.brokerAddress != info.masterAddress:
                    out.append(r.brokerAddress)
        return out

    def pid_of(self, proc: Proc) -> int | None:
        if self.cluster.up_dir is None and proc.name in self.restarted:
            pid = self.restarted[proc.name]
            return None if zombie(pid) else pid
        return current_pid(self.cluster, proc)

    def peers_of(self, inj: Injected) -> list[Proc]:
        if inj.peer is not None:
            return [inj.peer]
        return [p for p in self.cluster.procs if p.name != inj.proc.name]

    # ------------------------------------------------------------------ inject / heal

    async def resolve_step(self, step: FaultStep) -> Proc | str:
        """The process ``step`` targets now, or why there is none."""
        try:
            proc = await self.resolve(step.role)
        except Exception as e:  # the cluster is mid-failover: skip this one, say so
            return f"cannot tell who is {step.role.value} now ({type(e).__name__}: {e})"
        return f"no process is {step.role.value} now" if proc is None else proc

    async def inject(
        self, step: FaultStep, nursery: trio.Nursery, target: Proc | str | None = None
    ) -> Injected | str:
        """Inject one step (into ``target`` if already resolved); a string says why it was
        skipped."""
        proc = target if target is not None else await self.resolve_step(step)
        if isinstance(proc, str):
            return proc
        pid = self.pid_of(proc)
        if pid is None:
            return f"{proc.name} is not running now"
        inj = Injected(step, proc, pid)
        if step.peer is not None:
            try:
                inj.peer = await self.resolve(step.peer)
            except Exception as e:  # mid-failover: skip, say so
                return f"cannot tell who is {step.peer.value} now ({type(e).__name__}: {e})"
            if inj.peer is None or inj.peer.name == proc.name:
                return f"no other process is {step.peer.value} now"
        try:
            await self._apply(inj, nursery)
        except OSError as e:  # tc refused, the process just exited...: undone, and said
            self.active.append(inj)
            self.heal(inj)
            return f"{step.name} on {proc.name} failed: {e}"
        self.active.append(inj)
        return inj

    async def _apply(self, inj: Injected, nursery: trio.Nursery) -> None:
        proc, pid = inj.proc, inj.pid
        match inj.step.kind:
            case FaultKind.KILL:
                os.kill(pid, signal.SIGKILL)
                inj.healed = True
                if self.cluster.up_dir is None and proc.restart is not None:
                    nursery.start_soon(self._restart, proc)
            case FaultKind.SUSPEND:
                os.kill(pid, signal.SIGSTOP)
            case FaultKind.PARTITION | FaultKind.DELAY:
                await trio.to_thread.run_sync(self.net.setup)
                inj.prio = self.net.new_prio()
                nursery.start_soon(self._keep_filters, inj)
            case FaultKind.DISK_FULL:
                inj.ballast = await trio.to_thread.run_sync(self._fill, proc)
            case FaultKind.SLOW_DISK:
                await trio.to_thread.run_sync(self._slow, inj)

    async def _restart(self, proc: Proc) -> None:
        await trio.sleep(RESTART_AFTER_S)
        assert proc.restart is not None
        popen = subprocess.Popen(
            list(proc.restart), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self.restarted[proc.name] = popen.pid
        self.say(f"  restarted {proc.name}: pid {popen.pid}")

    def _pairs(self, inj: Injected) -> set[tuple[int | None, int | None]]:
        table = lonet.tcp_table()
        mine = lonet.conns_of(inj.pid, table)
        if inj.step.kind is FaultKind.DELAY:
            return {(c.local_port, None) for c in mine}
        out: set[tuple[int | None, int | None]] = set()
        for peer in self.peers_of(inj):
            pid = self.pid_of(peer)
            if pid is not None:
                out |= lonet.pairs_between(mine, lonet.conns_of(pid, table))
        return out

    async def _keep_filters(self, inj: Injected) -> None:
        """Add filters for the target's connections until healed (new ones show up)."""
        band = lonet.DROP_BAND if inj.step.kind is FaultKind.PARTITION else lonet.DELAY_BAND
        done: set[tuple[int | None, int | None]] = set()
        while not inj.healed:
            new = await trio.to_thread.run_sync(self._pairs, inj) - done
            if new and not inj.healed and inj.prio is not None:
                await trio.to_thread.run_sync(self.net.add, inj.prio, band, new)
                done |= new
            await trio.sleep(lonet.RESCAN_S)

    def _fill(self, proc: Proc) -> str:
        if proc.store_dir is None:  # a NameServer or controller: no store to fill
            raise OSError(f"{proc.name} has no store")
        path = os.path.join(mount_point(proc.store_dir), BALLAST)
        st = os.statvfs(os.path.dirname(path))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.posix_fallocate(fd, 0, max(1, st.f_bavail * st.f_frsize))
        except OSError:
            pass  # ENOSPC: as full as it gets, which is the point
        finally:
            os.close(fd)
        return path

    def _slow(self, inj: Injected) -> None:
        """Move every thread of the process into a new cgroup throttling its store's disk."""
        if inj.proc.store_dir is None:  # a NameServer or controller: no store to slow
            raise OSError(f"{inj.proc.name} has no store")
        mounts = self.sys.mounts()
        h = blkio.find_hierarchy(self.sys, mounts)
        if isinstance(h, str):
            raise OSError(h)
        dev = store_device(self.sys, inj.proc.store_dir, mounts)
        if isinstance(dev, str):
            raise OSError(dev)
        remove_stale(h, self.say)
        origins = _origins(inj.pid, h.version)
        directory = blkio.cgroup_dir(h, blkio.chaos_cgroup(os.getpid(), inj.pid))
        os.mkdir(directory)
        inj.slow = SlowCgroup(h, directory, origins)  # from here on, heal removes it
        for name, line in blkio.throttle_files(h, dev, self.throttle).items():
            _write(os.path.join(directory, name), line)
        _write(os.path.join(directory, blkio.JOIN_FILE), str(inj.pid))
        members = os.path.join(directory, blkio.members_file(h))
        for attempt in range(4):  # threads started while moving: moved one by one
            missing = _tids(inj.pid) - blkio.parse_ids(_read(members))
            if not missing:
                self.say(f"  slowdisk: {inj.proc.name} (pid {inj.pid}) in {directory}, {dev} "
                         f"throttled")  # fmt: skip
                return
            for tid in missing if attempt < 3 else ():
                _move(h, tid, blkio.chaos_cgroup(os.getpid(), inj.pid))
        raise OSError(f"threads {sorted(missing)} of pid {inj.pid} did not join {directory}")

    def _unslow(self, slow: SlowCgroup, pid: int) -> None:
        """Every thread still in the fault's cgroup back where it was (a thread started during
        the fault: where the process's main thread was), then the cgroup removed; a process
        killed meanwhile has left it already (its restart never entered it)."""
        try:
            release(slow, pid)
        except OSError as e:  # said, not raised: the other faults must still be healed
            self.say(f"  slowdisk: could not remove {slow.directory}: {e}")

    def heal(self, inj: Injected) -> None:
        """Undo ``inj`` (synchronous: it must work in a shielded finally too)."""
        if inj.healed and inj.step.kind is not FaultKind.KILL:
            return
        inj.healed = True
        match inj.step.kind:
            case FaultKind.KILL:
                pass
            case FaultKind.SLOW_DISK:
                if inj.slow is not None:
                    self._unslow(inj.slow, inj.pid)
            case FaultKind.SUSPEND:
                try:
                    os.kill(inj.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass  # killed meanwhile (a combination): nothing to continue
            case FaultKind.PARTITION | FaultKind.DELAY:
                if inj.prio is not None:
                    self.net.remove(inj.prio)
            case FaultKind.DISK_FULL:
                if inj.ballast is not None and os.path.exists(inj.ballast):
                    os.unlink(inj.ballast)
        if inj in self.active:
            self.active.remove(inj)
        if not any(i.prio is not None for i in self.active):
            self.net.teardown()

    def heal_all(self) -> None:
        """Continue every stopped process, remove every partition, delay and ballast."""
        for inj in list(self.active):
            inj.healed = False if inj.step.kind is not FaultKind.KILL else inj.healed
            self.heal(inj)
        self.active.clear()
        self.net.teardown()


# ---------------------------------------------------------------------- slow disk: file I/O


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _write(path: str, text: str) -> None:
    """One write(2), so the kernel's refusal of a cgroup line is raised here."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _tids(pid: int) -> set[int]:
    try:
        return {int(t) for t in os.listdir(f"/proc/{pid}/task")}
    except FileNotFoundError:
        return set()


def _origins(pid: int, version: blkio.Version) -> dict[int, str]:
    """Where each thread of ``pid`` is now (a thread that ends meanwhile is left out)."""
    out = {}
    for tid in _tids(pid):
        try:
            out[tid] = blkio.cgroup_of(_read(f"/proc/{pid}/task/{tid}/cgroup"), version)
        except FileNotFoundError:
            continue
    if pid not in out:
        raise OSError(f"pid {pid} has exited")
    return out


def _move(h: blkio.Hierarchy, tid: int, cgroup: str) -> None:
    """Thread ``tid`` into ``cgroup`` (v1: that thread; v2: its whole process)."""
    name = "tasks" if h.version is blkio.Version.V1 else blkio.JOIN_FILE
    try:
        _write(os.path.join(blkio.cgroup_dir(h, cgroup), name), str(tid))
    except ProcessLookupError:
        pass  # the thread ended meanwhile: nothing to move


def release(slow: SlowCgroup, pid: int, attempts: int = 20) -> None:
    """Move every member of ``slow``'s cgroup back to its origin and remove the cgroup."""
    members = os.path.join(slow.directory, blkio.members_file(slow.hierarchy))
    home = slow.origins.get(pid, "/")
    for i in range(attempts):
        if not os.path.isdir(slow.directory):
            return
        for tid in sorted(blkio.parse_ids(_read(members))):
            _move(slow.hierarchy, tid, slow.origins.get(tid, home))
        try:
            os.rmdir(slow.directory)
            return
        except OSError as e:  # EBUSY: a task exiting or just forked in; once more
            if i == attempts - 1:
                raise OSError(f"{slow.directory} still busy: {e}") from e
            time.sleep(0.05)


def remove_stale(h: blkio.Hierarchy, say: Callable[[str], None]) -> None:
    """Fault cgroups left by a chaos that was killed with -9 (it could not heal): their
    threads back to the hierarchy's root, the cgroups removed."""
    names = [n for n in os.listdir(h.mount) if os.path.isdir(os.path.join(h.mount, n))]
    for name in blkio.stale(names, lambda p: os.path.exists(f"/proc/{p}")):
        release(SlowCgroup(h, os.path.join(h.mount, name), {}), 0)
        say(f"  slowdisk: removed {name}, left by a chaos process that is gone")
