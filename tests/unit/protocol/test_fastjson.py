"""Admin bodies against upstream 5.2.0's own bytes (../shared/reference/admin-bodies/).

Each golden file is what the named upstream class's ``encode()`` (fastjson 1.2.83) wrote. A
body built the way the broker builds it must encode to those bytes exactly (MessageQueue-keyed
maps included: we iterate them in Java HashMap order); every golden and live file must decode
into our classes with the right values; and the variants Java accepts (admin-bodies README §4)
must decode too.
"""

from __future__ import annotations

import math

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import (
    BrokerData,
    ClusterInfo,
    Connection,
    ConsumerConnection,
    ConsumeStats,
    ConsumeStatsList,
    DataVersion,
    GroupList,
    MessageQueue,
    OffsetWrapper,
    ProducerConnection,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicOffset,
    TopicStatsTable,
)
from rocketrio.protocol.controller_headers import (
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    SyncStateSet,
)
from rocketrio.protocol.serde import HeaderError, from_json
from tests.harness.paths import GOLDEN_ADMIN_BODIES

GOLDEN = GOLDEN_ADMIN_BODIES

TS = 1795440000000
TOPIC, BROKER = "TopicTest", "broker-a"


def golden(name: str) -> bytes:
    return (GOLDEN / f"{name}.json").read_bytes()


def mq(i: int) -> MessageQueue:
    return MessageQueue(TOPIC, BROKER, i)


# ---------------------------------------------------------------------------- encoding


def test_topic_stats_table_bytes() -> None:
    """remoting/.../protocol/admin/TopicStatsTable.java (+ TopicOffset), built as
    AdminBrokerProcessor#getTopicStatsInfo does (put q0..q3)."""
    table = TopicStatsTable({mq(i): TopicOffset(0, 250 + i, TS - 1000 + i) for i in range(4)})
    assert fastjson.encode(table) == golden("topic_stats_table")


def _consume_stats(pull: bool) -> ConsumeStats:
    return ConsumeStats(
        {
            mq(i): OffsetWrapper(250 + i, 240 + i, (245 + i) if pull else 0, TS - 5000 + i)
            for i in range(4)
        },
        250 / 60.0,
    )


def test_consume_stats_bytes() -> None:
    """remoting/.../protocol/admin/ConsumeStats.java (+ OffsetWrapper)."""
    stats = _consume_stats(pull=True)
    assert fastjson.encode(stats) == golden("consume_stats")
    assert stats.total_diff() == 40


def test_consume_stats_list_bytes() -> None:
    """remoting/.../protocol/body/ConsumeStatsList.java: pullOffset stays 0 (upstream quirk)."""
    body = ConsumeStatsList(
        [{"group_a": [_consume_stats(pull=False)]}, {"TOOLS_CONSUMER": []}],
        "127.0.0.1:10911",
        40,
        -966,
    )
    assert fastjson.encode(body) == golden("consume_stats_list")


def test_consumer_connection_bytes() -> None:
    """remoting/.../protocol/body/ConsumerConnection.java (+ Connection, SubscriptionData)."""
    body = ConsumerConnection(
        [Connection("127.0.0.1@12345#1", "127.0.0.1:54321", "JAVA", 453)],
        {
            TOPIC: SubscriptionData(
                TOPIC, "TagA || TagB", False, ["TagA", "TagB"], [2598919, 2598920], TS
            ),
            "%RETRY%group_a": SubscriptionData("%RETRY%group_a", "*", False, [], [], TS),
        },
        "CONSUME_PASSIVELY",
        "CLUSTERING",
        "CONSUME_FROM_LAST_OFFSET",
    )
    assert fastjson.encode(body) == golden("consumer_connection")


def test_producer_connection_and_group_list_bytes() -> None:
    """body/ProducerConnection.java and body/GroupList.java."""
    body = ProducerConnection([Connection("127.0.0.1@12345#1", "127.0.0.1:54322", "JAVA", 453)])
    assert fastjson.encode(body) == golden("producer_connection")
    assert fastjson.encode(GroupList(["group_a"])) == golden("group_list")


