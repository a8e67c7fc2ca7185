"""System test with real processes: ordered consumption across restarts (issue 11, item 4).

`rocketrio up --mode single` (a NameServer and one broker); the broker's
rebalanceLockMaxLiveTime is set live to 15 s so a killed consumer's locks expire within the
test. 16 keys x 100 sequence numbers are sent with SelectMessageQueueByHash (key -> queue) over
about 15 s, while two orderly consumer processes (tests/harness/drivers/orderly_worker.py)
consume them: one is killed with SIGKILL and started again, then the other is stopped with
SIGTERM and started again.

What is asserted, from the consumers' records (wall-clock start / end of each listener call):
- no loss: every (key, seq) was consumed;
- per key, in consumption order, every seq is the previous one plus one, except for rewinds:
  a seq at or below the previous one, after which it again goes up one by one. A rewind is a
  re-delivery from the committed offset; only the SIGKILL can cause one (the graceful stop
  commits and unlocks first), so each key rewinds at most once and only on a queue the killed
  process owned;
- per queue, listener calls never overlap in time, across both processes (the killed
  process's last, unfinished call writes no record);
- no process logged an error.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.config_admin import update_broker_config
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.queue_select import SelectMessageQueueByHash
from tests.harness.paths import REPO
from tests.harness.system import UpProcess, log_problems, start_up, stop_processes

pytestmark = pytest.mark.system

TOPIC = "OrderTopic"
GROUP = "orderly_group"
KEYS = [f"order-{i}" for i in range(16)]
TOTAL = 100
ROOT = REPO


def start_worker(up: UpProcess, out: Path) -> subprocess.Popen[Any]:
    """Start a worker (its console output goes to ``<out>.log``); return once it consumes."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "tests.harness.drivers.orderly_worker", up.namesrv, GROUP, TOPIC]
    log = out.with_suffix(".log")
    with open(log, "w", encoding="utf-8") as console:
        proc = subprocess.Popen(
            [*cmd, str(out), "5"], cwd=ROOT, env=env, stdout=console, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 30
    while "started" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return proc


def records(paths: list[Path]) -> list[dict[str, Any]]:
    out = []
    for p in paths:
        if p.exists():
            out.extend(json.loads(line) for line in p.read_text().splitlines() if line)
    return sorted(out, key=lambda r: r["start"])


async def setup_topic(up: UpProcess) -> None:
    async with MQAdmin(up.namesrv) as admin:
        await admin.update_topic(TOPIC, cluster="DefaultCluster", read_queues=4, write_queues=4)
        await wait_for_route(admin, TOPIC)
        addr = (await admin.cluster_info()).brokerAddrTable["broker-a"].brokerAddrs[0]
        await update_broker_config(admin, addr, {"rebalanceLockMaxLiveTime": "15000"})


async def produce(up: UpProcess) -> None:
    async with Producer("orderly_producer", up.namesrv) as p:
        for seq in range(TOTAL):
            for key in KEYS:
                msg = Message(TOPIC, f"{key}:{seq}".encode())
                await p.send(msg, SelectMessageQueueByHash, key)
            await trio.sleep(0.15)


def test_two_orderly_consumers_keep_per_key_order_while_one_restarts(tmp_path: Path) -> None:
    up = start_up(str(tmp_path / "cluster"), "single", "--no-console")
    outs = [tmp_path / f"consumed-{i}.jsonl" for i in range(4)]
    workers: list[subprocess.Popen[Any]] = []
    try:
        trio.run(setup_topic, up)
        workers = [start_worker(up, outs[0]), start_worker(up, outs[1])]
        killed_pid = workers[1].pid

        async def scenario() -> None:
            async with trio.open_nursery() as n:
                n.start_soon(produce, up)
                await trio.sleep(5)
                # the waits in threads: a blocked loop would time out the producer's sends
                workers[1].send_signal(signal.SIGKILL)  # crash: no commit, no unlock
                await trio.to_thread.run_sync(workers[1].wait)
                workers.append(await trio.to_thread.run_sync(start_worker, up, outs[2]))
                await trio.sleep(5)
                workers[0].send_signal(signal.SIGTERM)  # graceful: commit, then unlock
                await trio.to_thread.run_sync(workers[0].wait, 30)
                workers.append(await trio.to_thread.run_sync(start_worker, up, outs[3]))
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                got = {r["body"] for r in records(outs)}
                if len(got) == len(KEYS) * TOTAL:
                    break
                await trio.sleep(0.5)

        trio.run(scenario)
        time.sleep(3)  # a late duplicate would show now
    finally:
        stop_processes(workers)
        up.stop()
    recs = records(outs)
    killed_queues = {r["queue"] for r in recs if r["pid"] == killed_pid}
    per_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in recs:
        key, seq = r["body"].split(":")
        per_key[key].append((int(seq), r["queue"]))
    assert set(per_key) == set(KEYS)
    total_rewinds = 0
    for key, seen in per_key.items():
        seqs = [s for s, _ in seen]
        assert seqs[0] == 0 and set(seqs) == set(range(TOTAL)), (key, seqs)  # no loss
        rewinds = 0
        for a, b in pairwise(seqs):
            if b == a + 1:
                continue
            assert b <= a, f"{key}: {a} then {b} (a skip or a swap): {seqs}"
            rewinds += 1
        assert rewinds <= 1, f"{key}: {rewinds} re-deliveries: {seqs}"
        total_rewinds += rewinds
        if rewinds:
            assert seen[0][1] in killed_queues, key
    by_queue: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in recs:
        by_queue[r["queue"]].append(r)
    for q, calls in by_queue.items():
        spans = sorted({(r["start"], r["end"]) for r in calls})
        for (_, end), (start, _) in pairwise(spans):
            assert start >= end, f"queue {q}: two listener calls at once"
    pids = {r["pid"] for r in recs}
    per_pid = {pid: sum(r["pid"] == pid for r in recs) for pid in sorted(pids)}
    print(f"records per process {per_pid}, keys re-delivered after the kill: {total_rewinds}")
    assert len(pids) == 4  # each of the four worker runs consumed something
    assert log_problems(str(tmp_path / "cluster" / "logs")) == []
