"""Delay-level and timer messages on a whole broker (SimNetwork + MockClock): delivered at their
due time (never early, within 100 ms), exactly once across a graceful restart, at most one
flush interval re-delivered after a crash, delayOffset.json on disk, the master-only guard,
GET_ALL_DELAY_OFFSET and the admin's view of a waiting message."""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.actors.broker.tables.delay_offset import DelayOffsetSerializeWrapper
from rocketrio.protocol.bodies import TopicStatsTable
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetTopicStatsInfoRequestHeader, ViewMessageRequestHeader
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext
from rocketrio.storage.store_dispatch import SCHEDULE_TOPIC
from rocketrio.storage.timer_wheel import TIMER_TOPIC, level_of, round_up_to_tick
from tests.harness.broker import BrokerHarness, harness
from tests.harness.clock import now_ms
from tests.harness.delay import LATE_MS, LEVELS, delivered, waiting

LEVEL_MS = [1000, 3000, 7000, 15_000, 30_000]


async def send_many(
    h: BrokerHarness, count: int, props_of: Any, topic: str = "D", first: int = 0
) -> None:
    async def worker(ids: range) -> None:
        for i in ids:
            resp = await h.send(topic, f"m{i}".encode(), props={"UNIQ_KEY": f"K{i}", **props_of(i)})
            assert resp.code == ResponseCode.SUCCESS, resp.remark

    async with trio.open_nursery() as n:
        step = 100
        for start in range(first, first + count, step):
            n.start_soon(worker, range(start, min(first + count, start + step)))


def read_delay_offset_file(h: BrokerHarness) -> DelayOffsetSerializeWrapper:
    path = os.path.join(h.root, "store", "config", "delayOffset.json")
    with open(path, "rb") as f:
        return from_json(DelayOffsetSerializeWrapper, f.read())


# --------------------------------------------------------------------------- delay levels


