"""Where the broker's Trio thread goes during bench/pop.py's POP + one ACK per message phase:
py-spy (``--nonblocking``, raw stacks) attached to the broker for that phase only, each busy
sample given to the first area (below) whose frame its stack holds, innermost first.

Prints ONE JSON line: the samples, the busy ones (the Trio thread outside its epoll wait), and
each area's share of the busy samples.

    .venv/bin/python bench/pop_spy.py [--count N] [--workers W] [--rate HZ] [--keep] [--buffer]

py-spy must be on PATH or in the venv's bin; it samples without stopping the broker, so on a
loaded machine it takes fewer samples than asked (the count is printed: read the shares with it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter

import trio
from benchlib import Proc, batched_sends, create_topics, one_broker, stop_all
from pop import TOPIC, pop_consume

from rocketrio.actors.observe.logs import configure_logging

# (area, function, file) of a frame that marks it, innermost area first
AREAS = [
    ("socket sends (the writers)", "._writer", "remoting_connection.py"),
    ("ACK_MESSAGE: the direct path", "DirectAck.__call__", "direct_ack.py"),
    ("ACK_MESSAGE: generic handler", "ack_message", "handlers.py"),
    ("ACK answers", "_answer", "direct_ack.py"),
    ("the ACK batcher (merge, records, answers)", "", "ack_batch.py"),
    ("POP_MESSAGE without a task", "PopNowait.try_serve", "pop_nowait.py"),
    ("POP answered from the CK's store turn", "PopNowait._stored", "pop_nowait.py"),
    ("POP_MESSAGE on a task", "._serve", "processor.py"),
    ("POP_MESSAGE handler", "pop_message", "handlers.py"),
    ("the revive scan", "", "revive_service.py"),
    ("the POP buffer's rounds", "", "buffer_service.py"),
    ("store turns (append, dispatch, completions)", "", "store/actor.py"),
    ("frame decode", ".next_command", "remoting.py"),
    ("the rest of the reader (dispatch, reads)", "._reader", "remoting_connection.py"),
]
IDLE = ("epoll", "poll (", "_epoll_wait", "get_events (")


def area_of(stack: str) -> str:
    frames = stack.split(";")
    for frame in reversed(frames):
        for name, fn, path in AREAS:
            if f"{path}:" in frame and (not fn or f"{fn} (" in frame):
                return name
    return "Trio's scheduler and the rest"


def shares(raw_path: str) -> dict[str, object]:
    """Busy samples of the main thread per area, from py-spy's raw (folded) output."""
    total, busy = 0, Counter[str]()
    with open(raw_path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not n.isdigit() or not stack.split(";")[0].endswith("MainThread"):
                continue
            total += int(n)
            inner = stack.rsplit(";", 1)[-1]
            if any(m in inner for m in IDLE):
                continue
            busy[area_of(stack)] += int(n)
    count = sum(busy.values())
    return {
        "main_thread_samples": total,
        "busy_samples": count,
        "areas_pct": {k: round(v / count * 100, 1) for k, v in busy.most_common()} if count else {},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=30_000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rate", type=int, default=250)
    ap.add_argument("--keep", action="store_true", help="keep the raw stacks, print where")
    ap.add_argument("--buffer", action="store_true", help="the broker with enablePopBufferMerge")
    args = ap.parse_args()
    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-popspy-")
    raw = os.path.join(tempfile.mkdtemp(prefix="rocketrio-popspy-"), "pop_ack.txt")
    procs: list[Proc] = []
    try:
        conf = {"enablePopBufferMerge": "true"} if args.buffer else {}
        ns, broker = one_broker(procs, work, "bench-pop", **conf)
        trio.run(create_topics, ns, broker, [TOPIC])
        trio.run(batched_sends, ns, TOPIC, args.count)
        pid = procs[-1].pid
        cmd = [spy, "record", "--nonblocking", "-r", str(args.rate), "-f", "raw", "-o", raw]
        recorder = subprocess.Popen(
            [*cmd, "--threads", "--pid", str(pid)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            trio.run(pop_consume, ns, "bench_pop", args.count + 1, args.workers, False)
        finally:
            recorder.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            recorder.wait(timeout=60)
    finally:
        stop_all(procs, work)
    result = {"bench": "pop_spy", "messages": args.count, "rate_hz": args.rate, **shares(raw)}
    result["pop_buffer_merge"] = args.buffer
    if args.keep:
        result["raw"] = raw
    else:
        shutil.rmtree(os.path.dirname(raw), ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
