"""What the benchmark scripts share: server processes on loopback, the client loads, figures.

Imported by the scripts in this folder (`python bench/<script>.py` puts the folder on the path).
Every server is its own OS process started through the launcher; the clients run in the
benchmark's process, so every figure includes the Python client's cost.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import anyio
import trio

from rocketrio.actors.client.config import ClientConfig, ProducerConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer

BODY = os.urandom(512).hex().encode()  # 1 KiB


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(taken: set[int]) -> int:
    """A free loopback port whose HA port (port + 1) is free too; both join ``taken``.

    Drawn below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by
    default): a port the kernel handed out for a bind to port 0 is in that range, and an outgoing
    connection of any process (the brokers' own to the NameServer) could take it before the
    server that was given it binds it; a bench run then stopped with "cannot connect"."""
    low = _ephemeral_low()
    while True:
        port = random.randrange(max(1024, low - 12_000), low - 1)
        if port in taken or port + 1 in taken:
            continue
        try:
            for p in (port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
        except OSError:
            continue
        taken.update((port, port + 1))
        return port


class Proc:
    """One server process of the launcher, with its config file; restartable."""

    def __init__(self, role: str, name: str, conf: dict[str, str], work: str) -> None:
        self.role, self.name, self.work = role, name, work
        self.path = os.path.join(work, f"{name}.conf")
        with open(self.path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
        self.p: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.p is not None
        return self.p.pid

    def start(self) -> Proc:
        with open(os.path.join(self.work, f"{self.name}.out"), "ab") as out:
            self.p = subprocess.Popen(
                [sys.executable, "-m", "rocketrio.cli.main", self.role, "-c", self.path,
                 "--name", self.name],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        return self

    def signal(self, sig: int) -> None:
        """Send ``sig``; after SIGKILL, also reap the process."""
        assert self.p is not None
        os.kill(self.p.pid, sig)
        if sig == signal.SIGKILL:
            self.p.wait()

    def stop(self) -> None:
        if self.p is not None and self.p.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(self.p.pid, signal.SIGCONT)  # a frozen process cannot exit
            self.p.terminate()
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()


def stop_all(procs: list[Proc], work: str) -> None:
    """Stop every process (last started first) and remove the work directory."""
    for p in reversed(procs):
        p.stop()
    shutil.rmtree(work, ignore_errors=True)


def one_broker(procs: list[Proc], work: str, name: str, **conf: str) -> tuple[str, str]:
    """Start a NameServer and one broker named ``name`` (extra broker config in ``conf``),
    appending both to ``procs``; returns (NameServer address, broker address)."""
    taken: set[int] = set()
    ns_port, b_port = free_port(taken), free_port(taken)
    ns = f"127.0.0.1:{ns_port}"
    procs.append(Proc("namesrv", "ns", {"listenPort": str(ns_port), "logDir": work}, work))
    procs[-1].start()
    time.sleep(0.5)
    broker_conf = {
        "namesrvAddr": ns, "logDir": work, "brokerIP1": "127.0.0.1", "brokerName": name,
        "listenPort": str(b_port), "storePathRootDir": os.path.join(work, "store"), **conf,
    }  # fmt: skip
    procs.append(Proc("broker", name, broker_conf, work).start())
    return ns, f"127.0.0.1:{b_port}"


async def create_topics(ns: str, broker: str, topics: list[str], queues: int = 4) -> None:
    """Create ``topics`` on ``broker`` once it answers (up to 20 s), then wait until each is
    writable through the NameServer's routes."""
    from rocketrio.actors.client.admin import MQAdmin

    async with MQAdmin(ns) as admin:
        for _ in range(100):
            try:
                for topic in topics:
                    await admin.update_topic(
                        topic, broker_addr=broker, read_queues=queues, write_queues=queues
                    )
                break
            except Exception:
                await trio.sleep(0.2)
        else:
            raise RuntimeError("the broker did not come up")
    for topic in topics:
        await wait_writable(ns, topic)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def sched_seconds(pid: int) -> tuple[float, float]:
    """(on a CPU, runnable but waiting for one) seconds of all of a process's threads so far,
    from /proc/<pid>/task/*/schedstat (threads that ended are not counted)."""
    run = wait = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                on_cpu, queued, _ = f.read().split()
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
        run += int(on_cpu)
        wait += int(queued)
    return run / 1e9, wait / 1e9


def machine_busy() -> tuple[int, int]:
    """(busy, all) CPU ticks of the machine so far, every CPU (idle and iowait are not busy)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return -1.0


def pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else -1


# the client figures below run on either loop (anyio): produce_consume.py --loop


async def wait_writable(ns: str, topic: str, timeout_s: float = 30) -> None:
    """Until a send to ``topic`` succeeds (the broker is up and the route known)."""
    deadline = time.monotonic() + timeout_s
    async with Producer(f"w_{topic}", ns) as p:
        while True:
            try:
                await p.send(Message(topic, b"warmup"))
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await anyio.sleep(0.1)


async def single_sends(ns: str, topic: str, total: int, inflight: int = 256) -> float:
    """msg/s of ``total`` single sends (send_async) with ``inflight`` outstanding."""
    cfg = ProducerConfig(producerGroup=f"s_{topic}", maxInFlight=inflight)
    async with Producer(f"s_{topic}", ns, config=cfg) as p:
        t0 = time.perf_counter()
        futs = [await p.send_async(Message(topic, BODY)) for _ in range(total)]
        for f in futs:
            await f.wait()
        return total / (time.perf_counter() - t0)


async def batched_sends(
    ns: str, topic: str, total: int, batch: int = 64, inflight: int = 8
) -> float:
    """msg/s of SEND_BATCH_MESSAGE requests of ``batch`` messages, ``inflight`` outstanding."""
    msgs = [Message(topic, BODY) for _ in range(batch)]
    sent = 0
    async with Producer(f"b_{topic}", ns) as p:
        t0 = time.perf_counter()

        async def worker() -> None:
            nonlocal sent
            while sent < total:
                sent += batch
                await p.send_batch(msgs)

        async with anyio.create_task_group() as n:
            for _ in range(inflight):
                n.start_soon(worker)
        return sent / (time.perf_counter() - t0)


async def latency_at_rate(ns: str, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    """(p50, p99) in ms of single synchronous sends started at a fixed rate."""
    lat: list[float] = []
    async with Producer(f"l_{topic}", ns) as p:

        async def one() -> None:
            t = time.perf_counter()
            await p.send(Message(topic, BODY))
            lat.append(time.perf_counter() - t)

        start = anyio.current_time()
        async with anyio.create_task_group() as n:
            for i in range(int(rate * seconds)):
                await anyio.sleep_until(start + i / rate)
                n.start_soon(one)
    return pct(lat, 0.5) * 1000, pct(lat, 0.99) * 1000


async def consume_backlog(
    ns: str,
    topic: str,
    group: str,
    expected: int,
    client_config: ClientConfig | None = None,
) -> float:
    """Msg/s of a fresh push-consumer group reading ``topic``'s backlog from offset 0 until it
    has ``expected`` messages (256 per pull and per listener call; gives up after 300 s)."""
    count = 0
    done = anyio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        nonlocal count
        count += len(msgs)
        if count >= expected:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    extra: dict[str, Any] = {} if client_config is None else {"client_config": client_config}
    c = PushConsumer(
        group,
        ns,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        pull_batch_size=256,
        consume_batch_size=256,
        **extra,
    )
    c.subscribe(topic, "*")
    c.register_listener(listener)
    async with c:
        t0 = time.perf_counter()
        with anyio.move_on_after(300):
            await done.wait()
        return count / (time.perf_counter() - t0)
