"""The admin offset tools on a static topic's logic queues, across a remapping (issue 30 item 2;
SimNetwork, MockClock): consumerProgress reports the 8 logic queues with logic offsets and lag,
resetOffsetByTime moves a running PushConsumer back over both generations (the older one read
on the old broker), skipAccumulatedMessage moves the group past what accumulated,
cloneGroupOffset gives another group the same logic offsets."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.offset_admin import clone_group_offset, reset_offset_by_timestamp
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.static_topic_admin import remapping_static_topic
from tests.harness.clients import Collector, cluster, consumer, wait_for
from tests.harness.clock import now_ms
from tests.harness.static_topic import T, leaders, route_until, static_topic

LQ = "__syslo__global__"


async def test_offset_tools_work_on_logic_queues_through_a_remapping(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        await route_until(admin, lambda r: len(leaders(r)) == 8)
        await c.start_broker("broker-c", "10.0.1.3")
        got = Collector()
        first = [f"a{i}".encode() for i in range(40)]
        second = [f"b{i}".encode() for i in range(40)]
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            pc = consumer(c, "cg", got, topic=T, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            async with pc:
                for b in first:
                    await p.send(Message(T, b))
                await wait_for(lambda: len(got.msgs) >= 40)
                await remapping_static_topic(admin, T, brokers="broker-b,broker-c", now_ms=now_ms)
                for b in second:
                    await p.send(Message(T, b))
                await wait_for(lambda: len(got.msgs) >= 80, timeout=300)
                await trio.sleep(12)  # the consumer commits its offsets (every 5 s)

                # consumerProgress: the 8 logic queues, logic offsets, nothing left
                prog = await admin.consumer_progress("cg", T)
                rows = [o for o in prog.offsets if o.topic == T]
                assert sorted(o.queueId for o in rows) == list(range(8))
                assert {o.brokerName for o in rows} == {LQ}
                assert sum(o.lag for o in rows) == 0
                moved = [o for o in rows if o.brokerOffset >= 10000]
                assert len(moved) == 4  # broker-a's four: their new generation's offsets

                # the console's group view (GET_BROKER_CONSUME_STATS) shows the logic queues
                views = [await admin.broker_consume_stats(c.addr(b)) for b in ("broker-b",)]
                rows = [
                    mq
                    for v in views
                    for per_group in v.consumeStatsList
                    for s in per_group.get("cg", [])
                    for mq in s.offsetTable
                    if mq.topic == T
                ]
                assert rows and {mq.brokerName for mq in rows} == {LQ}

                # the consume time span of each logic queue, the old generation's on broker-a
                spans = await admin.query_consume_time_span(T, "cg")
                assert sorted(s.messageQueue.queueId for s in spans) == list(range(8))
                assert all(s.messageQueue.brokerName == LQ for s in spans)
                assert all(0 < s.minTimeStamp <= s.maxTimeStamp for s in spans)
                assert all(s.delayTime == 0 for s in spans)

                # resetOffsetByTime to the beginning: the running consumer takes all 80 again
                before = len(got.msgs)
                res = await reset_offset_by_timestamp(admin, "cg", T, 0, True)
                assert {q.brokerName for q in res.offsets} == {LQ}
                assert sorted(q.queueId for q in res.offsets) == list(range(8))
                assert all(q.offset == 0 for q in res.offsets)
                await wait_for(lambda: len(got.msgs) >= before + 80, timeout=300)
                again = sorted(m.body for m in got.msgs[before:])
                assert again[:80] == sorted(first + second)
                await trio.sleep(12)

            # skipAccumulatedMessage while the group is offline: nothing of "c" is consumed
            for i in range(30):
                await p.send(Message(T, f"c{i}".encode()))
            res = await reset_offset_by_timestamp(admin, "cg", T, -1, True)
            assert sorted(q.queueId for q in res.offsets) == list(range(8))
            prog = await admin.consumer_progress("cg", T)
            assert sum(o.lag for o in prog.offsets if o.topic == T) == 0
            got2 = Collector()
            pc2 = consumer(c, "cg", got2, topic=T, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
            async with pc2:
                await trio.sleep(10)
                for i in range(8):
                    await p.send(Message(T, f"d{i}".encode()))
                await wait_for(lambda: len(got2.msgs) >= 8)
                await trio.sleep(10)
            assert sorted(got2.bodies()) == sorted(f"d{i}".encode() for i in range(8))

            # cloneGroupOffset: cg3 gets cg's logic offsets
            await trio.sleep(6)
            cloned = await clone_group_offset(admin, "cg", "cg3", T, offline=True)
            src = {
                o.queueId: o.consumerOffset
                for o in (await admin.consumer_progress("cg", T)).offsets
                if o.topic == T
            }
            assert {q.queueId: q.offset for q in cloned if q.brokerName == LQ} == src
