"""Produce/consume benchmark against real NameServer + Broker processes on loopback.

Prints ONE JSON line with:
- batch_produce_msgs_per_s   SEND_BATCH_MESSAGE, 64 x 1 KiB per batch, several batches in flight
- single_produce_msgs_per_s  single sends (send_async) with 256 in flight, ASYNC_FLUSH broker
- sync_flush_single_msgs_per_s  the same against a SYNC_FLUSH broker (group commit), and the ratio
- consume_msgs_per_s         a push consumer group reading the whole backlog from offset 0
- latency_p50_ms / p99_ms    single sends at a fixed rate (default 5,000 msg/s)
- broker_peak_rss_mb         VmHWM of the ASYNC_FLUSH broker process at the end

    .venv/bin/python bench/produce_consume.py [--quick]

Every server runs as its own process (`python -m rocketrio.cli.main ...`), the clients in this
process, all on the same machine; so the figures include the Python client's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import trio

from rocketrio.actors.client.config import ProducerConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.logs import configure_logging

BODY = os.urandom(512).hex().encode()  # 1 KiB


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(role: str, conf: dict[str, str], workdir: str, name: str) -> subprocess.Popen[bytes]:
    path = os.path.join(workdir, f"{name}.conf")
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in conf.items())
    out = open(os.path.join(workdir, f"{name}.out"), "wb")
    return subprocess.Popen(
        [sys.executable, "-m", "rocketrio.cli.main", role, "-c", path, "--name", name],
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return -1.0


async def wait_broker(ns: str, topic: str) -> None:
    deadline = time.monotonic() + 30
    async with Producer("bench_wait", ns) as p:
        while True:
            try:
                await p.send(Message(topic, b"warmup"))
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await trio.sleep(0.2)


async def batch_produce(
    ns: str, topic: str, total: int, batch: int = 64, inflight: int = 8
) -> float:
    msgs = [Message(topic, BODY) for _ in range(batch)]
    sent = 0
    async with Producer("bench_batch", ns) as p:
        t0 = time.perf_counter()

        async def worker() -> None:
            nonlocal sent
            while sent < total:
                sent += batch
                await p.send_batch(msgs)

        async with trio.open_nursery() as n:
            for _ in range(inflight):
                n.start_soon(worker)
        return sent / (time.perf_counter() - t0)


async def single_produce(ns: str, topic: str, total: int, inflight: int = 256) -> float:
    cfg = ProducerConfig(producerGroup="bench_single", maxInFlight=inflight)
    async with Producer("bench_single", ns, config=cfg) as p:
        t0 = time.perf_counter()
        futs = []
        for _ in range(total):
            futs.append(await p.send_async(Message(topic, BODY)))
        for f in futs:
            await f.wait()
        return total / (time.perf_counter() - t0)


async def latency(ns: str, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    lat: list[float] = []
    async with Producer("bench_latency", ns) as p:

        async def one() -> None:
            t = time.perf_counter()
            await p.send(Message(topic, BODY))
            lat.append(time.perf_counter() - t)

        n_total = int(rate * seconds)
        start = trio.current_time()
        async with trio.open_nursery() as n:
            for i in range(n_total):
                await trio.sleep_until(start + i / rate)
                n.start_soon(one)
    lat.sort()
    return lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000


async def consume(ns: str, topic: str, expected: int) -> float:
    count = 0
    done = trio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        nonlocal count
        count += len(msgs)
        if count >= expected:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(
        "bench_consumer",
        ns,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        pull_batch_size=256,
        consume_batch_size=256,
    )
    c.subscribe(topic, "*")
    c.register_listener(listener)
    async with c:
        t0 = time.perf_counter()
        with trio.move_on_after(300):
            await done.wait()
        return count / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    ap.add_argument("--rate", type=int, default=5000)
    args = ap.parse_args()
    scale = 0.1 if args.quick else 1.0
    n_batch, n_single = int(300_000 * scale), int(100_000 * scale)
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-")
    procs: list[subprocess.Popen[bytes]] = []
    result: dict[str, Any] = {"bench": "produce_consume", "body_bytes": len(BODY)}
    try:
        ns_port, b_port, s_port = free_port(), free_port(), free_port()
        ns = f"127.0.0.1:{ns_port}"
        procs.append(start("namesrv", {"listenPort": str(ns_port), "logDir": work}, work, "ns"))
        time.sleep(0.5)
        common = {"namesrvAddr": ns, "logDir": work, "brokerIP1": "127.0.0.1"}
        broker = start(
            "broker",
            {
                **common,
                "brokerName": "bench-async",
                "listenPort": str(b_port),
                "storePathRootDir": os.path.join(work, "async"),
                "flushDiskType": "ASYNC_FLUSH",
            },
            work,
            "bench-async",
        )
        procs.append(broker)
        syncb = start(
            "broker",
            {
                **common,
                "brokerName": "bench-sync",
                "listenPort": str(s_port),
                "storePathRootDir": os.path.join(work, "sync"),
                "flushDiskType": "SYNC_FLUSH",
                "brokerClusterName": "SyncCluster",
            },
            work,
            "bench-sync",
        )
        procs.append(syncb)
        # topics pinned to one broker each: create them through the broker directly
        from rocketrio.actors.client.admin import MQAdmin

        async def setup() -> None:
            async with MQAdmin(ns) as admin:
                for _ in range(100):
                    try:
                        await admin.update_topic(
                            "BenchAsync",
                            broker_addr=f"127.0.0.1:{b_port}",
                            read_queues=4,
                            write_queues=4,
                        )
                        await admin.update_topic(
                            "BenchSync",
                            broker_addr=f"127.0.0.1:{s_port}",
                            read_queues=4,
                            write_queues=4,
                        )
                        return
                    except Exception:
                        await trio.sleep(0.2)
                raise RuntimeError("brokers did not come up")

        trio.run(setup)
        trio.run(wait_broker, ns, "BenchAsync")
        trio.run(wait_broker, ns, "BenchSync")
        result["batch_produce_msgs_per_s"] = round(
            trio.run(batch_produce, ns, "BenchAsync", n_batch)
        )
        result["single_produce_msgs_per_s"] = round(
            trio.run(single_produce, ns, "BenchAsync", n_single)
        )
        p50, p99 = trio.run(latency, ns, "BenchAsync", args.rate, 10 * scale if args.quick else 10)
        result.update(
            latency_rate_msgs_per_s=args.rate,
            latency_p50_ms=round(p50, 2),
            latency_p99_ms=round(p99, 2),
        )
        total = n_batch + n_single + 1
        result["consume_msgs_per_s"] = round(trio.run(consume, ns, "BenchAsync", total))
        sync_rate = trio.run(single_produce, ns, "BenchSync", n_single)
        result["sync_flush_single_msgs_per_s"] = round(sync_rate)
        result["sync_vs_async_slowdown"] = round(result["single_produce_msgs_per_s"] / sync_rate, 2)
        result["broker_peak_rss_mb"] = round(peak_rss_mb(broker.pid), 1)
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
