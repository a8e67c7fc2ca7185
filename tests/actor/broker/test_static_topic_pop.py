"""POP (SimpleConsumer) on a static topic's logic queues through a remapping (issue 30 item 1;
SimNetwork, MockClock): the leader pops its logic queues, reads an older generation on the old
broker remotely, and after the remapping continues where the group was (the offset found by
Double-Check-Read, not initMode). Nothing is lost, an acknowledged message never comes back,
an unacknowledged one comes back after its invisible time (revived from a logic CK), and the
receipts name logic queues and logic offsets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.simple_consumer import ReceivedMessage, SimpleConsumer
from rocketrio.actors.client.static_topic_admin import remapping_static_topic
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.pop_extra_info import INIT_MODE_MIN
from tests.harness.clients import cluster
from tests.harness.clock import now_ms
from tests.harness.static_topic import T, leaders, route_until, static_topic


def pick(qs: Sequence[MessageQueue], _msg: object, gid: int) -> MessageQueue:
    return next(q for q in qs if q.queueId == gid)


def simple(c: object, group: str = "pg", order: bool = False) -> SimpleConsumer:
    sc = SimpleConsumer(
        group,
        c.ns_addr,  # type: ignore[attr-defined]
        **c.kwargs(),  # type: ignore[attr-defined]
        await_duration=0.0,
        init_mode=INIT_MODE_MIN,
        order=order,
    )
    sc.subscribe(T, "*")
    return sc


async def test_pop_through_a_remapping_loses_nothing_and_acks_hold(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        before = leaders(await route_until(admin, lambda r: len(leaders(r)) == 8))
        await c.start_broker("broker-c", "10.0.1.3")
        sent = [f"a{i}".encode() for i in range(80)] + [f"b{i}".encode() for i in range(80)]
        acked: list[bytes] = []
        deliveries: list[ReceivedMessage] = []
        unacked: set[bytes] = set()
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, simple(c) as sc:
            for body in sent[:80]:
                await p.send(Message(T, body))
            # first part: some acked, some left in flight (invisible 60 s)
            while len(deliveries) < 40:
                got = await sc.receive(8, 60.0)
                deliveries.extend(got)
                for i, m in enumerate(got):
                    if i % 4 == 3:
                        unacked.add(m.body)
                    else:
                        await sc.ack(m)
                        acked.append(m.body)
                await trio.sleep(0.1)
            assert unacked
            moved = await remapping_static_topic(
                admin, T, brokers="broker-b,broker-c", now_ms=now_ms
            )
            assert moved.mapOut == ["broker-a"] and moved.mapIn == ["broker-c"]
            for body in sent[80:]:
                await p.send(Message(T, body))
            with trio.fail_after(600):
                while set(acked) != set(sent):
                    got = await sc.receive(16, 60.0)
                    deliveries.extend(got)
                    for m in got:
                        await sc.ack(m)
                        acked.append(m.body)
                    if not got:
                        await trio.sleep(1)
            await trio.sleep(90)  # past every invisible time: nothing acked comes back
            assert await sc.receive(32, 60.0) == []
        after = leaders(await route_until(admin, lambda r: "broker-c" in set(leaders(r).values())))
        moved_ids = {g for g, b in after.items() if b == "broker-c"}
        assert moved_ids == {g for g, b in before.items() if b == "broker-a"}
        # each message acknowledged exactly once; only the ones left in flight came twice
        assert sorted(acked) == sorted(sent)
        counts: dict[bytes, int] = {}
        for m in deliveries:
            counts[m.body] = counts.get(m.body, 0) + 1
        assert {b for b, n in counts.items() if n > 1} == unacked
        # receipts and records name logic queues and logic offsets; a moved queue's
        # new generation starts at a 10,000 block
        first = {m.body: m for m in deliveries if m.topic == T and m.message.reconsume_times == 0}
        for m in first.values():
            assert 0 <= m.queue_id < 8
        for gid in moved_ids:
            offs = sorted(m.queue_offset for m in first.values() if m.queue_id == gid)
            old = [o for o in offs if o < 10000]
            new = [o for o in offs if o >= 10000]
            assert old == list(range(len(old))) and new and new[0] % 10000 == 0
            assert new == list(range(new[0], new[0] + len(new)))


async def test_ordered_pop_keeps_each_logic_queues_order_through_a_remapping(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Ordered POP (order=true): a logic queue's next messages are handed out only once the
    previous ones were acked, before and after its move; every message is received, and per
    logic queue the messages first arrive in send order (a re-delivery repeats, never
    reorders)."""
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        await route_until(admin, lambda r: len(leaders(r)) == 8)
        await c.start_broker("broker-c", "10.0.1.3")
        sent: dict[int, list[bytes]] = {g: [] for g in range(8)}
        seen: dict[int, list[bytes]] = {g: [] for g in range(8)}
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, simple(c, "og", True) as sc:

            async def send_round(k: int) -> None:
                for i in range(5):
                    for g in range(8):
                        body = f"{k}-{g}-{i}".encode()
                        for _ in range(50):  # a keyed send is refused (501) while remapped
                            try:
                                r = await p.send(Message(T, body), pick, g)
                                break
                            except MQBrokerError as e:
                                assert e.code == ResponseCode.NOT_LEADER_FOR_QUEUE
                                await trio.sleep(0.5)
                        sent[r.message_queue.queueId].append(body)

            async def drain(total: int) -> None:
                with trio.fail_after(600):
                    while sum(len(set(v)) for v in seen.values()) < total:
                        got = await sc.receive(8, 30.0)
                        for m in got:
                            seen[m.queue_id].append(m.body)
                        for m in got:
                            await sc.ack(m)
                        if not got:
                            await trio.sleep(1)

            await send_round(0)
            await drain(20)  # half of the first round
            await remapping_static_topic(admin, T, brokers="broker-b,broker-c", now_ms=now_ms)
            await send_round(1)
            await drain(80)
        for g in range(8):
            first_seen = list(dict.fromkeys(seen[g]))
            assert first_seen == sent[g], g


