"""The proxy's pure cores: gRPC <-> remoting message mapping, status codes, routes, FIFO queue
choice, receipt handles and transaction ids, the settings answer."""

from __future__ import annotations

import hashlib
import zlib

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.mapping import BadRequest, TargetQueue
from rocketrio.actors.proxy.receipt import TransactionId, decode_receipt, encode_receipt
from rocketrio.protocol.bodies import BrokerData, QueueData, TopicRouteData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.pop_extra_info import ExtraInfo, ExtraInfoError

ENDPOINTS = mp.endpoints_of("10.0.0.9", 8081)
NOW = 1_700_000_000_000


def route(*queue_datas: QueueData, masterless: tuple[str, ...] = ()) -> TopicRouteData:
    names = {q.brokerName for q in queue_datas}
    brokers = [
        BrokerData("c", n, {} if n in masterless else {0: f"{n}:10911"}) for n in sorted(names)
    ]
    return TopicRouteData(list(queue_datas), brokers)


# -- status codes


def test_remoting_codes_map_as_upstream_response_builder() -> None:
    assert mp.code_of_remoting(ResponseCode.SUCCESS) == pb.OK
    assert mp.code_of_remoting(ResponseCode.SYSTEM_BUSY) == pb.TOO_MANY_REQUESTS
    assert mp.code_of_remoting(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST) == (
        pb.CONSUMER_GROUP_NOT_FOUND
    )
    assert mp.code_of_remoting(ResponseCode.REQUEST_CODE_NOT_SUPPORTED) == pb.NOT_IMPLEMENTED
    assert mp.code_of_remoting(ResponseCode.TOPIC_NOT_EXIST) == pb.TOPIC_NOT_FOUND
    assert mp.code_of_remoting(ResponseCode.PULL_OFFSET_MOVED) == pb.INTERNAL_SERVER_ERROR
    assert pb.OK == 20000 and pb.MESSAGE_NOT_FOUND == 40401 and pb.TOPIC_NOT_FOUND == 40402


def test_send_results_map_to_persistence_codes() -> None:
    assert mp.code_of_send(ResponseCode.SUCCESS) == pb.OK
    assert mp.code_of_send(ResponseCode.FLUSH_DISK_TIMEOUT) == pb.MASTER_PERSISTENCE_TIMEOUT
    assert mp.code_of_send(ResponseCode.FLUSH_SLAVE_TIMEOUT) == pb.SLAVE_PERSISTENCE_TIMEOUT
    assert mp.code_of_send(ResponseCode.SLAVE_NOT_AVAILABLE) == pb.HA_NOT_AVAILABLE
    assert mp.code_of_send(ResponseCode.SYSTEM_BUSY) == pb.TOO_MANY_REQUESTS


# -- routes


def test_route_queues_split_read_write_and_name_the_proxy() -> None:
    r = route(QueueData("b", 4, 2, 6), QueueData("a", 2, 2, 6))  # 6 = read|write
    queues = mp.route_queues(r, pb.Resource(name="T"), ENDPOINTS)
    got = [(q.broker.name, q.id, q.permission) for q in queues]
    assert got == [
        ("a", 0, pb.READ_WRITE),
        ("a", 1, pb.READ_WRITE),
        ("b", 0, pb.READ),
        ("b", 1, pb.READ),
        ("b", 2, pb.READ_WRITE),
        ("b", 3, pb.READ_WRITE),
    ]
    for q in queues:
        assert q.broker.endpoints == ENDPOINTS and q.broker.id == 0
        assert list(q.accept_message_types) == [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION]


def test_route_leaves_out_broker_sets_without_master() -> None:
    r = route(QueueData("a", 2, 2, 6), QueueData("b", 2, 2, 6), masterless=("b",))
    assert {q.broker.name for q in mp.route_queues(r, pb.Resource(name="T"), ENDPOINTS)} == {"a"}
    assert {q.broker_name for q in mp.writable_queues(r)} == {"a"}


