"""Runs the official RocketMQ 5 Python SDK (rocketmq-python-client, unchanged) against a proxy
and prints what it saw as one JSON object; `test_proxy_sdk.py` runs it in its own process
because the SDK registers its own copy of the apache.rocketmq.v2 protos, which cannot share a
process (one protobuf descriptor pool) with rocketrio's stubs.

    python tests/harness/drivers/proxy_sdk_driver.py HOST:PORT [orphan | long [HOLD_S AFTER_S]]

``orphan``: a transactional producer sends a half message and never ends it; the broker's
check reaches the producer's TransactionChecker through the proxy, which commits; a consumer
then receives the message. ``long``: a PushConsumer (auto_renew) holds one message for HOLD_S
seconds (default 75), longer than the proxy's invisible time (defaultInvisibleTimeMills, 60 s
by default; the test gives its proxy a shorter one), before it succeeds, then watches AFTER_S
seconds (default 15) for a redelivery; it must be delivered once.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    Transaction,
    TransactionChecker,
    TransactionResolution,
)

# message id -> when a receive first returned it (ms, this host's clock)
RECEIVED_AT: dict[str, int] = {}


class CommitAll(TransactionChecker):
    def check(self, message: Any) -> Any:
        return TransactionResolution.COMMIT


class FailFirstTry(MessageListener):
    """Consumes everything; a body starting with "fail" fails its first delivery."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def consume(self, message: Any) -> Any:
        with self.lock:
            self.seen.append(describe(message))
        if message.body.startswith(b"fail") and message.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def push_consume(config: Any) -> list[dict[str, Any]]:
    """A PushConsumer (client-side assignment through QueryAssignment) on ProxyP."""
    producer = Producer(config, ("ProxyP",))
    producer.startup()
    try:
        for body in (b"p0", b"p1", b"fail-p2", b"p3"):
            m = Message()
            m.topic, m.body = "ProxyP", body
            producer.send(m)
    finally:
        producer.shutdown()
    listener = FailFirstTry()
    consumer = PushConsumer(config, "ProxyPushG", listener, {"ProxyP": FilterExpression("*")})
    consumer.startup()
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            with listener.lock:
                if len(listener.seen) >= 5:
                    break
            time.sleep(0.2)
        time.sleep(2)  # nothing more may come
    finally:
        consumer.shutdown()
    with listener.lock:
        return list(listener.seen)


def receive_all(consumer: Any, want: int, invisible_s: int = 15) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + 40
    while len(got) < want and time.monotonic() < deadline:
        batch = consumer.receive(16, invisible_s)
        for m in batch:
            RECEIVED_AT.setdefault(m.message_id, int(time.time() * 1000))
        got += batch
    return got


def describe(m: Any) -> dict[str, Any]:
    return {
        "id": m.message_id,
        "body": m.body.decode(),
        "tag": m.tag,
        "keys": sorted(m.keys),
        "props": dict(m.properties),
        "group": m.message_group,
        "attempt": m.delivery_attempt,
        "delivery_ms": m.delivery_timestamp,
        "received_at_ms": RECEIVED_AT.get(m.message_id),
    }