async def test_change_invisible_duration_on_a_logic_queue_after_a_remapping(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A message popped from a logic queue's old generation (read remotely by the new leader)
    is made visible sooner with CHANGE_INVISIBLE_TIME: it comes back at the new time, not the
    old one, and once acked with its new receipt it never comes back."""
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        await route_until(admin, lambda r: len(leaders(r)) == 8)
        await c.start_broker("broker-c", "10.0.1.3")
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, simple(c, "cg2") as sc:
            for i in range(16):
                await p.send(Message(T, f"m{i}".encode()))
            await remapping_static_topic(admin, T, brokers="broker-b,broker-c", now_ms=now_ms)
            await trio.sleep(3)
            got: list[ReceivedMessage] = []
            with trio.fail_after(60):
                while len(got) < 16:
                    got += await sc.receive(16, 300.0)
            moved = {g for g, b in leaders(await route_until(admin, lambda r: True)).items()
                     if b == "broker-c"}  # fmt: skip
            target = next(m for m in got if m.queue_id in moved)
            assert target.broker_name == "broker-c"  # popped by the new leader, read remotely
            for m in got:
                if m is not target:
                    await sc.ack(m)
            await sc.change_invisible_duration(target, 5.0)
            start = trio.current_time()
            again: list[ReceivedMessage] = []
            with trio.fail_after(120):
                while not again:
                    again = await sc.receive(16, 300.0)
                    if not again:
                        await trio.sleep(0.5)
            assert [m.body for m in again] == [target.body]
            assert 4.0 <= trio.current_time() - start < 60  # the new time, not the old 300 s
            await sc.ack(again[0])
            await trio.sleep(30)
            assert await sc.receive(16, 300.0) == []
