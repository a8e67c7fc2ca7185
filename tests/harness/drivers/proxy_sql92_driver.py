"""Runs the official RocketMQ 5 Python SDK (rocketmq-python-client, unchanged) against the gRPC
proxy with SQL92 filter expressions and prints what it saw as one JSON object;
`test_proxy_sql92_sdk.py` runs it in its own process (the SDK's protos cannot share a process
with rocketrio's stubs).

    python tests/harness/drivers/proxy_sql92_driver.py HOST:PORT TOPIC COUNT

A Producer sends COUNT messages with user properties (``a`` = i except on every 4th, ``region``
eu / us / asia in turn); a SimpleConsumer with ``FilterExpression(SIMPLE_SQL, SQL)`` receives and
acks until nothing more comes, a PushConsumer with ``FilterExpression(PUSH_SQL, SQL)`` consumes,
and a SimpleConsumer with an expression that does not compile reports the error it got.
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
)
from rocketmq.grpc_protocol import FilterType

SIMPLE_SQL = "a BETWEEN 4 AND 9 OR (region = 'asia' AND a IS NULL)"
PUSH_SQL = "region = 'us' AND a > 10"
QUIET_S = 4  # no further message may come within this long after the expected ones


def props_of(i: int) -> dict[str, str]:
    props = {"region": ("eu", "us", "asia")[i % 3]}
    if i % 4 != 3:
        props["a"] = str(i)
    return props


def send(config: Any, topic: str, count: int) -> None:
    producer = Producer(config, (topic,))
    producer.startup()
    try:
        for i in range(count):
            m = Message()
            m.topic, m.body = topic, f"m{i}".encode()
            for k, v in props_of(i).items():
                m.add_property(k, v)
            producer.send(m)
    finally:
        producer.shutdown()


def simple(config: Any, topic: str, want: int) -> list[str]:
    expr = FilterExpression(SIMPLE_SQL, FilterType.SQL)
    consumer = SimpleConsumer(config, "SqlSimpleG", {topic: expr}, 2)
    consumer.startup()
    got: list[str] = []
    try:
        deadline = time.monotonic() + 40
        quiet_until = None
        while time.monotonic() < deadline:
            if len(got) >= want:
                quiet_until = quiet_until or time.monotonic() + QUIET_S
                if time.monotonic() > quiet_until:
                    break
            for m in consumer.receive(16, 20):
                got.append(m.body.decode())
                consumer.ack(m)
    finally:
        consumer.shutdown()
    return got


class Collect(MessageListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: list[str] = []

    def consume(self, message: Any) -> Any:
        with self.lock:
            self.seen.append(message.body.decode())
        return ConsumeResult.SUCCESS


def push(config: Any, topic: str, want: int) -> list[str]:
    listener = Collect()
    expr = FilterExpression(PUSH_SQL, FilterType.SQL)
    consumer = PushConsumer(config, "SqlPushG", listener, {topic: expr})
    consumer.startup()
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            with listener.lock:
                if len(listener.seen) >= want:
                    break
            time.sleep(0.2)
        time.sleep(QUIET_S)
    finally:
        consumer.shutdown()
    with listener.lock:
        return list(listener.seen)


def bad(config: Any, topic: str) -> str:
    consumer = SimpleConsumer(
        config, "SqlBadG", {topic: FilterExpression("a BETWEEN", FilterType.SQL)}, 2
    )
    try:
        consumer.startup()
        consumer.receive(1, 20)
    except Exception as e:  # the SDK's own error for the refused expression
        return f"{type(e).__name__}: {e}"
    finally:
        consumer.shutdown()
    return ""


def main(endpoint: str, topic: str, count: int, simple_want: int, push_want: int) -> dict:
    config = ClientConfiguration(endpoint, Credentials())
    send(config, topic, count)
    return {
        "simple": simple(config, topic, simple_want),
        "push": push(config, topic, push_want),
        "bad": bad(config, topic),
    }


if __name__ == "__main__":
    endpoint, topic, count, simple_want, push_want = sys.argv[1:6]
    print(json.dumps(main(endpoint, topic, int(count), int(simple_want), int(push_want))))
