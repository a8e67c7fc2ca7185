"""The official RocketMQ 5 Python SDK (rocketmq-python-client, unchanged) on a static topic
through the gRPC proxy, in its own process (the SDK's protos cannot share a process with
rocketrio's): `system/test_static_topic_sdk.py` remaps the topic between the two phases.

    python tests/harness/drivers/static_topic_sdk_driver.py HOST:PORT TOPIC N

Phase 1: a Producer sends N messages ("a0".."a{N-1}"); a SimpleConsumer receives and acks until
it saw all N, leaving every 5th one unacked the first time (it comes back after its invisible
time). It prints ``PHASE1 DONE`` and waits for a line on stdin (the test remaps meanwhile).
Phase 2: N more ("b..."), received and acked until all 2N were acked; then 20 s more must
bring nothing. Prints one JSON object: the bodies acked (in order) and every delivery.
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

INVISIBLE_S = 10


def send(producer: Any, topic: str, prefix: str, n: int) -> None:
    for i in range(n):
        m = Message()
        m.topic, m.body = topic, f"{prefix}{i}".encode()
        for _ in range(20):  # a send during the remapping may be refused once: try again
            try:
                producer.send(m)
                break
            except Exception:
                time.sleep(0.5)


def consume(consumer: Any, want: set[str], out: dict[str, Any], held_back: set[str]) -> None:
    deadline = time.monotonic() + 180
    while not want <= set(out["acked"]) and time.monotonic() < deadline:
        try:
            batch = consumer.receive(16, INVISIBLE_S)
        except Exception as e:
            out["errors"].append(str(e)[:200])
            time.sleep(1)
            continue
        for m in batch:
            body = m.body.decode()
            out["deliveries"].append(body)
            if body.endswith("0") and body not in held_back and body[0] == "a":
                held_back.add(body)  # not acked: must come back after its invisible time
                continue
            consumer.ack(m)
            out["acked"].append(body)


def main(endpoint: str, topic: str, n: int) -> dict[str, Any]:
    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    consumer = SimpleConsumer(config, "StaticSdkG", {topic: FilterExpression("*")}, 5)
    consumer.startup()
    out: dict[str, Any] = {"acked": [], "deliveries": [], "errors": []}
    held_back: set[str] = set()
    try:
        send(producer, topic, "a", n)
        consume(consumer, {f"a{i}" for i in range(n)}, out, held_back)
        print("PHASE1 DONE", flush=True)
        sys.stdin.readline()
        send(producer, topic, "b", n)
        want = {f"{p}{i}" for p in "ab" for i in range(n)}
        consume(consumer, want, out, held_back)
        time.sleep(INVISIBLE_S * 2)
        late = consumer.receive(16, INVISIBLE_S)
        out["after"] = [m.body.decode() for m in late]
        out["held_back"] = sorted(held_back)
    finally:
        consumer.shutdown()
        producer.shutdown()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))), flush=True)
