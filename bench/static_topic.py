"""Static topic (RIP-21) vs ordinary topic: produce and consume msgs/s in the same run (issue 12).

A NameServer and two brokers (bench-a, bench-b, one cluster, ASYNC_FLUSH, no slaves: like
`rocketrio up --mode 2m-noslave`), each its own process on loopback. Two topics of the same
shape: an ordinary one with 4 queues on each broker (8 in all) and a static one with 8 logic
queues that ``update_static_topic`` (what `rocketrio admin updateStaticTopic -qn 8 -c ...`
calls) spreads over both brokers. The Python Producer and PushConsumer use both the same way.

For each round, in alternating order (ordinary first in even rounds, static first in odd ones,
so neither always runs on a warmer machine), each kind gets:

- sync_send    ``--sync-count`` sequential ``Producer.send`` (one in flight): msgs/s and the
               p50/p99 latency of a send
- async_send   ``--async-count`` ``send_async`` with 256 in flight (as benchlib.single_sends)
- consume      a fresh PushConsumer group (pull 256, listener batches of 256) reading the topic's
               whole backlog from offset 0: msgs/s from its first message to its last, and the
               time from start to the first message. Both topics hold the same number of
               messages at that point, so the rounds grow the backlog equally for both.

each with the CPU time per message of both brokers together and of this process (the
clients), over the timed section only. Each producer first makes one untimed send (the route,
the connections); those messages count in the backlog. Per figure the JSON carries every
round, the median, and ``ratio_static_vs_ordinary`` (median static / median ordinary: above 1
means the static topic is faster for msgs/s, slower or costlier for latencies, first-message
times and CPU) plus the per-round ratios.

Then, unless ``--remote-count 0``: remote reads of an older generation. Two more static topics
of 8 logic queues get ``--remote-count`` messages each; `remappingStaticTopic -b bench-b` moves
the remapped one's logic queues led by bench-a (about half the messages) to bench-b. A fresh
group reading it from offset 0 pulls every queue at bench-b, which reads the old generations on
bench-a with a PULL_MESSAGE of its own; the other topic is read locally (and spread over both
brokers, where bench-b serves every pull of the remapped one). Alternating rounds,
``ratio_remote_vs_local``.

    .venv/bin/python bench/static_topic.py [--rounds 3] [--sync-count 3000]
        [--async-count 20000] [--remote-count 30000]

Prints ONE JSON line: command, machine, settings, the figures. Every client runs in this
process, so each figure includes the Python client's cost; the defaults take under 2 minutes
on the project's 2-core VM with the test suite running beside it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import trio
from benchlib import BODY, Proc, cpu_seconds, free_port, own_cpu_seconds, pct, stop_all

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.config import ProducerConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.client.static_topic_admin import (
    master_addrs,
    remapping_static_topic,
    update_static_topic,
)
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.protocol.static_topic import logic_queue_endpoints

CLUSTER = "BenchCluster"
BROKERS = ("bench-a", "bench-b")
KINDS = {"ordinary": "BenchOrdinary", "static": "BenchStatic"}
REMOTE_KINDS = {"local": "BenchStaticLocal", "remote": "BenchStaticRemapped"}
FIGURES = ("sync_send", "async_send", "consume")


def machine() -> dict[str, Any]:
    """Where the figures were measured (as bench/store_scale.py records it) and the load."""
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    model = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        cwd=os.path.dirname(os.path.abspath(__file__)), check=False,
    ).stdout.strip()  # fmt: skip
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "mem_total_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "git_commit": commit,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


# --- the cluster ------------------------------------------------------------------------------


def start_cluster(procs: list[Proc], work: str) -> tuple[str, list[int]]:
    """A NameServer and the two brokers; returns the NameServer address and the brokers' pids."""
    taken: set[int] = set()
    ns_port = free_port(taken)
    ns = f"127.0.0.1:{ns_port}"
    procs.append(Proc("namesrv", "ns", {"listenPort": str(ns_port), "logDir": work}, work))
    procs[-1].start()
    time.sleep(0.5)
    pids = []
    for name in BROKERS:
        conf = {
            "namesrvAddr": ns, "logDir": work, "brokerIP1": "127.0.0.1", "brokerName": name,
            "brokerClusterName": CLUSTER, "listenPort": str(free_port(taken)),
            "storePathRootDir": os.path.join(work, name), "flushDiskType": "ASYNC_FLUSH",
        }  # fmt: skip
        procs.append(Proc("broker", name, conf, work).start())
        pids.append(procs[-1].pid)
    return ns, pids


