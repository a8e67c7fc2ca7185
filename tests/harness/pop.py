"""POP test helpers on a `BrokerHarness`: a SimpleConsumer on its own simulated host, receiving
until nothing is left, and the revive topic's records as they are in the store."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.simple_consumer import ReceivedMessage, SimpleConsumer
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.pop_extra_info import revive_topic
from tests.harness.broker import BrokerHarness

REVIVE = revive_topic("DefaultCluster")
_hosts = itertools.cycle(range(20, 250))  # each test has a network of its own


@asynccontextmanager
async def simple_consumer(
    h: BrokerHarness, group: str, topic: str, expr: str = "*"
) -> AsyncIterator[SimpleConsumer]:
    """A SimpleConsumer of ``group`` subscribed to ``topic``, on a host of its own."""
    host = f"10.0.0.{next(_hosts)}"
    c = SimpleConsumer(
        group,
        h.namesrv_addr,
        transport=h.net.transport(host),
        client_config=ClientConfig(clientIP=host, instanceName="pop"),
        await_duration=0.0,
    )
    async with c:
        c.subscribe(topic, expr)
        yield c


async def receive_all(c: SimpleConsumer, invisible: float = 30.0) -> list[ReceivedMessage]:
    """Receive (32 at a time, no long poll) until a receive returns nothing."""
    out: list[ReceivedMessage] = []
    while got := await c.receive(32, invisible, await_duration=0):
        out.extend(got)
    return out


def revive_records(h: BrokerHarness) -> list[tuple[str, dict[str, Any]]]:
    """(tag, JSON body) of every record of the revive topic, read from the store."""
    assert h.broker is not None
    store = h.broker.store.message_store
    out = []
    for q in range(8):
        res = store.get_messages(REVIVE, q, 0, 10_000, 1 << 24)
        for buf in res.buffers:
            for m in iter_stored(buf):
                out.append((m.tags or "", json.loads(m.body)))
    return out
