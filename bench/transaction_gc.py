"""Where a transaction's extra broker CPU goes, beside bench/transaction.py's figures: the
garbage collector's collections and the Python calls of the broker's Trio thread, per phase.

The broker runs under a small wrapper (this file with ``--wrap``) that counts every collection
per generation and its time (``gc.callbacks``) and profiles the main thread (cProfile) between a
SIGUSR1 at a phase's start and a SIGUSR2 at its end. Prints ONE JSON line with, for the plain
sends and the transactions (``--count`` of each, ``--tasks`` at once): broker CPU per message
(from /proc), collections per generation and their milliseconds, Python calls per message.

    .venv/bin/python bench/transaction_gc.py [--count N] [--tasks K]

The profile slows the broker: read its calls, not its CPU figures, as the cost.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import runpy
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import trio
from benchlib import Proc, cpu_seconds, create_topics, one_broker, stop_all
from transaction import plain_sends, tx_sends

from rocketrio.actors.observe.logs import configure_logging


def wrap(out: str, argv: list[str]) -> None:
    """Run the launcher with ``argv``; each SIGUSR1..SIGUSR2 phase appends a JSON line to
    ``out`` and writes its profile to ``out.<n>.prof``."""
    gens: dict[int, list[float]] = {}
    state: dict[str, Any] = {"n": 0, "prof": None, "t": 0.0}

    def on_gc(event: str, info: dict[str, int]) -> None:
        if event == "start":
            state["t"] = time.perf_counter()
            return
        g = gens.setdefault(info["generation"], [0, 0.0])
        g[0] += 1
        g[1] += time.perf_counter() - state["t"]

    def start(*_: object) -> None:
        gens.clear()
        state["prof"] = prof = cProfile.Profile()
        prof.enable()

    def stop(*_: object) -> None:
        prof = state["prof"]
        if prof is None:
            return
        prof.disable()
        path = f"{out}.{state['n']}.prof"
        prof.dump_stats(path)
        state["n"] += 1
        state["prof"] = None
        with open(out, "a") as f:
            f.write(json.dumps({"gc": gens, "profile": path}) + "\n")

    gc.callbacks.append(on_gc)
    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = ["rocketrio.cli.main", *argv]
    runpy.run_module("rocketrio.cli.main", run_name="__main__")


class WrappedProc(Proc):
    """A launcher process started under `wrap` (same config file as the plain one)."""

    def __init__(self, proc: Proc, out: str) -> None:  # no config file written again
        self.role, self.name, self.work, self.path = proc.role, proc.name, proc.work, proc.path
        self.p = None
        self.out = out

    def start(self) -> Proc:
        with open(os.path.join(self.work, f"{self.name}.out"), "ab") as log:
            self.p = subprocess.Popen(
                [sys.executable, __file__, "--wrap", self.out, self.role, "-c", self.path,
                 "--name", self.name],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        return self


def phase(pid: int, run: Callable[[], object], sent: int, out: str, done: int) -> dict[str, Any]:
    """One phase under the wrapper's counters; its figures."""
    os.kill(pid, signal.SIGUSR1)
    time.sleep(0.5)
    cpu0 = cpu_seconds(pid)
    run()
    cpu1 = cpu_seconds(pid)
    os.kill(pid, signal.SIGUSR2)
    lines: list[str] = []
    for _ in range(100):  # the wrapper appends its line once the profile is written
        if os.path.exists(out):
            with open(out) as f:
                lines = f.read().splitlines()
            if len(lines) > done:
                break
        time.sleep(0.1)
    line = json.loads(lines[done])
    stats: dict[Any, tuple[int, int, float, float, Any]] = pstats.Stats(line["profile"]).stats  # type: ignore[attr-defined]
    calls = sum(v[1] for v in stats.values())
    return {
        "broker_cpu_us_per_message": round((cpu1 - cpu0) / sent * 1e6),
        "collections": {g: n for g, (n, _) in sorted(line["gc"].items())},
        "gc_ms": round(sum(s for _, s in line["gc"].values()) * 1000, 1),
        "python_calls_per_message": round(calls / sent, 1),
    }


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--wrap":
        wrap(sys.argv[2], sys.argv[3:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=6000, help="sends of each kind")
    ap.add_argument("--tasks", type=int, default=32, help="concurrent sending tasks")
    args = ap.parse_args()
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-")
    out = os.path.join(work, "phases.jsonl")
    procs: list[Proc] = []
    sent = args.count // args.tasks * args.tasks
    result: dict[str, Any] = {"bench": "transaction_gc", "count": sent, "tasks": args.tasks}
    try:
        ns, broker = one_broker(procs, work, "bench-tx", flushDiskType="ASYNC_FLUSH")
        procs[-1].stop()  # started plain: again under the wrapper, same config and store
        procs[-1] = WrappedProc(procs[-1], out).start()
        trio.run(create_topics, ns, broker, ["BenchPlain", "BenchTx"])
        trio.run(plain_sends, ns, "BenchPlain", 640, args.tasks)  # warm up
        pid = procs[-1].pid
        plain = lambda: trio.run(plain_sends, ns, "BenchPlain", args.count, args.tasks)  # noqa: E731
        tx = lambda: trio.run(tx_sends, ns, "BenchTx", args.count, args.tasks)  # noqa: E731
        result["plain"] = phase(pid, plain, sent, out, 0)
        result["tx"] = phase(pid, tx, sent, out, 1)
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