def test_cluster_info_writes_long_keys_unquoted() -> None:
    """body/ClusterInfo.java: BrokerData.brokerAddrs is Map<Long,String>, keys bare."""
    info = ClusterInfo(
        {
            BROKER: BrokerData(
                "DefaultCluster", BROKER, {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
            )
        },
        {"DefaultCluster": [BROKER]},
    )
    assert fastjson.encode(info) == golden("cluster_info_master_slave")


def test_subscription_group_wrapper_bytes() -> None:
    """body/SubscriptionGroupWrapper.java (+ SubscriptionGroupConfig, GroupRetryPolicy)."""
    body = SubscriptionGroupWrapper(
        {"group_a": SubscriptionGroupConfig("group_a")}, DataVersion(0, TS, 1)
    )
    text = fastjson.encode(body)
    # the client-side class has no forbiddenTable; the broker's adds it (written as {})
    assert text.replace(b',"forbiddenTable":{}', b"") == golden("subscription_group_wrapper")


# ---------------------------------------------------------------------------- decoding


def test_golden_and_live_mq_keyed_bodies_decode() -> None:
    table = from_json(TopicStatsTable, golden("topic_stats_table")).offsetTable
    assert table[mq(2)] == TopicOffset(0, 252, TS - 998)
    assert len(table) == 4
    stats = from_json(ConsumeStats, golden("consume_stats"))
    assert stats.offsetTable[mq(0)] == OffsetWrapper(250, 240, 245, TS - 5000)
    assert stats.consumeTps == 250 / 60.0
    listed = from_json(ConsumeStatsList, golden("consume_stats_list"))
    assert listed.totalInflightDiff == -966
    assert listed.consumeStatsList[0]["group_a"][0].offsetTable[mq(3)].brokerOffset == 253
    live = from_json(TopicStatsTable, golden("live_topic_stats_table")).offsetTable
    assert live and all(k.topic == TOPIC for k in live)
    live_stats = from_json(ConsumeStats, golden("live_consume_stats"))
    assert live_stats.offsetTable and live_stats.consumeTps >= 0
    live_list = from_json(ConsumeStatsList, golden("live_consume_stats_list"))
    assert live_list.totalInflightDiff < 0 and len(live_list.consumeStatsList) == 9


def test_golden_connections_decode() -> None:
    conn = from_json(ConsumerConnection, golden("live_consumer_connection"))
    assert conn.messageModel == "CLUSTERING" and conn.consumeType == "CONSUME_PASSIVELY"
    assert conn.subscriptionTable[TOPIC].codeSet == [2598919, 2598920]
    assert conn.connectionSet[0].version == 453
    producers = from_json(ProducerConnection, golden("live_producer_connection"))
    assert producers.connectionSet[0].language == "JAVA"
    assert from_json(GroupList, golden("live_group_list")).groupList
    groups = from_json(SubscriptionGroupWrapper, golden("live_get_all_subscription_group"))
    assert groups.subscriptionGroupTable["TOOLS_CONSUMER"].consumeTimeoutMinute == 15


@pytest.mark.parametrize(
    "key",
    [
        '{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}',  # A: native fastjson
        '{"topic" : "TopicTest", "brokerName":"broker-a" , "queueId" :0}',  # B: order, spaces
        '"{\\"brokerName\\":\\"broker-a\\",\\"queueId\\":0,\\"topic\\":\\"TopicTest\\"}"',  # C
        '"{\\"brokerName\\": \\"broker-a\\", \\"queueId\\": 0, \\"topic\\": \\"TopicTest\\"}"',  # D
    ],
)
def test_message_queue_key_spellings_java_accepts(key: str) -> None:
    body = '{"offsetTable":{' + key + ':{"minOffset":1,"maxOffset":7}}}'
    assert from_json(TopicStatsTable, body).offsetTable == {mq(0): TopicOffset(1, 7, 0)}


def test_mixed_keys_and_bad_keys() -> None:
    mixed = (
        '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:3,'
        '"{\\"brokerName\\":\\"broker-a\\",\\"queueId\\":1,\\"topic\\":\\"TopicTest\\"}":4}}'
    )
    assert from_json(Offsets, mixed).offsetTable == {mq(0): 3, mq(1): 4}
    with pytest.raises(HeaderError, match="MessageQueue"):
        from_json(Offsets, '{"offsetTable":{"TopicTest@broker-a@0":3}}')  # G: Java refuses too
    with pytest.raises(HeaderError, match="not valid JSON"):
        from_json(Offsets, '{"offsetTable":{{"brokerName":"b"}:3')  # truncated


@attrs.define
class Offsets:
    """A map of MessageQueue to Long, as ResetOffsetBody has."""

    offsetTable: dict[MessageQueue, int] = attrs.field(factory=dict)


# ---------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (1.0, "1.0"),
        (250 / 60.0, "4.166666666666667"),
        (1e-5, "1.0E-5"),
        (1e7, "1.0E7"),
        (1.2345678912345e20, "1.2345678912345E20"),
        (0.001, "0.001"),
        (9.0e-4, "9.0E-4"),
        (9999999.0, "9999999.0"),
        (12345678.0, "1.2345678E7"),
        (2.4, "2.4"),
        (-3.5, "-3.5"),
        (100.0, "100.0"),
    ],
)
def test_java_double_to_string(value: float, text: str) -> None:
    assert fastjson.java_double(value) == text


