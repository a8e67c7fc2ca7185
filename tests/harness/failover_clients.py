"""Clients of the failover actor tests on a simulated `Cluster` (tests/harness/replication.py):
a client's transport and config on a host of its own, and a producer sending forever."""

from __future__ import annotations

import random
from typing import Any

import trio

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from tests.harness.replication import Cluster


def client_kw(c: Cluster, host: str) -> dict[str, Any]:
    """A client's transport and config on ``host`` of the cluster's network."""
    return {
        "transport": c.net.transport(host),
        "client_config": ClientConfig(namesrvAddr=c.namesrv_addr, clientIP=host),
    }


async def produce_forever(c: Cluster, host: str, topic: str, group: str, period_s: float) -> None:
    """Send ``m0``, ``m1``, ... to ``topic`` every ``period_s`` until cancelled; a failed send
    (mid-failover) is skipped after 0.1 s: the producer's own retries are not under test."""
    kw = client_kw(c, host)
    async with Producer(group, c.namesrv_addr, rng=random.Random(5), **kw) as p:
        i = 0
        while True:
            try:
                await p.send(Message(topic, f"m{i}".encode()))
            except Exception:
                await trio.sleep(0.1)
            i += 1
            await trio.sleep(period_s)