async def test_10000_delayed_messages_on_time_and_exactly_once_across_a_restart(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    count = 10_000
    async with harness(tmp_path, messageDelayLevel=LEVELS) as h:
        h.broker.tables.topics.update(_topic("D", 4))  # type: ignore[union-attr]
        await send_many(h, count, lambda i: {"DELAY": str(i % 5 + 1)})
        assert h.broker is not None
        dues = waiting(h.broker, SCHEDULE_TOPIC, range(5))
        assert len(dues) == count
        # tagsCode = store time + the level's delay (upstream computeDeliverTimestamp)
        sched = h.broker.store.view.look_message_by_offset(
            h.broker.store.view.read_queue_entries(SCHEDULE_TOPIC, 2, 0, 1)[1][0][0]
        )
        assert sched is not None and sched.properties["REAL_TOPIC"] == "D"
        assert dues[sched.properties["UNIQ_KEY"]] == sched.store_timestamp + LEVEL_MS[2]

        await trio.sleep(8)  # levels 1-3 delivered, 4 and 5 still waiting
        before = {k for k, _, _ in delivered(h.broker, "D", 4)}
        assert 0 < len(before) < count
        await h.stop_broker()
        on_disk = read_delay_offset_file(h)  # written at shutdown
        stopped_at = now_ms()
        await h.start_broker(messageDelayLevel=LEVELS)
        restarted_at = now_ms()
        # the offsets the restart starts from are the ones of the moment it stopped
        assert on_disk.offsetTable == h.broker.tables.delay_offsets.table.levels
        assert sum(on_disk.offsetTable.values()) == len(before)
        await trio.sleep(40)

        got = delivered(h.broker, "D", 4)
        keys = Counter(k for k, _, _ in got)
        assert len(keys) == count and max(keys.values()) == 1  # every one, exactly once
        for key, stored, props in got:
            due = dues[key]
            assert stored >= due, f"{key} delivered {due - stored} ms early"
            if stopped_at <= due <= restarted_at:
                assert stored <= restarted_at + LATE_MS
            else:
                assert stored <= due + LATE_MS, f"{key} delivered {stored - due} ms late"
            assert "DELAY" not in props and "REAL_TOPIC" not in props
        # everything done: delayOffset.json has each level at its queue's end after shutdown
        await h.stop_broker()
        final = read_delay_offset_file(h)
        assert final.offsetTable == {lvl: count // 5 for lvl in range(1, 6)}


async def test_a_crash_redelivers_at_most_one_flush_interval_and_loses_nothing(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    count = 2000
    flush_ms = 2000
    async with harness(tmp_path, messageDelayLevel=LEVELS, flushDelayOffsetInterval=flush_ms) as h:
        assert h.broker is not None
        h.broker.tables.topics.update(_topic("D", 4))
        # spread the sends over 10 s so the re-puts are spread too
        per = count // 10
        for burst in range(10):
            level = str(burst % 3 + 1)
            await send_many(h, per, lambda i, lv=level: {"DELAY": lv}, first=burst * per)
            await trio.sleep(1)
        await trio.sleep(0.5)
        reput = delivered(h.broker, "D", 4)
        flushed = read_delay_offset_file(h)  # what the last periodic write left on disk
        crash_at = now_ms()
        await h.crash_broker()
        await h.start_broker(messageDelayLevel=LEVELS, flushDelayOffsetInterval=flush_ms)
        await trio.sleep(30)
        keys = Counter(k for k, _, _ in delivered(h.broker, "D", 4))
        assert set(keys) == {f"K{i}" for i in range(count)}  # nothing lost
        dups = sum(n - 1 for n in keys.values())
        # exactly what was re-put after the last write of delayOffset.json is re-put again...
        assert dups == len(reput) - sum(flushed.offsetTable.values())
        # ... which is at most one flush interval's worth
        recent = sum(1 for _, stored, _ in reput if stored > crash_at - flush_ms - LATE_MS)
        assert 0 < dups <= recent


def _topic(name: str, queues: int) -> Any:
    from rocketrio.protocol.bodies import TopicConfig

    return TopicConfig(name, queues, queues)


# --------------------------------------------------------------------------- timers


async def test_timer_messages_at_arbitrary_times_across_a_restart(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    rng = random.Random(11)
    count = 300
    async with harness(tmp_path) as h:
        assert h.broker is not None
        h.broker.tables.topics.update(_topic("T", 2))
        asked: dict[str, int] = {}
        for i in range(count):
            kind = i % 3
            delay_ms = rng.choice([150, 999, 1234, 9_870, 61_001, 600_007])
            if kind == 0:
                props = {"TIMER_DELAY_MS": str(delay_ms)}
            elif kind == 1:
                props = {"TIMER_DELAY_SEC": str(delay_ms // 1000 or 1)}
                delay_ms = (delay_ms // 1000 or 1) * 1000
            else:
                props = {"TIMER_DELIVER_MS": str(now_ms() + delay_ms)}
            asked[f"K{i}"] = now_ms() + delay_ms
            resp = await h.send("T", b"t", props={"UNIQ_KEY": f"K{i}", **props})
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            await trio.sleep(rng.random() / 10)
        # a delay beyond timerMaxDelaySec (3 days) is refused
        resp = await h.send("T", b"x", props={"TIMER_DELAY_SEC": str(3 * 86400 + 60)})
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL and "max delay" in (resp.remark or "")

        # a 2-day timer waits at the wheel's top level (10^5 s slots), due at the
        # start of its deliver time's slot there (the cascade below is the pure tests')
        far = now_ms() + 2 * 86_400_000 + 3
        resp = await h.send("T", b"far", props={"TIMER_DELIVER_MS": str(far), "UNIQ_KEY": "F"})
        assert resp.code == ResponseCode.SUCCESS
        [(q, due)] = [
            (q, d)
            for q in range(59)
            for k, d in waiting(h.broker, TIMER_TOPIC, range(q, q + 1)).items()
            if k == "F"
        ]
        assert level_of(q)[0] == 6 and due == round_up_to_tick(far) // 10**8 * 10**8
        assert due > now_ms()

        await trio.sleep(120)  # the short ones are delivered, the 10 min ones wait
        await h.stop_broker()
        stopped_at = now_ms()
        await h.start_broker()
        restarted_at = now_ms()
        await trio.sleep(700)
        got = delivered(h.broker, "T", 2)
        keys = Counter(k for k, _, _ in got)
        assert set(keys) == set(asked) and max(keys.values()) == 1  # not "F": still waiting
        for key, stored, props in got:
            want = asked[key]
            assert stored >= want, f"{key} {want - stored} ms early"
            limit = (restarted_at if stopped_at <= want <= restarted_at else want) + 100 + LATE_MS
            assert stored <= limit, f"{key} {stored - want} ms late"
            assert "REAL_TOPIC" not in props and "TIMER_OUT_MS" in props
        # the wheel's progress is in delayOffset.json's timerOffsetTable
        await h.stop_broker()
        assert sum(read_delay_offset_file(h).timerOffsetTable.values()) > count


# --------------------------------------------------------------------------- master only


async def test_a_slave_never_reputs_and_starts_when_promoted(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, messageDelayLevel=LEVELS) as h:
        assert h.broker is not None
        broker = h.broker
        h.broker.tables.topics.update(_topic("D", 1))
        resp = await h.send("D", b"x", props={"DELAY": "1", "UNIQ_KEY": "S1"}, queue_id=0)
        assert resp.code == ResponseCode.SUCCESS
        master = [False]
        broker.schedule.is_master = lambda: master[0]
        await trio.sleep(5)
        assert delivered(broker, "D", 1) == []  # a slave must not re-put
        master[0] = True
        broker.schedule.role_changed()
        promoted_at = now_ms()
        await trio.sleep(1)
        [(key, stored, _)] = delivered(broker, "D", 1)
        assert key == "S1" and stored <= promoted_at + LATE_MS


# --------------------------------------------------------------------------- admin


async def test_get_all_delay_offset_and_the_view_of_a_waiting_message(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, messageDelayLevel=LEVELS) as h:
        assert h.broker is not None
        h.broker.tables.topics.update(_topic("D", 1))
        resp = await h.send("D", b"x", props={"DELAY": "5", "UNIQ_KEY": "V1"}, queue_id=0)
        offset_msg_id = resp.ext_fields["msgId"]
        await h.send("D", b"y", props={"DELAY": "1"}, queue_id=0)
        await trio.sleep(2)
        resp = await h.invoke(RemotingCommand(RequestCode.GET_ALL_DELAY_OFFSET))
        assert resp.code == ResponseCode.SUCCESS
        body = json.loads(resp.body)
        assert body["offsetTable"] == {"1": 1}
        assert set(body["dataVersion"]) == {"stateVersion", "timestamp", "counter"}
        # the waiting message by its offset id: stored in SCHEDULE_TOPIC_XXXX with REAL_TOPIC
        from rocketrio.protocol.message import parse_offset_msg_id

        _, _, phy = parse_offset_msg_id(offset_msg_id)
        view = await h.invoke(
            RemotingCommand(
                RequestCode.VIEW_MESSAGE_BY_ID, ext_fields=to_ext(ViewMessageRequestHeader(phy))
            )
        )
        assert view.code == ResponseCode.SUCCESS
        [m] = list(iter_stored(view.body))
        assert (m.topic, m.queue_id) == (SCHEDULE_TOPIC, 4)
        assert (m.properties["REAL_TOPIC"], m.properties["DELAY"]) == ("D", "5")
        # topicStatus (GET_TOPIC_STATS_INFO) on the wait topics: one queue per level / wheel slot
        for topic, queues in ((SCHEDULE_TOPIC, 5), (TIMER_TOPIC, 59)):
            header = GetTopicStatsInfoRequestHeader(topic=topic)
            resp = await h.invoke(
                RemotingCommand(RequestCode.GET_TOPIC_STATS_INFO, ext_fields=to_ext(header))
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            table = from_json(TopicStatsTable, resp.body).offsetTable
            assert len(table) == queues
            if topic == SCHEDULE_TOPIC:  # one message at level 1 (queue 0), one at 5 (queue 4)
                used = sorted(mq.queueId for mq, o in table.items() if o.maxOffset == 1)
                assert used == [0, 4]
        assert h.broker.store.view.get_max_offset(SCHEDULE_TOPIC, 4) == 1


async def test_a_classic_slave_never_reputs_due_messages(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, messageDelayLevel=LEVELS) as h:
        assert h.broker is not None
        h.broker.tables.topics.update(_topic("D", 1))
        resp = await h.send("D", b"x", props={"DELAY": "3", "UNIQ_KEY": "C1"}, queue_id=0)
        assert resp.code == ResponseCode.SUCCESS
        await h.stop_broker()  # before it is due (7 s)
        slave = await h.start_broker(
            messageDelayLevel=LEVELS, brokerRole=BrokerRole.SLAVE, brokerId=1
        )
        await trio.sleep(20)
        assert not slave.roles.serving_as_master()
        assert delivered(slave, "D", 1) == []
        assert slave.tables.delay_offsets.table.levels == {}
        assert slave.schedule.delivered == 0
        # it does not even try (the slave's store would refuse the re-put anyway)
        assert not slave.schedule.active
