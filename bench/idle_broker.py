"""Idle broker benchmark: what a broker with nothing to do costs, per second.

Starts a NameServer and one broker (the POP bench's topic created, so the broker's tables are
not empty), lets it settle, then samples the broker process's CPU (user + system, /proc) over
``--seconds`` with no client connected. With ``--strace`` it also counts the broker's system
calls (all threads) over the same window (``strace -c -f``), whose ``epoll_wait`` count is the
loop's wake-ups. Prints ONE JSON line:

- idle_cpu_ms_per_s           the broker's CPU per second of wall clock, idle
- idle_syscalls_per_s         (``--strace``) system calls per second, all threads
- idle_epoll_waits_per_s      (``--strace``) ``epoll_wait`` calls per second (the loop's wake-ups)

    .venv/bin/python bench/idle_broker.py [--settle 10] [--seconds 30] [--strace]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time

import trio
from benchlib import Proc, cpu_seconds, create_topics, one_broker, stop_all

TOPIC = "BenchPop"


def strace_counts(pid: int, seconds: float) -> dict[str, int]:
    """System calls of ``pid`` (every thread) over ``seconds``, by name."""
    out = subprocess.run(
        ["timeout", "-s", "INT", str(seconds), "strace", "-c", "-f", "-p", str(pid)],
        capture_output=True,
        text=True,
    ).stderr
    counts: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        # rows: % time, seconds, usecs/call, calls, [errors,] syscall
        if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] != "total":
            counts[parts[-1]] = int(parts[3])
    return counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--settle", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--strace", action="store_true")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rocketrio-idle-")
    procs: list[Proc] = []
    try:
        ns, broker = one_broker(procs, work, "bench-idle")
        trio.run(create_topics, ns, broker, [TOPIC])
        time.sleep(args.settle)
        pid = procs[-1].pid
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        time.sleep(args.seconds)
        c1, t1 = cpu_seconds(pid), time.perf_counter()
        result: dict[str, float] = {"idle_cpu_ms_per_s": round((c1 - c0) / (t1 - t0) * 1e3, 2)}
        if args.strace:
            counts = strace_counts(pid, args.seconds)
            result["idle_syscalls_per_s"] = round(sum(counts.values()) / args.seconds, 1)
            result["idle_epoll_waits_per_s"] = round(counts.get("epoll_wait", 0) / args.seconds, 1)
        result["load_avg_1m"] = round(os.getloadavg()[0], 2)
        print(json.dumps(result))
    finally:
        stop_all(procs, work)


if __name__ == "__main__":
    main()
