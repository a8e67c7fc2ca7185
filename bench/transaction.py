"""Transactional sends vs plain sends, against real NameServer + Broker processes on loopback.

Prints ONE JSON line with:
- plain_sends_per_s        sync `Producer.send`, ``--tasks`` tasks each sending in turn
- tx_sends_per_s           `TransactionProducer.send_message_in_transaction` (half message, local
                           transaction that commits at once, oneway END_TRANSACTION), same tasks
- tx_vs_plain_ratio        tx_sends_per_s / plain_sends_per_s (same broker, same run)
- tx_committed             committed messages found in the real topic (must equal tx_sent)
- commit_visible_ms        after the last transaction returned, until every commit was in the
                           real topic (END_TRANSACTION is oneway, so this is its lag), polled
                           with topicStatus every 5 ms
- halves / ops             records in RMQ_SYS_TRANS_HALF_TOPIC and RMQ_SYS_TRANS_OP_HALF_TOPIC
- broker_cpu_us_per_*      broker process CPU per plain send / per transaction
- tx_vs_plain_broker_cpu   their ratio (issue 28 item 5: <= 2.5)

    .venv/bin/python bench/transaction.py [--count N] [--tasks K] [--quick]

One ASYNC_FLUSH broker; the clients run in this process, so the figures include the Python
client's cost (a transaction is two client requests and three broker writes).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from typing import Any

import trio
from benchlib import BODY, Proc, cpu_seconds, create_topics, one_broker, stop_all

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.transaction_producer import LocalTransactionState, TransactionProducer
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.protocol.message import MessageExt

HALF, OP = "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"


class Commit:
    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


async def plain_sends(ns: str, topic: str, count: int, tasks: int) -> float:
    async with Producer("bench_plain", ns) as p:
        t0 = time.perf_counter()
        async with trio.open_nursery() as n:
            for _ in range(tasks):
                n.start_soon(_send_loop, p, topic, count // tasks)
        return (count // tasks * tasks) / (time.perf_counter() - t0)


async def _send_loop(p: Producer, topic: str, n: int) -> None:
    for _ in range(n):
        await p.send(Message(topic, BODY))


async def tx_sends(ns: str, topic: str, count: int, tasks: int) -> tuple[float, int, float]:
    """(transactions per second, committed messages seen in ``topic``, ms from the last
    transaction's return until every commit was there)."""
    async with MQAdmin(ns) as admin, TransactionProducer("bench_tx", ns, Commit()) as p:
        before = await _total(admin, topic)  # also warms the admin's route and connection
        t0 = time.perf_counter()
        async with trio.open_nursery() as n:
            for _ in range(tasks):
                n.start_soon(_tx_loop, p, topic, count // tasks)
        end = time.perf_counter()
        sent = count // tasks * tasks
        deadline = time.monotonic() + 30
        while (got := await _total(admin, topic) - before) < sent:
            if time.monotonic() > deadline:
                break
            await trio.sleep(0.005)
        return sent / (end - t0), got, (time.perf_counter() - end) * 1000


async def _tx_loop(p: TransactionProducer, topic: str, n: int) -> None:
    for _ in range(n):
        r = await p.send_message_in_transaction(Message(topic, BODY))
        assert r.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE


async def _total(admin: MQAdmin, topic: str) -> int:
    return sum(q.maxOffset - q.minOffset for q in await admin.topic_status(topic))


async def queue_total(ns: str, topic: str) -> int:
    async with MQAdmin(ns) as admin:
        return await _total(admin, topic)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=6000, help="sends of each kind")
    ap.add_argument("--tasks", type=int, default=32, help="concurrent sending tasks")
    ap.add_argument("--quick", action="store_true", help="a tenth of the count")
    args = ap.parse_args()
    count = args.count // 10 if args.quick else args.count
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-")
    procs: list[Proc] = []
    result: dict[str, Any] = {"bench": "transaction", "body_bytes": len(BODY), "tasks": args.tasks}
    try:
        ns, broker = one_broker(procs, work, "bench-tx", flushDiskType="ASYNC_FLUSH")
        trio.run(create_topics, ns, broker, ["BenchPlain", "BenchTx"])
        pid = procs[-1].pid
        cpu0 = cpu_seconds(pid)
        plain = trio.run(plain_sends, ns, "BenchPlain", count, args.tasks)
        cpu1 = cpu_seconds(pid)
        tx, committed, visible_ms = trio.run(tx_sends, ns, "BenchTx", count, args.tasks)
        cpu2 = cpu_seconds(pid)
        sent = count // args.tasks * args.tasks
        result.update(
            broker_cpu_us_per_plain_send=round((cpu1 - cpu0) / sent * 1e6),
            broker_cpu_us_per_tx=round((cpu2 - cpu1) / sent * 1e6),
            tx_vs_plain_broker_cpu=round((cpu2 - cpu1) / max(cpu1 - cpu0, 1e-9), 2),
        )
        result.update(
            count=sent,
            plain_sends_per_s=round(plain),
            tx_sends_per_s=round(tx),
            tx_vs_plain_ratio=round(tx / plain, 2),
            tx_sent=sent,
            tx_committed=committed,
            commit_visible_ms=round(visible_ms, 1),
            halves=trio.run(queue_total, ns, HALF),
            ops=trio.run(queue_total, ns, OP),
        )
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
