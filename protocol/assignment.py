"""The bodies of the broker's queue assignment (upstream's POP-mode rebalance on the broker):
QUERY_ASSIGNMENT (400) asks which queues a consumer owns, SET_MESSAGE_REQUEST_MODE (401) turns
a group's topic to PULL or POP (``mqadmin setConsumeMode``), GET_ALL_MESSAGE_REQUEST_MODE (402)
answers every mode a broker keeps (what a slave copies from its master).

Written with `fastjson.encode` (alphabetical, compact, None omitted: a response without
``messageQueueAssignments`` is upstream's null set, "no valid answer, keep what you have").
``mode`` and ``messageModel`` are checked on decoding: anything but upstream's enum names is a
`HeaderError` naming the field.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import attrs

from rocketrio.protocol.bodies import MessageQueue

PULL: Final = "PULL"
POP: Final = "POP"
REQUEST_MODES: Final = (PULL, POP)  # upstream MessageRequestMode
CLUSTERING: Final = "CLUSTERING"
BROADCASTING: Final = "BROADCASTING"
MESSAGE_MODELS: Final = (CLUSTERING, BROADCASTING)  # upstream MessageModel


def _one_of(names: tuple[str, ...]) -> Callable[[Any, attrs.Attribute[str], str], None]:
    def check(_inst: Any, attribute: attrs.Attribute[str], value: str) -> None:
        if value not in names:
            raise ValueError(f"{attribute.name} must be one of {', '.join(names)}, not {value!r}")

    return check


@attrs.define(slots=True)
class QueryAssignmentRequestBody:
    topic: str
    consumerGroup: str
    clientId: str
    strategyName: str | None = None  # the client's AllocateMessageQueueStrategy name
    messageModel: str = attrs.field(default=CLUSTERING, validator=_one_of(MESSAGE_MODELS))


@attrs.define(slots=True, frozen=True)
class MessageQueueAssignment:
    messageQueue: MessageQueue
    mode: str = PULL  # upstream's default; ``attachments`` (always null) is omitted


@attrs.define(slots=True)
class QueryAssignmentResponseBody:
    messageQueueAssignments: list[MessageQueueAssignment] | None = None


@attrs.define(slots=True)
class SetMessageRequestModeRequestBody:
    topic: str
    consumerGroup: str
    mode: str = attrs.field(default=PULL, validator=_one_of(REQUEST_MODES))
    popShareQueueNum: int = 0


@attrs.define(slots=True)
class MessageRequestModeSerializeWrapper:
    """GET_ALL_MESSAGE_REQUEST_MODE's body and messageRequestMode.json: topic -> group -> mode."""

    messageRequestModeMap: dict[str, dict[str, SetMessageRequestModeRequestBody]] = attrs.field(
        factory=dict
    )