def test_write_only_and_inaccessible_queues() -> None:
    r = route(QueueData("a", 0, 3, 2), QueueData("b", 1, 1, 0))  # 2 = write only; 0 = none
    queues = mp.route_queues(r, pb.Resource(name="T"), ENDPOINTS)
    assert [(q.broker.name, q.permission) for q in queues] == [("a", pb.WRITE)] * 3 + [
        ("b", pb.NONE)
    ]
    assert mp.writable_queues(r) == [TargetQueue("a", 0), TargetQueue("a", 1), TargetQueue("a", 2)]


def test_assignments_one_per_readable_broker_set() -> None:
    r = route(QueueData("a", 2, 2, 6), QueueData("b", 0, 2, 2), QueueData("c", 1, 1, 4))
    got = mp.assignments(r, pb.Resource(name="T"), ENDPOINTS)
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in got] == [
        ("a", -1),
        ("c", -1),
    ]  # b is write-only
    assert all(a.message_queue.broker.endpoints == ENDPOINTS for a in got)


def test_assignments_of_a_fifo_group_one_per_readable_queue() -> None:
    """upstream RouteActivity: a consumeMessageOrderly group is assigned each queue."""
    r = route(QueueData("a", 3, 3, 6), QueueData("b", 0, 2, 2), QueueData("c", 2, 2, 4))
    got = mp.assignments(r, pb.Resource(name="T"), ENDPOINTS, fifo=True)
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in got] == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("c", 0),
        ("c", 1),
    ]
    assert {a.message_queue.permission for a in got} == {pb.READ_WRITE, pb.READ}
    assert mp.assignments(route(QueueData("a", 2, 2, 6), masterless=("a",)),
                          pb.Resource(name="T"), ENDPOINTS, fifo=True) == []  # fmt: skip


# -- FIFO queue choice


def test_java_string_hash_matches_java() -> None:
    assert mp.java_string_hash("hello") == 99162322
    assert mp.java_string_hash("Aa") == mp.java_string_hash("BB") == 2112
    assert mp.java_string_hash("polygenelubricants") == -(2**31)
    assert mp.java_string_hash("") == 0


# (group, String.hashCode, consistentHash for 1, 3, 8, 16, 100 buckets) as printed by
# Guava 32.1.3's Hashing.consistentHash on a JVM
GUAVA = [
    ("order-7", -1207111304, (0, 0, 4, 9, 89)),
    ("g1", 3242, (0, 0, 6, 9, 41)),
    ("hello", 99162322, (0, 0, 4, 8, 65)),
    ("polygenelubricants", -2147483648, (0, 2, 2, 2, 58)),
    ("订单-42", -711980392, (0, 1, 1, 1, 70)),
]


@pytest.mark.parametrize(("group", "java_hash", "buckets"), GUAVA)
def test_fifo_queue_index_matches_guava(
    group: str, java_hash: int, buckets: tuple[int, ...]
) -> None:
    assert mp.java_string_hash(group) == java_hash
    assert tuple(mp.consistent_hash(java_hash, n) for n in (1, 3, 8, 16, 100)) == buckets


@given(st.integers(-(2**31), 2**31 - 1), st.integers(1, 64))
def test_consistent_hash_moves_a_key_only_to_a_new_bucket(key: int, n: int) -> None:
    before, after = mp.consistent_hash(key, n), mp.consistent_hash(key, n + 1)
    assert 0 <= before < n
    assert after in (before, n)  # jump consistent hashing: stay, or go to the new bucket


def test_consistent_hash_spreads_keys() -> None:
    counts = [0] * 8
    for i in range(8000):
        counts[mp.consistent_hash(mp.java_string_hash(f"group-{i}"), 8)] += 1
    assert min(counts) > 800  # about 1000 each


def test_fifo_group_always_picks_the_same_queue_others_round_robin() -> None:
    queues = [TargetQueue("a", i) for i in range(4)] + [TargetQueue("b", i) for i in range(4)]
    picks = {mp.choose_queue(queues, "order-7", turn) for turn in range(20)}
    assert len(picks) == 1
    assert [mp.choose_queue(queues, None, t) for t in range(8)] == queues
    with pytest.raises(BadRequest) as e:
        mp.choose_queue([], None, 0)
    assert e.value.code == pb.FORBIDDEN


# -- sending


