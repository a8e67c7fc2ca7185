"""POP benchmark: SimpleConsumer receive + ack against plain pull consumption, same broker, same
run, real NameServer + Broker processes on loopback.

Prints ONE JSON line with:
- pull_consume_msgs_per_s     a push consumer group (PULL_MESSAGE, 32 per pull) reading the
                              backlog from offset 0
- pop_receive_ack_msgs_per_s  SimpleConsumers of another group: receive(32) then one
                              ACK_MESSAGE per message (a receive's acks concurrently),
                              ``--workers`` receivers in parallel
- pop_receive_batch_ack_msgs_per_s  the same with one BATCH_ACK_MESSAGE per receive
- pop_vs_pull_ratio / pop_batch_vs_pull_ratio   POP rate / pull rate
- pop_inflight_after_run      popProgress's in-flight count of the first POP group at the end
                              (0: every message was acknowledged)
- broker_cpu_us_per_msg_pull / _pop_ack / _pop_batch_ack   broker process CPU (user + system)
                              per message of each phase, and pop_ack_vs_pull_broker_cpu (their
                              ratio: what the broker pays for POP + one ACK per message);
                              the same from clock ticks is coarse (10 ms a tick: ~1 us a message
                              at 10,000 messages, 10-15 % of pull's figure), so
- broker_oncpu_us_per_msg_pull / _pop_ack / _pop_batch_ack and pop_ack_vs_pull_broker_oncpu
                              are the same per message from the scheduler's nanosecond count of
                              the broker's time on a CPU (/proc/<pid>/task/*/schedstat)

    .venv/bin/python bench/pop.py [--count N] [--workers W] [--threads] [--buffer]

``--buffer`` runs the broker with enablePopBufferMerge=true (the POP buffer: CKs kept in memory
while acknowledged, broker/pop/buffer_merge.py); the JSON says which (``pop_buffer_merge``).

The default (10,000 messages of 1 KiB) runs in well under a minute.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import tempfile
import time
from typing import Any

import trio
from benchlib import (
    BODY,
    Proc,
    batched_sends,
    cpu_seconds,
    create_topics,
    one_broker,
    sched_seconds,
    stop_all,
)

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.pop_admin import pop_progress
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.client.simple_consumer import SimpleConsumer
from rocketrio.actors.observe.logs import configure_logging

TOPIC = "BenchPop"


async def pull_consume(ns: str, expected: int) -> float:
    """msg/s of a fresh push-consumer group reading the backlog, 32 messages per pull."""
    count = 0
    done = trio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        nonlocal count
        count += len(msgs)
        if count >= expected:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(
        "bench_pull",
        ns,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        pull_batch_size=32,
        consume_batch_size=32,
    )
    c.subscribe(TOPIC, "*")
    c.register_listener(listener)
    async with c:
        t0 = time.perf_counter()
        with trio.move_on_after(120):
            await done.wait()
        return count / (time.perf_counter() - t0)


async def pop_consume(ns: str, group: str, expected: int, workers: int, batch: bool) -> float:
    """msg/s of ``workers`` SimpleConsumers (one group) receiving and acking the backlog, timed
    from when every consumer has started to when the last expected message was acked (not
    counting start-up or the long poll that finds the backlog empty)."""
    count = 0
    done = trio.Event()
    ready = 0
    all_ready = trio.Event()
    t0 = t1 = 0.0

    async def worker() -> None:
        nonlocal count, ready, t0, t1
        async with SimpleConsumer(group, ns, await_duration=1.0, init_mode=0) as c:
            c.subscribe(TOPIC, "*")
            ready += 1
            if ready == workers:
                t0 = time.perf_counter()
                all_ready.set()
            await all_ready.wait()
            while not done.is_set():
                msgs = await c.receive(32, 60.0, await_duration=1.0)
                if batch and msgs:
                    await c.ack_batch(msgs)
                else:  # one ACK_MESSAGE per message, all of a receive in flight at once
                    async with trio.open_nursery() as n:
                        for m in msgs:
                            n.start_soon(c.ack, m)
                count += len(msgs)
                if count >= expected and not done.is_set():
                    t1 = time.perf_counter()
                    done.set()

    with trio.move_on_after(120):
        async with trio.open_nursery() as n:
            for _ in range(workers):
                n.start_soon(worker)
    return count / ((t1 or time.perf_counter()) - t0)


def thread_cpu(pid: int) -> dict[str, float]:
    """User + system CPU seconds of each of a process's threads so far, by thread name (threads
    of one name summed)."""
    out: dict[str, float] = {}
    tck = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:  # the thread ended meanwhile
            continue
        name = head.split("(", 1)[1]
        fields = rest.split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tck
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=10_000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--threads", action="store_true", help="each broker thread's CPU per phase")
    ap.add_argument("--buffer", action="store_true", help="the broker with enablePopBufferMerge")
    args = ap.parse_args()
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-pop-")
    procs: list[Proc] = []
    result: dict[str, Any] = {"bench": "pop", "body_bytes": len(BODY), "messages": args.count}
    result["pop_buffer_merge"] = args.buffer
    conf = {"enablePopBufferMerge": "true"} if args.buffer else {}
    try:
        ns, broker = one_broker(procs, work, "bench-pop", **conf)
        trio.run(create_topics, ns, broker, [TOPIC])
        trio.run(batched_sends, ns, TOPIC, args.count)
        total = args.count + 1  # and the warm-up message
        pid = procs[-1].pid
        cpu = [cpu_seconds(pid)]
        oncpu = [sched_seconds(pid)[0]]
        threads = [thread_cpu(pid)]
        pull = trio.run(pull_consume, ns, total)
        cpu.append(cpu_seconds(pid))
        oncpu.append(sched_seconds(pid)[0])
        threads.append(thread_cpu(pid))
        pop = trio.run(pop_consume, ns, "bench_pop", total, args.workers, False)
        cpu.append(cpu_seconds(pid))
        oncpu.append(sched_seconds(pid)[0])
        threads.append(thread_cpu(pid))
        pop_batch = trio.run(pop_consume, ns, "bench_pop_batch", total, args.workers, True)
        cpu.append(cpu_seconds(pid))
        oncpu.append(sched_seconds(pid)[0])
        threads.append(thread_cpu(pid))
        if args.threads:  # us per message of each thread name, per phase
            result["broker_thread_cpu_us_per_msg"] = {
                phase: {
                    name: round((b.get(name, 0.0) - a.get(name, 0.0)) / total * 1e6, 1)
                    for name in b
                    if b.get(name, 0.0) > a.get(name, 0.0)
                }
                for phase, (a, b) in zip(
                    ("pull", "pop_ack", "pop_batch_ack"), itertools.pairwise(threads), strict=True
                )
            }
        us = [round((b - a) / total * 1e6, 1) for a, b in itertools.pairwise(cpu)]
        result.update(
            broker_cpu_us_per_msg_pull=us[0],
            broker_cpu_us_per_msg_pop_ack=us[1],
            broker_cpu_us_per_msg_pop_batch_ack=us[2],
            pop_ack_vs_pull_broker_cpu=round(us[1] / us[0], 2) if us[0] else None,
        )
        on = [(b - a) / total * 1e6 for a, b in itertools.pairwise(oncpu)]
        result.update(
            broker_oncpu_us_per_msg_pull=round(on[0], 2),
            broker_oncpu_us_per_msg_pop_ack=round(on[1], 2),
            broker_oncpu_us_per_msg_pop_batch_ack=round(on[2], 2),
            pop_ack_vs_pull_broker_oncpu=round(on[1] / on[0], 2) if on[0] else None,
        )

        async def inflight() -> int:
            async with MQAdmin(ns) as admin:
                prog = await pop_progress(admin, "bench_pop", TOPIC)
                return prog.total_inflight

        result.update(
            pull_consume_msgs_per_s=round(pull),
            pop_receive_ack_msgs_per_s=round(pop),
            pop_receive_batch_ack_msgs_per_s=round(pop_batch),
            pop_vs_pull_ratio=round(pop / pull, 3),
            pop_batch_vs_pull_ratio=round(pop_batch / pull, 3),
            pop_workers=args.workers,
            pop_inflight_after_run=trio.run(inflight),
        )
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
