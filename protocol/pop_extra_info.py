"""POP names and receipts (upstream KeyBuilder, PopAckConstants, ExtraInfoUtil): pure text.

Owns the strings a POP consumer and the broker exchange and that must match upstream byte for
byte, so an upstream client can ack what rocketrio popped:

- topic names: the pop retry topic ``%RETRY%<group>_<topic>`` (V1; V2 uses ``+``), the revive
  topic ``rmq_sys_REVIVE_LOG_<cluster>``, the revive group ``CID_RMQ_SYS_REVIVE_GROUP``;
- the retry mark of a topic: "0" normal, "1" pop retry V1 (any ``%RETRY%`` topic), "2" V2;
- the extraInfo (receipt handle, the POP_CK property): space-separated
  ``ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId [queueOffset]``;
- the POP_MESSAGE response's ``startOffsetInfo`` / ``msgOffsetInfo`` (``retry queueId value``
  entries joined by ``;``) and, for an ordered pop, ``orderCountInfo``: ``retry qo<queueId>%<offset>
  count`` per message delivered before, then ``retry queueId minCount`` (upstream's
  buildQueueOffsetOrderCountInfo / buildQueueIdOrderCountInfo).

Everything here is a function of its arguments: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

POP_ORDER_REVIVE_QUEUE = 999
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
SPLIT = "@"
KEY_SEPARATOR = " "
PROPERTY_POP_CK = "POP_CK"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
QUEUE_OFFSET_MARK = "qo"  # orderCountInfo's per-message key: qo<queueId>%<offset>
RETRY_PREFIX = "%RETRY%"
NORMAL_TOPIC = "0"
RETRY_TOPIC = "1"
RETRY_TOPIC_V2 = "2"
# ConsumeInitMode
INIT_MODE_MIN = 0
INIT_MODE_MAX = 1


class ExtraInfoError(ValueError):
    """A receipt handle (extraInfo) that is not in upstream's format."""


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic_v1(topic: str, group: str) -> str:
    return f"{RETRY_PREFIX}{group}_{topic}"


def pop_retry_topic_v2(topic: str, group: str) -> str:
    return f"{RETRY_PREFIX}{group}+{topic}"


def pop_retry_topic(topic: str, group: str, v2: bool) -> str:
    return pop_retry_topic_v2(topic, group) if v2 else pop_retry_topic_v1(topic, group)


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX) and "+" in topic


def retry_flag(topic: str) -> str:
    """The retry mark upstream writes for ``topic`` in receipts and offset infos."""
    if is_pop_retry_topic_v2(topic):
        return RETRY_TOPIC_V2
    if topic.startswith(RETRY_PREFIX):
        return RETRY_TOPIC
    return NORMAL_TOPIC


def real_topic(topic: str, group: str, retry: str) -> str:
    """The topic a receipt points at: ``topic`` itself or the group's pop retry topic."""
    if retry == NORMAL_TOPIC:
        return topic
    if retry == RETRY_TOPIC:
        return pop_retry_topic_v1(topic, group)
    if retry == RETRY_TOPIC_V2:
        return pop_retry_topic_v2(topic, group)
    raise ExtraInfoError(f"retry mark {retry!r} is not 0, 1 or 2")


def normal_topic_of(retry_topic: str, group: str) -> str:
    """The topic a pop retry topic of ``group`` belongs to (upstream parseNormalTopic)."""
    for sep in ("+", "_"):
        prefix = f"{RETRY_PREFIX}{group}{sep}"
        if retry_topic.startswith(prefix):
            return retry_topic[len(prefix) :]
    return retry_topic