def test_non_finite_doubles_are_null_and_none_fields_omitted() -> None:
    assert fastjson.dumps(ConsumeStats({}, math.nan)) == '{"consumeTps":null,"offsetTable":{}}'
    assert fastjson.dumps(ConsumerConnection()) == '{"connectionSet":[],"subscriptionTable":{}}'


def test_java_hashes() -> None:
    assert fastjson.java_string_hash("TagA") == 2598919
    assert fastjson.java_string_hash("") == 0
    assert fastjson.java_string_hash("\U0001f600") == 1772899  # a surrogate pair: 2 units


queue_ids = st.lists(st.integers(0, 2000), unique=True, max_size=80)


@given(queue_ids, st.text(min_size=1, max_size=12))
def test_encode_then_decode_is_identity(ids: list[int], topic: str) -> None:
    stats = ConsumeStats(
        {MessageQueue(topic, BROKER, i): OffsetWrapper(i, i // 2, i, i * 7) for i in ids},
        float(len(ids)) / 3,
    )
    assert from_json(ConsumeStats, fastjson.encode(stats)) == stats


@given(queue_ids)
def test_hashmap_order_is_a_permutation_by_bucket(ids: list[int]) -> None:
    keys = [mq(i) for i in ids]
    ordered = fastjson.java_hashmap_order(keys, fastjson.message_queue_hash)
    assert sorted(ordered, key=keys.index) == keys
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(k: MessageQueue) -> int:
        h = fastjson.message_queue_hash(k) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    assert [bucket(k) for k in ordered] == sorted(bucket(k) for k in ordered)


@pytest.mark.parametrize(
    ("cls", "name"),
    [
        (BrokerReplicasInfo, "broker_replicas_info"),  # body/BrokerReplicasInfo.java
        (ElectMasterResponseBody, "elect_master_response_body"),  # ElectMasterResponseBody
        (ElectMasterResponseBody, "elect_master_response_body_no_member_group"),
        (SyncStateSet, "sync_state_set"),  # body/SyncStateSet.java
        (TopicList, "topic_list"),  # body/TopicList.java (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        (TopicList, "topic_list_with_broker_addr"),
        (ClusterInfo, "cluster_info"),  # body/ClusterInfo.java
        (SubscriptionGroupWrapper, "get_all_subscription_group_broker"),  # the broker's 201
        (TopicConfigSerializeWrapper, "topic_config_serialize_wrapper"),  # 21, client side
        (ConsumeStats, "consume_stats"),
        (ConsumerConnection, "consumer_connection"),
        (ProducerConnection, "producer_connection"),
        (TopicStatsTable, "live_topic_stats_table"),
    ],
)
def test_decode_then_encode_gives_upstream_bytes(cls: type, name: str) -> None:
    """What the NameServer, the controller and the broker send: decoding upstream's bytes and
    writing them again gives the same bytes (field set, order, key quoting, numbers)."""
    raw = golden(name)
    assert fastjson.encode(from_json(cls, raw)) == raw
