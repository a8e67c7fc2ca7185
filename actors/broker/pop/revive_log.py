"""The revive topic's records (upstream buildCkMsg / ACK message building).

Owns how CK and ACK records become messages of ``rmq_sys_REVIVE_LOG_<cluster>`` (queue = the
revive queue id; tag ``ck`` / ``ack`` / ``bAck``; UNIQ_KEY = upstream's genCkUniqueId /
genAckUniqueId; body = the record's JSON) and how such a message is read back into a typed
`ReviveRecord`. They are stored with `store.messages.put_and_wait`, so a CK is in the CommitLog
before its POP is answered, and an ACK before the ACK is.

Durability is the CommitLog's: the records are ordinary messages, flushed like any other.
"""

from __future__ import annotations

import attrs

from rocketrio.protocol.message import PROPERTY_TAGS, UNIQ_KEY, MessageExt
from rocketrio.protocol.pop_checkpoint import AckMsg, PopCheckPoint, PopRecordError
from rocketrio.protocol.pop_extra_info import ACK_TAG, BATCH_ACK_TAG, CK_TAG
from rocketrio.storage.message_store import MessageToStore

Host = tuple[bytes, int]


@attrs.define(slots=True)
class ReviveMessage(MessageToStore):
    """A CK or ACK record to store, with the record it encodes: once the store says where it
    put it, the revive task is given the record itself (revive_feed.py) instead of reading its
    bytes back and decoding them."""

    record: PopCheckPoint | AckMsg = attrs.field(kw_only=True)


def ck_message(
    ck: PopCheckPoint, revive_topic: str, revive_qid: int, now_ms: int, host: Host
) -> ReviveMessage:
    return ReviveMessage(
        topic=revive_topic,
        queue_id=revive_qid,
        body=ck.to_json(),
        properties={PROPERTY_TAGS: CK_TAG, UNIQ_KEY: ck.unique_id()},
        born_timestamp=now_ms,
        born_host=host,
        record=ck,
    )


def ack_message(
    ack: AckMsg, revive_topic: str, revive_qid: int, now_ms: int, host: Host
) -> ReviveMessage:
    return ReviveMessage(
        topic=revive_topic,
        queue_id=revive_qid,
        body=ack.to_json(),
        properties={PROPERTY_TAGS: ack.tag, UNIQ_KEY: ack.unique_id()},
        born_timestamp=now_ms,
        born_host=host,
        record=ack,
    )


@attrs.frozen
class CkRecord:
    ck: PopCheckPoint
    offset: int


@attrs.frozen
class AckRecord:
    ack: AckMsg
    offset: int


@attrs.frozen
class OtherRecord:
    """A message of the revive topic that is neither (unknown tag or unreadable body)."""

    offset: int
    why: str


ReviveRecord = CkRecord | AckRecord | OtherRecord


def read_record(msg: MessageExt) -> ReviveRecord:
    tag = msg.properties.get(PROPERTY_TAGS)
    try:
        if tag == CK_TAG:
            return CkRecord(PopCheckPoint.from_json(msg.body), msg.queue_offset)
        if tag == ACK_TAG:
            return AckRecord(AckMsg.from_json(msg.body, batch=False), msg.queue_offset)
        if tag == BATCH_ACK_TAG:
            return AckRecord(AckMsg.from_json(msg.body, batch=True), msg.queue_offset)
    except PopRecordError as e:
        return OtherRecord(msg.queue_offset, str(e))
    return OtherRecord(msg.queue_offset, f"tag {tag!r}")