async def wait_route(
    admin: MQAdmin, topic: str, ready: Callable[[Any], bool], timeout_s: float = 30
) -> None:
    """Until the NameServer's route of ``topic`` satisfies ``ready``."""
    with trio.fail_after(timeout_s):
        while True:
            try:
                if ready(await admin.topic_route(topic)):
                    return
            except Exception:
                pass
            await trio.sleep(0.2)


def static_leaders(topic: str, route: Any) -> list[str]:
    """The broker leading each logic queue, by logic queue id."""
    eps = logic_queue_endpoints(topic, route.topicQueueMappingByBroker)
    return [eps[q] for q in sorted(eps, key=lambda q: q.queueId)]


async def setup(ns: str, queues: int, static_topics: list[str]) -> None:
    """Both brokers registered; the ordinary topic (queues / 2 on each broker) and the static
    topics (``queues`` logic queues over both) created and in the NameServer's routes."""
    async with MQAdmin(ns) as admin:
        with trio.fail_after(30):
            while True:
                try:
                    masters = master_addrs(await admin.cluster_info())
                    if all(b in masters for b in BROKERS):
                        break
                except Exception:
                    pass
                await trio.sleep(0.2)
        ordinary = KINDS["ordinary"]
        for b in BROKERS:
            half = queues // 2
            await admin.update_topic(
                ordinary, broker_addr=masters[b], read_queues=half, write_queues=half
            )
        for topic in static_topics:
            await update_static_topic(admin, topic, queues, clusters=CLUSTER)
        await wait_route(
            admin, ordinary, lambda r: {q.brokerName for q in r.queueDatas} == set(BROKERS)
        )
        for topic in static_topics:
            await wait_route(
                admin,
                topic,
                lambda r, t=topic: (
                    len(static_leaders(t, r)) == queues
                    and set(static_leaders(t, r)) == set(BROKERS)
                ),
            )


async def remap_to_b(ns: str, topic: str) -> int:
    """`remappingStaticTopic -b bench-b`; returns how many logic queues moved."""
    async with MQAdmin(ns) as admin:
        before = static_leaders(topic, await admin.topic_route(topic))
        await remapping_static_topic(admin, topic, brokers=BROKERS[1])
        await wait_route(admin, topic, lambda r: set(static_leaders(topic, r)) == {BROKERS[1]})
    return sum(1 for b in before if b != BROKERS[1])


# --- the loads --------------------------------------------------------------------------------


class Meter:
    """CPU time of the brokers and of this process over one phase, per message."""

    def __init__(self, broker_pids: list[int]) -> None:
        self.pids = broker_pids
        self.broker0 = sum(cpu_seconds(p) for p in self.pids)
        self.own0 = own_cpu_seconds()

    def per_msg(self, messages: int) -> dict[str, float]:
        broker = sum(cpu_seconds(p) for p in self.pids) - self.broker0
        own = own_cpu_seconds() - self.own0
        n = max(messages, 1)
        return {
            "broker_cpu_us_per_msg": round(broker / n * 1e6, 1),
            "client_cpu_us_per_msg": round(own / n * 1e6, 1),
        }


async def sync_sends(ns: str, topic: str, count: int, pids: list[int]) -> dict[str, Any]:
    """``count`` sequential sends (after one untimed send that fetches the route)."""
    lat: list[float] = []
    async with Producer(f"sync_{topic}", ns) as p:
        await p.send(Message(topic, BODY))
        meter = Meter(pids)
        t0 = time.perf_counter()
        for _ in range(count):
            t = time.perf_counter()
            await p.send(Message(topic, BODY))
            lat.append(time.perf_counter() - t)
        elapsed = time.perf_counter() - t0
        cpu = meter.per_msg(count)
    return {
        "sent": count + 1,
        "msgs_per_s": round(count / elapsed),
        "p50_ms": round(pct(lat, 0.5) * 1000, 3),
        "p99_ms": round(pct(lat, 0.99) * 1000, 3),
        **cpu,
    }


