"""Broker sets on one host: aggregate throughput of `rocketrio up --sets 2` against `--sets 1`.

A broker is one Python process, so one broker set uses about one core; a host's other cores are
used by running more broker sets, as RocketMQ spreads a topic's queues over broker sets
(issue 28 item 6). Two clusters are started side by side with `rocketrio up` (default mode
controller: each set a master and an in-sync slave, NameServer with the embedded controller),
one with one set and one with two; the topic is created with `updateTopic -c` (4 queues on every
set). Then, in rounds that alternate which cluster goes first, ``--clients`` client processes
(on the same cores as the brokers) send 1 KiB messages in batches of 64 for ``--seconds`` to
one cluster; the figure is the sum of their acknowledged messages per second. The idle cluster
costs next to nothing meanwhile (its brokers only heartbeat).

Besides the msg/s, CPU seconds per message are measured (brokers from /proc, clients from their
own rusage): ``predicted_msgs_16_cores`` divides 16 cores by the CPU a message costs on the
2-set run, i.e. what a 16-core host carries when it runs enough sets to keep every core busy;
``per_set_cap_msgs`` is where one set tops out (its master, the busiest process of the 1-set
run, at one full core) and ``sets_for_16_cores`` how many sets that takes (docs/operations.md
says which assumptions these need).

    .venv/bin/python bench/sets.py [--rounds 3] [--seconds 8] [--clients 2] [--inflight 16]
                                   [--mode controller]

Prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import trio
from benchlib import BODY, cpu_seconds, free_port

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer

TOPIC = "SetsBench"
QUEUES_PER_SET = 4
BATCH = 64


class Cluster:
    """One `rocketrio up --sets K` with its broker pids."""

    def __init__(self, sets: int, mode: str, work: str) -> None:
        self.sets = sets
        taken: set[int] = set()
        base = free_port(taken)
        while not all(self._free(base + d) for d in range(0, 20 * sets + 40)):
            base = free_port(taken)
        self.ns = f"127.0.0.1:{base}"
        cmd = [
            sys.executable, "-m", "rocketrio.cli.main", "up", "--mode", mode,
            "--sets", str(sets), "--dir", os.path.join(work, f"sets{sets}"),
            "--namesrv-port", str(base), "--broker-port", str(base + 10),
            "--no-demo", "--no-console",
        ]  # fmt: skip
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.broker_pids: list[int] = []
        assert self.p.stdout is not None
        deadline = time.monotonic() + 120
        for line in self.p.stdout:
            if m := re.match(r"\s+broker\s+\S+\s+\S+\s+pid (\d+)", line):
                self.broker_pids.append(int(m.group(1)))
            if "running; press Ctrl-C" in line:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"up --sets {sets} did not come up")
        else:
            raise RuntimeError(f"up --sets {sets} exited: status {self.p.wait()}")

    @staticmethod
    def _free(port: int) -> bool:
        import socket

        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                return False
        return True

    def broker_cpu(self) -> list[float]:
        return [cpu_seconds(pid) for pid in self.broker_pids]

    def stop(self) -> None:
        self.p.send_signal(2)
        try:
            self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()


async def create_topic(ns: str) -> None:
    from rocketrio.cli.up import create_on_cluster

    for _ in range(100):
        try:
            await create_on_cluster(ns, TOPIC, "DefaultCluster", QUEUES_PER_SET)
            break
        except Exception:
            await trio.sleep(0.2)
    async with Producer("sets_warm", ns) as p:
        for _ in range(200):
            try:
                await p.send(Message(TOPIC, b"warmup"))
                return
            except Exception:
                await trio.sleep(0.1)


async def worker(ns: str, seconds: float, inflight: int) -> dict[str, float]:
    """One client process: batched sends for ``seconds``; acknowledged msgs and own CPU."""
    msgs = [Message(TOPIC, BODY) for _ in range(BATCH)]
    sent = 0
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    async with Producer("sets_bench", ns) as p:
        end = time.monotonic() + seconds

        async def loop() -> None:
            nonlocal sent
            while time.monotonic() < end:
                await p.send_batch(msgs)
                sent += BATCH

        t0 = time.monotonic()
        async with trio.open_nursery() as n:
            for _ in range(inflight):
                n.start_soon(loop)
        dt = time.monotonic() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"sent": sent, "seconds": dt, "cpu_s": cpu}


def measure(c: Cluster, clients: int, seconds: float, inflight: int) -> dict[str, float]:
    cpu0 = c.broker_cpu()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                c.ns,
                "--seconds",
                str(seconds),
                "--inflight",
                str(inflight),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(clients)
    ]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    per_broker = [b - a for a, b in zip(cpu0, c.broker_cpu(), strict=True)]
    broker_cpu = sum(per_broker)
    sent = sum(o["sent"] for o in outs)
    wall = max(o["seconds"] for o in outs)
    return {
        "msgs_per_s": sent / wall,
        "broker_cpu_us_per_msg": broker_cpu / sent * 1e6,
        "client_cpu_us_per_msg": sum(o["cpu_s"] for o in outs) / sent * 1e6,
        # cores the brokers kept busy: near 1 per set when the sets, not the clients, limit
        "broker_cores_busy": broker_cpu / wall,
        # the busiest broker process (a master): one process can use at most one core
        "busiest_broker_cores": max(per_broker) / wall,
        "busiest_broker_cpu_us_per_msg": max(per_broker) / sent * 1e6,
    }


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--clients", type=int, default=2, help="client processes per measurement")
    ap.add_argument("--mode", default="controller", help="the `up` mode whose set is repeated")
    ap.add_argument("--inflight", type=int, default=16, help="batches in flight per client")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # a client process: its NameServer
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(trio.run(worker, args.worker, args.seconds, args.inflight)))
        return
    work = tempfile.mkdtemp(prefix="rocketrio-setsbench-")
    clusters = {1: Cluster(1, args.mode, work), 2: Cluster(2, args.mode, work)}
    rows: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    try:
        for c in clusters.values():
            trio.run(create_topic, c.ns)
        for r in range(args.rounds):
            for k in (1, 2) if r % 2 == 0 else (2, 1):
                rows[k].append(measure(clusters[k], args.clients, args.seconds, args.inflight))
    finally:
        for c in clusters.values():
            c.stop()
        shutil.rmtree(work, ignore_errors=True)
    result: dict[str, Any] = {
        "bench": "sets", "mode": args.mode, "cpus": os.cpu_count(), "rounds": args.rounds,
        "seconds": args.seconds, "clients": args.clients, "batch": BATCH,
        "inflight": args.inflight,
    }  # fmt: skip
    for k in (1, 2):
        for key in rows[k][0]:
            result[f"sets{k}_{key}"] = spread([row[key] for row in rows[k]])
    ratios = [b["msgs_per_s"] / a["msgs_per_s"] for a, b in zip(rows[1], rows[2], strict=True)]
    result["ratio_2_sets_vs_1"] = spread(ratios)
    per_msg = [row["broker_cpu_us_per_msg"] + row["client_cpu_us_per_msg"] for row in rows[2]]
    result["cpu_us_per_msg_2_sets"] = round(statistics.median(per_msg), 1)
    predicted = 16e6 / statistics.median(per_msg)
    result["predicted_msgs_16_cores"] = round(predicted)
    # a set tops out when its master's one core is full: sets needed to carry that figure
    master_us = statistics.median(row["busiest_broker_cpu_us_per_msg"] for row in rows[1])
    result["per_set_cap_msgs"] = round(1e6 / master_us)
    result["sets_for_16_cores"] = math.ceil(predicted * master_us / 1e6)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
