"""Request-reply (RPC) messages on the wire: upstream's property names, the reply topic and the
PUSH_REPLY_MESSAGE_TO_CLIENT (326) header.

A requester sends an ordinary message carrying CORRELATION_ID (its own id for the request),
REPLY_TO_CLIENT (its client id) and TTL (the request's timeout in ms). The broker that stores
it adds CLUSTER. A responder builds the reply (`reply_properties`, upstream
MessageUtil.createReplyMessage): topic ``<cluster>_REPLY_TOPIC``, MSG_TYPE ``reply`` and the three
properties copied, and sends it with SEND_REPLY_MESSAGE_V2 (325). The broker pushes it to the
requester's connection with 326 (`ReplyMessageRequestHeader`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from rocketrio.protocol.message_format import PROPERTY_CLUSTER, PROPERTY_MESSAGE_TYPE

PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
PROPERTY_MESSAGE_TTL: Final = "TTL"
PROPERTY_REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
REPLY_TOPIC_POSTFIX: Final = "REPLY_TOPIC"
REPLY_MESSAGE_FLAG: Final = "reply"  # the MSG_TYPE value of a reply


def reply_topic(cluster: str) -> str:
    """The cluster's reply topic (upstream MixAll.getReplyTopic)."""
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


def is_reply(props: Mapping[str, str]) -> bool:
    """Whether a message with these properties is a reply (sent with 324/325)."""
    return props.get(PROPERTY_MESSAGE_TYPE) == REPLY_MESSAGE_FLAG


class NotARequest(ValueError):
    """The message has no CLUSTER property: not a request a broker stored (upstream
    CREATE_REPLY_MESSAGE_EXCEPTION)."""


def reply_properties(request_props: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """(reply topic, the reply's properties) for a received request's properties."""
    cluster = request_props.get(PROPERTY_CLUSTER)
    if cluster is None:
        raise NotARequest(
            f"create reply message fail, requestMessage error, property[{PROPERTY_CLUSTER}] "
            "is null."
        )
    props = {PROPERTY_MESSAGE_TYPE: REPLY_MESSAGE_FLAG}
    for key in (PROPERTY_CORRELATION_ID, PROPERTY_MESSAGE_REPLY_TO_CLIENT, PROPERTY_MESSAGE_TTL):
        value = request_props.get(key)
        if value is not None:
            props[key] = value
    return reply_topic(cluster), props


@attrs.define(slots=True)
class ReplyMessageRequestHeader:
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): the reply as the requester receives it."""

    producerGroup: str
    topic: str
    defaultTopic: str
    defaultTopicQueueNums: int
    queueId: int
    sysFlag: int
    bornTimestamp: int
    flag: int
    bornHost: str
    storeHost: str
    storeTimestamp: int
    properties: str | None = None
    reconsumeTimes: int | None = None
    unitMode: bool = False
