"""System test (F2): a network partition between OS processes, made with network namespaces.

Each process runs in its own network namespace (`ip netns`), all joined by a bridge; the test
client stays in the root namespace on the bridge. A partition is a pair of blackhole routes
(packets vanish, connections hang, nothing is reset: what a real network split does). Needs root
and iproute2; skipped with the reason otherwise. Everything created is removed in `finally`.

Scenario (upstream #7017 / #4800 family): under a steady stream of sends, the MASTER is cut off
from the NameServer + controller host only; it still reaches its slave and the clients. The
controller elects the slave; the isolated old master must not acknowledge anything from then on
(its slave stopped acking it); after the partition heals it learns the new epoch, becomes a
slave and cuts whatever it stored but never got acknowledged. Every acknowledged message is
consumed afterwards.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from tests.harness.system import consume_all, log_problems, role_changes

pytestmark = pytest.mark.system  # in conftest.XDIST_GROUPS

TOPIC = "FailoverTopic"  # consume_all reads this topic


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check)


def _netns_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    probe = f"rrprobe{os.getpid()}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"cannot create a network namespace: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


class Hosts:
    """Namespaces on a bridge: ``ip_of[name]``; the root namespace has ``client_ip``."""

    def __init__(self, names: list[str]) -> None:
        tag = f"{os.getpid() % 10000}{random.randrange(100)}"
        self.subnet = f"10.252.{random.randrange(1, 250)}"
        self.bridge = f"rrbr{tag}"
        self.client_ip = f"{self.subnet}.254"
        self.ns = {n: f"rr{tag}{n}" for n in names}
        self.ip_of = {n: f"{self.subnet}.{i + 1}" for i, n in enumerate(names)}
        self._veths: list[str] = []

    def create(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.client_ip}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, (name, ns) in enumerate(self.ns.items()):
            host_end, ns_end = f"rrv{self.bridge[4:]}{i}", f"rrp{self.bridge[4:]}{i}"
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            self._veths.append(host_end)
            _ip("link", "set", ns_end, "netns", ns)
            _ip("link", "set", host_end, "master", self.bridge)
            _ip("link", "set", host_end, "up")
            _ip("-n", ns, "addr", "add", f"{self.ip_of[name]}/24", "dev", ns_end)
            _ip("-n", ns, "link", "set", ns_end, "up")

    def partition(self, a: str, b: str) -> None:
        _ip("-n", self.ns[a], "route", "add", "blackhole", f"{self.ip_of[b]}/32")
        _ip("-n", self.ns[b], "route", "add", "blackhole", f"{self.ip_of[a]}/32")

    def heal(self, a: str, b: str) -> None:
        _ip("-n", self.ns[a], "route", "del", "blackhole", f"{self.ip_of[b]}/32", check=False)
        _ip("-n", self.ns[b], "route", "del", "blackhole", f"{self.ip_of[a]}/32", check=False)

    def destroy(self) -> None:
        for ns in self.ns.values():
            _ip("netns", "del", ns, check=False)
        for v in self._veths:
            _ip("link", "del", v, check=False)
        _ip("link", "del", self.bridge, check=False)


@contextmanager
def processes(hosts: Hosts, base: str) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    logs = os.path.join(base, "logs")
    os.makedirs(logs, exist_ok=True)
    ns_ip = hosts.ip_of["ns"]
    confs = {
        "ns": {
            "listenHost": ns_ip, "listenPort": "9876", "logDir": logs,
            "enableControllerInNamesrv": "true", "controllerDLegerGroup": "g",
            "controllerDLegerPeers": f"n0-{ns_ip}:9878", "controllerDLegerSelfId": "n0",
            "controllerStorePath": os.path.join(base, "controller"),
            "scanNotActiveBrokerInterval": "500", "scanInactiveMasterInterval": "500",
        },
    }  # fmt: skip
    for b in ("b0", "b1"):
        confs[b] = {
            "brokerName": "broker-a", "brokerIP1": hosts.ip_of[b], "listenPort": "10911",
            "namesrvAddr": f"{ns_ip}:9876", "storePathRootDir": os.path.join(base, b),
            "logDir": logs, "enableControllerMode": "true", "controllerAddr": f"{ns_ip}:9878",
            "brokerHeartbeatInterval": "500", "controllerHeartBeatTimeoutMills": "2000",
            "syncFlushTimeout": "2000",
        }  # fmt: skip
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for name, conf in confs.items():
            path = os.path.join(base, f"{name}.conf")
            with open(path, "w") as f:
                f.write("".join(f"{k}={v}\n" for k, v in conf.items()))
            role = "namesrv" if name == "ns" else "broker"
            node = "namesrv" if name == "ns" else f"broker-a-{name}"
            out = open(os.path.join(logs, f"{node}.out"), "ab")
            procs[name] = subprocess.Popen(
                ["ip", "netns", "exec", hosts.ns[name], sys.executable, "-m",
                 "rocketrio.cli.main", role, "-c", path, "--name", node],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            if name == "ns":
                time.sleep(0.5)
        yield procs
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs.values():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


class Up:
    """What consume_all / role_changes need of a cluster."""

    def __init__(self, namesrv: str, base_dir: str) -> None:
        self.namesrv = namesrv
        self.base_dir = base_dir


async def master_ip(namesrv: str, replicas: int = 1) -> str:
    async with MQAdmin(namesrv) as admin:
        with trio.fail_after(30):
            while True:
                try:
                    info = await admin.cluster_info()
                except Exception:  # the NameServer is still starting
                    await trio.sleep(0.2)
                    continue
                bd = info.brokerAddrTable.get("broker-a")
                if bd is not None and 0 in bd.brokerAddrs and len(bd.brokerAddrs) >= replicas:
                    return bd.brokerAddrs[0].rpartition(":")[0]
                await trio.sleep(0.2)


def sync_state_set(up: Up, node: str) -> list[int]:
    """The SyncStateSet ``node`` (a master) last had accepted, from its log ([] before any)."""
    path = os.path.join(up.base_dir, "logs", f"{node}.jsonl")
    last: list[int] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("event") == "sync_state_set_accepted":
                last = rec["sync_state_set"]
    return last


async def until(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    with trio.move_on_after(timeout_s):
        while not cond():
            await trio.sleep(0.1)
        return
    raise AssertionError(f"not within {timeout_s}s: {what}")


async def run_scenario(hosts: Hosts, up: Up) -> tuple[set[str], str, float]:
    acked: set[str] = set()
    host_by_ip = {ip: name for name, ip in hosts.ip_of.items()}
    old = host_by_ip[await master_ip(up.namesrv, 2)]
    node = f"broker-a-{old}"
    await until(lambda: len(sync_state_set(up, node)) == 2, 30, "the slave in the SyncStateSet")
    async with Producer("part_producer", up.namesrv, send_timeout=1.0, retries=4) as producer:
        stop = trio.Event()
        limiter = trio.CapacityLimiter(16)
        seq = 0

        async def one(body: str) -> None:
            async with limiter:
                try:
                    r = await producer.send(Message(TOPIC, body.encode()))
                except Exception:
                    return
                if r.send_status.name == "SEND_OK":
                    acked.add(body)

        async def stream() -> None:
            nonlocal seq
            async with trio.open_nursery() as n:
                while not stop.is_set():
                    n.start_soon(one, f"p{seq}")
                    seq += 1
                    await trio.sleep(0.005)

        async with trio.open_nursery() as n:
            n.start_soon(stream)
            await trio.sleep(2)
            cut_at = trio.current_time()
            hosts.partition(old, "ns")
            new_ip = await master_ip(up.namesrv)
            while host_by_ip[new_ip] == old:
                await trio.sleep(0.1)
                new_ip = await master_ip(up.namesrv)
            elected_after = trio.current_time() - cut_at
            await trio.sleep(5)  # the old master stays isolated from the controller a while
            hosts.heal(old, "ns")
            await until(
                lambda: role_changes(up, node)[-1]["broker_role"] == "SLAVE",
                30,
                "the old master stepped down",
            )
            await trio.sleep(2)  # sends go on to the new master beside its new slave
            stop.set()
    return acked, old, elected_after


def test_master_cut_off_from_the_controller_only(tmp_path: Any) -> None:
    why = _netns_unavailable()
    if why:
        pytest.skip(why)
    hosts = Hosts(["ns", "b0", "b1"])
    base = str(tmp_path / "cluster")
    try:
        hosts.create()
        with processes(hosts, base):
            up = Up(f"{hosts.ip_of['ns']}:9876", base)
            acked, old, elected_after = trio.run(run_scenario, hosts, up)
            # 2 s of silence (controllerHeartBeatTimeoutMills) + a 500 ms scan + the election
            assert elected_after < 4.5, f"new master after {elected_after:.1f}s"
            node = f"broker-a-{old}"
            deadline = time.monotonic() + 30
            while role_changes(up, node)[-1]["broker_role"] != "SLAVE":
                assert time.monotonic() < deadline, "the old master never stepped down"
                time.sleep(0.2)
            consumed = trio.run(consume_all, up, acked)
            missing = acked - consumed
            assert not missing, f"{len(missing)} acknowledged messages lost: {sorted(missing)[:5]}"
            assert len(acked) > 100
    finally:
        hosts.destroy()
    assert log_problems(os.path.join(base, "logs")) == []
