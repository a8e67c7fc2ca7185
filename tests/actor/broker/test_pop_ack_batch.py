"""ACK_MESSAGEs merged per turn (actors/broker/pop/ack_batch.py) against a real broker on the
simulated disk, SimNetwork + MockClock, seeded: the ACKs of one receive sent at once become few
store puts and one ``bAck`` record per checkpoint; after a crash right after the ACKs were
answered (no revive round in between; a kill -9, or a power cut keeping nothing unsynced) the
broker restarts from its disk and exactly the messages never acknowledged come back, once, and
no acknowledged one does, with two checkpoints of one queue in one revive queue acked in the
same turn."""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import FlushDiskType
from rocketrio.actors.client.simple_consumer import ReceivedMessage, SimpleConsumer
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.pop_extra_info import ACK_TAG, BATCH_ACK_TAG, revive_topic
from tests.harness.broker import BrokerHarness, harness
from tests.harness.pop import receive_all, simple_consumer
from tests.harness.sim_disk import SimFileSystem

SYNC = FlushDiskType.SYNC_FLUSH
TOPIC, GROUP = "PopBatchT", "PopBatchG"


def simple(h: BrokerHarness) -> Any:
    return simple_consumer(h, GROUP, TOPIC)


def ack_tags(h: BrokerHarness) -> list[str]:
    """The tag of every ACK record of the revive topic, read from the store."""
    assert h.broker is not None
    res = h.broker.store.message_store.get_messages(
        revive_topic("DefaultCluster"), 0, 0, 10_000, 1 << 24
    )
    tags = [m.tags or "" for buf in res.buffers for m in iter_stored(buf)]
    return [t for t in tags if t in (ACK_TAG, BATCH_ACK_TAG)]


async def start(h: BrokerHarness, fs: SimFileSystem) -> None:
    # one revive queue: the CKs of every pop share it, so only the merge key keeps them apart
    await h.start_broker(fs=fs, flushDiskType=SYNC, reviveQueueNum=1)


async def ack_at_once(c: SimpleConsumer, msgs: list[ReceivedMessage]) -> None:
    async with trio.open_nursery() as n:
        for m in msgs:
            n.start_soon(c.ack, m)


@pytest.mark.parametrize("power_cut", [False, True], ids=["kill-9", "power-cut"])
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_acks_of_one_turn_survive_a_power_cut_and_only_the_unacked_come_back(
    tmp_path: Any, mock_clock: trio.testing.MockClock, seed: int, power_cut: bool
) -> None:
    fs = SimFileSystem(random.Random(seed))
    async with harness(tmp_path, start=False) as h:
        await start(h, fs)
        for i in range(24):
            r = await h.send(TOPIC, f"m{i:02}".encode(), queue_id=0)
            assert r.code == ResponseCode.SUCCESS
        async with simple(h) as c:
            first = await c.receive(8, 30.0, await_duration=0)  # CK 1 of queue 0
            second = await c.receive(8, 30.0, await_duration=0)  # CK 2 of queue 0
            rest = await receive_all(c)
            assert len(first) == len(second) == 8 and len(rest) == 8
            await trio.sleep(6)  # the pop offsets reach consumerOffset.json
            acked = first[:6] + second[2:] + rest[::2]
            assert h.broker is not None
            batcher = h.broker.pop.acks.batcher
            puts_before = batcher.puts
            await ack_at_once(c, acked)  # every ACK answered SUCCESS
            assert batcher.puts - puts_before < len(acked) // 4  # merged, not one put each
        tags = ack_tags(h)
        assert BATCH_ACK_TAG in tags and len(tags) < len(acked)
        await h.crash_broker()  # kill -9 ...
        if power_cut:  # ... and the power: only what was synced survives
            fs.crash(lose_unsynced=True)
        else:  # the page cache survives
            fs.crash(keep_unsynced=True)
        await start(h, fs)
        unacked = sorted({m.body for m in first + second + rest} - {m.body for m in acked})
        async with simple(h) as c:
            assert await receive_all(c) == []  # still invisible
            await trio.sleep(40)
            back = await receive_all(c)
            assert sorted(m.body for m in back) == unacked
            await ack_at_once(c, back)
            await trio.sleep(60)
            assert await receive_all(c) == []


async def test_an_ack_the_batcher_cannot_take_is_written_alone_before_its_answer(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """ACK_MESSAGE is answered without a coroutine while the batcher takes it; when the batcher
    cannot (its queue full), the handler's awaitable writes the ACK's record alone: every ACK
    is answered SUCCESS only once its own ``ack`` record is stored, and after a kill -9 only the
    unacknowledged message comes back."""
    fs = SimFileSystem(random.Random(7))
    async with harness(tmp_path, start=False) as h:
        await start(h, fs)
        for i in range(4):
            r = await h.send(TOPIC, f"m{i}".encode(), queue_id=0)
            assert r.code == ResponseCode.SUCCESS
        async with simple(h) as c:
            got = await receive_all(c)
            assert len(got) == 4
            await trio.sleep(6)  # the pop offsets reach consumerOffset.json
            assert h.broker is not None
            batcher = h.broker.pop.acks.batcher
            batcher._puts.max_queued = 0  # full: every submit refused
            puts_before = batcher.puts
            await ack_at_once(c, got[:3])  # every ACK answered SUCCESS
            assert batcher.puts == puts_before  # none went through the batcher
        assert ack_tags(h) == [ACK_TAG] * 3  # one record each, written alone
        await h.crash_broker()
        fs.crash(keep_unsynced=True)
        await start(h, fs)
        async with simple(h) as c:
            await trio.sleep(40)
            assert [m.body for m in await receive_all(c)] == [got[3].body]
