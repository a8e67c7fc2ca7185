"""Helpers for the real-process tests: ports (per pytest-xdist worker), a `rocketrio up` process
(`start_up`, `UpProcess`), single roles from a config file (`launch`, `wait_for_line`), the
command line (`rr`), log scanning (`log_problems`) and failover observations (`master_name`,
`role_changes`)."""

from __future__ import annotations

import glob
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

import attrs
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.cli.up_plan import Layout, PlanError, load_templates, plan_from


def rr(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run ``rocketrio ARGS...`` (the command line, in a new process) and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "rocketrio.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# Ports for real processes come from 10000-31999, below Linux's ephemeral range (32768-60999)
# that outgoing connections and bind(0) use, so a port chosen here is not taken meanwhile by a
# client socket; under pytest-xdist each worker draws from its own slice, so two workers never
# choose overlapping blocks.
PORTS_FIRST, PORTS_END = 10_000, 32_000


def _port_slice() -> tuple[int, int]:
    """This process's range of ports: the whole range, or the xdist worker's slice of it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    size = (PORTS_END - PORTS_FIRST) // max(count, 1)
    first = PORTS_FIRST + index * size
    return first, first + size


def free_port_block(count: int, step: int = 10, extra: tuple[int, ...] = (2,)) -> int:
    """A base port such that base, base+step, ... (and base+extra) are free on 127.0.0.1."""
    first, end = _port_slice()
    span = max([step * count, *extra]) + 1
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(first, end - span)
        ports = [base + i * step for i in range(count)] + [base + e for e in extra]
        if _all_free(ports):
            return base
    raise RuntimeError("no free port block")


@attrs.define
class UpProcess:
    proc: subprocess.Popen[str]
    base_dir: str
    namesrv: str
    broker_port: int = 0
    lines: list[str] = attrs.field(factory=list)
    _reader: threading.Thread | None = None

    def __attrs_post_init__(self) -> None:
        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))

        self._reader = threading.Thread(target=pump, daemon=True)
        self._reader.start()

    def read_until(self, pattern: str, timeout_s: float, start: int = 0) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        rx = re.compile(pattern)
        seen = start
        while time.monotonic() < deadline:
            while seen < len(self.lines):
                if m := rx.search(self.lines[seen]):
                    return m
                seen += 1
            if self.proc.poll() is not None and self._reader is not None:
                self._reader.join(1)
                if seen >= len(self.lines):
                    break
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not seen; output so far:\n" + "\n".join(self.lines))

    def pid_of(self, name: str) -> int:
        pids = [
            int(m.group(1))
            for line in self.lines
            if (m := re.search(rf"\s{re.escape(name)}\s+\S+\s+pid (\d+)", line))
        ]
        assert pids, f"no pid line for {name}"
        return pids[-1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _all_free(ports: list[int]) -> bool:
    for port in ports:
        with socket.socket() as t:
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as `up`'s own check does
            try:
                t.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def up_ports(mode: str, base_dir: str, base: int) -> list[int]:
    """Every port `up --mode` listens on with ``--namesrv-port base --broker-port base+10``
    (listen ports, HA ports, controller peers); PlanError when that layout is not valid."""
    templates = load_templates(mode)
    specs = plan_from(templates, Layout(base_dir, namesrv_port=base, broker_port=base + 10))
    return [use.port for spec in specs for use in spec.listens]


def free_up_ports(mode: str, base_dir: str, avoid: Collection[int] = ()) -> int:
    """A NameServer port ``base`` such that every port of `up_ports` is free and none is in
    ``avoid`` (ports the caller hands `up` itself, free now but not bound until `up` binds
    them, so the free check alone cannot see them)."""
    for _ in range(50):
        base = free_port_block(1, extra=(200,))  # the plan's ports stay in this worker's slice
        try:
            ports = up_ports(mode, base_dir, base)
        except PlanError:
            continue
        if not set(avoid).intersection(ports) and _all_free(ports):
            return base
    raise RuntimeError(f"no free port layout for mode {mode}")


# `up`'s options that name a port of their own, besides the NameServer and broker ports
_PORT_OPTIONS = ("--console-port", "--proxy-port")


def start_up(base_dir: str, mode: str, *extra: str) -> UpProcess:
    given = {int(extra[i + 1]) for i, a in enumerate(extra[:-1]) if a in _PORT_OPTIONS}
    base = free_up_ports(mode, base_dir, avoid=given)
    cmd = [
        sys.executable,
        "-m",
        "rocketrio.cli.main",
        "up",
        "--mode",
        mode,
        "--dir",
        base_dir,
        "--namesrv-port",
        str(base),
        "--broker-port",
        str(base + 10),
        "--no-demo",
        *extra,
    ]
    if "--no-console" not in extra and "--console-port" not in extra:
        taken = given.union(up_ports(mode, base_dir, base))
        console = free_port_block(1, extra=())
        while console in taken:  # free now, but `up` is about to bind the plan's ports
            console = free_port_block(1, extra=())
        cmd += ["--console-port", str(console)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    up = UpProcess(proc, base_dir, f"127.0.0.1:{base}", base + 10)
    up.read_until("running; press Ctrl-C to stop", 60)
    return up


def stop_processes(procs: list[subprocess.Popen[Any]], grace_s: float = 30) -> None:
    """SIGINT every process still running, then wait for each; kill what does not stop."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(grace_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def log_problems(log_dir: str) -> list[str]:
    """Lines of the JSON logs that carry a traceback or are at error level."""
    bad = []
    for path in glob.glob(os.path.join(log_dir, "*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    bad.append(f"{path}: unparsable line {line[:200]!r}")
                    continue
                if "exception" in rec or rec.get("level") in ("error", "critical"):
                    bad.append(f"{os.path.basename(path)}: {line[:500]}")
    for path in glob.glob(os.path.join(log_dir, "*.out")):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if "Traceback" in text:
            bad.append(f"{path}: traceback in console output")
    return bad


TOPIC = "FailoverTopic"


async def master_name(up: UpProcess, replicas: int = 1) -> str:
    """The `up` process name of broker-a's current master (brokerId 0 at the NameServer),
    once at least ``replicas`` replicas are registered."""
    async with MQAdmin(up.namesrv) as admin:
        with trio.fail_after(20):
            while True:
                info = await admin.cluster_info()
                bd = info.brokerAddrTable.get("broker-a")
                if bd is not None and 0 in bd.brokerAddrs and len(bd.brokerAddrs) >= replicas:
                    addr = bd.brokerAddrs[0]
                    break
                await trio.sleep(0.2)
    port = int(addr.rpartition(":")[2])
    return "broker-a-0" if port == up.broker_port else "broker-a-1"


async def consume_all(up: UpProcess, acked: set[str]) -> set[str]:
    consumed: set[str] = set()
    done = trio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        for m in msgs:
            consumed.add(m.body.decode())
        if acked <= consumed:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "failover_group", up.namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    async with consumer:
        with trio.move_on_after(90):
            await done.wait()
    return consumed


def role_changes(up: UpProcess, node: str) -> list[dict[str, Any]]:
    path = os.path.join(up.base_dir, "logs", f"{node}.jsonl")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("event") == "broker_role_changed":
                out.append(rec)
    return out


def wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout_s}s: {what}")


def launch(role: str, name: str, conf: dict[str, str], work: str) -> subprocess.Popen[str]:
    path = os.path.join(work, f"{name}.conf")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{k}={v}\n" for k, v in conf.items()))
    cmd = [sys.executable, "-m", "rocketrio.cli.main", role, "-c", path, "--name", name]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(proc: subprocess.Popen[str], text: str, timeout_s: float = 60) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if text in line:
            return
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"{text!r} not printed (exit {proc.poll()})")


def launch_ns_and_broker(
    work: str, procs: list[subprocess.Popen[str]], **broker_conf: str
) -> tuple[str, str]:
    """A NameServer and one broker ``broker-a`` (registering every 3 s, extra keys from
    ``broker_conf``) as processes under ``work``, both booted; appended to ``procs`` as they
    start, so the caller's ``stop_processes(procs)`` stops them whatever fails. Returns (the
    NameServer's address, the broker's)."""
    base = free_port_block(3)
    logs = os.path.join(work, "logs")
    procs.append(launch("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, work))
    wait_for_line(procs[-1], "boot success")
    ns, broker = f"127.0.0.1:{base}", f"127.0.0.1:{base + 10}"
    conf = {
        "namesrvAddr": ns, "brokerIP1": "127.0.0.1", "logDir": logs, "brokerName": "broker-a",
        "listenPort": str(base + 10), "storePathRootDir": os.path.join(work, "store"),
        "registerNameServerPeriod": "3000", **broker_conf,
    }  # fmt: skip
    procs.append(launch("broker", "broker-a", conf, work))
    wait_for_line(procs[-1], "boot success")
    return ns, broker


async def create_topic_settled(
    ns: str, broker: str, topic: str, queues: int, settle_s: float = 5
) -> None:
    """``topic`` with ``queues`` read and write queues on ``broker``, then ``settle_s`` for its
    route to reach the NameServer with the broker's next registration (every 3 s in
    `launch_ns_and_broker`): a Java client asks the NameServer, not this process."""
    from rocketrio.actors.client.admin import MQAdmin

    async with MQAdmin(ns) as admin:
        await admin.update_topic(topic, broker_addr=broker, read_queues=queues, write_queues=queues)
    await trio.sleep(settle_s)


async def send_one(ns: str, topic: str, broker_addr: str) -> str:
    async with MQAdmin(ns) as admin:
        await admin.update_topic(topic, broker_addr=broker_addr, read_queues=1, write_queues=1)
    async with Producer("lock_test_producer", ns) as producer:
        for _ in range(100):  # the route appears after the broker's next registration
            try:
                result = await producer.send(Message(topic, b"still serving"))
                return str(result.send_status)
            except Exception:
                await trio.sleep(0.2)
    raise AssertionError("the first broker stopped serving")
