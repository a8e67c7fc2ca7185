"""What a broker keeps in RAM per topic, queue and consumer group (issue 14: memory bounded by
configuration, not by the number of stored messages).

Starts a NameServer and one broker as processes on loopback (as a user runs them), then grows
the broker's tables in steps and reads its resident memory (``VmRSS`` and ``RssAnon`` from
/proc) after each step, once the broker has settled:

- ``empty``         the broker just started (the same-run reference every ratio uses);
- ``topics_<n>``    n topics of 8 queues each, one message in every queue (so every queue has
                    its ConsumeQueue file, its offsets and its statistics);
- ``groups_<g>``    g subscription groups, each with a committed offset on every queue of the
                    first 64 topics;
- ``messages``      ``--messages`` more messages with keys spread over the queues (the slope
                    per stored message: near zero when nothing in RAM grows with the store).

Prints ONE JSON line: each step's RSS / RssAnon (MiB), and the slopes derived from them:
``bytes_per_queue`` (topic and its 8 queues, divided by 8), ``bytes_per_group``,
``bytes_per_committed_offset`` and ``bytes_per_stored_message``. Python frees memory to its own
pools rather than to the OS, so a slope is an upper bound of what the tables hold.

    .venv/bin/python bench/broker_ram.py [--topics 250,1000] [--groups 20] [--messages 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from typing import Any

import trio
from benchlib import BODY, Proc, free_port, stop_all, wait_writable

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.protocol.bodies import MessageQueue, SubscriptionGroupConfig

QUEUES = 8


def memory_mb(pid: int) -> dict[str, float]:
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                out[key] = round(int(rest.split()[0]) / 1024, 1)
    return out


async def settle(pid: int) -> dict[str, float]:
    """RSS once it stops moving (two readings 1 s apart within 0.5 MiB, at most 10 s)."""
    last = memory_mb(pid)
    for _ in range(10):
        await trio.sleep(1)
        now = memory_mb(pid)
        if abs(now["VmRSS"] - last["VmRSS"]) < 0.5:
            return now
        last = now
    return last


async def add_topics(ns: str, addr: str, first: int, last: int) -> None:
    async with MQAdmin(ns) as admin, Producer("ram_pg", ns) as p:
        for t in range(first, last):
            await admin.update_topic(
                f"RamT{t}", broker_addr=addr, read_queues=QUEUES, write_queues=QUEUES
            )
        for t in range(first, last):
            name = f"RamT{t}"
            for _ in range(100):
                try:
                    for q in range(QUEUES):
                        mq = MessageQueue(name, "ram-broker", q)
                        await p.send_to_queue(Message(name, b"x", keys=f"k{t}-{q}"), mq)
                    break
                except Exception:
                    await trio.sleep(0.1)  # the route is not there yet


async def add_groups(ns: str, addr: str, first: int, last: int, topics: int) -> None:
    async with MQAdmin(ns) as admin:
        for g in range(first, last):
            group = f"RamG{g}"
            await admin.update_sub_group(SubscriptionGroupConfig(groupName=group), [addr])
            for t in range(topics):
                for q in range(QUEUES):
                    mq = MessageQueue(f"RamT{t}", "ram-broker", q)
                    await admin.api.update_consumer_offset(addr, group, mq, 1)


async def keyed_sends(ns: str, topic: str, total: int, batch: int = 64) -> None:
    """``total`` 1 KiB messages in batches, each with its own KEYS value (indexed)."""
    sent = 0
    async with Producer("ram_keys", ns) as p:

        async def worker() -> None:
            nonlocal sent
            while sent < total:
                first = sent
                sent += batch
                await p.send_batch(
                    [Message(topic, BODY, keys=f"key-{first + i}") for i in range(batch)]
                )

        async with trio.open_nursery() as n:
            for _ in range(8):
                n.start_soon(worker)


async def run(args: argparse.Namespace, ns: str, addr: str, pid: int) -> dict[str, Any]:
    steps: dict[str, dict[str, float]] = {}
    await wait_writable(ns, "RamWarm")
    steps["empty"] = await settle(pid)
    sizes = [int(x) for x in args.topics.split(",")]
    done = 0
    for n in sizes:
        await add_topics(ns, addr, done, n)
        done = n
        steps[f"topics_{n}"] = await settle(pid)
    group_topics = min(64, done)
    await add_groups(ns, addr, 0, args.groups, group_topics)
    steps[f"groups_{args.groups}"] = await settle(pid)
    await keyed_sends(ns, "RamWarm", args.messages)
    steps["messages"] = await settle(pid)

    def delta(a: str, b: str) -> float:
        return (steps[b]["RssAnon"] - steps[a]["RssAnon"]) * 1024 * 1024

    lo, hi = sizes[0], sizes[-1]
    per_queue = delta(f"topics_{lo}", f"topics_{hi}") / ((hi - lo) * QUEUES) if hi > lo else -1
    per_group_all = delta(f"topics_{hi}", f"groups_{args.groups}") / args.groups
    offsets_per_group = group_topics * QUEUES
    return {
        "steps_mb": steps,
        "bytes_per_queue": round(per_queue),
        "bytes_per_group_with_offsets": round(per_group_all),
        "offsets_per_group": offsets_per_group,
        "bytes_per_stored_message": round(
            delta(f"groups_{args.groups}", "messages") / args.messages, 2
        ),
        "messages": args.messages,
        "rss_ratio_largest_to_empty": round(
            steps["messages"]["VmRSS"] / steps["empty"]["VmRSS"], 2
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", default="250,1000", help="topic counts to grow to, in steps")
    ap.add_argument("--groups", type=int, default=20)
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--quick", action="store_true", help="a smoke run (small tables)")
    args = ap.parse_args()
    if args.quick:
        args.topics, args.groups, args.messages = "20,60", 3, 5000
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-ram-")
    procs: list[Proc] = []
    try:
        taken: set[int] = set()
        ns_port, port = free_port(taken), free_port(taken)
        ns, addr = f"127.0.0.1:{ns_port}", f"127.0.0.1:{port}"
        procs.append(Proc("namesrv", "ns", {"listenPort": str(ns_port), "logDir": work}, work))
        procs[-1].start()
        time.sleep(0.5)
        conf = {
            "namesrvAddr": ns, "logDir": work, "brokerIP1": "127.0.0.1",
            "brokerName": "ram-broker", "listenPort": str(port),
            "storePathRootDir": os.path.join(work, "store"),
            "autoCreateTopicEnable": "true",
        }  # fmt: skip
        broker = Proc("broker", "ram-broker", conf, work).start()
        procs.append(broker)
        result = trio.run(run, args, ns, addr, broker.pid)
        result.update(
            bench="broker_ram",
            body_bytes=len(BODY),
            cpus=os.cpu_count(),
            python=platform.python_version(),
            command="python bench/broker_ram.py "
            + f"--topics {args.topics} --groups {args.groups} --messages {args.messages}",
        )
        print(json.dumps(result))
    finally:
        stop_all(procs, work)


if __name__ == "__main__":
    main()
