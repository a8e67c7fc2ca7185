"""Python calls of the broker's Trio thread per message, pull against POP + one ACK per message,
beside bench/pop.py's CPU figures (the broker under `transaction_gc.wrap`: cProfile between a
SIGUSR1 at a phase's start and a SIGUSR2 at its end).

Prints ONE JSON line: for the pull phase and the POP + ACK phase, broker CPU per message (from
/proc; inflated by the profile, read the calls), Python calls per message and garbage
collections, and, with ``--top N``, the N functions with the most calls per message in the POP
phase (with their own time). The profiles stay in the work directory with ``--keep``.

    .venv/bin/python bench/pop_calls.py [--count N] [--workers W] [--top N] [--batch-ack]

``--batch-ack`` acknowledges each receive with one BATCH_ACK_MESSAGE: the POP phase is then
mostly the receive's own calls.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import sys
import tempfile
from typing import Any

import trio
from benchlib import Proc, batched_sends, create_topics, one_broker, stop_all
from pop import TOPIC, pop_consume, pull_consume
from transaction_gc import WrappedProc, phase, wrap

from rocketrio.actors.observe.logs import configure_logging


def top_calls(path: str, sent: int, n: int) -> list[dict[str, Any]]:
    """The ``n`` functions of the profile at ``path`` with the most calls, per message."""
    stats: dict[Any, Any] = pstats.Stats(path).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda kv: -kv[1][1])[:n]
    return [
        {
            "fn": f"{os.path.basename(f)}:{line}:{name}",
            "calls": round(v[1] / sent, 2),
            "own_us": round(v[2] / sent * 1e6, 2),
        }
        for (f, line, name), v in rows
    ]


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--wrap":
        wrap(sys.argv[2], sys.argv[3:])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--keep", action="store_true", help="keep the profiles, print where")
    ap.add_argument(
        "--batch-ack",
        action="store_true",
        help="one BATCH_ACK_MESSAGE per receive instead of one ACK per message (the receive alone)",
    )
    args = ap.parse_args()
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-popcalls-")
    out = os.path.join(work, "phases.jsonl")
    procs: list[Proc] = []
    total = args.count + 1  # and the warm-up message
    result: dict[str, Any] = {"bench": "pop_calls", "messages": total}
    try:
        ns, broker = one_broker(procs, work, "bench-pop")
        procs[-1].stop()  # started plain: again under the wrapper, same config and store
        procs[-1] = WrappedProc(procs[-1], out).start()
        trio.run(create_topics, ns, broker, [TOPIC])
        trio.run(batched_sends, ns, TOPIC, args.count)
        pid = procs[-1].pid
        pull = lambda: trio.run(pull_consume, ns, total)  # noqa: E731
        pop = lambda: trio.run(pop_consume, ns, "bench_pop", total, args.workers, args.batch_ack)  # noqa: E731
        result["pull"] = phase(pid, pull, total, out, 0)
        result["pop_batch_ack" if args.batch_ack else "pop_ack"] = phase(pid, pop, total, out, 1)
        if args.top:
            result["pop_ack_top"] = top_calls(f"{out}.1.prof", total, args.top)
        if args.keep:
            result["profiles"] = [f"{out}.0.prof", f"{out}.1.prof"]
    finally:
        if args.keep:
            for p in procs:
                p.stop()
        else:
            stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
