"""System test with real processes: a static topic through `rocketrio admin` (issue 12).

A NameServer and broker-a and broker-b run as OS processes; `rocketrio admin updateStaticTopic
-qn 8 -c DefaultCluster` spreads 8 logic queues over the two. A Producer and a PushConsumer
(one consume task, so a queue's messages are handed over in queue order) use them; broker-c
starts and, while messages flow, `rocketrio admin remappingStaticTopic -b broker-b,broker-c`
moves broker-a's four logic queues to it. Once everything sent before is consumed, broker-a is
retired (stopped) and messages keep flowing. Every acknowledged message is consumed exactly
once and in send order per logic queue; the logic offsets of each queue are continuous within
each generation (a remapping starts the next at a 10,000 block); the consumer sees 8 logic
queues throughout; no process logs an error or a traceback.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.observe.logs import configure_logging
from tests.harness.system import (
    free_port_block,
    launch,
    log_problems,
    stop_processes,
    wait_for_line,
)

pytestmark = pytest.mark.system

TOPIC = "SysStatic"
LQ = "__syslo__global__"
PHASE = 200  # messages before the remapping, during it, and after broker-a is retired


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketrio.cli.main", "admin", *args, "-n", namesrv],
        capture_output=True,
        text=True,
        timeout=120,
    )


class Run:
    """What the clients saw."""

    def __init__(self) -> None:
        self.consumed: Counter[str] = Counter()
        self.order: list[int] = []  # message numbers, as consumed
        self.sent: dict[int, list[tuple[int, int]]] = {}  # logic queue -> (number, offset)
        self.queue_counts: set[int] = set()


def broker_conf(name: str, port: int, ns: str, work: str) -> dict[str, str]:
    return {
        "namesrvAddr": ns,
        "brokerIP1": "127.0.0.1",
        "brokerName": name,
        "brokerClusterName": "DefaultCluster",
        "listenPort": str(port),
        "storePathRootDir": os.path.join(work, name),
        "logDir": os.path.join(work, "logs"),
    }


async def _run(ns: str, work: str, ports: list[int], procs: dict[str, Any]) -> Run:
    run = Run()
    r = await trio.to_thread.run_sync(
        admin, ns, "updateStaticTopic", "-t", TOPIC, "-qn", "8", "-c", "DefaultCluster",
        "--mapDir", work,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr

    def listener(msgs: list[Any]) -> ConsumeStatus:
        for m in msgs:
            n = int(m.body.decode()[1:])
            run.consumed[m.body.decode()] += 1
            run.order.append(n)
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer(
        "sys_static",
        ns,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        consume_concurrency=1,
    )
    c.subscribe(TOPIC, "*")
    c.register_listener(listener)

    async def send(p: Producer, n: int) -> None:
        res = await p.send(Message(TOPIC, f"s{n}".encode()))
        assert res.message_queue.brokerName == LQ
        run.sent.setdefault(res.message_queue.queueId, []).append((n, res.queue_offset))
        run.queue_counts.add(len({q for q in c.assigned_queues() if q.topic == TOPIC}))
        await trio.sleep(0.005)

    async def all_consumed(timeout_s: float = 120) -> None:
        sent = {f"s{n}" for q in run.sent.values() for n, _ in q}
        with trio.fail_after(timeout_s):
            while not sent <= run.consumed.keys():
                await trio.sleep(0.2)

    async def offsets_persisted() -> None:
        """Until the broker leading each logic queue holds the consumer's offset of it (the
        consumer persists its offsets every 5 s)."""
        store = c.offset_store
        assert store is not None
        with trio.fail_after(30):
            while True:
                mqs = [q for q in c.assigned_queues() if q.topic == TOPIC]
                if mqs and all([await store.fetch(q) == store.table.read(q) for q in mqs]):
                    return
                await trio.sleep(0.5)

    async with Producer("sys_static_p", ns) as p, c:
        with trio.fail_after(60):
            while len(c.assigned_queues()) < 8:
                await trio.sleep(0.2)
        for n in range(PHASE):
            await send(p, n)
        procs["broker-c"] = launch(
            "broker", "broker-c", broker_conf("broker-c", ports[2], ns, work), work
        )
        wait_for_line(procs["broker-c"], "boot success")
        for n in range(PHASE, 2 * PHASE):
            if n == PHASE + PHASE // 4:
                r = await trio.to_thread.run_sync(
                    admin, ns, "remappingStaticTopic", "-t", TOPIC, "-b", "broker-b,broker-c",
                    "--mapDir", work,
                )  # fmt: skip
                assert r.returncode == 0, r.stderr
            await send(p, n)
        await all_consumed()
        await offsets_persisted()
        # broker-a leads nothing any more and its generations are read: retire it
        stop_processes([procs.pop("broker-a")])
        async with MQAdmin(ns) as mq:
            with trio.fail_after(60):
                while "broker-a" in {
                    b.brokerName for b in (await mq.topic_route(TOPIC)).brokerDatas
                }:
                    await trio.sleep(0.5)
        for n in range(2 * PHASE, 3 * PHASE):
            await send(p, n)
        await all_consumed()
        await trio.sleep(3)  # a duplicate would show up by now
        run.queue_counts.add(len({q for q in c.assigned_queues() if q.topic == TOPIC}))
    return run


def test_static_topic_through_the_admin_tools(tmp_path: Any) -> None:
    configure_logging("test", "test", None, console=None)
    work = str(tmp_path)
    base = free_port_block(4)
    ns = f"127.0.0.1:{base}"
    ports = [base + 10, base + 20, base + 30]
    logs = os.path.join(work, "logs")
    procs: dict[str, Any] = {
        "ns": launch("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, work)
    }
    try:
        wait_for_line(procs["ns"], "boot success")
        for name, port in zip(("broker-a", "broker-b"), ports, strict=False):
            procs[name] = launch("broker", name, broker_conf(name, port, ns, work), work)
        for name in ("broker-a", "broker-b"):
            wait_for_line(procs[name], "boot success")
        run = trio.run(_run, ns, work, ports, procs)
        status = admin(ns, "topicStatus", "-t", TOPIC)
        assert status.returncode == 0, status.stderr
        assert status.stdout.count(LQ) == 8, status.stdout  # the logic queues, all led
    finally:
        stop_processes(list(procs.values()))
    sent = {f"s{n}" for q in run.sent.values() for n, _ in q}
    assert len(sent) == 3 * PHASE and sent == run.consumed.keys()
    assert max(run.consumed.values()) == 1, [k for k, v in run.consumed.items() if v > 1][:10]
    assert run.queue_counts == {8}
    assert sorted(run.sent) == list(range(8))
    queue_of = {n: qid for qid, pairs in run.sent.items() for n, _ in pairs}
    for qid in run.sent:
        numbers = [n for n in run.order if queue_of[n] == qid]
        assert numbers == sorted(numbers), (qid, numbers)  # send order per logic queue
    moved = 0
    for qid, pairs in run.sent.items():
        offsets = [o for _, o in pairs]
        assert offsets[0] == 0, (qid, offsets)
        jumps = [b for a, b in itertools.pairwise(offsets) if b != a + 1]
        # continuous within a generation; a moved queue starts its next one at a block
        assert all(b % 10_000 == 0 for b in jumps), (qid, offsets)
        assert len(jumps) <= 1, (qid, offsets)
        moved += len(jumps)
    assert moved == 4  # broker-a's four logic queues went to broker-c
    problems = log_problems(logs)
    assert not problems, "\n".join(problems[:20])
