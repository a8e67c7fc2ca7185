"""A broker's CPU per send by how many sends the client keeps in flight: synchronous sends of
1 KiB from ``--concurrency`` tasks of one Producer (1 = one request at a time), real NameServer
and Broker processes on loopback.

Prints ONE JSON line: per concurrency, the send rate and the broker's CPU per send (schedstat:
its threads' time on a CPU), and ``vs_highest`` (each concurrency's CPU per send over the
highest concurrency's, same run). With ``--calls`` the broker runs under cProfile
(transaction_gc.wrap) and each concurrency also reports the broker's Python calls per send (its
CPU figures are then inflated by the profile: read the calls).

    .venv/bin/python bench/send_concurrency.py [--count N] [--concurrency 1,4,16,64] [--calls]

What it shows: a store turn, a reader's wake-up and a scheduler round each cost the same
whatever they carry, so at one request in flight each send pays all of them (2026-11-29: ~440 us
of broker CPU a send and ~437 Python calls at concurrency 1, ~35-50 us and ~98 calls at 64;
docs/benchmarks.md, thirteenth pass of item 5).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

import trio
from benchlib import BODY, Proc, create_topics, one_broker, sched_seconds, stop_all
from transaction_gc import WrappedProc, phase, wrap

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.observe.logs import configure_logging

TOPIC = "BenchConcurrency"


async def sends(ns: str, count: int, concurrency: int) -> float:
    """msg/s of ``count`` synchronous sends spread over ``concurrency`` tasks (after one
    warm-up send that connects and fetches the route)."""
    async with Producer(f"c{concurrency}", ns) as p:
        await p.send(Message(TOPIC, BODY))
        each = count // concurrency

        async def worker() -> None:
            for _ in range(each):
                await p.send(Message(TOPIC, BODY))

        t0 = time.perf_counter()
        async with trio.open_nursery() as n:
            for _ in range(concurrency):
                n.start_soon(worker)
        return each * concurrency / (time.perf_counter() - t0)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--wrap":
        wrap(sys.argv[2], sys.argv[3:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=4_000, help="sends per concurrency")
    ap.add_argument("--concurrency", default="1,4,16,64")
    ap.add_argument("--calls", action="store_true", help="Python calls per send (cProfile)")
    args = ap.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    if not levels or min(levels) < 1:
        ap.error("--concurrency: positive integers, comma-separated")
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-conc-")
    out = os.path.join(work, "phases.jsonl")
    procs: list[Proc] = []
    result: dict[str, Any] = {"bench": "send_concurrency", "body_bytes": len(BODY)}
    try:
        ns, broker = one_broker(procs, work, "bench-conc")
        if args.calls:  # started plain: again under the wrapper, same config and store
            procs[-1].stop()
            procs[-1] = WrappedProc(procs[-1], out).start()
        trio.run(create_topics, ns, broker, [TOPIC])
        pid = procs[-1].pid
        rows: dict[str, dict[str, Any]] = {}
        for i, c in enumerate(levels):
            if args.calls:
                rate_of: list[float] = []

                def run(c: int = c, into: list[float] = rate_of) -> None:
                    into.append(trio.run(sends, ns, args.count, c))

                row = phase(pid, run, args.count, out, i)
                rows[str(c)] = {"msgs_per_s": round(rate_of[0]), **row}
                continue
            cpu0 = sched_seconds(pid)[0]
            rate = trio.run(sends, ns, args.count, c)
            cpu = sched_seconds(pid)[0] - cpu0
            rows[str(c)] = {
                "msgs_per_s": round(rate),
                "broker_cpu_us_per_send": round(cpu / (args.count + 1) * 1e6, 1),
            }
        result["by_concurrency"] = rows
        key = "broker_cpu_us_per_message" if args.calls else "broker_cpu_us_per_send"
        top = rows[str(max(levels))][key]
        result["vs_highest"] = {c: round(r[key] / top, 2) if top else None for c, r in rows.items()}
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
