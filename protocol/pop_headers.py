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