def main(endpoint: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, ("ProxyT", "ProxyFifo"), CommitAll())
    producer.startup()
    try:
        sent = []
        for i in range(5):
            m = Message()
            m.topic, m.body, m.tag, m.keys = "ProxyT", f"n{i}".encode(), "tagA", f"k{i}"
            m.add_property("color", "red")
            sent.append(producer.send(m).message_id)
        fifo_queues = []
        for i in range(4):
            m = Message()
            m.topic, m.body, m.message_group = "ProxyFifo", f"f{i}".encode(), "order-7"
            fifo_queues.append(str(producer.send(m).message_queue))
        m = Message()
        m.topic, m.body = "ProxyT", b"delayed"
        m.delivery_timestamp = int(time.time() * 1000) + 2000
        sent.append(producer.send(m).message_id)
        for body, commit in ((b"tx-commit", True), (b"tx-rollback", False)):
            tx: Transaction = producer.begin_transaction()
            m = Message()
            m.topic, m.body = "ProxyT", body
            receipt = producer.send(m, tx)
            if commit:
                sent.append(receipt.message_id)
                tx.commit()
            else:
                tx.rollback()
        out["sent"] = sent
        out["fifo_queues"] = fifo_queues
    finally:
        producer.shutdown()

    consumer = SimpleConsumer(config, "ProxyG", {"ProxyT": FilterExpression("*")}, 5)
    consumer.startup()
    try:
        got = receive_all(consumer, len(out["sent"]))
        out["received"] = [describe(m) for m in got]
        # postpone one, ack the rest: only the postponed one comes back
        later = got[0]
        consumer.change_invisible_duration(later, 2)
        for m in got[1:]:
            consumer.ack(m)
        again = receive_all(consumer, 1)
        out["again"] = [describe(m) for m in again]
        for m in again:
            consumer.ack(m)
        out["after_ack"] = [describe(m) for m in consumer.receive(16, 15)]
    finally:
        consumer.shutdown()

    fifo = SimpleConsumer(config, "ProxyFifoG", {"ProxyFifo": FilterExpression("*")}, 5)
    fifo.startup()
    try:
        got = receive_all(fifo, 4)
        out["fifo"] = [describe(m) for m in got]
        for m in got:
            fifo.ack(m)
    finally:
        fifo.shutdown()
    out["push"] = push_consume(config)
    return out


class RecordingChecker(TransactionChecker):
    """Commits every half it is asked about, and remembers which."""

    def __init__(self) -> None:
        self.checked: list[dict[str, Any]] = []
        self.called = threading.Event()

    def check(self, message: Any) -> Any:
        self.checked.append({"id": message.message_id, "body": message.body.decode()})
        self.called.set()
        return TransactionResolution.COMMIT


def orphan(endpoint: str) -> dict[str, Any]:
    config = ClientConfiguration(endpoint, Credentials())
    checker = RecordingChecker()
    producer = Producer(config, ("ProxyTx",), checker)
    producer.startup()
    try:
        tx: Transaction = producer.begin_transaction()
        m = Message()
        m.topic, m.body = "ProxyTx", b"orphan-tx"
        sent = producer.send(m, tx).message_id  # and neither commit nor rollback
        checker.called.wait(120)
        time.sleep(2)  # the checker's EndTransaction goes out
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(config, "ProxyTxG", {"ProxyTx": FilterExpression("*")}, 5)
    consumer.startup()
    try:
        got = receive_all(consumer, 1)
        for m in got:
            consumer.ack(m)
    finally:
        consumer.shutdown()
    return {"sent": sent, "checked": checker.checked, "received": [describe(m) for m in got]}


class SlowFirst(MessageListener):
    """Takes `hold_s` over a message's first delivery, then succeeds."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.seen: list[dict[str, Any]] = []
        self.done = threading.Event()

    def consume(self, message: Any) -> Any:
        self.seen.append({**describe(message), "at": time.monotonic()})
        if message.delivery_attempt == 1:
            time.sleep(self.hold_s)
        self.done.set()
        return ConsumeResult.SUCCESS


def long_processing(endpoint: str, hold_s: float = 75, after_s: float = 15) -> dict[str, Any]:
    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, ("ProxyLong",))
    producer.startup()
    try:
        m = Message()
        m.topic, m.body = "ProxyLong", b"slow"
        producer.send(m)
    finally:
        producer.shutdown()
    listener = SlowFirst(hold_s)
    consumer = PushConsumer(config, "ProxyLongG", listener, {"ProxyLong": FilterExpression("*")})
    started = time.monotonic()
    consumer.startup()
    try:
        listener.done.wait(hold_s + 60)
        time.sleep(after_s)  # a redelivery would show up here
    finally:
        consumer.shutdown()
    return {
        "deliveries": [{**d, "at": d["at"] - started} for d in listener.seen],
        "hold_s": hold_s,
    }


if __name__ == "__main__":
    mode = sys.argv[2] if len(sys.argv) > 2 else "main"
    run = {"main": main, "orphan": orphan, "long": long_processing}[mode]
    print(json.dumps(run(sys.argv[1], *map(float, sys.argv[3:]))))
