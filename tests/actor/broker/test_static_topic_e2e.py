"""A static topic in use through a remapping (S3/S4 end to end; SimNetwork, MockClock): the
Python Producer and PushConsumer on 8 logic queues over 2 brokers while half the queues move to
a third broker. Every message is consumed once, in order per logic queue, with logic offsets
continuous within each generation; the consumer always owns the same 8 logic queues."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.client.message import Message, SendResult, SendStatus
from rocketrio.actors.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import OrderlyPushConsumer
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.queue_select import SelectMessageQueueByHash
from rocketrio.actors.client.static_topic_admin import remapping_static_topic
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message_format import MessageExt
from tests.harness.clients import Collector, cluster, consumer, wait_for
from tests.harness.clock import now_ms
from tests.harness.static_topic import QUEUES, T, leaders, route_until, static_topic


async def test_produce_and_consume_through_a_remapping(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        before = leaders(await route_until(admin, lambda r: len(leaders(r)) == 8))
        await c.start_broker("broker-c", "10.0.1.3")
        got = Collector()
        pc = consumer(
            c,
            "cg",
            got,
            topic=T,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            consume_concurrency=1,
        )
        sent: list[SendResult] = []
        owned: list[set[MessageQueue]] = []
        producing = True

        async def produce(p: Producer) -> None:
            for i in range(300):
                sent.append(await p.send(Message(T, f"m{i}".encode())))
                await trio.sleep(0.1)

        async def watch() -> None:
            while producing:
                owned.append({q for q in pc.assigned_queues() if q.topic == T})
                await trio.sleep(0.2)

        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, pc:
            await wait_for(lambda: {q for q in pc.assigned_queues() if q.topic == T} == QUEUES)
            async with trio.open_nursery() as n:
                n.start_soon(watch)
                n.start_soon(produce, p)
                await trio.sleep(10)  # a third of the messages in
                # half the queues move: broker-a's four go to broker-c
                moved = await remapping_static_topic(
                    admin, T, brokers="broker-b,broker-c", now_ms=now_ms
                )
                assert moved.mapOut == ["broker-a"] and moved.mapIn == ["broker-c"]
                await wait_for(lambda: len(sent) == 300, timeout=600)
                await wait_for(lambda: len(got.msgs) >= 300, timeout=600)
                await trio.sleep(30)  # room for a duplicate to show up
                producing = False

        after = leaders(await route_until(admin, lambda r: "broker-c" in set(leaders(r).values())))
        moved_ids = sorted(g for g, b in after.items() if b == "broker-c")
        assert moved_ids == sorted(g for g, b in before.items() if b == "broker-a")

        assert all(r.send_status is SendStatus.SEND_OK for r in sent)
        # every message once
        bodies = got.bodies()
        assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(300))
        assert len(bodies) == len(set(bodies)) == 300
        # the consumer always owned the 8 logic queues
        assert owned and all(o == QUEUES for o in owned)
        # per logic queue: consumed in send order, with the offsets the sends were answered
        sent_by_queue: dict[int, list[tuple[int, bytes]]] = {}
        body_of = {r.msg_id: f"m{i}".encode() for i, r in enumerate(sent)}
        for r in sent:
            sent_by_queue.setdefault(r.message_queue.queueId, []).append(
                (r.queue_offset, body_of[r.msg_id])
            )
        for gid in range(8):
            mine = [(m.queue_offset, m.body) for m in got.msgs if m.queue_id == gid]
            assert mine == sent_by_queue[gid], gid
            offs = [o for o, _ in mine]
            if gid in moved_ids:
                old = [o for o in offs if o < 10000]
                new = [o for o in offs if o >= 10000]
                assert old == list(range(len(old))) and len(new) > 0
                assert new == list(range(new[0], new[0] + len(new)))
                assert new[0] % 10000 == 0
            else:
                assert offs == list(range(len(offs)))


async def test_the_old_broker_retires_after_its_queues_moved(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        await route_until(admin, lambda r: len(leaders(r)) == 8)
        await c.start_broker("broker-c", "10.0.1.3")
        got = Collector()
        pc = consumer(
            c,
            "cg",
            got,
            topic=T,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            consume_concurrency=1,
        )
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, pc:
            await wait_for(lambda: {q for q in pc.assigned_queues() if q.topic == T} == QUEUES)
            for i in range(80):
                await p.send(Message(T, f"a{i}".encode()))
            await wait_for(lambda: len(got.msgs) >= 80)
            await remapping_static_topic(admin, T, brokers="broker-b,broker-c", now_ms=now_ms)
            for i in range(80):
                await p.send(Message(T, f"b{i}".encode()))
            await wait_for(lambda: len(got.msgs) >= 160)
            await trio.sleep(15)  # the consumer persists its offsets (every 5 s)
            c.crash_broker("broker-a")  # retired: it leads nothing any more
            route = await route_until(
                admin, lambda r: "broker-a" not in {b.brokerName for b in r.brokerDatas}
            )
            assert set(leaders(route).values()) == {"broker-b", "broker-c"}
            assert len(leaders(route)) == 8
            results = [await p.send(Message(T, f"c{i}".encode())) for i in range(80)]
            assert all(r.send_status is SendStatus.SEND_OK for r in results)
            await wait_for(lambda: len(got.msgs) >= 240)
            await trio.sleep(20)
            assert {q for q in pc.assigned_queues() if q.topic == T} == QUEUES
        bodies = got.bodies()
        expected = [f"{k}{i}".encode() for k in "abc" for i in range(80)]
        assert sorted(bodies) == sorted(expected) and len(bodies) == 240


async def test_orderly_consumers_lock_logic_queues_at_their_leaders(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Keyed sends (SelectMessageQueueByHash over the 8 logic queues) and two orderly members:
    the locks of a logic queue are taken at the broker leading it, each key is consumed in
    order by one member at a time, across a remapping."""
    keys = [f"k{i}" for i in range(8)]
    refused: list[str] = []
    seen: dict[str, list[int]] = {k: [] for k in keys}

    def listener(name: str) -> Any:
        async def consume(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> Any:
            for m in msgs:
                key, seq = m.body.decode().split(":")
                seen[key].append(int(seq))
            await trio.sleep(0.01)
            return ConsumeOrderlyStatus.SUCCESS

        return consume

    def member(name: str, host: str) -> OrderlyPushConsumer:
        m = OrderlyPushConsumer(
            "og", c.ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **c.kwargs(host)
        )
        m.subscribe(T, "*")
        m.register_listener(listener(name))
        return m

    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        await route_until(admin, lambda r: len(leaders(r)) == 8)
        await c.start_broker("broker-c", "10.0.1.3")
        m1, m2 = member("m1", "10.0.9.81"), member("m2", "10.0.9.82")
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, m1, m2:

            def owned() -> list[set[MessageQueue]]:
                return [{q for q in m.assigned_queues() if q.topic == T} for m in (m1, m2)]

            await wait_for(lambda: owned()[0] | owned()[1] == QUEUES and all(owned()))
            for seq in range(60):
                if seq == 20:
                    await remapping_static_topic(
                        admin, T, brokers="broker-b,broker-c", now_ms=now_ms
                    )
                for k in keys:
                    # a keyed send is not retried by the producer: during the remapping the
                    # logic queue refuses writes (501) and the application tries again
                    for _ in range(50):
                        try:
                            msg = Message(T, f"{k}:{seq}".encode())
                            r = await p.send(msg, SelectMessageQueueByHash, k)
                            break
                        except MQBrokerError as e:
                            assert e.code == ResponseCode.NOT_LEADER_FOR_QUEUE
                            refused.append(k)
                            await trio.sleep(0.5)
                    assert r.send_status is SendStatus.SEND_OK
            await wait_for(lambda: all(len(set(v)) == 60 for v in seen.values()), timeout=600)
            assert refused  # the remapping did block writes for a moment
            # the locks are held at the logic queues' leaders
            assert not set.intersection(*owned())
        for k, seqs in seen.items():
            assert sorted(set(seqs)) == list(range(60)), k
            assert seqs == sorted(seqs), (k, seqs)  # in order, no re-delivery out of place