def grpc_message(**sp: object) -> pb.Message:
    props = {"message_id": "ID1", **sp}
    return pb.Message(
        topic=pb.Resource(name="T"),
        user_properties={"color": "red"},
        system_properties=pb.SystemProperties(**props),  # type: ignore[arg-type]
        body=b"hello",
    )


def test_send_properties_of_a_normal_message() -> None:
    m = grpc_message(tag="tA", keys=["k1", "k2"], message_type=pb.NORMAL)
    props = mp.send_properties(m, 1024, "G", NOW)
    assert props == {"color": "red", "TAGS": "tA", "KEYS": "k1 k2", "UNIQ_KEY": "ID1"}


def test_send_properties_of_fifo_delay_and_transaction() -> None:
    fifo = mp.send_properties(
        grpc_message(message_group="g1", message_type=pb.FIFO), 1024, "G", NOW
    )
    assert fifo["__SHARDINGKEY"] == "g1"
    delay = grpc_message(message_type=pb.DELAY)
    delay.system_properties.delivery_timestamp.CopyFrom(mp.timestamp_ms(1_700_000_000_123))
    assert mp.send_properties(delay, 1024, "G", NOW)["TIMER_DELIVER_MS"] == "1700000000123"
    tx = mp.send_properties(grpc_message(message_type=pb.TRANSACTION), 1024, "G", NOW)
    assert tx["TRAN_MSG"] == "true" and tx["PGROUP"] == "G"


@pytest.mark.parametrize(
    ("message", "limit", "code"),
    [
        (grpc_message(), 4, pb.MESSAGE_BODY_TOO_LARGE),
        (grpc_message(message_id=""), 1024, pb.ILLEGAL_MESSAGE_ID),
        (grpc_message(tag="a|b"), 1024, pb.ILLEGAL_MESSAGE_TAG),
        (grpc_message(message_type=pb.FIFO), 1024, pb.ILLEGAL_MESSAGE_GROUP),
    ],
)
def test_bad_messages_get_upstream_codes(message: pb.Message, limit: int, code: int) -> None:
    with pytest.raises(BadRequest) as e:
        mp.send_properties(message, limit, "G", NOW)
    assert e.value.code == code


def test_delivery_time_too_far_ahead_and_the_python_sdks_milliseconds() -> None:
    far = grpc_message(message_type=pb.DELAY)
    far.system_properties.delivery_timestamp.CopyFrom(mp.timestamp_ms(NOW + mp.MAX_DELAY_MS + 1))
    with pytest.raises(BadRequest) as e:
        mp.send_properties(far, 1024, "G", NOW)
    assert e.value.code == pb.ILLEGAL_DELIVERY_TIME
    # rocketmq-python-client 5.1.2 puts milliseconds into Timestamp.seconds
    sdk = grpc_message(message_type=pb.DELAY)
    sdk.system_properties.delivery_timestamp.seconds = NOW + 2000
    assert mp.send_properties(sdk, 1024, "G", NOW)["TIMER_DELIVER_MS"] == str(NOW + 2000)


def test_user_property_may_not_be_a_system_key() -> None:
    m = grpc_message()
    m.user_properties["UNIQ_KEY"] = "forged"
    with pytest.raises(BadRequest) as e:
        mp.send_properties(m, 1024, "G", NOW)
    assert e.value.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY


# -- receiving


def stored(props: dict[str, str], body: bytes = b"payload") -> MessageExt:
    return MessageExt(
        "T", body, properties=props, queue_id=2, queue_offset=17, born_timestamp=1000,
        store_timestamp=2000, reconsume_times=1, born_host="10.0.0.1:5555",
        store_host="127.0.0.1:10911",
    )  # fmt: skip


