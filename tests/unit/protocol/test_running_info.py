"""ConsumerRunningInfo (307) and QueryConsumeTimeSpanBody (303) as upstream 5.2.0 writes them,
and the consumer's pull / consume figures (ConsumerStatsManager).

ConsumerRunningInfo has no golden file: the expected text below is built from upstream's class
definitions and fastjson's rules (admin-bodies README §1): getters in alphabetical order, null
``jstack`` omitted, TreeMap / TreeSet in their sort order (MessageQueue.compareTo: topic,
brokerName, queueId; SubscriptionData.compareTo: ``topic@subString``), MessageQueue keys bare.
Sources: remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/
ConsumerRunningInfo.java, ProcessQueueInfo.java, ConsumeStatus.java; remoting/.../heartbeat/
SubscriptionData.java. ``properties`` (a java.util.Properties) holds one key here: with more,
Java writes them in its hash-table order, which rocketrio does not copy (readers look keys up).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from rocketrio.actors.client.consumer_stats import ConsumerStatsManager
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import MessageQueue, SubscriptionData
from rocketrio.protocol.running_info import (
    ConsumerRunningInfo,
    ConsumeStatus,
    ProcessQueueInfo,
    QueryConsumeTimeSpanBody,
    QueueTimeSpan,
    sorted_mq_table,
    sorted_subscriptions,
)
from rocketrio.protocol.serde import from_json
from tests.harness.paths import GOLDEN_ADMIN_BODIES

GOLDEN = GOLDEN_ADMIN_BODIES
TS = 1795440000000


def _sample() -> ConsumerRunningInfo:
    subs = [
        SubscriptionData("TopicTest", "TagA", tagsSet=["TagA"], codeSet=[2598919], subVersion=TS),
        SubscriptionData("%RETRY%group_a", "*", subVersion=TS),
    ]
    # built out of order: the TreeMap / TreeSet order is the writer's to make
    queues = [
        (MessageQueue("TopicTest", "broker-b", 0), ProcessQueueInfo(commitOffset=7)),
        (MessageQueue("TopicTest", "broker-a", 1), ProcessQueueInfo(
            commitOffset=241, cachedMsgMinOffset=241, cachedMsgMaxOffset=245, cachedMsgCount=5,
            lastPullTimestamp=TS - 10, lastConsumeTimestamp=TS - 20)),
        (MessageQueue("TopicTest", "broker-a", 0), ProcessQueueInfo(commitOffset=240)),
        (MessageQueue("%RETRY%group_a", "broker-a", 0), ProcessQueueInfo(droped=True)),
    ]  # fmt: skip
    return ConsumerRunningInfo(
        properties={"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY"},
        subscriptionSet=sorted_subscriptions(subs),
        mqTable=sorted_mq_table(queues),
        statusTable={
            "%RETRY%group_a": ConsumeStatus(),
            "TopicTest": ConsumeStatus(1.5, 4.166666666666667, 0.25, 4.0, 0.0, 3),
        },
    )


def _pq(commit: int, *, cmin: int = 0, cmax: int = 0, count: int = 0, droped: bool = False,
        pull: int = 0, consume: int = 0) -> str:  # fmt: skip
    return (
        f'{{"cachedMsgCount":{count},"cachedMsgMaxOffset":{cmax},"cachedMsgMinOffset":{cmin},'
        f'"cachedMsgSizeInMiB":0,"commitOffset":{commit},"droped":{str(droped).lower()},'
        f'"lastConsumeTimestamp":{consume},"lastLockTimestamp":0,"lastPullTimestamp":{pull},'
        '"locked":false,"transactionMsgCount":0,"transactionMsgMaxOffset":0,'
        '"transactionMsgMinOffset":0,"tryUnlockTimes":0}'
    )


def _mq(topic: str, broker: str, qid: int) -> str:
    return f'{{"brokerName":"{broker}","queueId":{qid},"topic":"{topic}"}}'


EXPECTED = (
    '{"mqPopTable":{},"mqTable":{'
    + f"{_mq('%RETRY%group_a', 'broker-a', 0)}:{_pq(0, droped=True)},"
    + f"{_mq('TopicTest', 'broker-a', 0)}:{_pq(240)},"
    + f"{_mq('TopicTest', 'broker-a', 1)}:"
    + f"{_pq(241, cmin=241, cmax=245, count=5, pull=TS - 10, consume=TS - 20)},"
    + f"{_mq('TopicTest', 'broker-b', 0)}:{_pq(7)}"
    + '},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"},"statusTable":{'
    '"%RETRY%group_a":{"consumeFailedMsgs":0,"consumeFailedTPS":0.0,"consumeOKTPS":0.0,'
    '"consumeRT":0.0,"pullRT":0.0,"pullTPS":0.0},'
    '"TopicTest":{"consumeFailedMsgs":3,"consumeFailedTPS":0.0,"consumeOKTPS":4.0,'
    '"consumeRT":0.25,"pullRT":1.5,"pullTPS":4.166666666666667}},"subscriptionSet":['
    '{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
    f'"subVersion":{TS},"tagsSet":[],"topic":"%RETRY%group_a"}},'
    '{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA",'
    f'"subVersion":{TS},"tagsSet":["TagA"],"topic":"TopicTest"}}'
    '],"userConsumerInfo":{}}'
)


def test_consumer_running_info_as_upstream_writes_it() -> None:
    assert fastjson.encode(_sample()).decode() == EXPECTED


def test_consumer_running_info_reads_back() -> None:
    info = from_json(ConsumerRunningInfo, EXPECTED.encode())
    assert info == _sample()
    with_jstack = EXPECTED[:-1] + ',"jstack":"main  TID: 1"}'
    assert from_json(ConsumerRunningInfo, with_jstack.encode()).jstack == "main  TID: 1"


def test_jstack_is_written_only_when_present() -> None:
    info = _sample()
    info.jstack = "stacks"
    assert fastjson.encode(info).decode().startswith('{"jstack":"stacks","mqPopTable":{}')


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_query_consume_time_span_body_is_upstreams(utc: None) -> None:
    """remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/
    QueryConsumeTimeSpanBody.java and QueueTimeSpan.java (getter-only *TimeStampStr)."""
    body = QueryConsumeTimeSpanBody(
        [
            QueueTimeSpan(MessageQueue("TopicTest", "broker-a", i), TS - 3_600_000,
                          TS - 1000 + i, TS - 5000 + i, 4000)
            for i in range(4)
        ]
    )  # fmt: skip
    golden = (GOLDEN / "query_consume_time_span_body.json").read_bytes()
    assert fastjson.encode(body) == golden
    assert from_json(QueryConsumeTimeSpanBody, golden) == body
    live = from_json(
        QueryConsumeTimeSpanBody, (GOLDEN / "live_query_consume_time_span_body.json").read_bytes()
    )
    assert live.consumeTimeSpanSet and live.consumeTimeSpanSet[0].messageQueue is not None


# ---------------------------------------------------------------------------- stats


def test_minute_figures_are_per_second_and_per_call() -> None:
    s = ConsumerStatsManager()
    s.tick(0)
    for _ in range(6):  # 60 messages pulled in 6 pulls, 120 consumed, 6 failed in 30 calls
        s.on_pull("T", 10, 30)
        s.on_consumed("T", 20, 0, 8, 4)
        s.on_consumed("T", 0, 1, 4, 1)
    s.tick(10_000)
    st = s.consume_status("T")
    # "T" was first counted after the tick at 0: its first sample (10 s) is preceded by a
    # zero snapshot one period earlier, so the window spans 10 s
    assert st.pullTPS == pytest.approx(60 * 1000 / 10_000)
    assert st.pullRT == pytest.approx(30.0)
    assert st.consumeOKTPS == pytest.approx(120 * 1000 / 10_000)
    assert st.consumeFailedTPS == pytest.approx(6 * 1000 / 10_000)
    assert st.consumeRT == pytest.approx((6 * 12) / 30)
    assert st.consumeFailedMsgs == 0  # the hour list samples every 10 min
    s.tick(600_000)
    assert s.consume_status("T").consumeFailedMsgs == 6
    assert s.consume_status("unknown") == ConsumeStatus()


def test_the_minute_window_forgets_older_periods_and_the_hour_keeps_failures() -> None:
    s = ConsumerStatsManager()
    s.tick(0)
    s.on_consumed("T", 100, 5, 0, 1)
    for t in range(10_000, 600_001, 10_000):  # 10 min of nothing after the burst
        s.tick(t)
    st = s.consume_status("T")
    assert st.consumeOKTPS == 0.0 and st.consumeFailedTPS == 0.0
    assert st.consumeFailedMsgs == 5  # the hour list still has it
    for t in range(1_200_000, 4_800_001, 600_000):
        s.tick(t)
    assert s.consume_status("T").consumeFailedMsgs == 0
