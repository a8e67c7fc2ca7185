"""The consumers' hand-over channels are bounded, and a full one pauses pulling without a deadlock.

Lite pull consumer: pulled batches wait for ``poll`` in a channel sized for what flow control
lets in at full batches; small batches (a trickle of messages, each long-polling pull answered
with one) fill it first, and then the pull loops wait. Push consumer with an async listener:
consume requests wait for a worker in a channel of a full pull's chunks per worker; a listener
that stalls stops pulling instead of queueing the whole backlog. In both, once the application
catches up every message arrives, once and in order.
"""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.client.message import Message, MessageExt
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.pull_consumer import LitePullConsumer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from tests.harness.clients import cluster, create_topic, wait_for


async def test_lite_pull_buffer_is_bounded_when_the_application_does_not_poll(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=1)
        pc = LitePullConsumer(
            "lg", c.ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **c.kwargs()
        )
        pc.config.pullThresholdForAll = 20
        pc.config.pullBatchSize = 10
        pc.subscribe("T", "*")
        async with pc, Producer("pg", c.ns_addr, **c.kwargs()) as p:
            assert pc._send is not None
            capacity = pc._send.statistics().max_buffer_size
            assert capacity == 3  # ceil(20 / 10) + 1
            # a trickle: each long-polling pull comes back with one message
            for i in range(40):
                await p.send(Message("T", b"m%d" % i))
                await trio.sleep(0.2)
            await trio.sleep(5)
            # nobody polled: the buffer is full and pulling waits, it does not keep taking
            assert pc._send.statistics().current_buffer_used == capacity
            assert pc._buffered <= capacity
            got: list[bytes] = []
            with trio.fail_after(60):
                while len(got) < 40:
                    got.extend(m.body for m in await pc.poll(1.0))
        assert got == [b"m%d" % i for i in range(40)]


async def test_push_consumer_with_a_stalled_listener_stops_pulling(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=1)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            for i in range(200):
                await p.send(Message("T", b"m%d" % i))
        gate = trio.Event()
        got: list[bytes] = []

        async def listener(msgs: list[MessageExt]) -> ConsumeStatus:
            await gate.wait()
            got.extend(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        pc = PushConsumer(
            "g",
            c.ns_addr,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            consume_concurrency=2,
            pull_batch_size=4,
            consume_batch_size=1,
            **c.kwargs(),
        )
        pc.subscribe("T", "*")
        pc.register_listener(listener)
        async with pc:
            await wait_for(lambda: bool(pc.assigned_queues()))
            await trio.sleep(10)
            send = pc._consume_send
            assert send is not None
            stats = send.statistics()
            assert stats.max_buffer_size == 8  # 2 workers x a pull of 4 in chunks of 1
            assert stats.current_buffer_used == 8
            # pulled so far: the channel, the two stalled workers, and one pull's batch
            # waiting to get in; not the 200 of the backlog (pullThresholdForQueue is 1000)
            [st] = [s for mq, s in pc.queues.items() if mq.topic == "T"]
            assert st.pq.msg_count <= 8 + 2 + 4
            gate.set()
            await wait_for(lambda: len(got) >= 200, timeout=60)
        assert sorted(got) == sorted(b"m%d" % i for i in range(200))