async def async_sends(
    ns: str, topic: str, count: int, pids: list[int], inflight: int = 256
) -> dict[str, Any]:
    """``count`` send_async with ``inflight`` outstanding (as benchlib.single_sends), after one
    untimed send that fetches the route."""
    cfg = ProducerConfig(producerGroup=f"async_{topic}", maxInFlight=inflight)
    async with Producer(f"async_{topic}", ns, config=cfg) as p:
        await p.send(Message(topic, BODY))
        meter = Meter(pids)
        t0 = time.perf_counter()
        futs = [await p.send_async(Message(topic, BODY)) for _ in range(count)]
        for f in futs:
            await f.wait()
        elapsed = time.perf_counter() - t0
        cpu = meter.per_msg(count)
    return {"sent": count + 1, "msgs_per_s": round(count / elapsed), **cpu}


async def drain(ns: str, topic: str, group: str, expected: int, pids: list[int]) -> dict[str, Any]:
    """A fresh push-consumer group reads ``topic`` from offset 0 until it has ``expected``
    messages (gives up after 300 s): msgs/s from its first message to the last, and the time
    from the consumer's start to its first message."""
    count = 0
    first: float | None = None
    last = 0.0
    done = trio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        nonlocal count, first, last
        last = time.perf_counter()
        if first is None:
            first = last
        count += len(msgs)
        if count >= expected:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(
        group, ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET", pull_batch_size=256,
        consume_batch_size=256,
    )  # fmt: skip
    c.subscribe(topic, "*")
    c.register_listener(listener)
    meter = Meter(pids)
    t0 = time.perf_counter()
    async with c:
        with trio.move_on_after(300):
            await done.wait()
        cpu = meter.per_msg(count)
    if first is None:
        return {
            "consumed": 0, "expected": expected, "msgs_per_s": 0, "first_message_s": None, **cpu
        }  # fmt: skip
    span = max(last - first, 1e-9)
    return {
        "consumed": count,
        "expected": expected,
        "msgs_per_s": round(count / span),
        "first_message_s": round(first - t0, 3),
        **cpu,
    }


# --- the report -------------------------------------------------------------------------------

Rounds = dict[str, dict[str, list[dict[str, Any]]]]  # kind -> figure -> one record per round
COUNTS = ("sent", "consumed", "expected")


def median(values: list[Any]) -> Any:
    v = [x for x in values if x is not None]
    return round(statistics.median(v), 3) if v else None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def collapse(per_kind: Rounds) -> dict[str, Any]:
    """Per kind and figure: each value's median over the rounds, and the rounds
    (``<key>_rounds``); the message counts summed (``<key>_total``)."""
    out: dict[str, Any] = {}
    for kind, figs in per_kind.items():
        out[kind] = {}
        for fig, rounds in figs.items():
            rec: dict[str, Any] = {}
            for key in rounds[0]:
                values = [r.get(key) for r in rounds]
                if key in COUNTS:
                    rec[f"{key}_total"] = sum(v or 0 for v in values)
                else:
                    rec[key] = median(values)
                    rec[f"{key}_rounds"] = values
            out[kind][fig] = rec
    return out


