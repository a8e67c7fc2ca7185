"""transaction_policy: the check decision, op records, message shapes and the bookkeeping
(pure: no store, no Trio, time passed in); plus the wire form of the transaction headers."""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.transaction.policy import (
    CHECK_MAX_TIME_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    Check,
    DecidedSet,
    Discard,
    HalfState,
    OpIndex,
    Skip,
    Wait,
    committed_message,
    decide,
    decode_op_body,
    discarded_message,
    encode_op_body,
    half_message,
    immunity_ms,
    op_message,
    reject_late_end,
    renewed_half,
    reset_transaction_value,
)
from rocketrio.actors.client.transaction_producer import LocalTransactionState, end_header
from rocketrio.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
)
from rocketrio.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
    build_stored_message,
    decode_properties,
    decode_stored,
)
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.storage.message_store import MessageToStore

TIMEOUT = 6_000
DAY = 86_400_000
HOST = (b"\x0a\x00\x00\x01", 1234)


def half(
    check_times: int = 0, stored: int = 1_000, born: int = 1_000, immunity: int = TIMEOUT
) -> HalfState:
    return HalfState(
        queue_offset=0,
        uniq="U",
        group="pg",
        born_ms=born,
        stored_ms=stored,
        check_times=check_times,
        immunity_ms=immunity,
    )


def verdict(
    h: HalfState, now: int, *, op: bool = False, decided: bool = False, check_max: int = 15
) -> object:
    return decide(
        h, now_ms=now, done_by_op=op, decided=decided, check_max=check_max, max_age_ms=DAY
    )


# ---------------------------------------------------------------------------- decide


def test_a_half_within_transaction_timeout_waits_and_is_checked_after_it() -> None:
    h = half(stored=1_000)
    assert verdict(h, 1_000) == Wait()
    assert verdict(h, 1_000 + TIMEOUT) == Wait()  # upstream: "<= immunity" still waits
    assert verdict(h, 1_001 + TIMEOUT) == Check(1)


def test_an_op_or_a_decision_through_another_copy_skips_before_anything_else() -> None:
    h = half(check_times=99)
    assert verdict(h, 1_000, op=True) == Skip("op")
    assert verdict(h, 1_000, decided=True) == Skip("decided")


def test_check_times_count_up_and_the_max_discards() -> None:
    now = 1_000 + TIMEOUT + 1
    assert verdict(half(check_times=0), now, check_max=3) == Check(1)
    assert verdict(half(check_times=2), now, check_max=3) == Check(3)
    assert verdict(half(check_times=3), now, check_max=3) == Discard("check_max")
    # discard comes before the immunity window, as upstream
    assert verdict(half(check_times=3), 1_000, check_max=3) == Discard("check_max")


def test_a_half_older_than_the_file_reserved_time_is_discarded() -> None:
    assert verdict(half(born=0, stored=0), DAY + 1) == Discard("too_old")


def test_a_copy_stored_in_the_future_is_checked_at_once() -> None:
    assert verdict(half(stored=5_000), 4_000) == Check(1)


def test_the_immunity_window_is_the_longer_of_the_property_and_the_timeout() -> None:
    assert immunity_ms({}, TIMEOUT) == TIMEOUT
    assert immunity_ms({"CHECK_IMMUNITY_TIME_IN_SECONDS": "60"}, TIMEOUT) == 60_000
    assert immunity_ms({"CHECK_IMMUNITY_TIME_IN_SECONDS": "2"}, TIMEOUT) == TIMEOUT
    assert immunity_ms({"CHECK_IMMUNITY_TIME_IN_SECONDS": "x"}, TIMEOUT) == TIMEOUT
    h = half(immunity=60_000)
    assert verdict(h, 1_000 + 30_000) == Wait()
    assert verdict(h, 1_001 + 60_000) == Check(1)


def test_a_producers_late_end_is_refused_only_with_an_immunity_property() -> None:
    props = {"CHECK_IMMUNITY_TIME_IN_SECONDS": "10"}
    late = {"now_ms": 20_001, "transaction_timeout_ms": TIMEOUT}
    assert reject_late_end(props, 10_000, from_check=False, **late) is True
    assert reject_late_end(props, 10_000, from_check=True, **late) is False
    assert reject_late_end({}, 10_000, from_check=False, **late) is False
    assert reject_late_end(props, 10_001, from_check=False, **late) is False


