"""Delay and timer decisions, pure: levels, send routing, due decisions, the timer wheel's
queues and rounding, delayOffset.json's format (against upstream's shape)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.schedule.policy import (
    Deliver,
    Rehop,
    TimerIllegal,
    due_prefix,
    parse_message_delay_level,
    real_target,
    schedule_queue,
    send_back_level,
    timer_deliver_ms,
    timer_step,
    wait_target,
)
from rocketrio.actors.broker.tables.delay_offset import (
    DelayOffsetSerializeWrapper,
    DelayOffsetTable,
)
from rocketrio.protocol.bodies import DataVersion
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import SendMessageRequestHeader
from rocketrio.protocol.message import decode_properties, encode_properties
from rocketrio.protocol.serde import from_json, to_json
from rocketrio.storage.timer_wheel import (
    DUE_NOW_QUEUE,
    TIMER_LEVELS,
    TIMER_RESOLUTION_MS,
    hop_due_ms,
    level_of,
    max_queue_id,
    queue_of,
    round_up_to_tick,
    timer_queue_id,
)
from tests.harness.processors import HOST, NOW_MS, Sender

DAY_MS = 86_400_000

# --------------------------------------------------------------------------- levels


def test_upstream_default_levels_parse_to_18_delays() -> None:
    delays = parse_message_delay_level(BrokerConfig().messageDelayLevel)
    assert len(delays) == 18
    assert delays[:4] == [1000, 5000, 10_000, 30_000]
    assert delays[-1] == 2 * 3600 * 1000


@pytest.mark.parametrize(
    ("text", "needle"),
    [("", "no level"), ("1s 5x", "bad level '5x'"), ("1s 0s", "> 0"), ("s", "bad level")],
)
def test_bad_levels_are_refused_naming_the_key(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match="messageDelayLevel") as e:
        BrokerConfig(messageDelayLevel=text)
    assert needle in str(e.value)


def test_schedule_queue_clamps_to_the_highest_level() -> None:
    assert schedule_queue(1, 18) == (1, 0)
    assert schedule_queue(18, 18) == (18, 17)
    assert schedule_queue(40, 18) == (18, 17)


def test_send_back_level_is_3_plus_reconsume_times_when_the_consumer_sent_0() -> None:
    assert [send_back_level(0, n) for n in range(4)] == [3, 4, 5, 6]
    assert send_back_level(7, 2) == 7


# --------------------------------------------------------------------------- due decisions


def test_due_prefix_stops_at_the_first_entry_not_due() -> None:
    assert due_prefix([], 10) == (0, None)
    assert due_prefix([5, 10, 11, 9], 10) == (2, 11)
    assert due_prefix([5, 10], 10) == (2, None)  # due at exactly its time, not a tick later
    assert due_prefix([11], 10) == (0, 11)


def test_real_target_restores_the_topic_and_drops_what_made_it_wait() -> None:
    props = {
        "REAL_TOPIC": "Orders",
        "REAL_QID": "3",
        "DELAY": "2",
        "UNIQ_KEY": "U1",
        "KEYS": "k",
        "TIMER_DELAY_SEC": "5",
    }
    assert real_target(props) == Deliver("Orders", 3, {"UNIQ_KEY": "U1", "KEYS": "k"})
    with pytest.raises(ValueError):
        real_target({"DELAY": "2"})


def test_timer_step_delivers_once_the_deliver_time_is_reached() -> None:
    props = {"REAL_TOPIC": "T", "REAL_QID": "0", "TIMER_OUT_MS": "5000"}
    assert timer_step(props, 5000, 4999) == Rehop(props)
    assert timer_step(props, 5000, 5000) == Deliver("T", 0, {"TIMER_OUT_MS": "5000"})


# --------------------------------------------------------------------------- timer sends


def test_timer_deliver_time_from_each_property_rounded_up_to_a_tick() -> None:
    max_ms = 3 * DAY_MS
    assert timer_deliver_ms({"TIMER_DELAY_SEC": "5"}, 1_000_050, max_ms) == 1_005_100
    assert timer_deliver_ms({"TIMER_DELAY_MS": "250"}, 1_000_000, max_ms) == 1_000_300
    assert timer_deliver_ms({"TIMER_DELIVER_MS": "1000400"}, 1_000_000, max_ms) == 1_000_400
    # SEC wins over MS, MS over DELIVER_MS (upstream's order)
    both = {"TIMER_DELAY_SEC": "1", "TIMER_DELAY_MS": "99999", "TIMER_DELIVER_MS": "1"}
    assert timer_deliver_ms(both, 0, max_ms) == 1000
    assert timer_deliver_ms({}, 0, max_ms) is None
    assert timer_deliver_ms({"TIMER_DELIVER_MS": "5"}, 10, max_ms) is None  # already due


def test_timer_beyond_max_delay_or_garbled_is_illegal() -> None:
    too_far = timer_deliver_ms({"TIMER_DELAY_SEC": str(3 * 86400 + 1)}, 0, 3 * DAY_MS)
    assert isinstance(too_far, TimerIllegal) and "max delay 259200000ms" in too_far.remark
    assert timer_deliver_ms({"TIMER_DELAY_SEC": str(3 * 86400)}, 0, 3 * DAY_MS) == 3 * DAY_MS
    assert isinstance(timer_deliver_ms({"TIMER_DELAY_MS": "soon"}, 0, DAY_MS), TimerIllegal)


@given(st.integers(min_value=0, max_value=10**13))
def test_rounding_never_moves_a_deliver_time_earlier_nor_by_a_tick(ms: int) -> None:
    r = round_up_to_tick(ms)
    assert r % TIMER_RESOLUTION_MS == 0 and ms <= r < ms + TIMER_RESOLUTION_MS


def test_queue_ids_round_trip_and_cover_three_days() -> None:
    for level in range(TIMER_LEVELS - 1):
        for d in range(1, 10):
            assert level_of(queue_of(level, d)) == (level, d)
    assert level_of(queue_of(TIMER_LEVELS - 1, 4)) == (TIMER_LEVELS - 1, 4)
    assert max_queue_id(3 * DAY_MS) == 58
    with pytest.raises(ValueError):
        queue_of(0, 10)


@given(
    now=st.integers(min_value=10**12, max_value=10**12 + 10**9),
    delay=st.integers(min_value=0, max_value=3 * DAY_MS),
)
def test_the_wheel_cascades_to_the_exact_deliver_time(now: int, delay: int) -> None:
    """Follow a message hop by hop as the service would (each hop stored at its due time):
    every hop is in the future when stored, goes down a level, and the last one is due exactly
    at the rounded deliver time; never more than TIMER_LEVELS hops."""
    out = round_up_to_tick(now + delay)
    t, hops, last_level = now, 0, TIMER_LEVELS
    while True:
        q = timer_queue_id(out, t)
        if q == DUE_NOW_QUEUE:
            assert out <= t
            break
        level, _ = level_of(q)
        assert level < last_level
        due = hop_due_ms(out, q)
        assert t < due <= out
        assert q <= max_queue_id(3 * DAY_MS)
        t, last_level, hops = due, level, hops + 1
    assert t == out or (hops == 0 and out <= now)
    assert hops <= TIMER_LEVELS


@given(
    a=st.integers(min_value=0, max_value=10**9),
    gap=st.integers(min_value=0, max_value=10**8),
    da=st.integers(min_value=1, max_value=3 * DAY_MS),
    db=st.integers(min_value=1, max_value=3 * DAY_MS),
)
def test_a_queue_is_due_in_store_order(a: int, gap: int, da: int, db: int) -> None:
    """Two messages in the same queue, stored in order: the later is never due earlier (the
    property that lets the service stop at the first entry not due)."""
    b = a + gap
    oa, ob = round_up_to_tick(a + da), round_up_to_tick(b + db)
    qa, qb = timer_queue_id(oa, a), timer_queue_id(ob, b)
    if qa == qb and qa != DUE_NOW_QUEUE:
        assert hop_due_ms(oa, qa) <= hop_due_ms(ob, qb)


# --------------------------------------------------------------------------- delayOffset.json

# upstream's ScheduleMessageService writes this (fastjson: integer keys without quotes)
UPSTREAM_DELAY_OFFSET = (
    b'{"dataVersion":{"counter":3,"stateVersion":0,"timestamp":1700000000000},'
    b'"offsetTable":{1:12,3:7,18:0}}'
)


def test_delay_offset_file_reads_upstream_and_writes_its_shape() -> None:
    w = from_json(DelayOffsetSerializeWrapper, UPSTREAM_DELAY_OFFSET)
    assert w.offsetTable == {1: 12, 3: 7, 18: 0}
    assert w.dataVersion == DataVersion(0, 1_700_000_000_000, 3)
    assert w.timerOffsetTable == {}
    written = json.loads(to_json(w))
    assert written == {
        "offsetTable": {"1": 12, "3": 7, "18": 0},
        "dataVersion": {"stateVersion": 0, "timestamp": 1_700_000_000_000, "counter": 3},
        "timerOffsetTable": {},
    }
    assert from_json(DelayOffsetSerializeWrapper, to_json(w)) == w


def test_data_version_moves_every_update_step() -> None:
    clock = [100]
    t = DelayOffsetTable(lambda: clock[0], version_step=3)
    t.update_level(1, 1)
    t.update_level(1, 2)
    assert t.data_version.counter == 0
    t.update_timer(5, 9)
    assert t.data_version == DataVersion(0, 100, 1)
    t.update_level(1, 2)  # no change: not counted
    assert t._changes == 3
    snap = t.snapshot_for_persist()
    assert snap is not None and snap.offsetTable == {1: 2} and snap.timerOffsetTable == {5: 9}
    assert t.snapshot_for_persist() is None  # nothing changed since


def test_adopt_takes_a_masters_table_once() -> None:
    t = DelayOffsetTable(lambda: 0)
    master = DelayOffsetSerializeWrapper({2: 40}, DataVersion(1, 5, 9), {7: 3})
    assert t.adopt(master) and (t.levels, t.timers) == ({2: 40}, {7: 3}) and t.dirty
    assert not t.adopt(master)


# --------------------------------------------------------------------------- the send path


def _props(**p: str) -> str:
    return encode_properties(p)


async def test_a_delay_send_is_stored_in_the_schedule_topic(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    assert await s.send("Orders", queue_id=1, properties=_props(DELAY="40", KEYS="k")) is None
    [([m], _)] = s.writer.puts
    assert (m.topic, m.queue_id) == ("SCHEDULE_TOPIC_XXXX", 17)  # clamped to level 18
    props = _decoded(m.properties)
    assert (props["REAL_TOPIC"], props["REAL_QID"], props["KEYS"]) == ("Orders", "1", "k")


async def test_a_timer_send_goes_to_the_wheel_and_beyond_max_is_refused(tmp_path: Path) -> None:
    s = Sender(tmp_path, timerMaxDelaySec=60)
    s.processor.now_ms = lambda: NOW_MS + 30
    assert await s.send("Orders", queue_id=2, properties=_props(TIMER_DELAY_SEC="10")) is None
    [([m], _)] = s.writer.puts
    props = _decoded(m.properties)
    assert m.topic == "rmq_sys_wheel_timer"
    assert (props["TIMER_OUT_MS"], props["REAL_TOPIC"], props["REAL_QID"]) == (
        str(NOW_MS + 10_100),
        "Orders",
        "2",
    )
    refusal = await s.send("Orders", properties=_props(TIMER_DELAY_SEC="61"))
    assert isinstance(refusal, Refusal) and refusal.code == RC.MESSAGE_ILLEGAL
    assert "timer message illegal" in refusal.remark
    # already due: a plain message
    assert await s.send("Orders", queue_id=0, properties=_props(TIMER_DELIVER_MS="1")) is None
    assert s.writer.puts[-1][0][0].topic == "Orders"
    # nobody sends to the wheel directly
    refusal = await s.send("rmq_sys_wheel_timer", queue_id=0)
    assert isinstance(refusal, Refusal) and refusal.code == RC.NO_PERMISSION


def _decoded(props: Any) -> dict[str, str]:
    return props if isinstance(props, dict) else decode_properties(props)


async def test_a_delayed_batch_is_illegal(tmp_path: Path) -> None:
    s = Sender(tmp_path)
    for props in (_props(DELAY="2"), _props(TIMER_DELAY_SEC="5")):
        header = SendMessageRequestHeader(
            "pg", "Orders", "TBW102", 4, 0, 0, 7, 0, properties=props, batch=True
        )
        refusal = await s.processor.send_batch(header, b"x", HOST, "p", s.outcomes.append)
        assert isinstance(refusal, Refusal) and refusal.code == RC.MESSAGE_ILLEGAL
        assert "batch cannot be a delay or timer message" in refusal.remark
    assert s.writer.batches == []


def test_wait_target_of_a_message_put_outside_the_send_path() -> None:
    """A committed transactional message waits like a send: a DELAY level in its level's queue
    (clamped), a timer in the wheel with its deliver time rounded up, otherwise no wait."""
    kw = {"max_level": 3, "now_ms": 1_000_000, "timer_max_delay_ms": 60_000}
    real = {"REAL_TOPIC": "T", "REAL_QID": "2"}
    assert wait_target({"DELAY": "2"}, "T", 2, **kw) == ("SCHEDULE_TOPIC_XXXX", 1, real)
    assert wait_target({"DELAY": "9"}, "T", 2, **kw) == ("SCHEDULE_TOPIC_XXXX", 2, real)
    timer = wait_target({"TIMER_DELAY_MS": "1234"}, "T", 2, **kw)
    assert timer == ("rmq_sys_wheel_timer", 0, {"TIMER_OUT_MS": "1001300", **real})
    assert wait_target({"TIMER_DELAY_SEC": "3600"}, "T", 2, **kw) is None  # beyond the max
    assert wait_target({"DELAY": "0", "KEYS": "k"}, "T", 2, **kw) is None
    assert wait_target({}, "T", 2, **kw) is None
