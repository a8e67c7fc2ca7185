"""Whether each consumer group has consumed one message (upstream MessageTrack / TrackType).

Pure: `decide_track` takes what the admin shell fetched from the broker holding the message
(the group's ConsumerConnection or the failure asking for it, and the group's ConsumeStats or
the failure asking for them) and returns the group's `MessageTrack`. The rules are
DefaultMQAdminExtImpl.messageTrackDetail's:

- the connection lookup failed: NOT_ONLINE when the broker said CONSUMER_NOT_ONLINE (206),
  otherwise UNKNOWN, with the failure as ``exceptionDesc``;
- a pull consumer (CONSUME_ACTIVELY) keeps its offsets itself: PULL;
- a push consumer (CONSUME_PASSIVELY): CONSUMED when the group's consumer offset of the
  message's queue is past the message's queue offset, CONSUMED_BUT_FILTERED when moreover its
  subscription of the topic names tags and not the message's, NOT_CONSUME_YET otherwise; an
  empty offset table of a BROADCASTING group is CONSUME_BROADCASTING (its offsets live in the
  clients), and a failed stats lookup is UNKNOWN with the failure.
"""

from __future__ import annotations

import enum

import attrs

from rocketrio.protocol.bodies import ConsumerConnection, ConsumeStats, MessageQueue
from rocketrio.protocol.codes import ResponseCode

CONSUME_ACTIVELY = "CONSUME_ACTIVELY"
CONSUME_PASSIVELY = "CONSUME_PASSIVELY"
BROADCASTING = "BROADCASTING"


class TrackType(enum.Enum):
    """upstream tools.admin.api.TrackType, same names."""

    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    PULL = "PULL"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"
    CONSUME_BROADCASTING = "CONSUME_BROADCASTING"
    UNKNOWN = "UNKNOWN"


@attrs.frozen
class LookupFailure:
    """A lookup the broker refused (``code`` its response code) or that got no answer
    (``code`` None); ``desc`` says which, as upstream's ``CODE:<n> DESC:<remark>``."""

    code: int | None
    desc: str


@attrs.frozen
class MessageTrack:
    """One consumer group's track of a message (upstream MessageTrack's fields)."""

    consumerGroup: str
    trackType: TrackType
    exceptionDesc: str | None = None


@attrs.frozen
class TrackedMessage:
    """Where the message sits: the queue (with the broker's name) and its offset there."""

    queue: MessageQueue
    queue_offset: int
    tags: str | None


def decide_track(
    group: str,
    msg: TrackedMessage,
    connection: ConsumerConnection | LookupFailure,
    stats: ConsumeStats | LookupFailure | None,
) -> MessageTrack:
    """The group's track of ``msg``; ``stats`` is only read for a push consumer (None is
    accepted for the other cases, which do not need it)."""
    if isinstance(connection, LookupFailure):
        if connection.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return MessageTrack(group, TrackType.NOT_ONLINE, connection.desc)
        return MessageTrack(group, TrackType.UNKNOWN, connection.desc)
    if connection.consumeType == CONSUME_ACTIVELY:
        return MessageTrack(group, TrackType.PULL)
    if connection.consumeType != CONSUME_PASSIVELY:
        return MessageTrack(group, TrackType.UNKNOWN, f"consumeType {connection.consumeType}")
    if stats is None:
        return MessageTrack(group, TrackType.UNKNOWN, "no consume stats asked for")
    if isinstance(stats, LookupFailure):
        return MessageTrack(group, TrackType.UNKNOWN, stats.desc)
    if not stats.offsetTable and connection.messageModel == BROADCASTING:
        return MessageTrack(group, TrackType.CONSUME_BROADCASTING)
    wrapper = stats.offsetTable.get(msg.queue)
    if wrapper is None or wrapper.consumerOffset <= msg.queue_offset:
        return MessageTrack(group, TrackType.NOT_CONSUME_YET)
    sub = connection.subscriptionTable.get(msg.queue.topic)
    if sub is not None and sub.tagsSet and "*" not in sub.tagsSet:
        if msg.tags not in sub.tagsSet:
            return MessageTrack(group, TrackType.CONSUMED_BUT_FILTERED)
    return MessageTrack(group, TrackType.CONSUMED)
