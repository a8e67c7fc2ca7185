"""Replication cost: a replicated broker set measured against an unreplicated broker, same run.

Processes on loopback, all started here: a NameServer with an embedded controller; an
UNREPLICATED broker (no slave) per flush type; a REPLICATED broker set per flush type (controller
mode, a master and an in-sync slave, allAckInSyncStateSet: a send is acknowledged once the slave
holds it too). Each topic lives on exactly one of them. For each flush type (ASYNC_FLUSH,
SYNC_FLUSH) and each target it measures:

- single sends, 256 in flight (send_async), 1 KiB bodies;
- batched sends, 64 x 1 KiB per SEND_BATCH_MESSAGE, 8 in flight;
and reports replicated / unreplicated as ``*_ratio`` (targets: >= 0.7 single, >= 0.6 batched),
plus, against the replicated ASYNC_FLUSH set: send latency p50/p99 at a fixed rate (default
5,000 msg/s; target p99 <= 10 ms) and the slave's replication lag (bytes of CommitLog the slave
is behind the master, sampled every 20 ms during the single-send run; p50/p99/max, and in ms of
traffic at the measured rate).

    .venv/bin/python bench/replicated.py [--quick] [--rate 5000]

Prints ONE JSON line.
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

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.config import ProducerConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.logs import configure_logging

BODY = os.urandom(512).hex().encode()  # 1 KiB


def free_port(taken: set[int]) -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p in taken or p + 1 in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p + 1))  # the HA port
            except OSError:
                continue
        taken.update((p, p + 1))
        return p


def start(role: str, name: str, conf: dict[str, str], work: str) -> subprocess.Popen[bytes]:
    path = os.path.join(work, f"{name}.conf")
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in conf.items())
    out = open(os.path.join(work, f"{name}.out"), "wb")
    return subprocess.Popen(
        [sys.executable, "-m", "rocketrio.cli.main", role, "-c", path, "--name", name],
        stdout=out,
        stderr=subprocess.STDOUT,
    )


async def single(ns: str, topic: str, total: int, inflight: int = 256) -> float:
    cfg = ProducerConfig(producerGroup=f"s_{topic}", maxInFlight=inflight)
    async with Producer(f"s_{topic}", ns, config=cfg) as p:
        t0 = time.perf_counter()
        futs = [await p.send_async(Message(topic, BODY)) for _ in range(total)]
        for f in futs:
            await f.wait()
        return total / (time.perf_counter() - t0)


async def batched(ns: str, topic: str, total: int, batch: int = 64, inflight: int = 8) -> float:
    msgs = [Message(topic, BODY) for _ in range(batch)]
    sent = 0
    async with Producer(f"b_{topic}", ns) as p:
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


async def latency(ns: str, topic: str, rate: int, seconds: float) -> tuple[float, float]:
    lat: list[float] = []
    async with Producer(f"l_{topic}", ns) as p:

        async def one() -> None:
            t = time.perf_counter()
            await p.send(Message(topic, BODY))
            lat.append(time.perf_counter() - t)

        start_t = trio.current_time()
        async with trio.open_nursery() as n:
            for i in range(int(rate * seconds)):
                await trio.sleep_until(start_t + i / rate)
                n.start_soon(one)
    lat.sort()
    return lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000


async def sample_lag(ns: str, master: str, slave: str, stop: trio.Event, out: list[int]) -> None:
    async with MQAdmin(ns) as admin:
        while not stop.is_set():
            # The slave first: the master can only have grown by the time it answers, so the
            # sample is an upper bound of the lag (never negative).
            s = await admin.broker_status(slave)
            m = await admin.broker_status(master)
            out.append(int(m["commitLogMaxOffset"]) - int(s["commitLogMaxOffset"]))
            await trio.sleep(0.02)


async def with_lag(
    ns: str, topic: str, total: int, master: str, slave: str
) -> tuple[float, list[int]]:
    lags: list[int] = []
    stop = trio.Event()
    async with trio.open_nursery() as n:
        n.start_soon(sample_lag, ns, master, slave, stop, lags)
        rate = await single(ns, topic, total)
        stop.set()
    return rate, lags


async def set_addrs(ns: str, name: str) -> tuple[str, str]:
    """(master, slave) of a replicated set, once both are registered."""
    async with MQAdmin(ns) as admin:
        with trio.fail_after(60):
            while True:
                try:
                    bd = (await admin.cluster_info()).brokerAddrTable.get(name)
                except Exception:
                    bd = None
                if bd is not None and 0 in bd.brokerAddrs and len(bd.brokerAddrs) == 2:
                    slave = next(a for i, a in bd.brokerAddrs.items() if i != 0)
                    return bd.brokerAddrs[0], slave
                await trio.sleep(0.2)


async def make_topic(ns: str, topic: str, addr: str) -> None:
    error: Exception | None = None
    async with MQAdmin(ns) as admin:
        for _ in range(300):
            try:
                await admin.update_topic(topic, broker_addr=addr, read_queues=4, write_queues=4)
                return
            except Exception as e:
                error = e
                await trio.sleep(0.1)
    raise RuntimeError(f"cannot create {topic} on {addr}: {error}")


async def warm(ns: str, topic: str) -> None:
    async with Producer(f"w_{topic}", ns) as p:
        for _ in range(300):
            try:
                await p.send(Message(topic, b"warmup"))
                return
            except Exception:
                await trio.sleep(0.1)
    raise RuntimeError(f"{topic} never took a write")


def pct(values: list[int], q: float) -> int:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))] if v else -1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rate", type=int, default=5000)
    args = ap.parse_args()
    scale = 0.2 if args.quick else 1.0
    n_single, n_batch = int(50_000 * scale), int(200_000 * scale)
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-replbench-")
    taken: set[int] = set()
    ns_port, ctrl_port = free_port(taken), free_port(taken)
    ns = f"127.0.0.1:{ns_port}"
    procs: list[subprocess.Popen[bytes]] = []
    result: dict[str, Any] = {"bench": "replicated", "body_bytes": len(BODY)}
    try:
        procs.append(start("namesrv", "namesrv", {
            "listenPort": str(ns_port), "logDir": work, "enableControllerInNamesrv": "true",
            "controllerDLegerGroup": "g", "controllerDLegerPeers": f"n0-127.0.0.1:{ctrl_port}",
            "controllerDLegerSelfId": "n0", "controllerStorePath": os.path.join(work, "ctrl"),
        }, work))  # fmt: skip
        time.sleep(0.5)
        lone_addr: dict[str, str] = {}
        for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            tag = flush.split("_")[0].lower()
            port = free_port(taken)
            lone_addr[flush] = f"127.0.0.1:{port}"
            procs.append(start("broker", f"lone-{tag}", {
                "brokerClusterName": f"LoneCluster{tag}", "brokerName": f"lone-{tag}",
                "brokerIP1": "127.0.0.1", "listenPort": str(port), "namesrvAddr": ns,
                "storePathRootDir": os.path.join(work, f"lone-{tag}"), "logDir": work,
                "flushDiskType": flush, "autoCreateTopicEnable": "false",
            }, work))  # fmt: skip
            for i in range(2):
                port = free_port(taken)
                procs.append(start("broker", f"repl-{tag}-{i}", {
                    "brokerClusterName": f"ReplCluster{tag}", "brokerName": f"repl-{tag}",
                    "brokerIP1": "127.0.0.1", "listenPort": str(port), "namesrvAddr": ns,
                    "storePathRootDir": os.path.join(work, f"repl-{tag}-{i}"), "logDir": work,
                    "flushDiskType": flush, "autoCreateTopicEnable": "false",
                    "enableControllerMode": "true", "controllerAddr": f"127.0.0.1:{ctrl_port}",
                    "allAckInSyncStateSet": "true",
                }, work))  # fmt: skip

        async def run() -> None:
            for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
                tag = flush.split("_")[0].lower()
                master, slave = await set_addrs(ns, f"repl-{tag}")
                await make_topic(ns, f"BenchLone{tag}", lone_addr[flush])
                await make_topic(ns, f"BenchRepl{tag}", master)
                await warm(ns, f"BenchLone{tag}")
                await warm(ns, f"BenchRepl{tag}")
                await trio.sleep(4)  # the slave copied the topic and is in the SyncStateSet
                base_single = await single(ns, f"BenchLone{tag}", n_single)
                repl_single, lags = await with_lag(ns, f"BenchRepl{tag}", n_single, master, slave)
                base_batch = await batched(ns, f"BenchLone{tag}", n_batch)
                repl_batch = await batched(ns, f"BenchRepl{tag}", n_batch)
                result[f"{tag}_flush"] = {
                    "unreplicated_single_msgs_per_s": round(base_single),
                    "replicated_single_msgs_per_s": round(repl_single),
                    "single_ratio": round(repl_single / base_single, 3),
                    "unreplicated_batched_msgs_per_s": round(base_batch),
                    "replicated_batched_msgs_per_s": round(repl_batch),
                    "batched_ratio": round(repl_batch / base_batch, 3),
                    "slave_lag_bytes": {
                        "p50": pct(lags, 0.5),
                        "p99": pct(lags, 0.99),
                        "max": max(lags, default=-1),
                        "samples": len(lags),
                    },
                    "slave_lag_p99_ms_of_traffic": round(
                        pct(lags, 0.99) / (repl_single * (len(BODY) + 200)) * 1000, 2
                    ),
                }
            seconds = 2 if args.quick else 10
            p50, p99 = await latency(ns, "BenchReplasync", args.rate, seconds)
            base50, base99 = await latency(ns, "BenchLoneasync", args.rate, seconds)
            result["latency_at_rate"] = {
                "rate_msgs_per_s": args.rate,
                "replicated_p50_ms": round(p50, 2),
                "replicated_p99_ms": round(p99, 2),
                "unreplicated_p50_ms": round(base50, 2),
                "unreplicated_p99_ms": round(base99, 2),
            }

        trio.run(run)
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
