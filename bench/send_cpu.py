"""Broker CPU per message of the project's own producer: one NameServer + one ASYNC_FLUSH broker,
40,000 batched sends (64 x 1 KiB per request) then 10,000 single sends (256 in flight), the
broker process's CPU (``/proc``) divided by the messages. Prints ONE JSON line.

Broker CPU per message moves far less than throughput on a shared machine, so this is the
figure to compare two checkouts with: the script's folder provides `benchlib`, the Python that
runs it provides rocketrio, so another checkout's code is measured with

    (cd OTHER && .venv/bin/python /path/to/this/bench/send_cpu.py)

Then a fresh push consumer reads the whole backlog (``consume_broker_cpu_us_per_msg``), so a
change to the send path is seen not to make consuming dearer. ``--single`` / ``--batch`` set
the message counts.
"""

from __future__ import annotations

import argparse
import json
import tempfile

import trio
from benchlib import (
    Proc,
    batched_sends,
    consume_backlog,
    cpu_seconds,
    create_topics,
    one_broker,
    single_sends,
    stop_all,
)

from rocketrio.actors.observe.logs import configure_logging

N_BATCH, N_SINGLE = 40_000, 10_000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--single", type=int, default=N_SINGLE)
    ap.add_argument("--batch", type=int, default=N_BATCH)
    args = ap.parse_args()
    n_batch, n_single = args.batch, args.single
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-send-cpu-")
    procs: list[Proc] = []
    try:
        ns, broker = one_broker(procs, work, "cpu", flushDiskType="ASYNC_FLUSH")
        trio.run(create_topics, ns, broker, ["SendCpu"])
        pid = procs[-1].pid
        c0 = cpu_seconds(pid)
        batch = trio.run(batched_sends, ns, "SendCpu", n_batch)
        c1 = cpu_seconds(pid)
        single = trio.run(single_sends, ns, "SendCpu", n_single)
        c2 = cpu_seconds(pid)
        total = n_batch + n_single
        consume = trio.run(consume_backlog, ns, "SendCpu", "cpu_consumer", total)
        c3 = cpu_seconds(pid)
    finally:
        stop_all(procs, work)
    print(
        json.dumps(
            {
                "bench": "send_cpu",
                "batch_msgs_per_s": round(batch),
                "batch_broker_cpu_us_per_msg": round((c1 - c0) / n_batch * 1e6, 2),
                "single_msgs_per_s": round(single),
                "single_broker_cpu_us_per_msg": round((c2 - c1) / n_single * 1e6, 2),
                "consume_msgs_per_s": round(consume),
                "consume_broker_cpu_us_per_msg": round((c3 - c2) / total * 1e6, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
