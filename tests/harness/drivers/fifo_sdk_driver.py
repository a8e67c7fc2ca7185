"""Runs the official RocketMQ 5 Python SDK (rocketmq-python-client, unchanged) as a FIFO
producer and a FIFO PushConsumer against a proxy, and prints every listener call as one JSON
object; `test_proxy_fifo_sdk.py` runs it in its own process (the SDK's protos cannot share a
process with rocketrio's stubs).

    python tests/harness/drivers/fifo_sdk_driver.py HOST:PORT TOPIC GROUP N FAIL_BODY

Three message groups (g0, g1, g2) get N messages each, sent interleaved; the listener takes
0.1 s per message and fails FAIL_BODY's first call. The consumer caches at most 2 messages
per queue, so a group's messages come in several receives.
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
)

GROUPS = ("g0", "g1", "g2")


class Recorder(MessageListener):
    """Records each call (body, attempt, start and end times); fails ``fail_body`` once."""

    def __init__(self, fail_body: str) -> None:
        self.fail_body = fail_body
        self.failed = False
        self.calls: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def consume(self, message: Any) -> Any:
        start = time.monotonic()
        body = message.body.decode()
        time.sleep(0.1)
        fail = False
        with self.lock:
            if body == self.fail_body and not self.failed:
                self.failed = fail = True
            self.calls.append(
                {
                    "body": body,
                    "group": message.message_group,
                    "attempt": message.delivery_attempt,
                    "start": start,
                    "end": time.monotonic(),
                    "ok": not fail,
                }
            )
        return ConsumeResult.FAILURE if fail else ConsumeResult.SUCCESS

    def successes(self) -> int:
        with self.lock:
            return len({c["body"] for c in self.calls if c["ok"]})


def main(endpoint: str, topic: str, group: str, n: int, fail_body: str) -> dict[str, Any]:
    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    queues: dict[str, set[str]] = {g: set() for g in GROUPS}
    try:
        for i in range(n):
            for g in GROUPS:
                m = Message()
                m.topic, m.body, m.message_group = topic, f"{g}:{i}".encode(), g
                queues[g].add(str(producer.send(m).message_queue))
    finally:
        producer.shutdown()
    listener = Recorder(fail_body)
    consumer = PushConsumer(
        config, group, listener, {topic: FilterExpression("*")}, max_cache_message_count=4
    )
    consumer.startup()
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and listener.successes() < n * len(GROUPS):
            time.sleep(0.1)
        time.sleep(1.5)  # nothing more may come
        fifo = consumer.fifo
    finally:
        consumer.shutdown()
    with listener.lock:
        calls = sorted(listener.calls, key=lambda c: c["start"])
    return {"fifo": fifo, "calls": calls, "queues": {g: sorted(q) for g, q in queues.items()}}


if __name__ == "__main__":
    endpoint, topic, group, n, fail_body = sys.argv[1:6]
    print(json.dumps(main(endpoint, topic, group, int(n), fail_body)))
