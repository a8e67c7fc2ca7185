"""Typed headers of the POP calls (upstream PopMessageRequestHeader, AckMessageRequestHeader,
ChangeInvisibleTimeRequestHeader and their response headers).

Attribute names are upstream's extField keys (`serde.from_ext` / `serde.to_ext` convert them);
required fields have no default, optional ones default to None. The request codes
(POP_MESSAGE=200050, ACK_MESSAGE=200051, CHANGE_MESSAGE_INVISIBLETIME=200053,
BATCH_ACK_MESSAGE=200151) are in `protocol.codes`; BATCH_ACK_MESSAGE's body is
`actors.broker.pop_checkpoint.BatchAckMessageRequestBody`.

`ack_request` reads an ACK_MESSAGE's fields and its receipt in one call (the direct ACK path,
one per acknowledged message): protocol/speedups/ack_request.c when compiled, `ack_request_py`
(the reference) else.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.pop_extra_info import ExtraInfoError, parse_fields


@attrs.define(slots=True)
class PopMessageRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int  # -1: any queue of the topic
    maxMsgNums: int
    invisibleTime: int  # ms
    pollTime: int  # ms a pop that finds nothing may be held
    bornTime: int
    initMode: int  # ConsumeInitMode: 0 MIN, 1 MAX
    expType: str | None = None
    exp: str | None = None
    order: bool | None = None
    attemptId: str | None = None
    bname: str | None = None


@attrs.define(slots=True)
class PopMessageResponseHeader:
    popTime: int
    invisibleTime: int
    reviveQid: int
    restNum: int
    startOffsetInfo: str | None = None
    msgOffsetInfo: str | None = None
    orderCountInfo: str | None = None


@attrs.define(slots=True)
class AckMessageRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    extraInfo: str
    offset: int
    bname: str | None = None


# what an ACK_MESSAGE's handler uses of its header: consumerGroup, topic, queueId, extraInfo, offset
AckFields = tuple[str, str, int, str, int]


def ack_fields(ext: dict[str, str]) -> AckFields | None:
    """`AckMessageRequestHeader`'s fields but bname, read straight from the extFields of an
    ACK_MESSAGE (one per acknowledged message: no header object, no `from_ext` dispatch).
    Exactly what `serde.from_ext` takes as is (each field present and a str, the two numbers
    ``int()`` of it); anything else is None, and the caller asks `from_ext`, whose value or
    HeaderError it is (tests/unit/protocol/test_pop_headers.py holds the two together)."""
    try:
        group = ext["consumerGroup"]
        topic = ext["topic"]
        queue_id = ext["queueId"]
        extra_info = ext["extraInfo"]
        offset = ext["offset"]
        if (
            group.__class__ is str
            and topic.__class__ is str
            and queue_id.__class__ is str
            and extra_info.__class__ is str
            and offset.__class__ is str
        ):
            return group, topic, int(queue_id), extra_info, int(offset)
    except (KeyError, ValueError):
        pass
    return None


# `ack_fields`, then the receipt's ck_offset, pop_time, revive_qid, retry and broker_name
AckRequest = tuple[str, str, int, str, int, int, int, int, str, str]


def ack_request_py(ext: dict[str, str]) -> AckRequest | None:
    """`ack_fields` and the receipt's `parse_fields` in one: the ACK's five fields, then the
    fields of its extraInfo an ACK uses; None where either step would not give plain values
    (`ack_fields` None, or `parse_fields` raising): the caller then takes the two steps, whose
    values or refusals are theirs."""
    f = ack_fields(ext)
    if f is None:
        return None
    try:
        ck_offset, pop_time, _, revive_qid, retry, broker_name, _, _ = parse_fields(f[3])
    except ExtraInfoError:
        return None
    return (*f, ck_offset, pop_time, revive_qid, retry, broker_name)


# the compiled twin takes a plain ACK and declines (None) the rest, which the Python steps decide
ack_request: Callable[[dict[str, str]], AckRequest | None] = (
    ack_request_py if _speedups is None else _speedups.ack_request
)


@attrs.define(slots=True)
class ChangeInvisibleTimeRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    extraInfo: str
    offset: int
    invisibleTime: int
    bname: str | None = None


@attrs.define(slots=True)
class ChangeInvisibleTimeResponseHeader:
    popTime: int
    invisibleTime: int
    reviveQid: int


@attrs.define(slots=True)
class PopInflightItem:
    topic: str
    queueId: int
    inflight: int


@attrs.define(slots=True)
class PopInflightBody:
    """GET_POP_INFLIGHT's answer (rocketrio): the group's popped, unacknowledged messages per
    queue as the broker's revive service last read them; reviveRunning=false on a broker that
    does not run it (a slave), whose counts are then empty."""

    brokerName: str
    reviveRunning: bool
    items: list[PopInflightItem] = attrs.field(factory=list)
