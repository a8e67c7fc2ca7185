"""resume.py's pure part: the resumed half is upstream's shape (half topic, queue 0, check
count 0, other properties and the body kept); a message without REAL_TOPIC is no half."""

from __future__ import annotations

from rocketrio.actors.broker.transaction.policy import HALF_QUEUE_ID, HALF_TOPIC
from rocketrio.actors.broker.transaction.resume import resumed_half
from rocketrio.protocol.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    UNIQ_KEY,
    MessageExt,
    decode_properties,
)


def stored(props: dict[str, str], topic: str = "TRANS_CHECK_MAX_TIME_TOPIC") -> MessageExt:
    return MessageExt(topic=topic, body=b"b", properties=props, born_host="10.0.0.9:5000")


def test_a_half_comes_back_to_the_half_queue_with_count_zero() -> None:
    props = {
        PROPERTY_REAL_TOPIC: "T",
        PROPERTY_REAL_QUEUE_ID: "2",
        PROPERTY_TRANSACTION_CHECK_TIMES: "15",
        UNIQ_KEY: "U1",
    }
    copy = resumed_half(stored(props))
    assert not isinstance(copy, str)
    assert (copy.topic, copy.queue_id, copy.body) == (HALF_TOPIC, HALF_QUEUE_ID, b"b")
    assert decode_properties(copy.properties) == {**props, PROPERTY_TRANSACTION_CHECK_TIMES: "0"}


def test_a_message_without_real_topic_is_no_half() -> None:
    why = resumed_half(stored({UNIQ_KEY: "U1"}, topic="T"))
    assert why == "the message in topic T is not a transaction half message (no REAL_TOPIC)"