def test_received_message_carries_digest_receipt_and_user_properties_only() -> None:
    m = stored({"UNIQ_KEY": "ID9", "TAGS": "tA", "KEYS": "k1 k2", "color": "red",
                "__CRC32#": "1", "POP_CK": "x", "MIN_OFFSET": "0"})  # fmt: skip
    out = mp.received_message(m, "T", "RECEIPT", 30_000)
    sp = out.system_properties
    assert sp.body_digest.type == pb.CRC32
    assert sp.body_digest.checksum == format(zlib.crc32(b"payload"), "08X")
    assert sp.message_id == "ID9" and sp.tag == "tA" and list(sp.keys) == ["k1", "k2"]
    assert sp.receipt_handle == "RECEIPT" and sp.delivery_attempt == 2
    assert (sp.queue_id, sp.queue_offset) == (2, 17)
    assert sp.born_host == "10.0.0.1" and sp.born_timestamp.nanos == 0
    assert sp.store_timestamp.seconds == 2
    assert sp.invisible_duration.seconds == 30 and sp.message_type == pb.NORMAL
    assert dict(out.user_properties) == {"color": "red"}


def test_received_fifo_and_delayed_messages() -> None:
    fifo = mp.received_message(stored({"__SHARDINGKEY": "g1"}), "T", "R", 1000)
    assert fifo.system_properties.message_group == "g1"
    assert fifo.system_properties.message_type == pb.FIFO
    delayed = mp.received_message(stored({"TIMER_DELIVER_MS": "5000"}), "T", "R", 1000)
    assert delayed.system_properties.delivery_timestamp.seconds == 5
    assert delayed.system_properties.message_type == pb.DELAY
    fired = mp.received_message(stored({"TIMER_OUT_MS": "7000"}), "T", "R", 1000)
    assert fired.system_properties.delivery_timestamp.seconds == 7
    assert fired.system_properties.message_type == pb.DELAY
    assert dict(fired.user_properties) == {}


def test_digests_are_uppercase_hex() -> None:
    assert mp.digest_of(b"x", pb.MD5).checksum == hashlib.md5(b"x").hexdigest().upper()
    assert mp.digest_of(b"x", pb.SHA1).checksum == hashlib.sha1(b"x").hexdigest().upper()
    assert mp.digest_of(b"", pb.CRC32).checksum == "00000000"


# -- receipts and transaction ids


def test_receipt_handle_is_the_brokers_checkpoint_and_the_commit_offset() -> None:
    info = ExtraInfo.of(10, 1_000, 30_000, 0, "T", "broker-a", 3, 12)
    handle = encode_receipt(info.build(), 12, 4096)
    # upstream ReceiptHandle.encode: startOffset retrieveTime invisibleTime reviveQid topicType
    # brokerName queueId offset commitLogOffset, space separated
    assert handle == "10 1000 30000 0 0 broker-a 3 12 4096"
    receipt = decode_receipt(handle)
    assert receipt.extra == info and receipt.commit_log_offset == 4096
    assert receipt.extra_info == info.build()  # what the broker is given back


def test_receipt_of_a_checkpoint_without_queue_offset_gets_the_messages() -> None:
    info = ExtraInfo.of(10, 1_000, 30_000, 0, "%RETRY%G_T", "broker-a", 0)
    receipt = decode_receipt(encode_receipt(info.build(), 15, 77))
    assert receipt.extra.queue_offset == 15 and receipt.extra.retry == info.retry
    assert decode_receipt("10 1000 30000 0 0 broker-a 3 12").commit_log_offset == -1


def _parsed_and_rebuilt(extra_info: str, queue_offset: int, commit_log_offset: int) -> str:
    """What `encode_receipt` was before it took the broker's text as it came."""
    extra = ExtraInfo.parse(extra_info)
    if extra.queue_offset is None:
        extra = attrs.evolve(extra, queue_offset=queue_offset)
    return f"{extra.build()} {commit_log_offset}"


_EXTRA_INFOS = st.builds(
    ExtraInfo,
    st.integers(0, 2**62), st.integers(0, 2**45), st.integers(1, 2**31), st.integers(0, 999),
    st.sampled_from(["0", "1", "2"]), st.sampled_from(["broker-a", "b_1", "x.y-z"]),
    st.integers(0, 1023), st.none() | st.integers(0, 2**62),
)  # fmt: skip


