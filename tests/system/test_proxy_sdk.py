"""The official RocketMQ 5 Python SDK (rocketmq-python-client 5.1.2, unchanged) through the
gRPC proxy that `rocketrio up --proxy` starts: a Producer sends normal, FIFO, delayed and
transactional messages; a SimpleConsumer receives them, changes an invisible duration, acks.
Real processes on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.system.cluster import free_port_block, log_problems, start_up

pytestmark = pytest.mark.system

rocketmq = pytest.importorskip("rocketmq.v5.client")


def rr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketrio.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def receive_all(consumer: Any, want: int, invisible_s: int = 15) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + 40
    while len(got) < want and time.monotonic() < deadline:
        got += consumer.receive(16, invisible_s)
    return got


def test_official_sdk_through_the_proxy(tmp_path: Any) -> None:
    from rocketmq import (
        ClientConfiguration,
        Credentials,
        FilterExpression,
        Message,
        Producer,
        SimpleConsumer,
    )

    grpc_port = free_port_block(1, extra=())
    up = start_up(str(tmp_path / "c"), "single", "--no-console", "--proxy",
                  "--proxy-port", str(grpc_port))  # fmt: skip
    try:
        up.read_until(rf"proxy\s+gRPC 127\.0\.0\.1:{grpc_port}", 5)
        for topic in ("ProxyT", "ProxyFifo"):
            r = rr("admin", "updateTopic", "-n", up.namesrv, "-t", topic, "-r", "4", "-w", "4")
            assert r.returncode == 0, r.stdout + r.stderr
        config = ClientConfiguration(f"127.0.0.1:{grpc_port}", Credentials())
        producer = Producer(config, ("ProxyT", "ProxyFifo"))
        producer.startup()
        try:
            ids = set()
            for i in range(5):
                m = Message()
                m.topic, m.body, m.tag, m.keys = "ProxyT", f"n{i}".encode(), "tagA", f"k{i}"
                m.add_property("color", "red")
                ids.add(producer.send(m).message_id)
            fifo_queues = set()
            for i in range(4):
                m = Message()
                m.topic, m.body, m.message_group = "ProxyFifo", f"f{i}".encode(), "order-7"
                receipt = producer.send(m)
                fifo_queues.add(str(receipt.message_queue))
            assert len(fifo_queues) == 1  # one group, one queue
            m = Message()
            m.topic, m.body = "ProxyT", b"delayed"
            m.delivery_timestamp = int(time.time() * 1000) + 2000
            ids.add(producer.send(m).message_id)
        finally:
            producer.shutdown()

        consumer = SimpleConsumer(config, "ProxyG", {"ProxyT": FilterExpression("*")}, 5)
        consumer.startup()
        try:
            got = receive_all(consumer, 6)
            assert {m.message_id for m in got} == ids
            normal = [m for m in got if m.body.startswith(b"n")]
            assert all(m.tag == "tagA" and m.properties.get("color") == "red" for m in normal)
            # postpone one, ack the rest: the postponed one comes back, nothing else
            later = got[0]
            consumer.change_invisible_duration(later, 2)
            for m in got[1:]:
                consumer.ack(m)
            again = receive_all(consumer, 1)
            assert [m.message_id for m in again] == [later.message_id]
            assert again[0].delivery_attempt == 2
            consumer.ack(again[0])
        finally:
            consumer.shutdown()

        fifo = SimpleConsumer(config, "ProxyFifoG", {"ProxyFifo": FilterExpression("*")}, 5)
        fifo.startup()
        try:
            got = receive_all(fifo, 4)
            assert sorted(m.body for m in got) == [b"f0", b"f1", b"f2", b"f3"]
            assert {m.message_group for m in got} == {"order-7"}
            for m in got:
                fifo.ack(m)
        finally:
            fifo.shutdown()
    finally:
        up.stop()
    problems = [p for p in log_problems(os.path.join(up.base_dir, "logs")) if "proxy" in p]
    assert not problems, problems
