"""Typed headers of the POP probes (upstream PeekMessageRequestHeader, NotificationRequestHeader,
NotificationResponseHeader, PollingInfoRequestHeader, PollingInfoResponseHeader).

Attribute names are upstream's extField keys (`serde.from_ext` / `serde.to_ext` convert them);
required fields have no default, optional ones default to None. The request codes
(PEEK_MESSAGE=200052, NOTIFICATION=200054, POLLING_INFO=200055) are in `protocol.codes`. A
PEEK_MESSAGE is answered with POP_MESSAGE's `pop_headers.PopMessageResponseHeader` (restNum only).
"""

from __future__ import annotations

import attrs


@attrs.define(slots=True)
class PeekMessageRequestHeader:
    topic: str
    queueId: int  # negative: every queue of the topic
    maxMsgNums: int
    consumerGroup: str
    bname: str | None = None


@attrs.define(slots=True)
class NotificationRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int  # negative: every queue of the topic
    pollTime: int  # ms the request may be held when nothing is there
    bornTime: int | None = None  # ms; 0 or absent (upstream adds it) means "now"
    order: bool | None = None
    attemptId: str | None = None
    bname: str | None = None


@attrs.define(slots=True)
class NotificationResponseHeader:
    hasMsg: bool


@attrs.define(slots=True)
class PollingInfoRequestHeader:
    consumerGroup: str
    topic: str
    queueId: int
    bname: str | None = None


@attrs.define(slots=True)
class PollingInfoResponseHeader:
    pollingNum: int
