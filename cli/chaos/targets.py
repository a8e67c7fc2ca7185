"""Which processes a chaos run may touch: a cluster started by `rocketrio up` (read from its
``--dir``) or one described by a small JSON file; and the refusal of anything that is not on
this machine's loopback.

From `up`'s directory: ``up.lock`` must be held (a running `up`; chaos never starts or stops
the cluster), ``conf/<name>.conf`` gives each process's role, addresses and store, and
``logs/up.jsonl`` the pid of each process's latest start (``child_started``): `up` restarts a
process chaos killed, and the next fault reads the new pid. A pid is used only while
``/proc/<pid>/cmdline`` still names its config file (a pid the kernel gave to another program
since is never signalled).

The config file (for processes not started by `up`)::

    {"namesrv": "127.0.0.1:9876",
     "processes": [{"name": "broker-a-0", "role": "broker", "addr": "127.0.0.1:10911",
                    "ports": [10911, 10912], "pid": 4242, "broker_name": "broker-a",
                    "store_dir": "/data/broker-a-0", "restart": ["rocketrio", "broker", "-c",
                    "/etc/rocketrio/broker-a-0.conf"]}, ...]}

``restart`` (optional) is how chaos starts a process again after killing it; without it, kill
faults skip that process. ``controller_addr`` names the controller a process hosts.

A broker of a container (`up --mode container-2m-2s`: ``container-<n>.conf`` names its brokers'
configs in ``brokerConfigPaths``) runs in the container's process: its `Proc` has ``host`` = the
container's name, and a kill or suspend of the broker hits that whole process (every broker it
holds), as losing or hanging the machine would.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
from collections.abc import Iterable
from typing import Any

import attrs

from rocketrio.cli.up_lock import LOCK_FILE
from rocketrio.cli.up_plan import PEERS_KEY, PlanError, role_of
from rocketrio.protocol.config import parse_properties


class TargetError(Exception):
    """The target cannot be used; the message is one line for the user."""


@attrs.frozen
class Proc:
    name: str
    role: str  # namesrv | controller | broker | proxy
    addr: str  # host:listenPort (a standalone controller: its peer address)
    ports: tuple[int, ...]  # every port it listens on
    controller_addr: str | None = None  # the controller peer address it hosts, if any
    broker_name: str | None = None
    store_dir: str | None = None
    conf_path: str | None = None  # what its command line must name (up's processes)
    restart: tuple[str, ...] | None = None  # None: `up` restarts it (or nobody)
    host: str | None = None  # the process it runs in (a container's name); None: its own
    # a classic-mode slave (brokerRole=SLAVE, no controller): routed as id 0 only while it acts
    # as master for its dead master (RIP-32), with the write bit cleared
    classic_slave: bool = False


@attrs.frozen
class Cluster:
    namesrv: str
    procs: tuple[Proc, ...]
    up_dir: str | None = None  # set: the processes are `up`'s children
    pids: dict[str, int] = attrs.field(factory=dict)  # the config file's pids

    def proc(self, name: str) -> Proc:
        return next(p for p in self.procs if p.name == name)

    @property
    def controllers(self) -> list[str]:
        return [p.controller_addr for p in self.procs if p.controller_addr]

    def by_addr(self, addr: str) -> Proc | None:
        port = int(addr.rpartition(":")[2])
        for p in self.procs:
            if p.addr == addr or p.controller_addr == addr or port in p.ports:
                return p
        return None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def not_local(cluster: Cluster) -> list[str]:
    """Every address of ``cluster`` that is not on this machine's loopback."""
    addrs = [cluster.namesrv] + [p.addr for p in cluster.procs] + cluster.controllers
    return [a for a in addrs if not is_loopback(a.rpartition(":")[0])]


def _peer_addr(config: dict[str, str]) -> str | None:
    self_id = config.get("controllerDLegerSelfId", "")
    for peer in config.get(PEERS_KEY, "").split(";"):
        pid, _, addr = peer.strip().partition("-")
        if pid == self_id and addr:
            return addr
    return None


