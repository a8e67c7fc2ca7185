"""The request-reply decisions without sockets: whom a reply is pushed to, the 326 request,
the answer after the push and after the store, the responder's reply properties, and which
sends go as SEND_REPLY_MESSAGE_V2."""

from __future__ import annotations

import pytest

from rocketrio.actors.broker.clients.client_manager import ClientChannelInfo, ProducerManager
from rocketrio.actors.broker.dispatch.outcomes import PutFailed, PutStatus, SendStored
from rocketrio.actors.broker.reply.processor import (
    ReplyAnswer,
    after_push,
    after_store,
    push_request,
    push_target,
)
from rocketrio.actors.client.send_api import is_reply_props
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.headers import SendMessageRequestHeader
from rocketrio.protocol.message_format import decode_properties, encode_properties
from rocketrio.protocol.reply import (
    NotARequest,
    ReplyMessageRequestHeader,
    reply_properties,
    reply_topic,
)
from rocketrio.protocol.serde import from_ext


def _producers() -> ProducerManager:
    pm = ProducerManager()
    pm.register("g1", ClientChannelInfo("conn-old", "10.0.0.1@c", "PYTHON", 1, 5.0))
    pm.register("g2", ClientChannelInfo("conn-new", "10.0.0.1@c", "PYTHON", 1, 9.0))
    pm.register("g1", ClientChannelInfo("conn-other", "10.0.0.2@c", "JAVA", 1, 9.0))
    return pm


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"REPLY_TO_CLIENT": "10.0.0.1@c"}, "conn-new"),  # the most recently heard connection
        ({"REPLY_TO_CLIENT": "10.0.0.2@c"}, "conn-other"),
        (
            {"REPLY_TO_CLIENT": "10.9.9.9@x"},
            "push reply message fail, channel of <10.9.9.9@x> not found.",
        ),
        ({}, "reply message properties[REPLY_TO_CLIENT] is null"),
    ],
)
def test_push_target(props: dict[str, str], expected: str) -> None:
    got = push_target(props, _producers())
    assert (got if isinstance(got, str) else got.conn) == expected


def test_push_request_carries_the_reply_and_the_push_time() -> None:
    h = SendMessageRequestHeader("pg", reply_topic("C1"), "TBW102", 4, 0, 0, 111, 3, "a\x01b")
    cmd = push_request(h, b"body", {"a": "b"}, born_addr="1.2.3.4:5", store_host="9.9.9.9:10911",
                       now_ms=222)  # fmt: skip
    assert cmd.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT
    assert cmd.body == b"body"
    got = from_ext(ReplyMessageRequestHeader, cmd.ext_fields)
    assert (got.topic, got.bornHost, got.storeHost, got.storeTimestamp, got.flag) == (
        "C1_REPLY_TOPIC", "1.2.3.4:5", "9.9.9.9:10911", 222, 3,
    )  # fmt: skip
    assert decode_properties(got.properties or "") == {"a": "b", "PUSH_REPLY_TIME": "222"}


def test_answers_follow_upstream() -> None:
    pushed = after_push(True, None, 0)
    assert pushed == ReplyAnswer(True, None, "0", 0, 0)
    failed = after_push(False, "why", 0)
    assert failed == ReplyAnswer(False, "why", None, 0, 0)
    stored = SendStored(PutStatus.PUT_OK, None, "OFFSETID", 0, 7, "UNIQ")
    assert after_store(pushed, stored) == ReplyAnswer(True, None, "OFFSETID", 0, 7)
    # a stored reply keeps the failed push's code and remark, with the stored ids
    assert after_store(failed, stored) == ReplyAnswer(False, "why", "OFFSETID", 0, 7)
    assert after_store(pushed, PutFailed(PutStatus.UNKNOWN_ERROR, "x")) == pushed


def test_reply_properties_as_message_util() -> None:
    request = {"CLUSTER": "C1", "CORRELATION_ID": "id", "REPLY_TO_CLIENT": "r@1", "TTL": "3000",
               "KEYS": "k"}  # fmt: skip
    topic, props = reply_properties(request)
    assert topic == "C1_REPLY_TOPIC"
    assert props == {"MSG_TYPE": "reply", "CORRELATION_ID": "id", "REPLY_TO_CLIENT": "r@1",
                     "TTL": "3000"}  # fmt: skip
    with pytest.raises(NotARequest, match=r"property\[CLUSTER\] is null"):
        reply_properties({"CORRELATION_ID": "id"})


@pytest.mark.parametrize(
    ("props", "reply"),
    [
        ({"MSG_TYPE": "reply"}, True),
        ({"TAGS": "t", "MSG_TYPE": "reply", "WAIT": "true"}, True),
        ({"MSG_TYPE": "replyX"}, False),
        ({"XMSG_TYPE": "reply"}, False),
        ({"TAGS": "MSG_TYPE"}, False),
        ({}, False),
    ],
)
def test_which_sends_are_replies(props: dict[str, str], reply: bool) -> None:
    assert is_reply_props(encode_properties(props)) is reply
