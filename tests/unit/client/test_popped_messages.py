"""A POP_MESSAGE response turned into received messages (`popped_messages`, `receipts_of`):
each receipt is upstream's extraInfo text, written out as `ExtraInfo.build` writes it, for
normal and retry topics; a revived message keeps the broker's POP_CK; an ordered pop's counts
become delivery counts, an unordered pop's are not read."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.client.simple_consumer import popped_messages, receipts_of
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message import MessageExt, encode_properties
from rocketrio.protocol.message_build import build_stored_message
from rocketrio.protocol.pop_extra_info import (
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    ExtraInfo,
    offset_info_key,
)
from rocketrio.protocol.pop_headers import PopMessageResponseHeader
from rocketrio.protocol.remoting import RemotingCommand

BROKER = "broker-a"
HOST = (b"\x7f\x00\x00\x01", 10911)


def record(topic: str, queue_id: int, offset: int, props: dict[str, str]) -> bytes:
    return build_stored_message(
        topic=topic, queue_id=queue_id, body=b"b", flag=0, properties=encode_properties(props),
        sys_flag=0, born_timestamp=1, born_host=HOST, store_timestamp=2, store_host=HOST,
        queue_offset=offset, physical_offset=64 * offset,
    )  # fmt: skip


@given(
    st.sampled_from(["T", "%RETRY%G_T", "%RETRY%G+T"]),
    st.integers(0, 2**45),
    st.integers(1, 2**31),
    st.integers(0, 999),
    st.integers(0, 1023),
    st.integers(0, 2**40),
    st.integers(0, 2**20),
)
def test_each_receipt_is_the_built_extra_info(
    topic: str, pop_time: int, invisible: int, revive_qid: int, qid: int, start: int, gap: int
) -> None:
    offset = start + gap
    header = PopMessageResponseHeader(
        popTime=pop_time, invisibleTime=invisible, reviveQid=revive_qid, restNum=0,
        startOffsetInfo=f"{offset_info_key(topic, qid).replace('@', ' ')} {start}",
        msgOffsetInfo=f"{offset_info_key(topic, qid).replace('@', ' ')} {offset}",
    )  # fmt: skip
    m = MessageExt(topic, b"b", queue_id=qid, queue_offset=offset)
    built = ExtraInfo.of(start, pop_time, invisible, revive_qid, topic, BROKER, qid, offset)
    assert receipts_of(header, [m], BROKER) == [built.build()]


def pop_response(order_count_info: str | None) -> RemotingCommand:
    body = record("T", 1, 7, {"UNIQ_KEY": "A"}) + record(
        "T", 1, 8, {"UNIQ_KEY": "B", PROPERTY_POP_CK: "3 5 6 0 0 broker-a 1 8"}
    )
    ext = {
        "popTime": "1000", "invisibleTime": "30000", "reviveQid": "2", "restNum": "0",
        "startOffsetInfo": "0 1 7", "msgOffsetInfo": "0 1 7,8",
    }  # fmt: skip
    if order_count_info is not None:
        ext["orderCountInfo"] = order_count_info
    return RemotingCommand(ResponseCode.SUCCESS, ext_fields=ext, body=body, flag=1)


def test_popped_messages_receipts_first_pop_time_and_delivery_counts() -> None:
    counts = "0 qo1%7 2;0 1 0"  # the message at offset 7 was delivered twice before
    unordered = popped_messages(pop_response(counts), "T", BROKER, False)
    assert [r.receipt_handle for r in unordered] == [
        "7 1000 30000 2 0 broker-a 1 7",
        "3 5 6 0 0 broker-a 1 8",  # the broker's POP_CK (a revived message) as it came
    ]
    assert [r.message.properties[PROPERTY_FIRST_POP_TIME] for r in unordered] == ["1000"] * 2
    assert [r.delivery_attempt for r in unordered] == [1, 1]  # counts are an ordered pop's
    ordered = popped_messages(pop_response(counts), "T", BROKER, True)
    assert [r.delivery_attempt for r in ordered] == [3, 1]
    assert [r.broker_name for r in ordered] == [BROKER, BROKER]
