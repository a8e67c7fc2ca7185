"""Delayed and transactional messages to a static topic's logic queues (issue 30 item 6;
SimNetwork, MockClock): sent to the logic queue's leader, they wait there (the schedule topic,
the half topic) and are delivered to the logic queue; when a remapping moved the queue
meanwhile, the old leader hands them to the new one. Every message is consumed once, a delayed
one not before its delay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.client.message import Message, SendStatus
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.static_topic_admin import remapping_static_topic
from rocketrio.actors.client.transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
)
from rocketrio.protocol.message_format import MessageExt
from tests.harness.clients import Collector, cluster, consumer, wait_for
from tests.harness.clock import now_ms
from tests.harness.static_topic import T, leaders, route_until, static_topic

S = LocalTransactionState
DELAY_LEVEL = 3  # 10 s
CONFIG = {"transactionCheckInterval": 5_000, "transactionTimeOut": 6_000}


class Later:
    """Answers UNKNOW at once and COMMIT when checked: the commit comes from the check, after
    the remapping."""

    def __init__(self) -> None:
        self.checked: list[bytes] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> S:
        return S.UNKNOW if msg.body.startswith(b"late") else S.COMMIT_MESSAGE

    def check_local_transaction(self, msg: MessageExt) -> S:
        self.checked.append(msg.body)
        return S.COMMIT_MESSAGE


class Timed(Collector):
    """A Collector that also notes the (MockClock) time each message was consumed."""

    def __init__(self) -> None:
        super().__init__()
        self.at: list[float] = []

    def __call__(self, msgs: list[MessageExt]) -> Any:
        self.at.extend(trio.current_time() for _ in msgs)
        return super().__call__(msgs)


async def run(tmp_path: Path, remap: bool) -> None:
    async with cluster(tmp_path, ()) as c, c.admin() as admin:
        await c.start_broker("broker-a", "10.0.1.1", **CONFIG)
        await c.start_broker("broker-b", "10.0.1.2", **CONFIG)
        await static_topic(c, admin)
        await route_until(admin, lambda r: len(leaders(r)) == 8)
        await c.start_broker("broker-c", "10.0.1.3", **CONFIG)
        got = Timed()
        pc = consumer(c, "cg", got, topic=T, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        listener = Later()
        delayed = [f"delay{i}".encode() for i in range(16)]
        now_tx = [f"tx{i}".encode() for i in range(16)]
        late_tx = [f"late{i}".encode() for i in range(16)]
        async with (
            Producer("pg", c.ns_addr, **c.kwargs()) as p,
            TransactionProducer("tg", c.ns_addr, listener, **c.kwargs()) as tp,
            pc,
        ):
            sent_at = trio.current_time()
            for b in delayed:
                r = await p.send(Message(T, b, delay_time_level=DELAY_LEVEL))
                assert r.send_status is SendStatus.SEND_OK
            for b in now_tx + late_tx:
                r = await tp.send_message_in_transaction(Message(T, b))
                assert r.send_status is SendStatus.SEND_OK
            if remap:  # before any delay ends and before any check commits
                moved = await remapping_static_topic(
                    admin, T, brokers="broker-b,broker-c", now_ms=now_ms
                )
                assert moved.mapOut == ["broker-a"]
            await wait_for(lambda: len(got.msgs) >= 48, timeout=300)
            await trio.sleep(30)  # room for a duplicate
        bodies = got.bodies()
        assert sorted(bodies) == sorted(delayed + now_tx + late_tx)
        assert len(bodies) == len(set(bodies))
        assert set(listener.checked) >= set(late_tx)
        for m, at in zip(got.msgs, got.at, strict=True):
            assert 0 <= m.queue_id < 8
            if m.body.startswith(b"delay"):  # delivered at its time, not before
                assert at - sent_at >= 10.0, (m.body, at - sent_at)


async def test_delayed_and_transactional_messages_to_logic_queues(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    await run(tmp_path, remap=False)


async def test_delayed_and_transactional_messages_through_a_remapping(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    await run(tmp_path, remap=True)
