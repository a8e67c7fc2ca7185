"""The bodies of the read-only admin queries as upstream's fastjson writes them (alphabetical,
compact, nulls left out, the correction map's integer keys unquoted), the topic sets in
HashSet order, the SQL92 filter data text, and `queryCq`'s lines (mqadmin's)."""

from __future__ import annotations

from rocketrio.actors.broker.dispatch.filter_data import build_filter_data
from rocketrio.actors.broker.query.feature import filter_json, hash_set_order
from rocketrio.cli.admin_query_cq import RULE, cq_lines, entry_line
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.query_bodies import (
    ConsumeQueueData,
    QueryConsumeQueueResponseBody,
    QueryCorrectionOffsetBody,
    QuerySubscriptionResponseBody,
    pretty,
)


def test_consume_queue_body_is_alphabetical_without_nulls() -> None:
    body = QueryConsumeQueueResponseBody(
        filterData="null", queueData=[ConsumeQueueData(1, 2, 3)], maxQueueIndex=4
    )
    assert fastjson.encode(body) == (
        b'{"filterData":"null","maxQueueIndex":4,"minQueueIndex":0,'
        b'"queueData":[{"eval":false,"physicOffset":1,"physicSize":2,"tagsCode":3}]}'
    )


def test_correction_offsets_keys_are_unquoted() -> None:
    body = QueryCorrectionOffsetBody({0: 3, 1: (1 << 63) - 1})
    assert fastjson.encode(body) == b'{"correctionOffsets":{0:3,1:9223372036854775807}}'


def test_subscription_body_without_a_subscription() -> None:
    body = QuerySubscriptionResponseBody(None, "G", "T")
    assert fastjson.encode(body) == b'{"group":"G","topic":"T"}'


def test_topic_sets_in_java_hashset_order() -> None:
    # "TBW102" and "SCHEDULE_TOPIC_XXXX" and friends as a HashSet<String> lists them
    names = {"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "a", "b"}
    order = hash_set_order(names)
    assert sorted(order) == sorted(names)
    assert order == fastjson.java_hashmap_order(sorted(names), fastjson.java_string_hash)
    assert order.index("a") < order.index("b")  # buckets 1 and 2 of 16


def test_no_filter_data_is_the_text_null() -> None:
    assert filter_json(None, 64) == "null"


def test_sql92_filter_data_is_upstreams_bean_in_the_pretty_layout() -> None:
    sub = SubscriptionData("T", "a > 1", expressionType="SQL92", subVersion=7)
    data = build_filter_data("T", "G", sub)
    assert data is not None
    data.born_ms, data.positions = 1000, (3, 17)
    assert filter_json(data, 64).splitlines() == [
        "{",
        '\t"bloomFilterData":{',
        '\t\t"bitNum":64,',
        '\t\t"bitPos":[3,17]',
        "\t},",
        '\t"bornTime":1000,',
        '\t"clientVersion":7,',
        '\t"consumerGroup":"G",',
        '\t"dead":false,',
        '\t"deadTime":0,',
        '\t"expression":"a > 1",',
        '\t"expressionType":"SQL92",',
        '\t"topic":"T"',
        "}",
    ]
    data.dead_ms = 2000
    assert '\t"dead":true,' in filter_json(data, 64).splitlines()


def test_pretty_of_nothing() -> None:
    assert pretty({}) == "{}"


def test_entry_line_is_upstream_to_string() -> None:
    line = entry_line(ConsumeQueueData(10, 20, 30))
    assert line == (
        "ConsumeQueueData{physicOffset=10, physicSize=20, tagsCode=30, "
        "extendDataJson='null', bitMap='null', eval=false, msg='null'}"
    )


def test_cq_lines() -> None:
    body = QueryConsumeQueueResponseBody(
        subscriptionData=SubscriptionData("T"),
        filterData="null",
        queueData=[ConsumeQueueData(10, 20, 30)],
        maxQueueIndex=8,
        minQueueIndex=2,
    )
    lines = cq_lines(body, 7)
    assert lines[0] == "Subscription data: "
    assert lines[1].startswith('{\n\t"classFilterMode":false,\n\t"codeSet":[],')
    assert lines[2:] == [
        RULE, "Filter data: ", "null", RULE,
        "Queue data: ", "max: 8, min: 2", RULE,
        "idx: 7", entry_line(ConsumeQueueData(10, 20, 30)), RULE,
    ]  # fmt: skip
    assert cq_lines(QueryConsumeQueueResponseBody(), 0) == [
        "Queue data: ", "max: 0, min: 0", RULE
    ]  # fmt: skip
