"""A pull held at a logic queue's old leader ends with the remapping (RIP-21 S4; SimNetwork,
MockClock): the push consumer's long poll on a queue that moved is answered as soon as the old
leader takes the new mapping, so consumption follows the queue to its new broker at once.

Before, the held pull stayed at the old leader (nothing arrives there any more) until the
consumer's route was refreshed by something else or the hold ended: messages sent to the moved
queues right after the remapping were consumed 4.6 s later here (the harness persists offsets
every 5 s, and the failed persist refreshed the route), up to the 15 s hold in general."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus
from rocketrio.actors.client.static_topic_admin import remapping_static_topic
from rocketrio.protocol.message_format import MessageExt
from tests.harness.clients import Collector, cluster, consumer, wait_for
from tests.harness.clock import now_ms
from tests.harness.static_topic import QUEUES, T, leaders, route_until, static_topic


async def test_a_held_pull_ends_when_its_queue_moves(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    got_at: dict[bytes, float] = {}

    class Timed(Collector):
        def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
            for m in msgs:
                got_at.setdefault(m.body, trio.current_time())
            return super().__call__(msgs)

    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        before = leaders(await route_until(admin, lambda r: len(leaders(r)) == 8))
        await c.start_broker("broker-c", "10.0.1.3")
        pc = consumer(c, "cg", Timed(), topic=T, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        sent: dict[bytes, tuple[float, int]] = {}
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, pc:
            await wait_for(lambda: {q for q in pc.assigned_queues() if q.topic == T} == QUEUES)
            for i in range(16):
                await p.send(Message(T, f"a{i}".encode()))
            await wait_for(lambda: len(got_at) == 16)
            await trio.sleep(1)  # every queue's pull is held now (nothing new)
            await remapping_static_topic(admin, T, brokers="broker-b,broker-c", now_ms=now_ms)
            for i in range(48):
                body = f"b{i}".encode()
                t = trio.current_time()
                r = await p.send(Message(T, body))
                sent[body] = (t, r.message_queue.queueId)
            await wait_for(lambda: len(got_at) == 64, timeout=60)
    moved = {g for g, b in before.items() if b == "broker-a"}
    assert len(moved) == 4
    lag = {body: got_at[body] - t for body, (t, _) in sent.items()}
    moved_lag = [lag[body] for body, (_, gid) in sent.items() if gid in moved]
    assert len(moved_lag) >= 16  # 6 of the 48 per queue, but a refused send goes elsewhere
    # the consumer's next pull at the old leader is refused (NOT_LEADER_FOR_QUEUE), it asks
    # for the route and pulls again after its first broker-gone pause (0.1 s)
    assert max(moved_lag) < 0.5, sorted(moved_lag)[-5:]
