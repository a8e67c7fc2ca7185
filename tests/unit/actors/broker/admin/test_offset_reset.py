"""Moving consumer offsets: the bodies against upstream 5.2.0's bytes, the target-offset policy
(upstream Broker2Client.resetOffset), mqadmin's timestamp forms, and the client's reading of
RESET_CONSUMER_CLIENT_OFFSET bodies in both shapes."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.auth.rights import rights_of
from rocketrio.actors.broker.admin.offset_reset import explicit_offset_refusal, reset_target
from rocketrio.actors.client.errors import UsageError
from rocketrio.actors.client.mq_client import decode_reset_offsets
from rocketrio.cli.admin_offsets import parse_bool, parse_timestamp
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import MessageQueue, ResetOffsetBody, ResetOffsetBodyForC
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import CloneGroupOffsetRequestHeader, ResetOffsetRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext
from tests.harness.paths import GOLDEN_ADMIN_BODIES

GOLDEN = GOLDEN_ADMIN_BODIES


def golden(name: str) -> bytes:
    return (GOLDEN / f"{name}.json").read_bytes()


def mq(i: int) -> MessageQueue:
    return MessageQueue("TopicTest", "broker-a", i)


def sample() -> ResetOffsetBody:
    return ResetOffsetBody({mq(i): 100 * i for i in range(4)})


# ---------------------------------------------------------------------------- golden bodies


def test_reset_offset_body_bytes() -> None:
    """remoting/src/main/java/org/apache/rocketmq/remoting/protocol/body/ResetOffsetBody.java,
    as Broker2Client#resetOffset builds it (the 220 request and the 222 answer)."""
    assert fastjson.encode(sample()) == golden("reset_offset_body")


def test_reset_offset_body_for_c_bytes() -> None:
    """remoting/.../protocol/body/ResetOffsetBodyForC.java with
    common/src/main/java/org/apache/rocketmq/common/message/MessageQueueForC.java."""
    assert fastjson.encode(ResetOffsetBodyForC.of(sample())) == golden("reset_offset_body_for_c")


def test_live_reset_offset_body_decodes() -> None:
    """The 222 answer of a real 5.2.0 broker (force, timestamp 0): every queue at 0."""
    body = from_json(ResetOffsetBody, golden("live_reset_offset_body"))
    assert body.offsetTable == {mq(i): 0 for i in range(4)}


def test_constructed_bodies_round_trip() -> None:
    assert from_json(ResetOffsetBody, golden("reset_offset_body")) == sample()
    c = from_json(ResetOffsetBodyForC, golden("reset_offset_body_for_c"))
    assert c.to_body() == sample()


def test_client_reads_both_body_shapes() -> None:
    assert decode_reset_offsets(golden("reset_offset_body")) == sample().offsetTable
    assert decode_reset_offsets(golden("reset_offset_body_for_c")) == sample().offsetTable
    assert decode_reset_offsets(b"") == {}


def test_headers_use_upstream_ext_field_names() -> None:
    h = ResetOffsetRequestHeader("T", "G", -1, True)
    assert to_ext(h) == {
        "topic": "T",
        "group": "G",
        "timestamp": "-1",
        "isForce": "true",
        "queueId": "-1",
    }
    one = ResetOffsetRequestHeader("T", "G", 0, False, queueId=2, offset=7)
    assert from_ext(ResetOffsetRequestHeader, to_ext(one)) == one
    clone = CloneGroupOffsetRequestHeader("A", "B", "T", True)
    assert to_ext(clone) == {"srcGroup": "A", "destGroup": "B", "topic": "T", "offline": "true"}


# ---------------------------------------------------------------------------- the policy


@pytest.mark.parametrize(
    ("found", "committed", "force", "target"),
    [
        (5, 10, False, 5),  # back in time: moves back
        (15, 10, False, 10),  # not forced: never forward
        (10, 10, False, 10),
        (15, 10, True, 15),  # forced: forward too (skipAccumulatedMessage)
        (5, 10, True, 5),
        (-1, 10, True, 0),  # nothing found: the queue's start
        (-1, 10, False, 0),
    ],
)
def test_reset_target(found: int, committed: int, force: bool, target: int) -> None:
    assert reset_target(found, committed, force) == target


@given(st.integers(-5, 10**6), st.integers(0, 10**6), st.booleans())
def test_a_non_forced_reset_never_moves_forward(found: int, committed: int, force: bool) -> None:
    t = reset_target(found, committed, force)
    assert t >= 0
    if not force:
        assert t <= committed
    else:
        assert t == max(found, 0)


def test_explicit_offset_must_lie_in_the_queue() -> None:
    assert explicit_offset_refusal(5, 0, 10) is None
    assert explicit_offset_refusal(11, 0, 10) is None  # one past the end, as upstream
    low = explicit_offset_refusal(2, 3, 10)
    high = explicit_offset_refusal(12, 0, 10)
    assert low is not None and low.code == ResponseCode.SYSTEM_ERROR
    assert high is not None and "not in consume queue range [0-10]" in high.remark


# ---------------------------------------------------------------------------- mqadmin's -s


def test_timestamp_forms() -> None:
    utc = dt.UTC
    assert parse_timestamp("now", 1234) == 1234
    assert parse_timestamp("1700000000123", 0) == 1700000000123
    assert parse_timestamp("2023-11-14#22:13:20:123", 0, utc) == 1700000000123
    kolkata = dt.timezone(dt.timedelta(hours=5, minutes=30))
    assert parse_timestamp("2023-11-15#03:43:20:000", 0, kolkata) == 1700000000000
    with pytest.raises(UsageError, match="yyyy-MM-dd#HH:mm:ss:SSS"):
        parse_timestamp("yesterday", 0)


def test_force_flag_values() -> None:
    assert parse_bool(None, "-f", True) is True
    assert parse_bool("false", "-f", True) is False
    assert parse_bool("TRUE", "-f", False) is True
    with pytest.raises(UsageError, match="-f must be true or false"):
        parse_bool("yes", "-f", True)


def test_acl_rights_are_upstreams() -> None:
    """With ACL 2.0 on, a reset needs Update on the group and the topic, a clone Update on
    the destination group (and the topic when named), as upstream's header annotations."""
    reset = RemotingCommand(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
        ext_fields=to_ext(ResetOffsetRequestHeader("T", "G", -1, True)),
    )
    assert [r.describe() for r in rights_of(reset, "C")] == [
        "Update on Group:G",
        "Update on Topic:T",
    ]
    clone = RemotingCommand(
        RequestCode.CLONE_GROUP_OFFSET,
        ext_fields=to_ext(CloneGroupOffsetRequestHeader("A", "B", "T")),
    )
    assert [r.describe() for r in rights_of(clone, "C")] == [
        "Update on Group:B",
        "Update on Topic:T",
    ]
