"""Runs the official RocketMQ 5 Python SDK (rocketmq-python-client, unchanged) against a
local-mode proxy and prints what it saw as one JSON object; `test_proxy_local_sdk.py` runs it in
its own process (the SDK's protos cannot share a process with rocketrio's stubs).

    python tests/harness/drivers/proxy_local_driver.py HOST:PORT TOPIC COUNT

A Producer sends COUNT messages (the SDK sends each to the endpoints of the queue it picked,
so to the proxy of that queue's broker); a SimpleConsumer receives and acks them all (their
receipt handles name the broker set each was popped from).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    Message,
    Producer,
    SimpleConsumer,
)


def main(endpoint: str, topic: str, count: int) -> dict[str, Any]:
    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    sent: dict[str, str] = {}  # message id -> the broker set of the queue the SDK chose
    try:
        for i in range(count):
            m = Message()
            m.topic, m.body = topic, f"m{i}".encode()
            receipt = producer.send(m)
            sent[receipt.message_id] = str(receipt.message_queue).split(".")[0]
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(config, "LocalG", {topic: FilterExpression("*")}, 2)
    consumer.startup()
    received: list[dict[str, str]] = []
    try:
        deadline = time.monotonic() + 30
        while len(received) < count and time.monotonic() < deadline:
            for m in consumer.receive(16, 20):
                received.append(
                    {"id": m.message_id, "body": m.body.decode(), "receipt": m.receipt_handle}
                )
                consumer.ack(m)
    finally:
        consumer.shutdown()
    return {"sent": sent, "received": received}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
