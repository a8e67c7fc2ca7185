"""Typed headers of the POP calls (upstream PopMessageRequestHeader, AckMessageRequestHeader,
ChangeInvisibleTimeRequestHeader and their response headers).

Attribute names are upstream's extField keys (`serde.from_ext` / `serde.to_ext` convert them);
required fields have no default, optional ones default to None. The request codes
(POP_MESSAGE=200050, ACK_MESSAGE=200051, CHANGE_MESSAGE_INVISIBLETIME=200053,
BATCH_ACK_MESSAGE=200151) are in `protocol.codes`; BATCH_ACK_MESSAGE's body is
`actors.broker.pop_checkpoint.BatchAckMessageRequestBody`.
"""

from __future__ import annotations

import attrs


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
