"""The POP buffer (``enablePopBufferMerge``, broker/pop/buffer_merge.py) across a kill -9 of the
master: nothing popped is lost.

A controller-mode set of two replicas (real controller, NameServer and brokers on the simulated
network under MockClock), both with the buffer on. A `Producer` sends every 50 ms; a
`SimpleConsumer` receives 16 at a time (invisible 10 s) and acknowledges every message except a
quarter of first deliveries, which must come back after their invisible time. The master is
killed while pops whose CKs are only in its memory are in flight (the buffer keeps a CK up to
popCkStayBufferTime, 10 s); the slave is elected and serves on.

Checked: every message whose send was acknowledged is acknowledged by the consumer in the end.
A buffered pop's offset must not pass its messages before its CK is stored or every message of
it acknowledged: the offset the new master got from the old one would then skip messages whose
only CK died with the old master, and they would never come back (the hand mutant "the POP
buffer commits a pop's offset at once" is caught here). Duplicates are allowed (at least once).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.simple_consumer import SimpleConsumer
from tests.harness.failover_clients import client_kw
from tests.harness.replication import Cluster, cluster, pair, routed_topic, wait_until

TOPIC, GROUP = "PopBufF", "pop_buf_g"
SEND_PERIOD_S = 0.05
INVISIBLE_S = 10.0
BROKER = {
    "brokerHeartbeatInterval": 200,
    "controllerHeartBeatTimeoutMills": 1000,
    "enablePopBufferMerge": True,
}
PRODUCER_HOST, CONSUMER_HOST = "10.0.9.31", "10.0.9.32"


async def produce(c: Cluster, sent: set[bytes], count: int) -> None:
    kw = client_kw(c, PRODUCER_HOST)
    async with Producer("pop_buf_p", c.namesrv_addr, rng=random.Random(3), **kw) as p:
        for i in range(count):
            body = f"m{i}".encode()
            try:
                await p.send(Message(TOPIC, body))
                sent.add(body)
            except Exception:  # mid-failover: not acknowledged, so not owed
                await trio.sleep(0.1)
            await trio.sleep(SEND_PERIOD_S)


async def consume(c: Cluster, acked: set[bytes], rng: random.Random) -> None:
    """Receive and acknowledge, leaving a quarter of first deliveries unacknowledged."""
    seen: set[bytes] = set()
    async with SimpleConsumer(GROUP, c.namesrv_addr, **client_kw(c, CONSUMER_HOST)) as sc:
        sc.subscribe(TOPIC)
        while True:
            try:
                msgs = await sc.receive(16, invisible_duration=INVISIBLE_S, await_duration=2.0)
            except Exception:
                await trio.sleep(0.5)
                continue
            for m in msgs:
                first = m.body not in seen
                seen.add(m.body)
                if first and rng.random() < 0.25:
                    continue  # left to come back after its invisible time
                try:
                    await sc.ack(m)
                    acked.add(m.body)
                except Exception:  # it comes back after its invisible time
                    pass


@pytest.mark.parametrize("seed", [1, 2])
async def test_nothing_popped_is_lost_when_the_master_dies_with_cks_in_its_buffer(
    tmp_path: Path, mock_clock: trio.testing.MockClock, seed: int
) -> None:
    ctrl = {"scanNotActiveBrokerInterval": 100}
    async with cluster(tmp_path, seed, controller_overrides=ctrl) as c:
        a, b = await pair(c, **BROKER)
        await routed_topic(c, TOPIC)
        sent: set[bytes] = set()
        acked: set[bytes] = set()
        rng = random.Random(seed)
        async with trio.open_nursery() as n:
            n.start_soon(produce, c, sent, 600)
            n.start_soon(consume, c, acked, rng)
            await trio.sleep(8.0 + rng.uniform(0.0, 4.0))
            buffer = a.b.pop.buffer
            assert buffer is not None and buffer.cks, "pops with CKs only in memory"
            await a.crash()
            await wait_until(lambda: _serving(b), "the slave took over")
            await trio.sleep(40.0)  # the producer ends; revives come round
            with trio.move_on_after(60.0):  # six invisible times more
                while sent - acked:
                    await trio.sleep(0.5)
            n.cancel_scope.cancel()
        lost = sorted(sent - acked)
        assert not lost, f"{len(lost)} acknowledged sends never consumed: {lost[:10]}"
        assert len(sent) > 300


async def _serving(b: object) -> bool:
    return b.rm.serving_as_master()  # type: ignore[attr-defined, no-any-return]
