"""The broker's statistics cores, without a broker: upstream StatsItem windows
(common/src/main/java/org/apache/rocketmq/common/stats/StatsItem.java), StoreStatsService
figures (store/src/main/java/org/apache/rocketmq/store/StoreStatsService.java) and the day
counters (store/src/main/java/org/apache/rocketmq/store/stats/BrokerStats.java), which here
survive restarts."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.stats.day_counters import DayCounters, DayCountersFile
from rocketrio.actors.broker.stats.items import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    SNDBCK_PUT_NUMS,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    BrokerStatsManager,
    StatsSnapshot,
)
from rocketrio.actors.broker.stats.runtime_info import DiskSpace, human_bytes, used_ratio
from rocketrio.actors.broker.store.figures import (
    StoreStatsService,
    java_fixed,
    percentile,
    runtime_text,
)

S = 1000  # ms


def manager() -> BrokerStatsManager:
    return BrokerStatsManager("DefaultCluster", lambda t: t.startswith("rmq_sys_"))


# ------------------------------------------------------------------ StatsItem windows


def test_first_sample_covers_what_was_counted_before_it() -> None:
    m = manager()
    m.tick(0)  # the schedules start; no item exists yet
    for _ in range(5):
        m.on_topic_put("T", 10, 1000)  # 5 requests of 10 messages, 1000 bytes each
    view = m.stats_item(TOPIC_PUT_NUMS, "T")
    assert view is not None and view.minute == StatsSnapshot()  # not sampled yet: zeros
    m.tick(10 * S)
    nums, size = m.stats_item(TOPIC_PUT_NUMS, "T"), m.stats_item(TOPIC_PUT_SIZE, "T")
    assert nums is not None and size is not None
    # upstream: a zero snapshot one period back, then the counter: all 50 in the first 10 s
    assert nums.minute == StatsSnapshot(50, 5.0, 10.0, 5)
    assert size.minute == StatsSnapshot(5000, 500.0, 1000.0, 5)
    assert nums.hour == StatsSnapshot() and nums.day == StatsSnapshot()  # not due yet


def test_minute_window_keeps_seven_snapshots_so_it_spans_one_minute() -> None:
    m = manager()
    m.tick(0)
    for i in range(1, 13):  # 12 periods of 10 s, 30 messages each (3 requests of 10)
        for _ in range(3):
            m.on_topic_put("T", 10, 100)
        m.tick(i * 10 * S)
    view = m.stats_item(TOPIC_PUT_NUMS, "T")
    assert view is not None
    assert view.minute.sum == 6 * 30  # the last 60 s only
    assert view.minute.tps == pytest.approx(3.0) and view.minute.avgpt == 10.0
    assert view.hour.sum == 0  # the hour list samples at 10 min


def test_hour_and_day_windows_and_their_schedules() -> None:
    m = manager()
    m.tick(0)
    minute = 60 * S
    for i in range(1, 121):  # two hours, one minute at a time, 6 messages a minute
        m.on_topic_put("T", 6, 60)
        m.tick(i * minute)
    view = m.stats_item(TOPIC_PUT_NUMS, "T")
    assert view is not None
    assert view.hour.sum == 360 and view.hour.tps == pytest.approx(0.1)  # last 60 minutes
    assert view.day.sum == 720  # every hour sample so far (zero snapshot + 2 hours)
    assert view.day.tps == pytest.approx(720 / 7200)


def test_group_send_back_and_broker_items_use_upstream_keys() -> None:
    m = manager()
    m.tick(0)
    m.on_group_get("T", "G", 8, 800)
    m.on_group_get("T", "G", 2, 200)
    m.on_send_back("T", "G")
    m.on_topic_put("T", 10, 1000)
    m.tick(10 * S)
    get = m.stats_item(GROUP_GET_NUMS, "T@G")
    assert get is not None and get.minute == StatsSnapshot(10, 1.0, 5.0, 2)
    size = m.stats_item(GROUP_GET_SIZE, "T@G")
    assert size is not None and size.minute.sum == 1000
    back = m.stats_item(SNDBCK_PUT_NUMS, "T@G")
    assert back is not None and back.minute == StatsSnapshot(1, 0.1, 1.0, 1)
    # BROKER_* are keyed by the cluster name and add no "time": avgpt stays 0 (upstream)
    put = m.stats_item(BROKER_PUT_NUMS, "DefaultCluster")
    assert put is not None and put.minute == StatsSnapshot(10, 1.0, 0.0, 0)
    got = m.stats_item(BROKER_GET_NUMS, "DefaultCluster")
    assert got is not None and got.minute.sum == 10
    for name, key in (
        (TOPIC_PUT_NUMS, "Nope"),
        (GROUP_GET_NUMS, "T@Other"),
        (GROUP_GET_NUMS, "T"),  # not topic@group
        (BROKER_PUT_NUMS, "OtherCluster"),
        ("NO_SUCH_STATS", "T"),
    ):
        assert m.stats_item(name, key) is None, (name, key)


def test_deleting_a_topic_forgets_its_items_but_not_the_broker_totals() -> None:
    m = manager()
    m.on_topic_put("T", 3, 30)
    m.on_topic_put("rmq_sys_X", 2, 20)
    m.on_group_get("T", "G", 3, 30)
    m.on_topic_deleted("T")
    m.on_group_deleted("G")
    assert m.stats_item(TOPIC_PUT_NUMS, "T") is None and m.stats_item(GROUP_GET_NUMS, "T@G") is None
    assert (m.put_total(), m.put_total(without_system_topics=True)) == (5, 3)
    assert (m.get_total(), m.get_total(without_system_topics=True)) == (3, 3)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(1, 50), max_size=5), min_size=1, max_size=20))
def test_minute_sum_is_what_the_last_six_periods_counted(periods: list[list[int]]) -> None:
    """Invariant: the minute window's sum is the messages counted in the last min(n, 6)
    sampling periods (plus those before the first sample when n <= 6)."""
    m = manager()
    m.tick(0)
    m.on_topic_put("T", 1, 1)  # the item exists from the start
    counted = [1]
    for i, sends in enumerate(periods, start=1):
        for n in sends:
            m.on_topic_put("T", n, n)
        counted.append(sum(sends))
        m.tick(i * 10 * S)
    view = m.stats_item(TOPIC_PUT_NUMS, "T")
    assert view is not None
    n = len(periods)
    expected = sum(counted) if n <= 6 else sum(counted[-6:])
    assert view.minute.sum == expected


# ------------------------------------------------------------------ StoreStatsService


def store_stats() -> tuple[StoreStatsService, list[int]]:
    total = [0]
    return StoreStatsService(0, lambda: total[0], lambda: total[0] * 100), total


def test_tps_triples_have_an_empty_window_until_enough_samples() -> None:
    s, total = store_stats()
    for sec in range(11):  # 11 samples = 10 s of history
        total[0] = sec * 7
        s.sample(sec * S)
    info = s.runtime_info(11 * S)
    assert info["putTps"] == "7.0  "  # upstream: "" for the 60 s and 600 s windows
    assert info["getFoundTps"] == "0.0  " and info["getTransferredTps"] == "0.0  "
    assert info["getTotalTps"] == "0.0 0.0 0.0"  # upstream prints 0.0 for missing windows
    for sec in range(11, 62):
        total[0] = sec * 7
        s.on_get(True, 4, 1)
        s.sample(sec * S)
    info = s.runtime_info(62 * S)
    assert info["putTps"] == "7.0 7.0 "
    assert info["getTransferredTps"] == "4.0 3.4 "  # 204 messages over the last 60 s
    assert info["getTotalTps"].split(" ")[0] == "1.0"
    assert info["putMessageTimesTotal"] == str(61 * 7)
    assert info["putMessageAverageSize"] == "100.0"


def test_put_distribution_is_null_in_the_first_minute_then_last_minutes_buckets() -> None:
    s, _ = store_stats()
    s.sample(0)
    s.on_put_turn(0, 3)  # 3 messages answered in 0 ms
    s.on_put_turn(12, 2)
    s.on_put_turn(10_000, 1)
    assert s.runtime_info(S)["putMessageDistributeTime"] == "null"
    assert s.runtime_info(S)["putMessageEntireTimeMax"] == "10000"
    s.sample(61 * S)  # a minute passed: the buckets turn into "last minute"
    text = s.runtime_info(61 * S)["putMessageDistributeTime"]
    assert text == (
        "[<=0ms]:3 [0~10ms]:0 [10~50ms]:2 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 "
        "[500ms~1s]:0 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:1 "
    )


def test_put_latency_percentiles_interpolate_in_upstream_buckets() -> None:
    counts = [0] * 75
    counts[0] = 100  # all in (0, 1] ms
    assert percentile(counts, 0.99) == pytest.approx(0.99)
    counts = [0] * 75
    counts[4], counts[24] = 90, 10  # 90 at <= 5 ms, 10 in (28, 30] ms
    assert percentile(counts, 0.99) == pytest.approx(29.8)
    s, _ = store_stats()
    s.sample(0)
    for _ in range(90):
        s.on_put_turn(5, 1)
    s.on_put_turn(30, 10)
    assert s.runtime_info(S)["putLatency99"] == "0.00"  # no minute completed yet
    s.sample(61 * S)
    info = s.runtime_info(61 * S)
    # int(100 * 0.999) = 99: the same index as p99
    assert (info["putLatency99"], info["putLatency999"]) == ("29.80", "29.80")


def test_upstream_text_formats() -> None:
    assert runtime_text(((1 * 24 + 2) * 3600 + 3 * 60 + 4) * 1000 + 999) == (
        "[ 1 days, 2 hours, 3 minutes, 4 seconds ]"
    )
    assert runtime_text(1234 * 86_400_000) == "[ 1,234 days, 0 hours, 0 minutes, 0 seconds ]"
    assert java_fixed(2.25, 1) == "2.3" and java_fixed(0.125, 2) == "0.13"  # HALF_UP
    assert [human_bytes(n) for n in (0, 1023, 2048, 50 * 1024**3, 1536 * 1024)] == [
        "0 B",
        "1023 B",
        "2.0 KiB",
        "50.0 GiB",
        "1.5 MiB",
    ]
    # used / (used + usable), rounded up to a whole percent; -1 when unknown
    assert used_ratio(DiskSpace(100, 77, 70)) == 0.25
    assert used_ratio(DiskSpace(100, 77, 77)) == 0.23
    assert used_ratio(None) == -1.0


# ------------------------------------------------------------------ day counters

DAY0 = dt.date(2026, 11, 23)
DAY_MS = 86_400_000


def utc_day(ms: int) -> dt.date:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).date()


MIDNIGHT0 = int(dt.datetime(2026, 11, 23, tzinfo=dt.UTC).timestamp() * 1000)


def test_mornings_roll_at_local_midnight_and_survive_a_restart_on_a_later_day() -> None:
    live = [0, 0]
    days = DayCounters(lambda: live[0], lambda: live[1], utc_day)
    days.restore(None, MIDNIGHT0 + 3_600_000)
    live[:] = [10, 4]  # 10 put, 4 got on day 0
    assert days.roll(MIDNIGHT0 + DAY_MS - 1) is False
    live[:] = [15, 6]
    assert days.roll(MIDNIGHT0 + DAY_MS) is True  # day 1 begins
    live[:] = [18, 6]
    f = days.figures(MIDNIGHT0 + DAY_MS + 5)
    assert (f.msgPutTotalYesterdayMorning, f.msgPutTotalTodayMorning, f.msgPutTotalTodayNow) == (
        0,
        15,
        18,
    )
    saved = days.snapshot()
    assert saved is not None and days.snapshot() is None  # unchanged: nothing to write
    assert saved == DayCountersFile("2026-11-24", 18, 6, 15, 0, 6, 0)
    # restart on day 2: the missed midnight shifts the mornings; this run counts from 0
    live2 = [0, 0]
    again = DayCounters(lambda: live2[0], lambda: live2[1], utc_day)
    again.restore(saved, MIDNIGHT0 + 2 * DAY_MS + 60_000)
    live2[:] = [2, 1]
    f = again.figures(MIDNIGHT0 + 2 * DAY_MS + 61_000)
    assert f.msgPutTotalTodayMorning - f.msgPutTotalYesterdayMorning == 3  # day 1: 18 - 15
    assert f.msgPutTotalTodayNow - f.msgPutTotalTodayMorning == 2
    assert f.msgGetTotalTodayMorning - f.msgGetTotalYesterdayMorning == 0
    # restart three days later: yesterday saw nothing
    third = DayCounters(lambda: 0, lambda: 0, utc_day)
    third.restore(saved, MIDNIGHT0 + 5 * DAY_MS)
    f = third.figures(MIDNIGHT0 + 5 * DAY_MS)
    assert f.msgPutTotalTodayMorning == f.msgPutTotalYesterdayMorning == f.msgPutTotalTodayNow


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("put"), st.integers(1, 9)),
            st.tuples(st.just("get"), st.integers(1, 9)),
            st.tuples(st.just("midnight"), st.integers(1, 3)),
            st.tuples(st.just("restart"), st.just(0)),
        ),
        max_size=40,
    )
)
def test_yesterday_and_today_are_what_was_counted_across_restarts(
    steps: list[tuple[str, int]],
) -> None:
    """Invariant (clean restarts, the file written at shutdown): clusterList -m's
    yesterday = the puts / gets of the previous local day, today = those of this day."""
    now = MIDNIGHT0 + 1000
    live = [0, 0]
    days = DayCounters(lambda: live[0], lambda: live[1], utc_day)
    days.restore(None, now)
    disk: DayCountersFile | None = None  # brokerStats.json
    per_day: dict[dt.date, list[int]] = {}
    for op, n in steps:
        if op in ("put", "get"):
            live[op == "get"] += n
            per_day.setdefault(utc_day(now), [0, 0])[op == "get"] += n
        elif op == "midnight":
            now += n * DAY_MS
            days.roll(now)
        else:
            disk = days.snapshot() or disk  # the clean shutdown writes if changed
            live = [0, 0]
            lv = live
            days = DayCounters(lambda lv=lv: lv[0], lambda lv=lv: lv[1], utc_day)
            days.restore(disk, now)
        f = days.figures(now)
        today, yesterday = utc_day(now), utc_day(now) - dt.timedelta(days=1)
        put_t, get_t = per_day.get(today, [0, 0])
        put_y, get_y = per_day.get(yesterday, [0, 0])
        assert f.msgPutTotalTodayNow - f.msgPutTotalTodayMorning == put_t
        assert f.msgGetTotalTodayNow - f.msgGetTotalTodayMorning == get_t
        assert f.msgPutTotalTodayMorning - f.msgPutTotalYesterdayMorning == put_y
        assert f.msgGetTotalTodayMorning - f.msgGetTotalYesterdayMorning == get_y


def test_the_facade_counts_pulls_and_send_backs_once() -> None:
    s = BrokerStats("C", lambda t: False)
    s.on_pull("T", "G", 0, 0, 3)  # a miss
    s.on_pull("T", "G", 5, 500, 7)
    s.on_send_back("T", "G", to_dlq=True)
    assert (s.store.get_found, s.store.get_miss, s.store.get_transferred) == (1, 1, 5)
    assert s.store.get_time_max_ms == 7 and s.items.get_total() == 5
    assert (s.send_back_total, s.dlq_total) == (1, 1)


def test_a_fresh_store_reports_upstream_idle_values() -> None:
    s, _ = store_stats()
    info = s.runtime_info(0)
    assert info["putMessageTimesTotal"] == "1"  # upstream never reports fewer than 1
    assert info["putMessageAverageSize"] == "0.0" and info["putMessageDistributeTime"] == "null"
    assert (info["putTps"], info["getTotalTps"]) == ("  ", "0.0 0.0 0.0")
    assert (info["putLatency99"], info["putLatency999"]) == ("0.00", "0.00")