@attrs.frozen
class ExtraInfo:
    """One receipt handle; ``queue_offset`` is the message's own offset (None when absent)."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int | None = None

    @classmethod
    def of(
        cls,
        ck_queue_offset: int,
        pop_time: int,
        invisible_time: int,
        revive_qid: int,
        topic: str,
        broker_name: str,
        queue_id: int,
        queue_offset: int | None = None,
    ) -> ExtraInfo:
        return cls(
            ck_queue_offset,
            pop_time,
            invisible_time,
            revive_qid,
            retry_flag(topic),
            broker_name,
            queue_id,
            queue_offset,
        )

    @property
    def revive_time(self) -> int:
        """When the message becomes visible again (ms)."""
        return self.pop_time + self.invisible_time

    def build(self) -> str:
        parts = [
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry,
            self.broker_name,
            self.queue_id,
        ]
        if self.queue_offset is not None:
            parts.append(self.queue_offset)
        return KEY_SEPARATOR.join(map(str, parts))

    @classmethod
    def parse(cls, text: str) -> ExtraInfo:
        return cls(*parse_fields(text))

    def real_topic(self, topic: str, group: str) -> str:
        return real_topic(topic, group, self.retry)


# an ExtraInfo's fields in its order, as a plain tuple (what an ACK_MESSAGE reads of its receipt)
ExtraInfoFields = tuple[int, int, int, int, str, str, int, int | None]


def parse_fields(text: str) -> ExtraInfoFields:
    """`ExtraInfo.parse`'s fields without the object (ACK_MESSAGE parses one per acknowledged
    message); its checks and its ExtraInfoError are this function's."""
    parts = text.split(KEY_SEPARATOR)
    n = len(parts)
    if n != 7 and n != 8:
        raise ExtraInfoError(f"extraInfo {text!r} has {n} fields, upstream's has 7 or 8")
    try:  # positional
        return (
            int(parts[0]),  # ck_queue_offset
            int(parts[1]),  # pop_time
            int(parts[2]),  # invisible_time
            int(parts[3]),  # revive_qid
            parts[4],  # retry
            parts[5],  # broker_name
            int(parts[6]),  # queue_id
            int(parts[7]) if n == 8 else None,  # queue_offset
        )
    except ValueError as e:
        raise ExtraInfoError(f"extraInfo {text!r}: {e}") from None


def start_offset_entry(topic: str, queue_id: int, start_offset: int) -> str:
    return f"{retry_flag(topic)} {queue_id} {start_offset}"


def msg_offset_entry(topic: str, queue_id: int, offsets: Sequence[int]) -> str:
    return f"{retry_flag(topic)} {queue_id} {','.join(map(str, offsets))}"


def _parse_entries(text: str | None, what: str) -> dict[str, str]:
    if not text:
        return {}
    out: dict[str, str] = {}
    for one in text.split(";"):
        fields = one.split(KEY_SEPARATOR)
        if len(fields) != 3:
            raise ExtraInfoError(f"parse {what} error, {text}")
        key = f"{fields[0]}{SPLIT}{fields[1]}"
        if key in out:
            raise ExtraInfoError(f"parse {what} error, duplicate, {text}")
        out[key] = fields[2]
    return out


def parse_start_offset_info(text: str | None) -> dict[str, int]:
    """``{"<retry>@<queueId>": startOffset}`` like upstream parseStartOffsetInfo."""
    return {k: int(v) for k, v in _parse_entries(text, "startOffsetInfo").items()}


def parse_msg_offset_info(text: str | None) -> dict[str, list[int]]:
    """``{"<retry>@<queueId>": [queue offsets]}`` like upstream parseMsgOffsetInfo."""
    return {
        k: [int(x) for x in v.split(",")] for k, v in _parse_entries(text, "msgOffsetInfo").items()
    }


def offset_info_key(topic: str, queue_id: int) -> str:
    return f"{retry_flag(topic)}{SPLIT}{queue_id}"


def order_count_entry(topic: str, queue_id: int, by_offset: dict[int, int], min_count: int) -> str:
    """One queue's part of an ordered pop's orderCountInfo."""
    flag = retry_flag(topic)
    parts = [
        f"{flag} {QUEUE_OFFSET_MARK}{queue_id}%{offset} {count}"
        for offset, count in sorted(by_offset.items())
    ]
    parts.append(f"{flag} {queue_id} {min_count}")
    return ";".join(parts)


def parse_order_count_info(text: str | None) -> dict[str, int]:
    """``{"<retry>@qo<queueId>%<offset>" or "<retry>@<queueId>": count}`` (upstream
    parseOrderCountInfo)."""
    return {k: int(v) for k, v in _parse_entries(text, "orderCountInfo").items()}


def order_count_of(counts: dict[str, int], topic: str, queue_id: int, offset: int) -> int:
    """A message's delivery count from a parsed orderCountInfo (its own entry, else its
    queue's), as upstream's client reads it."""
    flag = retry_flag(topic)
    own = counts.get(f"{flag}{SPLIT}{QUEUE_OFFSET_MARK}{queue_id}%{offset}")
    if own is not None:
        return own
    return counts.get(f"{flag}{SPLIT}{queue_id}", 0)
