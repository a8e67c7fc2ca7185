"""The pure parts of PullMessage and the offset RPCs: a request's queue, the pull status codes,
the stream's order, the exact tag filter."""

from __future__ import annotations

import pytest

from rocketrio.actors.client.api import PullStatus
from rocketrio.actors.proxy.mapping import BadRequest
from rocketrio.actors.proxy.offsets import message_queue_of, pull_code, pull_responses, tag_filter
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.message import MessageExt


def mq(topic: str = "T", broker: str = "b", qid: int = 1) -> pb.MessageQueue:
    return pb.MessageQueue(topic=pb.Resource(name=topic), id=qid, broker=pb.Broker(name=broker))


def test_message_queue_of() -> None:
    assert message_queue_of(mq()) == MessageQueue("T", "b", 1)
    for bad, code in ((mq(topic=""), pb.ILLEGAL_TOPIC), (mq(broker=""), pb.BAD_REQUEST),
                      (mq(qid=-1), pb.BAD_REQUEST)):  # fmt: skip
        with pytest.raises(BadRequest) as e:
            message_queue_of(bad)
        assert e.value.code == code


@pytest.mark.parametrize(
    ("pull_status", "code"),
    [
        (PullStatus.FOUND, pb.OK),
        (PullStatus.NO_NEW_MSG, pb.MESSAGE_NOT_FOUND),
        (PullStatus.NO_MATCHED_MSG, pb.MESSAGE_NOT_FOUND),
        (PullStatus.OFFSET_ILLEGAL, pb.ILLEGAL_OFFSET),
    ],
)
def test_pull_codes(pull_status: PullStatus, code: int) -> None:
    assert pull_code(pull_status) == code


def test_pull_stream_is_status_then_messages_then_next_offset() -> None:
    msgs = [pb.Message(body=b"a"), pb.Message(body=b"b")]
    out = pull_responses(pb.OK, "FOUND", msgs, 7)
    assert [r.WhichOneof("content") for r in out] == ["status", "message", "message", "next_offset"]
    assert out[0].status.code == pb.OK and out[-1].next_offset == 7
    assert [r.message.body for r in out[1:-1]] == [b"a", b"b"]
    empty = pull_responses(pb.MESSAGE_NOT_FOUND, "NO_NEW_MSG", [], 3)
    assert [r.WhichOneof("content") for r in empty] == ["status", "next_offset"]


def tagged(tag: str | None) -> MessageExt:
    return MessageExt("T", b"", properties={} if tag is None else {"TAGS": tag})


def test_tag_filter() -> None:
    every = tag_filter(pb.FilterExpression(type=pb.TAG, expression="*"))
    assert every(tagged(None)) and every(tagged("x"))
    ab = tag_filter(pb.FilterExpression(type=pb.TAG, expression="a || b"))
    assert [ab(tagged(t)) for t in ("a", "b", "c", None)] == [True, True, False, False]
    # SQL92: left to the broker once it compiles; one that does not is refused by name
    sql = tag_filter(pb.FilterExpression(type=pb.SQL, expression="a > 1"))
    assert sql(tagged("x"))
    with pytest.raises(BadRequest) as e:
        tag_filter(pb.FilterExpression(type=pb.SQL, expression="a >"))
    assert e.value.code == pb.ILLEGAL_FILTER_EXPRESSION
    assert "ParseException" in str(e.value)
