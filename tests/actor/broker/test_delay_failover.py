"""Delay messages across a controller-mode failover (real controller, NameServer and two
brokers on the simulated network under MockClock): the promoted slave continues re-putting
from the offsets its slave sync copied (delayOffset.json via GET_ALL_DELAY_OFFSET), so what the
old master re-put is not re-put again, what was still waiting is re-put on time, and what fell
due while the old master had stopped re-putting is re-put within 100 ms of the promotion."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import trio
import trio.testing

from rocketrio.protocol.bodies import TopicConfig
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import SendMessageRequestHeader, SendMessageRequestHeaderV2
from rocketrio.protocol.message import encode_properties
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from rocketrio.storage.store_dispatch import SCHEDULE_TOPIC
from tests.harness.clock import EPOCH_MS
from tests.harness.delay import LATE_MS, LEVELS, delivered, waiting
from tests.harness.replication import (
    Cluster,
    Node,
    awaits_equal,
    awaits_true,
    cluster,
    pair,
    wait_until,
)


async def send_delayed(c: Cluster, node: Node, key: str, level: int) -> None:
    assert c.client is not None
    v1 = SendMessageRequestHeader(
        producerGroup="PG", topic="D", defaultTopic="TBW102", defaultTopicQueueNums=4,
        queueId=0, sysFlag=0, bornTimestamp=EPOCH_MS, flag=0,
        properties=encode_properties({"DELAY": str(level), "UNIQ_KEY": key}),
    )  # fmt: skip
    header = SendMessageRequestHeaderV2.from_v1(v1)
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=to_ext(header), body=b"d")
    resp = await c.client.invoke(node.b.addr, cmd, 10)
    assert resp.code == RC.SUCCESS, resp.remark


async def test_a_promoted_slave_continues_where_the_master_stopped(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 53) as c:
        a, b = await pair(c, messageDelayLevel=LEVELS)
        await trio.sleep(11)  # past the controller's listening window after its election
        a.b.tables.topics.update(TopicConfig("D", 4, 4))
        for i in range(20):
            await send_delayed(c, a, f"early{i}", 1)  # 1 s: re-put by A
            await send_delayed(c, a, f"late{i}", 4)  # 15 s: A dies first
        dues = waiting(a.b, SCHEDULE_TOPIC, range(5))
        await trio.sleep(8)  # A re-put the 1 s ones; B's slave sync copied the offsets
        assert a.b.tables.delay_offsets.table.levels == {1: 20}
        assert b.b.tables.delay_offsets.table.levels == {1: 20}
        assert not b.b.schedule.active
        # A stops re-putting (as a hung master would) before these fall due: B must re-put
        # them at once when promoted (the role change wakes its service), not a poll later
        await a.b.schedule.stop()
        for i in range(5):
            await send_delayed(c, a, f"stuck{i}", 1)
        dues.update(waiting(a.b, SCHEDULE_TOPIC, range(1)))
        await trio.sleep(4)
        promoted: list[int] = []

        async def watch_promotion() -> None:  # the moment B's role flips, to the ms
            while not b.rm.serving_as_master():
                await trio.sleep(0.001)
            promoted.append(EPOCH_MS + int(trio.current_time() * 1000))

        async with trio.open_nursery() as n:
            n.start_soon(watch_promotion)
            await a.crash()
        await wait_until(lambda: awaits_true(b.rm.serving_as_master()), "B promoted")
        promoted_ms = promoted[0]
        await trio.sleep(20)
        assert b.b.schedule.active
        got = delivered(b.b, "D", 4)
        keys = Counter(k for k, _, _ in got)
        assert set(keys) == {f"{t}{i}" for t in ("early", "late") for i in range(20)} | {
            f"stuck{i}" for i in range(5)
        }
        assert max(keys.values()) == 1  # what A re-put, B did not re-put again
        for key, stored, _ in got:
            if key.startswith("stuck"):  # overdue when B became master
                assert dues[key] < promoted_ms <= stored <= promoted_ms + LATE_MS
            if key.startswith("late"):
                due = dues[key]
                assert due > promoted_ms and due <= stored <= due + LATE_MS
        assert b.b.tables.delay_offsets.table.levels == {1: 25, 4: 20}


async def test_a_reput_only_the_master_holds_moves_no_delay_offset(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Cluster simulation seed 303789 (a consumer's send-back never came back): a re-put
    answered FLUSH_SLAVE_TIMEOUT is on the master only, and a failover may cut it, so the delay
    offset stays until confirmOffset passes the re-put (here: once the controller lets the
    SyncStateSet shrink to the master), and the re-put is written once, not again while it
    waits (store/confirmed_put.py)."""
    async with cluster(tmp_path, 59) as c:
        a, b = await pair(c, messageDelayLevel=LEVELS)
        await trio.sleep(11)
        a.b.tables.topics.update(TopicConfig("D", 4, 4))
        for i in range(5):
            await send_delayed(c, a, f"k{i}", 1)  # 1 s; acknowledged by both copies
        # the slave stops answering (a silent split between the two): the set still names it
        c.net.partition([a.b.addr.split(":")[0]], [b.b.addr.split(":")[0]])
        await trio.sleep(1 + 5 + 1)  # due, re-put, and syncFlushTimeout (5 s) past
        assert await c.sync_state_set() == {1, 2}
        assert a.b.tables.delay_offsets.table.levels.get(1, 0) == 0
        await wait_until(lambda: awaits_equal(c.sync_state_set(), {1}), "the set shrank")
        await trio.sleep(1)
        assert a.b.tables.delay_offsets.table.levels == {1: 5}
        keys = Counter(k for k, _, _ in delivered(a.b, "D", 4))
        assert keys == Counter({f"k{i}": 1 for i in range(5)})