@given(_EXTRA_INFOS, st.integers(0, 2**62), st.integers(-1, 2**62))
def test_receipt_handle_from_the_brokers_text_is_the_parsed_and_rebuilt_one(
    extra: ExtraInfo, queue_offset: int, commit_log_offset: int
) -> None:
    """The handle is written from the broker's extraInfo text as it came (no parse and
    rebuild per received message): byte for byte what the parsed and rebuilt one was, with
    seven fields (the message's queue offset appended) and with eight (kept)."""
    text = extra.build()
    handle = encode_receipt(text, queue_offset, commit_log_offset)
    assert handle == _parsed_and_rebuilt(text, queue_offset, commit_log_offset)
    receipt = decode_receipt(handle)
    assert receipt.commit_log_offset == commit_log_offset
    assert receipt.extra.queue_offset == (
        extra.queue_offset if extra.queue_offset is not None else queue_offset
    )


@pytest.mark.parametrize("text", ["", "1 2 3", "1 2 3 4 5 6", "1 2 3 4 5 6 7 8 9"])
def test_an_extra_info_of_another_number_of_fields_is_refused(text: str) -> None:
    with pytest.raises(ExtraInfoError):
        encode_receipt(text, 1, 2)


@pytest.mark.parametrize(
    "handle", ["", "garbage", "1 2 3", "a b c d e f g h", "10 1000 30000 0 0 b 3 12 x"]
)
def test_bad_receipt_handles(handle: str) -> None:
    with pytest.raises(BadRequest) as e:
        decode_receipt(handle)
    assert e.value.code == pb.INVALID_RECEIPT_HANDLE


def test_transaction_id_round_trip_and_garbage() -> None:
    tx = TransactionId("broker-a", 123456, 7, "C0A8")
    assert TransactionId.decode(tx.encode()) == tx
    for bad in ("", "x", "a#b#c#d", "#1#2#x"):
        with pytest.raises(BadRequest) as e:
            TransactionId.decode(bad)
        assert e.value.code == pb.INVALID_TRANSACTION_ID


# -- settings


def test_settings_answer_for_a_producer_and_a_consumer() -> None:
    producer = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(max_body_size=1))
    out = mp.settings_answer(producer, ENDPOINTS, 4096)
    assert out.publishing.max_body_size == 4096 and out.publishing.validate_message_type
    assert out.access_point == ENDPOINTS and not out.metric.on
    assert out.backoff_policy.max_attempts == 3
    consumer = pb.Settings(
        client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(receive_batch_size=8)
    )
    out = mp.settings_answer(consumer, ENDPOINTS, 4096)
    assert out.WhichOneof("pub_sub") == "subscription"
    assert out.subscription.receive_batch_size == 8  # the client's own
    assert out.subscription.long_polling_timeout.seconds == 30  # it named none
    assert out.backoff_policy.max_attempts == 17
    delays = [d.seconds for d in out.backoff_policy.customized_backoff.next]
    assert delays[:4] == [1, 5, 10, 30] and delays[-1] == 7200
    assert out.backoff_policy.WhichOneof("strategy") == "customized_backoff"


def test_settings_answer_tells_a_consumer_of_a_fifo_group_it_is_fifo() -> None:
    consumer = pb.Settings(client_type=pb.PUSH_CONSUMER, subscription=pb.Subscription(fifo=True))
    assert not mp.settings_answer(consumer, ENDPOINTS, 4096).subscription.fifo  # not its say
    assert mp.settings_answer(consumer, ENDPOINTS, 4096, fifo=True).subscription.fifo
    producer = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing())
    out = mp.settings_answer(producer, ENDPOINTS, 4096, fifo=True)
    assert out.WhichOneof("pub_sub") == "publishing"


def test_received_message_zero_times_are_present_and_filled_in_place_the_same() -> None:
    """Times of 0 are still set fields (the SDK reads them), and `fill_received` into a
    ReceiveMessageResponse gives the message `received_message` builds."""
    m = stored({"TIMER_DELIVER_MS": "0"})
    m.born_timestamp = m.store_timestamp = 0
    out = mp.received_message(m, "T", "R", 0)
    sp = out.system_properties
    for name in ("born_timestamp", "store_timestamp", "invisible_duration", "delivery_timestamp"):
        assert sp.HasField(name), name
    answer = spb.ReceiveMessageResponse()
    mp.fill_received(answer.message, m, "T", "R", 0)
    assert answer.message == out and answer.WhichOneof("content") == "message"