def test_half_state_reads_upstream_properties() -> None:
    ext = MessageExt(
        HALF_TOPIC,
        b"b",
        properties={"UNIQ_KEY": "U1", "PGROUP": "pg", "TRANSACTION_CHECK_TIMES": "4"},
        born_timestamp=5,
        store_timestamp=7,
        queue_offset=3,
    )
    s = HalfState.of(ext, TIMEOUT)
    assert (s.uniq, s.group, s.check_times, s.born_ms, s.stored_ms) == ("U1", "pg", 4, 5, 7)
    assert s.queue_offset == 3 and s.immunity_ms == TIMEOUT


# ---------------------------------------------------------------------------- ops


def test_op_body_is_comma_separated_offsets_and_tolerates_garbage() -> None:
    assert encode_op_body([3]) == b"3"
    assert encode_op_body([3, 17]) == b"3,17"
    assert decode_op_body(b"3,17") == [3, 17]
    assert decode_op_body(b"4,x,, 9") == [4, 9]
    assert decode_op_body(b"") == []


def test_op_message_is_tag_d_in_the_op_topic_queue_0() -> None:
    op = op_message([5, 9], "OPUNIQ", 42, HOST)
    assert (op.topic, op.queue_id, op.body) == (OP_TOPIC, 0, b"5,9")
    assert isinstance(op.properties, str)
    assert decode_properties(op.properties) == {"TAGS": "d", "UNIQ_KEY": "OPUNIQ"}


def test_op_index_passes_named_offsets_and_moves_the_op_offset_over_done_ops() -> None:
    ops = OpIndex(half_floor=10)
    ops.add(0, [3])  # below the half scan offset: done at once
    ops.add(1, [10, 12])
    ops.add(2, [11])
    assert ops.next_op_offset(0) == 1
    assert ops.take(10) is True
    assert ops.next_op_offset(0) == 1  # op 1 still names 12
    assert ops.take(11) is True
    assert ops.next_op_offset(0) == 1
    assert ops.take(12) is True
    assert ops.next_op_offset(0) == 3
    assert ops.take(13) is False


def test_the_decided_set_forgets_a_key_once_the_scan_passes_its_horizon() -> None:
    d = DecidedSet()
    d.add("A", 5)
    d.add("B", 9)
    d.prune(4)
    assert "A" in d and "B" in d
    d.prune(5)
    assert "A" not in d and "B" in d
    d.add("B", 3)  # a later decision never shortens the horizon
    d.prune(8)
    assert "B" in d


# ---------------------------------------------------------------------------- shapes


def stored(msg: MessageToStore, queue_offset: int = 7, physical: int = 1000) -> MessageExt:
    props = msg.properties
    assert isinstance(props, str)
    record = build_stored_message(
        topic=msg.topic,
        queue_id=msg.queue_id,
        body=msg.body,
        flag=msg.flag,
        properties=props,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        store_timestamp=99,
        store_host=HOST,
        queue_offset=queue_offset,
        physical_offset=physical,
    )
    return decode_stored(record)[0]


def sent() -> MessageToStore:
    return MessageToStore(
        topic="T",
        queue_id=2,
        body=b"x",
        flag=3,
        properties="TAGS\x01a\x02UNIQ_KEY\x01U1\x02TRAN_MSG\x01true\x02PGROUP\x01pg\x02",
        sys_flag=TRANSACTION_PREPARED_TYPE,
        born_timestamp=11,
        born_host=HOST,
    )


def test_a_half_goes_to_queue_0_of_the_half_topic_with_its_real_topic() -> None:
    h = half_message(sent())
    assert (h.topic, h.queue_id, h.sys_flag & 0xC) == (HALF_TOPIC, 0, 0)
    assert isinstance(h.properties, str)
    props = decode_properties(h.properties)
    assert props["REAL_TOPIC"] == "T" and props["REAL_QID"] == "2"
    assert props["__transactionId__"] == "U1"
    assert props["TRAN_MSG"] == "true" and props["PGROUP"] == "pg"


def test_a_commit_restores_the_real_topic_with_the_commit_flag_and_same_uniq_key() -> None:
    h = stored(half_message(sent()))
    c = committed_message(h, HOST)
    assert (c.topic, c.queue_id, c.sys_flag & 0xC) == ("T", 2, TRANSACTION_COMMIT_TYPE)
    assert isinstance(c.properties, str)
    props = decode_properties(c.properties)
    assert "REAL_TOPIC" not in props and "REAL_QID" not in props and "TRAN_MSG" not in props
    assert props["UNIQ_KEY"] == "U1" and props["TAGS"] == "a" and props["PGROUP"] == "pg"
    assert c.prepared_transaction_offset == 1000
    assert (c.body, c.flag, c.born_timestamp) == (b"x", 3, 11)


