"""Client message ids, wire properties, queue selection, subscriptions, pull/send parsing."""

from __future__ import annotations

from datetime import datetime

import pytest

from rocketrio.actors.client.api import PullStatus, parse_pull_response
from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.client.message import (
    Message,
    UniqIdGenerator,
    month_bounds,
    nearly_time_from_id,
    parse_uniq_id,
)
from rocketrio.actors.client.producer import batch_chunks, check_message
from rocketrio.actors.client.queue_select import (
    FaultTracker,
    TopicPublishInfo,
    java_hash_code,
    select_by_hash,
    subscribe_queues,
)
from rocketrio.actors.client.subscription import build_subscription, filter_by_tags, parse_tags
from rocketrio.protocol.bodies import BrokerData, MessageQueue, QueueData, TopicRouteData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message import MessageExt, tags_hash_code
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError


def ms(*args: int) -> int:
    return int(datetime(*args).timestamp() * 1000)  # type: ignore[arg-type]


# --- message ids ---------------------------------------------------------------------------


def test_uniq_id_layout_matches_upstream() -> None:
    now = ms(2025, 3, 10, 12, 0, 0)
    clock = iter([now, now, now + 5])  # construction reads the clock once
    gen = UniqIdGenerator(
        "10.1.2.3", pid=0x12345, client_hash=0xCAFEBABE, clock_ms=lambda: next(clock)
    )
    a, b = gen.next_id(), gen.next_id()
    assert len(a) == 32 and a == a.upper()
    assert a[:20] == "0A010203" + "2345" + "CAFEBABE"  # ip, low 16 bits of pid, hash
    pa, pb = parse_uniq_id(a), parse_uniq_id(b)
    assert (pa.ip, pa.pid, pa.client_hash) == ("10.1.2.3", 0x2345, 0xCAFEBABE)
    start, _ = month_bounds(now)
    assert pa.ms_since_month_start == now - start
    assert pb.ms_since_month_start == now + 5 - start
    assert (pa.counter, pb.counter) == (0, 1)
    assert nearly_time_from_id(a, now + 1000) == now


def test_uniq_id_counter_wraps_and_month_rolls_over() -> None:
    t = [ms(2025, 1, 31, 23, 59, 59)]
    gen = UniqIdGenerator("127.0.0.1", pid=1, client_hash=2, clock_ms=lambda: t[0])
    gen._counter = 0xFFFF
    last = parse_uniq_id(gen.next_id())
    assert last.counter == 0xFFFF
    t[0] = ms(2025, 2, 1, 0, 0, 1)
    first = parse_uniq_id(gen.next_id())
    assert first.counter == 0
    assert first.ms_since_month_start == 1000


def test_non_ipv4_client_gets_a_fake_ip_like_upstream() -> None:
    gen = UniqIdGenerator("::1", pid=1, client_hash=1, clock_ms=lambda: 0x0102030405)
    assert gen.prefix.startswith("02030405")


def test_distinct_ids() -> None:
    gen = UniqIdGenerator("127.0.0.1")
    ids = {gen.next_id() for _ in range(5000)}
    assert len(ids) == 5000


# --- messages ------------------------------------------------------------------------------


def test_wire_properties() -> None:
    m = Message("T", b"x", tags="A", keys=["k1", "k2"], properties={"color": "red"})
    assert m.wire_properties("ID") == {
        "TAGS": "A",
        "KEYS": "k1 k2",
        "WAIT": "true",
        "UNIQ_KEY": "ID",
        "color": "red",
    }
    assert Message("T", b"x", keys="a b").wire_properties(None) == {"KEYS": "a b", "WAIT": "true"}
    with pytest.raises(ValueError, match="UNIQ_KEY"):
        Message("T", b"x", properties={"UNIQ_KEY": "mine"}).wire_properties("ID")


@pytest.mark.parametrize(
    ("msg", "error"),
    [
        (Message("", b"x"), "empty"),
        (Message("a b", b"x"), "characters"),
        (Message("T" * 128, b"x"), "longer"),
        (Message("T", b""), "body is empty"),
        (Message("T", b"x" * 11), "above 10"),
    ],
)
def test_check_message(msg: Message, error: str) -> None:
    with pytest.raises(Exception, match=error):
        check_message(msg, 10)


def test_batch_chunks() -> None:
    assert batch_chunks([4, 4, 4], 8) == [(0, 2), (2, 3)]
    assert batch_chunks([10, 1, 1], 8) == [(0, 1), (1, 3)]
    assert batch_chunks([1] * 5, 100) == [(0, 5)]
    assert batch_chunks([], 8) == []


# --- routes and queue selection ------------------------------------------------------------


def route() -> TopicRouteData:
    return TopicRouteData(
        queueDatas=[
            QueueData("broker-b", 2, 2, 6),
            QueueData("broker-a", 3, 2, 6),
            QueueData("broker-c", 2, 2, 4),  # read-only
            QueueData("broker-d", 2, 2, 6),  # no master
        ],
        brokerDatas=[
            BrokerData("C", "broker-a", {0: "a:1"}),
            BrokerData("C", "broker-b", {0: "b:1", 1: "b:2"}),
            BrokerData("C", "broker-c", {0: "c:1"}),
            BrokerData("C", "broker-d", {1: "d:2"}),
        ],
    )


