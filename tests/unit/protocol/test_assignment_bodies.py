"""The assignment bodies (protocol/assignment.py) against upstream 5.2.0's bytes
(the golden files of /work/shared/reference/admin-bodies, inlined): each decodes and re-encodes
byte-identically, a live broker's set of assignments decodes, no answer is ``{}``, and a
mode or message model that is not upstream's enum name is refused naming the field."""

from __future__ import annotations

import pytest

from rocketrio.protocol import fastjson
from rocketrio.protocol.assignment import (
    MessageQueueAssignment,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.serde import HeaderError, from_json

REQUEST = (
    b'{"clientId":"127.0.0.1@12345#1","consumerGroup":"group_a","messageModel":"CLUSTERING",'
    b'"strategyName":"AVG","topic":"TopicTest"}'
)
SET_MODE = b'{"consumerGroup":"group_a","mode":"POP","popShareQueueNum":0,"topic":"TopicTest"}'
LIVE = (
    b'{"messageQueueAssignments":[{"messageQueue":{"brokerName":"broker-a","queueId":3,'
    b'"topic":"TopicTest"},"mode":"PULL"},{"messageQueue":{"brokerName":"broker-a","queueId":1,'
    b'"topic":"TopicTest"},"mode":"PULL"}]}'
)


@pytest.mark.parametrize(
    ("cls", "data"),
    [
        (QueryAssignmentRequestBody, REQUEST),
        (SetMessageRequestModeRequestBody, SET_MODE),
        (QueryAssignmentResponseBody, LIVE),
    ],
)
def test_upstream_bytes_round_trip(cls: type, data: bytes) -> None:
    assert fastjson.encode(from_json(cls, data)) == data


def test_the_response_lists_queues_and_modes_and_no_answer_is_empty() -> None:
    body = from_json(QueryAssignmentResponseBody, LIVE)
    assert body.messageQueueAssignments == [
        MessageQueueAssignment(MessageQueue("TopicTest", "broker-a", 3), "PULL"),
        MessageQueueAssignment(MessageQueue("TopicTest", "broker-a", 1), "PULL"),
    ]
    assert fastjson.encode(QueryAssignmentResponseBody(None)) == b"{}"


@pytest.mark.parametrize(
    ("cls", "data", "field"),
    [
        (SetMessageRequestModeRequestBody, SET_MODE.replace(b'"POP"', b'"PUSH"'), "mode"),
        (QueryAssignmentRequestBody, REQUEST.replace(b"CLUSTERING", b"CLUSTER"), "messageModel"),
        (SetMessageRequestModeRequestBody, b'{"mode":"POP"}', "topic"),
    ],
)
def test_a_bad_enum_or_missing_field_is_refused_by_name(cls: type, data: bytes, field: str) -> None:
    with pytest.raises(HeaderError, match=field):
        from_json(cls, data)