def test_a_check_renews_the_half_with_one_more_check_and_discard_keeps_it_whole() -> None:
    h = stored(half_message(sent()))
    r = renewed_half(h, 3, HOST)
    assert (r.topic, r.queue_id) == (HALF_TOPIC, 0)
    assert isinstance(r.properties, str)
    assert decode_properties(r.properties)["TRANSACTION_CHECK_TIMES"] == "3"
    d = discarded_message(h, HOST)
    assert (d.topic, d.queue_id, d.body) == (CHECK_MAX_TIME_TOPIC, 0, b"x")
    assert isinstance(d.properties, str)
    assert decode_properties(d.properties)["REAL_TOPIC"] == "T"


def test_reset_transaction_value() -> None:
    assert reset_transaction_value(0x4 | 0x1, TRANSACTION_COMMIT_TYPE) == 0x8 | 0x1
    assert reset_transaction_value(0xC, 0) == 0
    assert reset_transaction_value(0x80, TRANSACTION_ROLLBACK_TYPE) == 0x8C


# ---------------------------------------------------------------------------- wire


def test_end_transaction_header_golden() -> None:
    """The extFields a Java TransactionMQProducer sends (EndTransactionRequestHeader)."""
    h = end_header(
        "pg",
        LocalTransactionState.COMMIT_MESSAGE,
        tran_state_table_offset=7,
        commit_log_offset=1234,
        msg_id="U1",
        topic="T",
        transaction_id="U1",
        broker_name="broker-a",
        from_check=False,
    )
    assert to_ext(h) == {
        "producerGroup": "pg",
        "tranStateTableOffset": "7",
        "commitLogOffset": "1234",
        "commitOrRollback": "8",
        "msgId": "U1",
        "topic": "T",
        "fromTransactionCheck": "false",
        "transactionId": "U1",
        "bname": "broker-a",
    }
    java = {
        "producerGroup": "pg",
        "tranStateTableOffset": "7",
        "commitLogOffset": "1234",
        "commitOrRollback": "12",
        "fromTransactionCheck": "true",
        "msgId": "U1",
        "transactionId": "U1",
        "topic": "RMQ_SYS_TRANS_HALF_TOPIC",
        "bname": "broker-a",
        "oway": "true",  # RpcRequestHeader fields we do not use are ignored
    }
    parsed = from_ext(EndTransactionRequestHeader, java)
    assert parsed.commitOrRollback == TRANSACTION_ROLLBACK_TYPE
    assert parsed.fromTransactionCheck is True
    assert (parsed.tranStateTableOffset, parsed.commitLogOffset) == (7, 1234)


@pytest.mark.parametrize(
    ("state", "value"),
    [
        (LocalTransactionState.COMMIT_MESSAGE, "8"),
        (LocalTransactionState.ROLLBACK_MESSAGE, "12"),
        (LocalTransactionState.UNKNOW, "0"),
    ],
)
def test_local_states_map_to_upstream_sysflag_values(
    state: LocalTransactionState, value: str
) -> None:
    h = end_header(
        "pg",
        state,
        tran_state_table_offset=0,
        commit_log_offset=0,
        msg_id="U",
        topic=None,
        transaction_id=None,
        broker_name=None,
        from_check=True,
    )
    assert to_ext(h)["commitOrRollback"] == value


def test_check_transaction_state_header_golden() -> None:
    h = CheckTransactionStateRequestHeader(
        tranStateTableOffset=3,
        commitLogOffset=900,
        topic=HALF_TOPIC,
        msgId="U1",
        transactionId="U1",
        offsetMsgId="0A00000100002A9F0000000000000384",
        bname="broker-a",
    )
    assert to_ext(h) == {
        "tranStateTableOffset": "3",
        "commitLogOffset": "900",
        "topic": "RMQ_SYS_TRANS_HALF_TOPIC",
        "msgId": "U1",
        "transactionId": "U1",
        "offsetMsgId": "0A00000100002A9F0000000000000384",
        "bname": "broker-a",
    }
    assert from_ext(CheckTransactionStateRequestHeader, to_ext(h)) == h