def proc_from_conf(name: str, text: str, conf_path: str) -> Proc:
    """A process of `up` from its generated config."""
    try:
        role = role_of(name)
    except PlanError as e:
        raise TargetError(str(e)) from None
    c = parse_properties(text, conf_path)
    host = c.get("listenHost") or c.get("brokerIP1") or "127.0.0.1"
    ports: list[int] = []
    if "listenPort" in c and role != "controller":
        ports.append(int(c["listenPort"]))
    if role == "broker":
        ports.append(int(c.get("haListenPort") or 0) or int(c["listenPort"]) + 1)
    embedded = c.get("enableControllerInNamesrv", "false").lower() == "true"
    ctrl = _peer_addr(c) if role == "controller" or embedded else None
    if ctrl is not None:
        ports.append(int(ctrl.rpartition(":")[2]))
    addr = f"{host}:{ports[0]}" if ports and role != "controller" else (ctrl or "")
    return Proc(
        name, role, addr, tuple(ports), controller_addr=ctrl,
        broker_name=c.get("brokerName") if role == "broker" else None,
        store_dir=c.get("storePathRootDir") if role == "broker" else None,
        conf_path=conf_path,
        classic_slave=role == "broker" and c.get("brokerRole", "").upper() == "SLAVE"
        and c.get("enableControllerMode", "false").lower() != "true",
    )  # fmt: skip


def up_is_running(up_dir: str) -> bool:
    """True while an `up` holds ``<dir>/up.lock`` (a shared lock attempt fails)."""
    path = os.path.join(up_dir, LOCK_FILE)
    if not os.path.exists(path):
        return False
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def from_up_dir(up_dir: str) -> Cluster:
    up_dir = os.path.abspath(up_dir)
    if not up_is_running(up_dir):
        raise TargetError(f"no rocketrio up is running on {up_dir} (start it: rocketrio up "
                          f"--dir {up_dir}); chaos never starts a cluster itself")  # fmt: skip
    conf_dir = os.path.join(up_dir, "conf")
    procs = []
    for f in sorted(os.listdir(conf_dir)):
        if f.endswith(".conf"):
            path = os.path.join(conf_dir, f)
            with open(path, encoding="utf-8") as fh:
                procs.append(proc_from_conf(f.removesuffix(".conf"), fh.read(), path))
    ns = [p.addr for p in procs if p.role == "namesrv"]
    if not ns:
        raise TargetError(f"{conf_dir} has no namesrv config: not a rocketrio up directory?")
    return Cluster(ns[0], tuple(in_containers(procs)), up_dir=up_dir)


def in_containers(procs: list[Proc]) -> list[Proc]:
    """``procs`` with every broker a container's ``brokerConfigPaths`` names moved into that
    container's process (``host``, and the container's config as what its command line names)."""
    hosted: dict[str, Proc] = {}
    for c in procs:
        if c.role != "container" or c.conf_path is None:
            continue
        with open(c.conf_path, encoding="utf-8") as fh:
            paths = parse_properties(fh.read(), c.conf_path).get("brokerConfigPaths", "")
        base = os.path.dirname(c.conf_path)
        for rel in filter(None, paths.split(":")):
            hosted[os.path.normpath(os.path.join(base, rel))] = c
    out = []
    for p in procs:
        c = hosted.get(os.path.normpath(p.conf_path)) if p.conf_path else None
        out.append(p if c is None else attrs.evolve(p, host=c.name, conf_path=c.conf_path))
    return out


def pids_from_up_log(lines: Iterable[str]) -> dict[str, int]:
    """The pid of each child's latest start in `up`'s log (``child_started`` lines)."""
    out: dict[str, int] = {}
    for line in lines:
        if '"child_started"' not in line:
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get("event") == "child_started":
            out[d["child"]] = int(d["pid"])
    return out


def from_config_file(path: str) -> Cluster:
    try:
        with open(path, encoding="utf-8") as f:
            d: Any = json.load(f)
        procs = tuple(
            Proc(
                p["name"],
                p["role"],
                p["addr"],
                tuple(int(x) for x in p.get("ports") or ()),
                controller_addr=p.get("controller_addr"),
                broker_name=p.get("broker_name"),
                store_dir=p.get("store_dir"),
                restart=tuple(p["restart"]) if p.get("restart") else None,
            )
            for p in d["processes"]
        )
        pids = {p["name"]: int(p["pid"]) for p in d["processes"]}
        return Cluster(d["namesrv"], procs, pids=pids)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TargetError(f"{path}: not a chaos target file ({type(e).__name__}: {e})") from None


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def current_pid(cluster: Cluster, proc: Proc) -> int | None:
    """The live pid of ``proc`` now, or None (not running, or the pid is no longer it)."""
    if cluster.up_dir is not None:
        log = os.path.join(cluster.up_dir, "logs", "up.jsonl")
        try:
            with open(log, encoding="utf-8", errors="replace") as f:
                pid = pids_from_up_log(f).get(proc.host or proc.name)
        except OSError:
            return None
    else:
        pid = cluster.pids.get(proc.name)
    if pid is None:
        return None
    line = cmdline(pid)
    if not line or (proc.conf_path is not None and proc.conf_path not in line):
        return None
    if zombie(pid):
        return None
    return pid


def zombie(pid: int) -> bool:
    """True when ``pid`` is gone or a zombie (dead, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True
