"""Ordered POP (order=true, upstream's FIFO consumption) on SimNetwork + MockClock: a queue's
next batch only after the last one is acked, the same messages again (same order, higher
delivery attempt) after the invisible time, CHANGE_MESSAGE_INVISIBLETIME extending the block,
ACKs and expiries waking held receives, the order info surviving a restart, the attemptId of a
retried receive, and no revive records."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
import trio.testing

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.client.simple_consumer import ReceivedMessage, SimpleConsumer
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import UpdateConsumerOffsetRequestHeader
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.pop_extra_info import POP_ORDER_REVIVE_QUEUE, ExtraInfo, revive_topic
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from tests.harness.broker import BrokerHarness, harness
from tests.harness.clock import EPOCH_MS, now_ms

TOPIC = "FifoT"
GROUP = "FifoG"

_hosts = iter(range(20, 250))


@asynccontextmanager
async def ordered(h: BrokerHarness, group: str = GROUP) -> AsyncIterator[SimpleConsumer]:
    host = f"10.0.1.{next(_hosts)}"
    c = SimpleConsumer(
        group,
        h.namesrv_addr,
        transport=h.net.transport(host),
        client_config=ClientConfig(clientIP=host, instanceName="fifo"),
        await_duration=0.0,
        order=True,
    )
    async with c:
        c.subscribe(TOPIC, "*")
        yield c


async def send_n(h: BrokerHarness, n: int, prefix: str = "m", queue_id: int = 0) -> None:
    for i in range(n):
        r = await h.send(TOPIC, f"{prefix}{i}".encode(), queue_id=queue_id)
        assert r.code == ResponseCode.SUCCESS


async def receive(c: SimpleConsumer, n: int = 3, invisible: float = 20.0) -> list[ReceivedMessage]:
    return await c.receive(n, invisible, await_duration=0)


def names(msgs: list[ReceivedMessage]) -> list[str]:
    return [m.body.decode() for m in msgs]


def revive_tags(h: BrokerHarness) -> list[str]:
    assert h.broker is not None
    out = []
    for q in range(8):
        res = h.broker.store.message_store.get_messages(
            revive_topic("DefaultCluster"), q, 0, 10_000, 1 << 24
        )
        out += [m.tags or "" for buf in res.buffers for m in iter_stored(buf)]
    return out


async def test_next_batch_only_after_every_message_of_the_last_is_acked(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, ordered(h) as c:
        await send_n(h, 7)
        first = await receive(c)
        assert names(first) == ["m0", "m1", "m2"]
        info = ExtraInfo.parse(first[0].receipt_handle)
        assert info.revive_qid == POP_ORDER_REVIVE_QUEUE
        assert all(m.delivery_attempt == 1 for m in first)
        assert await receive(c) == []  # the queue is blocked: nothing else of it
        await c.ack(first[0])
        await c.ack(first[1])
        assert await receive(c) == []  # m2 still in flight
        await c.ack(first[2])
        second = await receive(c)
        assert names(second) == ["m3", "m4", "m5"]
        await c.ack_batch(second)  # BATCH_ACK_MESSAGE of ordered receipts
        assert names(await receive(c)) == ["m6"]
        # an ordered pop writes no checkpoint and an ordered ack no revive record
        assert revive_tags(h) == []


async def test_unacked_batch_comes_again_in_the_same_order_after_its_invisible_time(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, ordered(h) as c:
        await send_n(h, 5)
        first = await receive(c, invisible=10.0)
        assert names(first) == ["m0", "m1", "m2"]
        visible_at = ExtraInfo.parse(first[0].receipt_handle).revive_time
        await trio.sleep((visible_at - 100 - now_ms()) / 1000)
        assert await receive(c) == []  # not one ms early
        await trio.sleep(0.2)
        again = await receive(c, invisible=10.0)
        assert names(again) == ["m0", "m1", "m2"]
        assert [m.delivery_attempt for m in again] == [2, 2, 2]
        await c.ack(again[0])
        await trio.sleep(10.5)
        third = await receive(c, invisible=10.0)
        # from the first unacked one: m1, m2 a third time, m3 new
        assert names(third) == ["m1", "m2", "m3"]
        assert [m.delivery_attempt for m in third] == [3, 3, 1]
        # a receipt of an older delivery changes nothing: m1 must still be acked
        await c.ack(first[1])
        assert await receive(c) == []
        for m in third:
            await c.ack(m)
        assert names(await receive(c)) == ["m4"]


async def test_change_invisible_duration_extends_and_shortens_the_block(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, ordered(h) as c:
        await send_n(h, 3)
        got = await receive(c, invisible=10.0)
        await c.ack(got[0])
        await c.change_invisible_duration(got[1], 60.0)
        renewed = ExtraInfo.parse(got[1].receipt_handle)
        assert renewed.revive_qid == POP_ORDER_REVIVE_QUEUE
        assert abs(renewed.revive_time - (now_ms() + 60_000)) < 50
        await trio.sleep(30)
        assert await receive(c) == []  # past the 10 s, within the 60 s
        await c.change_invisible_duration(got[1], 1.0)  # shortened from now
        await trio.sleep(1.1)
        again = await receive(c)
        assert names(again) == ["m1", "m2"]
        # the changed receipt still acks (it keeps the batch's pop time)
        await c.ack(again[0])
        await c.ack(again[1])
        assert await receive(c) == []
        await send_n(h, 1, prefix="n")
        assert names(await receive(c)) == ["n0"]


async def test_ack_and_expiry_wake_a_held_ordered_receive(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, ordered(h) as c:
        await send_n(h, 4)
        first = await receive(c, n=2, invisible=30.0)
        got: list[ReceivedMessage] = []
        answered: list[float] = []

        async def hold() -> None:
            got.extend(await c.receive(2, 5.0, await_duration=20.0))
            answered.append(trio.current_time())

        async with trio.open_nursery() as n:
            n.start_soon(hold)
            await trio.sleep(3.0)
            assert got == []
            acked_at = trio.current_time()
            for m in first:
                await c.ack(m)
        assert names(got) == ["m2", "m3"]
        assert answered[0] - acked_at < 0.5  # woken by the ACK, not the 20 s poll time
        visible_at = ExtraInfo.parse(got[0].receipt_handle).revive_time
        got.clear()
        answered.clear()
        async with trio.open_nursery() as n:
            n.start_soon(hold)  # nothing acked: the 5 s invisible time ends first
        assert names(got) == ["m2", "m3"]
        assert [m.delivery_attempt for m in got] == [2, 2]
        answered_ms = EPOCH_MS + answered[0] * 1000
        assert visible_at <= answered_ms < visible_at + 500  # not at the 20 s poll time


async def test_a_retried_receive_with_its_attempt_id_gets_the_same_batch(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, ordered(h) as c:
        await send_n(h, 4)
        a = await c.receive_from(TOPIC, "broker-a", 2, 30.0, 0.0, attempt_id="att-1")
        b = await c.receive_from(TOPIC, "broker-a", 2, 30.0, 0.0, attempt_id="att-1")
        assert names(a) == names(b) == ["m0", "m1"]
        assert [m.delivery_attempt for m in b] == [1, 1]  # the same attempt, not counted
        assert await c.receive_from(TOPIC, "broker-a", 2, 30.0, 0.0, attempt_id="att-2") == []


async def test_ack_of_an_offset_outside_the_batch_is_refused(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, ordered(h) as c:
        await send_n(h, 4)
        got = await receive(c, n=2)
        forged = ReceivedMessage(got[1].message, TOPIC, "broker-a", got[1].receipt_handle)
        info = ExtraInfo.parse(forged.receipt_handle)
        forged.receipt_handle = attrs.evolve(info, queue_offset=3).build()
        try:
            await c.ack(forged)
            raise AssertionError("an ACK of m3 while m0..m1 are in flight was accepted")
        except MQBrokerError as e:
            assert e.code == ResponseCode.MESSAGE_ILLEGAL
        # the offset did not move: after the invisible time m0, m1 come again
        await trio.sleep(21)
        assert names(await receive(c, n=2)) == ["m0", "m1"]


async def test_restart_keeps_the_blocks_in_upstreams_file(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        async with ordered(h) as c:
            await send_n(h, 5)
            got = await receive(c, invisible=60.0)
            assert names(got) == ["m0", "m1", "m2"]
            await c.ack(got[0])
        await h.stop_broker()
        path = tmp_path / "store" / "config" / "consumerOrderInfo.json"
        table = json.loads(path.read_text())["table"]
        rec = table[f"{TOPIC}@{GROUP}"]["0"]
        assert rec["o"] == [0, 1, 2] and rec["cm"] == 1 and rec["i"] == 60_000
        assert rec["popTime"] == ExtraInfo.parse(got[0].receipt_handle).pop_time
        await h.start_broker()
        async with ordered(h) as c:
            assert await receive(c) == []  # still blocked after the restart
            await c.ack(got[1])  # receipts from before the restart still ack
            await c.ack(got[2])
            assert names(await receive(c)) == ["m3", "m4"]


async def test_raw_ordered_pop_response_carries_order_count_info(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, ordered(h) as c:
        await send_n(h, 2)
        await receive(c, invisible=1.0)
        await trio.sleep(1.1)
        ext = {
            "consumerGroup": GROUP,
            "topic": TOPIC,
            "queueId": "0",
            "maxMsgNums": "4",
            "invisibleTime": "30000",
            "pollTime": "0",
            "bornTime": str(now_ms()),
            "initMode": "1",
            "order": "true",
        }
        resp = await h.invoke(RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=ext))
        assert resp.code == ResponseCode.SUCCESS
        assert resp.ext_fields["reviveQid"] == str(POP_ORDER_REVIVE_QUEUE)
        # each message delivered once before, and the queue's least count (upstream's format)
        assert resp.ext_fields["orderCountInfo"] == "0 qo0%0 1;0 qo0%1 1;0 0 1"
        assert resp.ext_fields["startOffsetInfo"] == "0 0 0"
        assert resp.ext_fields["msgOffsetInfo"] == "0 0 0,1"


async def test_an_offset_moved_past_the_batch_ends_its_block(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, ordered(h) as c:
        await send_n(h, 6)
        got = await receive(c, invisible=60.0)
        assert names(got) == ["m0", "m1", "m2"]
        header = UpdateConsumerOffsetRequestHeader(GROUP, TOPIC, 0, 4)  # an admin's reset
        cmd = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=to_ext(header))
        assert (await h.invoke(cmd)).code == ResponseCode.SUCCESS
        after = await receive(c, invisible=60.0)
        assert names(after) == ["m4", "m5"]
        await c.ack(got[0])  # an ACK of the old batch does not move the offset back
        for m in after:
            await c.ack(m)
        await send_n(h, 1, prefix="n")
        assert names(await receive(c)) == ["n0"]


async def test_blocks_written_periodically_survive_a_crash(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """kill -9 after consumerOrderInfo.json's periodic write (flushConsumerOffsetInterval):
    the batch in flight stays blocked until its invisible time, then comes again in order."""
    async with harness(tmp_path) as h:
        async with ordered(h) as c:
            await send_n(h, 4)
            got = await receive(c, invisible=60.0)
            assert names(got) == ["m0", "m1", "m2"]
            await trio.sleep(6)  # one periodic write (every 5 s)
        await h.crash_broker()
        await h.start_broker()
        async with ordered(h) as c:
            assert await receive(c) == []
            await trio.sleep((ExtraInfo.parse(got[0].receipt_handle).revive_time - now_ms()) / 1000)
            again = await receive(c)
            assert names(again) == ["m0", "m1", "m2"]
            assert [m.delivery_attempt for m in again] == [2, 2, 2]


async def test_acks_of_later_messages_never_move_the_offset_past_an_unacked_one(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, ordered(h) as c:
        await send_n(h, 4)
        got = await receive(c, invisible=10.0)
        await c.ack(got[2])
        await c.ack(got[1])  # m0 is not acked: the group's offset stays at m0
        assert h.broker is not None and h.broker.tables.offsets.query(GROUP, TOPIC, 0) == 0
        await trio.sleep(10.1)
        # from the first unacked message on, like upstream (acked ones included)
        assert names(await receive(c)) == ["m0", "m1", "m2"]