def compare(per_kind: Rounds, a: str, b: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per figure and value: median(a) / median(b), and the per-round ratios."""
    medians: dict[str, Any] = {}
    rounds: dict[str, Any] = {}
    for fig, ra in per_kind[a].items():
        rb = per_kind[b][fig]
        for key in ra[0]:
            if key in COUNTS:
                continue
            name = f"{fig}_{key}"
            medians[name] = ratio(
                median([x.get(key) for x in ra]), median([y.get(key) for y in rb])
            )
            rounds[name] = [ratio(x.get(key), y.get(key)) for x, y in zip(ra, rb, strict=True)]
    return medians, rounds


def run(a: argparse.Namespace) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix="rocketrio-bench-static-")
    procs: list[Proc] = []
    result: dict[str, Any] = {"work_dir": work}  # removed at the end
    try:
        ns, pids = start_cluster(procs, work)
        statics = [KINDS["static"]]
        if a.remote_count > 0:
            statics += list(REMOTE_KINDS.values())
        t0 = time.perf_counter()
        trio.run(setup, ns, a.queues, statics)
        result["setup_s"] = round(time.perf_counter() - t0, 2)

        per_kind: Rounds = {k: {f: [] for f in FIGURES} for k in KINDS}
        backlog = dict.fromkeys(KINDS, 0)
        for rnd in range(a.rounds):
            order = list(KINDS) if rnd % 2 == 0 else list(reversed(KINDS))
            for kind in order:
                r = trio.run(sync_sends, ns, KINDS[kind], a.sync_count, pids)
                backlog[kind] += r["sent"]
                per_kind[kind]["sync_send"].append(r)
            for kind in order:
                r = trio.run(async_sends, ns, KINDS[kind], a.async_count, pids)
                backlog[kind] += r["sent"]
                per_kind[kind]["async_send"].append(r)
            for kind in order:
                group = f"bench_{kind}_{rnd}"
                r = trio.run(drain, ns, KINDS[kind], group, backlog[kind], pids)
                per_kind[kind]["consume"].append(r)
        result["topics"] = collapse(per_kind)
        ratios, ratio_rounds = compare(per_kind, "static", "ordinary")
        result["ratio_static_vs_ordinary"] = ratios
        result["ratio_static_vs_ordinary_rounds"] = ratio_rounds
        result["complete"] = all(
            r["consumed"] >= r["expected"] for k in KINDS for r in per_kind[k]["consume"]
        )
        if a.remote_count > 0:
            result["remote_read"] = remote_read(a, ns, pids)
    finally:
        stop_all(procs, work)
    return result


def remote_read(a: argparse.Namespace, ns: str, pids: list[int]) -> dict[str, Any]:
    """Consume of a static topic after half its logic queues moved (the old generations read
    by the new leader from the old one) vs an untouched static topic holding as many."""
    backlog = {}
    for kind, topic in REMOTE_KINDS.items():
        backlog[kind] = trio.run(async_sends, ns, topic, a.remote_count, pids)["sent"]
    t0 = time.perf_counter()
    moved = trio.run(remap_to_b, ns, REMOTE_KINDS["remote"])
    remap_s = time.perf_counter() - t0
    per_kind: Rounds = {k: {"consume": []} for k in REMOTE_KINDS}
    for rnd in range(a.rounds):
        order = list(REMOTE_KINDS) if rnd % 2 == 0 else list(reversed(REMOTE_KINDS))
        for kind in order:
            group = f"bench_{kind}_{rnd}"
            r = trio.run(drain, ns, REMOTE_KINDS[kind], group, backlog[kind], pids)
            per_kind[kind]["consume"].append(r)
    ratios, ratio_rounds = compare(per_kind, "remote", "local")
    return {
        "messages_per_topic": backlog["remote"],
        "logic_queues_moved": moved,
        "remapping_s": round(remap_s, 2),
        "topics": collapse(per_kind),
        "ratio_remote_vs_local": ratios,
        "ratio_remote_vs_local_rounds": ratio_rounds,
        "complete": all(
            r["consumed"] >= r["expected"] for k in REMOTE_KINDS for r in per_kind[k]["consume"]
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per figure")
    ap.add_argument("--queues", type=int, default=8, help="queues of each topic (even)")
    ap.add_argument("--sync-count", type=int, default=3000, help="sequential sends per round")
    ap.add_argument("--async-count", type=int, default=20000, help="send_async per round")
    ap.add_argument(
        "--remote-count",
        type=int,
        default=30000,
        help="messages of each remote-read topic; 0: skip",
    )
    a = ap.parse_args()
    if a.queues < 2 or a.queues % 2:
        ap.error("--queues must be even and at least 2")
    configure_logging("bench", "bench", None, console=None)
    result: dict[str, Any] = {
        "bench": "static_topic",
        "command": shlex.join([os.path.relpath(sys.executable), *sys.argv]),
        "machine": machine(),
        "settings": {**vars(a), "body_bytes": len(BODY), "brokers": list(BROKERS)},
    }
    t0 = time.perf_counter()
    result.update(run(a))
    result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["elapsed_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