def test_publish_info_keeps_writable_master_queues_in_broker_order() -> None:
    info = TopicPublishInfo.from_route("T", route())
    assert [(q.brokerName, q.queueId) for q in info.queues] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-b", 0),
        ("broker-b", 1),
    ]
    subs = subscribe_queues("T", route())
    assert len(subs) == 3 + 2 + 2 + 2  # readable queues, master or not


def test_default_route_limits_queue_count() -> None:
    info = TopicPublishInfo.from_default_route("New", route(), 1)
    assert [(q.topic, q.brokerName, q.queueId) for q in info.queues] == [
        ("New", "broker-a", 0),
        ("New", "broker-b", 0),
    ]
    assert not info.have_route


def test_order_topic_conf() -> None:
    r = TopicRouteData(orderTopicConf="broker-a:2;broker-b:1")
    info = TopicPublishInfo.from_route("T", r)
    assert [(q.brokerName, q.queueId) for q in info.queues] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-b", 0),
    ]


def test_select_round_robin_avoids_failed_and_isolated_brokers() -> None:
    info = TopicPublishInfo.from_route("T", route())
    picks = [info.select() for _ in range(4)]
    assert len(set(picks)) == 4
    for _ in range(10):
        assert info.select(last_failed_broker="broker-a").brokerName == "broker-b"
    faults = FaultTracker()
    faults.mark_unavailable("broker-b", now=100.0, duration_s=30)
    for _ in range(10):
        assert info.select(None, lambda b: faults.is_available(b, 110.0)).brokerName == "broker-a"
    # all brokers isolated: still send somewhere, but not where the last attempt failed
    faults.mark_unavailable("broker-a", now=100.0, duration_s=30)
    ok = lambda b: faults.is_available(b, 110.0)  # noqa: E731
    assert info.select("broker-a", ok).brokerName == "broker-b"
    assert faults.is_available("broker-a", 130.0)


@pytest.mark.parametrize(
    ("arg", "java"),
    [
        ("hello", 99162322),
        ("abc", 96354),
        ("", 0),
        ("order-10086", tags_hash_code("order-10086")),
        (42, 42),
        (-7, -7),
        (1 << 32, 1),  # Long.hashCode
        (-1 << 40, -256),  # (int)(v ^ (v >>> 32)) with v = 0xFFFFFF0000000000
        (True, 1231),
    ],
)
def test_java_hash_code(arg: object, java: int) -> None:
    assert java_hash_code(arg) == java


def test_select_by_hash_is_stable_and_uses_abs_of_java_remainder() -> None:
    mqs = [MessageQueue("T", "b", i) for i in range(3)]
    assert select_by_hash(mqs, None, -7).queueId == 1  # Java: abs(-7 % 3) = 1
    assert select_by_hash(mqs, None, "hello").queueId == 99162322 % 3
    assert {select_by_hash(mqs, None, "k").queueId for _ in range(10)} == {
        select_by_hash(mqs, None, "k").queueId
    }


# --- subscriptions -------------------------------------------------------------------------


def test_parse_tags_and_subscription() -> None:
    assert parse_tags("*") == [] and parse_tags("") == [] and parse_tags(None) == []
    assert parse_tags(" a || b||a || ") == ["a", "b"]
    sub = build_subscription("T", "a || b", 7)
    assert sub.subString == "a || b"
    assert sub.codeSet == [tags_hash_code("a"), tags_hash_code("b")]
    assert sub.subVersion == 7
    assert build_subscription("T", "*", 7).tagsSet == []
    m = [MessageExt("T", b"", properties={"TAGS": t}) for t in ("a", "c", "b")]
    m.append(MessageExt("T", b""))
    assert [x.tags for x in filter_by_tags(m, sub)] == ["a", "b"]
    assert len(filter_by_tags(m, build_subscription("T", "*", 0))) == 4


# --- pull responses ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.SUCCESS, PullStatus.FOUND),
        (ResponseCode.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
        (ResponseCode.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_pull_status_mapping(code: int, status: PullStatus) -> None:
    ext = {"suggestWhichBrokerId": "1", "nextBeginOffset": "9", "minOffset": "0", "maxOffset": "9"}
    r = parse_pull_response(RemotingCommand(code=code, ext_fields=ext), "b:1")
    assert r.status is status
    assert (r.next_begin_offset, r.suggest_which_broker_id) == (9, 1)
    assert r.messages() == []


def test_pull_error_codes_raise() -> None:
    resp = RemotingCommand(code=ResponseCode.SUBSCRIPTION_NOT_EXIST, remark="no sub")
    with pytest.raises(MQBrokerError, match="SUBSCRIPTION_NOT_EXIST") as e:
        parse_pull_response(resp, "b:1")
    assert e.value.code == ResponseCode.SUBSCRIPTION_NOT_EXIST


def test_pull_response_header_errors_name_the_field() -> None:
    ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": "x", "minOffset": "0", "maxOffset": "9"}
    with pytest.raises(HeaderError, match="nextBeginOffset"):
        parse_pull_response(RemotingCommand(code=ResponseCode.SUCCESS, ext_fields=ext), "b:1")
    del ext["nextBeginOffset"]
    with pytest.raises(HeaderError, match="nextBeginOffset"):
        parse_pull_response(RemotingCommand(code=ResponseCode.SUCCESS, ext_fields=ext), "b:1")
    ext.update(nextBeginOffset=" 12 ", maxOffset="40")
    r = parse_pull_response(RemotingCommand(code=ResponseCode.SUCCESS, ext_fields=ext), "b:1")
    assert (r.next_begin_offset, r.min_offset, r.max_offset) == (12, 0, 40)
