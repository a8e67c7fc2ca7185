"""Transactional messages, the pure part: message shapes, op records and the check decision.

Owns what upstream keeps in TransactionalMessageUtil, TransactionalMessageBridge (half / op /
re-put shapes) and the decision half of TransactionalMessageServiceImpl.check, without I/O,
Trio or clocks (the time is passed in). The Trio shell is transaction_service.py.

Shapes (upstream's, so a Java producer and Java tooling read them unchanged):

- a half message is the producer's message stored in RMQ_SYS_TRANS_HALF_TOPIC queue 0 with
  REAL_TOPIC / REAL_QID / __transactionId__ added and the transaction bits of sysFlag cleared;
- an op message ("this half is decided") goes to RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0 with tag
  "d" and the decided half queue offsets as its body, comma separated ("3" or "3,17");
- a commit re-puts the half to REAL_TOPIC / REAL_QID with sysFlag commit (0x8), TRAN_MSG,
  REAL_TOPIC and REAL_QID removed, the other properties (UNIQ_KEY, PGROUP ...) kept;
- a check re-puts the half to the end of the half queue with TRANSACTION_CHECK_TIMES + 1;
- a half checked transactionCheckMax times goes to TRANS_CHECK_MAX_TIME_TOPIC queue 0.

Idempotence: a transaction is identified by its UNIQ_KEY, the same in every re-put copy of the
half. `DecidedSet` remembers the keys decided while a copy may still lie ahead of the check
scan, so a second END_TRANSACTION (a duplicate, a late one for an older copy, or a check's
answer for a copy made before a restart) never commits twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

import attrs

from rocketrio.actors.broker.tables.topic_config import (
    RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
)
from rocketrio.protocol.headers import CheckTransactionStateRequestHeader
from rocketrio.protocol.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_CRC32,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    UNIQ_KEY,
    MessageExt,
    build_stored_message,
    encode_properties,
    find_property,
)
from rocketrio.storage.message_store import MessageToStore, PutResult

CID_SYS_RMQ_TRANS = "CID_RMQ_SYS_TRANS"  # upstream MixAll: the group of the scan offsets
HALF_TOPIC = RMQ_SYS_TRANS_HALF_TOPIC
OP_TOPIC = RMQ_SYS_TRANS_OP_HALF_TOPIC
CHECK_MAX_TIME_TOPIC = RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
HALF_QUEUE_ID = 0
REMOVE_TAG = "d"
OFFSET_SEPARATOR = ","
_TRANSACTION_BITS = TRANSACTION_ROLLBACK_TYPE  # 0xC: both bits


def reset_transaction_value(sys_flag: int, kind: int) -> int:
    """Upstream MessageSysFlag.resetTransactionValue: the transaction bits set to ``kind``."""
    return (sys_flag & ~_TRANSACTION_BITS) | kind


def transaction_value(sys_flag: int) -> int:
    return sys_flag & _TRANSACTION_BITS


# ---------------------------------------------------------------------------- message shapes


def half_message(msg: MessageToStore) -> MessageToStore:
    """The producer's prepared message made a half, in place (upstream
    parseHalfMessageInner). On the send path the properties are the encoded text: the three
    keys are appended (a key the client set too is read back with the last value, ours)."""
    if isinstance(msg.properties, str):
        uniq = find_property(msg.properties, _UNIQ_KEY_AT)
        text = msg.properties
        if text and not text.endswith(PROPERTY_SEPARATOR):
            text += PROPERTY_SEPARATOR
    else:
        uniq = msg.properties.get(UNIQ_KEY)
        text = encode_properties(msg.properties)
    msg.properties = text + half_keys(msg.topic, str(msg.queue_id), uniq)
    msg.topic = HALF_TOPIC
    msg.queue_id = HALF_QUEUE_ID
    msg.sys_flag = reset_transaction_value(msg.sys_flag, TRANSACTION_NOT_TYPE)
    return msg


_UNIQ_KEY_AT = UNIQ_KEY + NAME_VALUE_SEPARATOR


def half_keys(topic: str, queue_id: str, uniq: str | None) -> str:
    """``encode_properties`` of the keys a half gets (__transactionId__ when there is a
    UNIQ_KEY, REAL_TOPIC, REAL_QID), written out: no dict per half."""
    if "\x01" in topic or "\x02" in topic or (uniq and ("\x01" in uniq or "\x02" in uniq)):
        extra = {PROPERTY_REAL_TOPIC: topic, PROPERTY_REAL_QUEUE_ID: queue_id}
        return encode_properties({PROPERTY_TRANSACTION_ID: uniq, **extra} if uniq else extra)
    keys = f"{PROPERTY_REAL_TOPIC}\x01{topic}\x02{PROPERTY_REAL_QUEUE_ID}\x01{queue_id}\x02"
    return f"{PROPERTY_TRANSACTION_ID}\x01{uniq}\x02{keys}" if uniq else keys


def _copy(
    half: MessageExt,
    topic: str,
    queue_id: int,
    props: dict[str, str],
    sys_flag: int,
    born_host: tuple[bytes, int],
) -> MessageToStore:
    return MessageToStore(
        topic=topic,
        queue_id=queue_id,
        body=half.body,
        flag=half.flag,
        properties=encode_properties(props),
        sys_flag=sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=born_host,
        reconsume_times=half.reconsume_times,
    )


def born_host_of(half: MessageExt) -> tuple[bytes, int]:
    """The half's born host as stored (a text one that does not parse: 0.0.0.0:0)."""
    try:
        return half.born_host_packed()
    except ValueError:
        return (b"\x00\x00\x00\x00", 0)


def committed_message(half: MessageExt, born_host: tuple[bytes, int]) -> MessageToStore:
    """The half as its real topic's message: upstream endMessageTransaction + commit bits."""
    props = dict(half.properties)
    topic = props.pop(PROPERTY_REAL_TOPIC)
    queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID))
    props.pop(PROPERTY_TRANSACTION_PREPARED, None)
    props.pop(PROPERTY_CRC32, None)  # the half's record CRC: the store drops it (wire_properties)
    msg = _copy(
        half,
        topic,
        queue_id,
        props,
        reset_transaction_value(half.sys_flag, TRANSACTION_COMMIT_TYPE),
        born_host,
    )
    msg.prepared_transaction_offset = half.commitlog_offset
    return msg


def renewed_half(
    half: MessageExt, check_times: int, born_host: tuple[bytes, int]
) -> MessageToStore:
    """The half again at the end of its queue, counting one more check (renewHalfMessageInner)."""
    props = dict(half.properties)
    props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(check_times)
    return _copy(half, HALF_TOPIC, HALF_QUEUE_ID, props, half.sys_flag, born_host)


def escaped_half(half: MessageExt, born_host: tuple[bytes, int]) -> MessageToStore:
    """An unresolved half as the prepared message its producer sent, for another group's master
    to store as its own half and check (RIP-32 escape, done by an acting slave): real topic and
    queue back, TRAN_MSG and the prepared bits set, the check count kept."""
    props = dict(half.properties)
    topic = props.pop(PROPERTY_REAL_TOPIC)
    queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0"))
    props[PROPERTY_TRANSACTION_PREPARED] = "true"
    prepared = reset_transaction_value(half.sys_flag, TRANSACTION_PREPARED_TYPE)
    return _copy(half, topic, queue_id, props, prepared, born_host)


def discarded_message(half: MessageExt, born_host: tuple[bytes, int]) -> MessageToStore:
    """The half given up after transactionCheckMax checks (resolveDiscardMsg)."""
    return _copy(half, CHECK_MAX_TIME_TOPIC, 0, dict(half.properties), half.sys_flag, born_host)


def encode_op_body(half_offsets: Iterable[int]) -> bytes:
    return OFFSET_SEPARATOR.join(str(o) for o in half_offsets).encode()


def decode_op_body(body: bytes) -> list[int]:
    """The half offsets an op names; a part that is not a number is skipped (upstream logs
    and reads it as -1, which is below every half offset)."""
    out: list[int] = []
    for part in body.decode("utf-8", "replace").split(OFFSET_SEPARATOR):
        part = part.strip()
        if part.isdigit():
            out.append(int(part))
    return out


def op_message(
    half_offsets: Iterable[int], uniq: str, born_ms: int, born_host: tuple[bytes, int]
) -> MessageToStore:
    """The op record deciding these half offsets (makeOpMessageInner, tag "d")."""
    return MessageToStore(
        topic=OP_TOPIC,
        queue_id=HALF_QUEUE_ID,
        body=encode_op_body(half_offsets),
        properties=encode_properties({PROPERTY_TAGS: REMOVE_TAG, UNIQ_KEY: uniq}),
        born_timestamp=born_ms,
        born_host=born_host,
    )


def is_remove_op(msg: MessageExt) -> bool:
    return msg.properties.get(PROPERTY_TAGS) == REMOVE_TAG


def check_request(
    half: MessageExt,
    copy: MessageToStore,
    put: PutResult,
    broker_name: str,
    store_host: tuple[bytes, int],
) -> tuple[CheckTransactionStateRequestHeader, bytes]:
    """CHECK_TRANSACTION_STATE for the re-put ``copy`` stored as ``put`` (upstream
    sendCheckMessage): the header names the copy's offsets, the body is the copy encoded with
    its real topic and queue (MessageDecoder.encode: no CRC trailer)."""
    props = copy.properties
    assert isinstance(props, str)
    uniq = half.properties.get(UNIQ_KEY) or half.offset_msg_id
    body = build_stored_message(
        topic=half.properties.get(PROPERTY_REAL_TOPIC, HALF_TOPIC),
        queue_id=int(half.properties.get(PROPERTY_REAL_QUEUE_ID, "0") or 0),
        body=half.body,
        flag=half.flag,
        properties=props,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=copy.born_host,
        store_timestamp=put.store_timestamp,
        store_host=store_host,
        reconsume_times=half.reconsume_times,
        queue_offset=put.queue_offset,
        physical_offset=put.commitlog_offset,
        record_crc="none",
    )
    header = CheckTransactionStateRequestHeader(
        tranStateTableOffset=put.queue_offset,
        commitLogOffset=put.commitlog_offset,
        topic=HALF_TOPIC,
        msgId=uniq,
        transactionId=uniq,
        offsetMsgId=put.msg_id,
        bname=broker_name,
    )
    return header, body


# ---------------------------------------------------------------------------- the decision


def immunity_ms(props: Mapping[str, str], transaction_timeout_ms: int) -> int:
    """How long after its birth a half is left alone: CHECK_IMMUNITY_TIME_IN_SECONDS when set
    and longer than transactionTimeOut, else transactionTimeOut (upstream getImmunityTime)."""
    raw = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
    try:
        custom = int(raw) * 1000 if raw is not None else 0
    except ValueError:
        custom = 0
    return max(custom, transaction_timeout_ms)


def check_times_of(props: Mapping[str, str]) -> int:
    """How many checks the half had (TRANSACTION_CHECK_TIMES; absent: none yet)."""
    raw = props.get(PROPERTY_TRANSACTION_CHECK_TIMES)
    try:
        return max(0, int(raw)) if raw is not None else 0
    except ValueError:
        return 0


@attrs.frozen
class HalfState:
    """What the check decision reads of one half message."""

    queue_offset: int
    uniq: str
    group: str
    born_ms: int  # the producer's clock: only for the fileReservedTime limit
    stored_ms: int  # this copy's store time (the broker's clock): the immunity window
    check_times: int
    immunity_ms: int

    @classmethod
    def of(cls, half: MessageExt, transaction_timeout_ms: int) -> HalfState:
        props = half.properties
        return cls(
            queue_offset=half.queue_offset,
            uniq=props.get(UNIQ_KEY) or half.offset_msg_id,
            group=props.get(PROPERTY_PRODUCER_GROUP, ""),
            born_ms=half.born_timestamp,
            stored_ms=half.store_timestamp,
            check_times=check_times_of(props),
            immunity_ms=immunity_ms(props, transaction_timeout_ms),
        )


@attrs.frozen
class Skip:
    """Decided already (an op names this offset, or its transaction was decided through
    another copy): pass it."""

    why: Literal["op", "decided"]


@attrs.frozen
class Wait:
    """Not due yet: the round stops here (later halves are younger or re-put copies)."""


@attrs.frozen
class Check:
    """Due: re-put it with ``check_times`` and ask a producer of its group."""

    check_times: int


@attrs.frozen
class Discard:
    """Checked too often (or older than the CommitLog keeps files): give it up."""

    reason: Literal["check_max", "too_old"]


Verdict = Skip | Wait | Check | Discard


def decide(
    half: HalfState,
    *,
    now_ms: int,
    done_by_op: bool,
    decided: bool,
    check_max: int,
    max_age_ms: int,
) -> Verdict:
    """Upstream check() for one half, in its order: an op, then the discard rules, then the
    immunity window.

    One deviation: the immunity window counts from the copy's store time (the broker's clock),
    not from its born time (the producer's clock), so a producer whose clock is off is neither
    checked at once nor left alone too long. The first copy is stored when it is sent; a
    re-put copy is checked again one immunity window after its check (upstream: every round).
    A copy stored "in the future" (the broker's clock stepped back) is checked at once."""
    if done_by_op:
        return Skip("op")
    if decided:
        return Skip("decided")
    if half.check_times >= check_max:
        return Discard("check_max")
    if now_ms - half.born_ms > max_age_ms:
        return Discard("too_old")
    age = now_ms - half.stored_ms
    if 0 <= age <= half.immunity_ms:
        return Wait()
    return Check(half.check_times + 1)


def reject_late_end(
    props: Mapping[str, str],
    stored_ms: int,
    *,
    now_ms: int,
    from_check: bool,
    transaction_timeout_ms: int,
) -> bool:
    """Upstream rejectCommitOrRollback: a producer's own END_TRANSACTION (not a check's answer)
    for a half with CHECK_IMMUNITY_TIME_IN_SECONDS, arriving after that time, is refused with
    ILLEGAL_OPERATION (the check owns the half by then). Counted from the store time, like
    `decide`."""
    if from_check or PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS not in props:
        return False
    return now_ms - stored_ms > immunity_ms(props, transaction_timeout_ms)


# ---------------------------------------------------------------------------- bookkeeping


class OpIndex:
    """The ops read in one round (upstream's removeMap / opMsgMap / doneOpOffset): which half
    offsets are decided, and how far the op queue's scan offset may move."""

    def __init__(self, half_floor: int) -> None:
        self.half_floor = half_floor
        self._by_half: dict[int, int] = {}  # half offset -> the op offset naming it
        self._open: dict[int, set[int]] = {}  # op offset -> its half offsets not passed yet
        self._done: set[int] = set()

    def add(self, op_offset: int, half_offsets: Iterable[int]) -> None:
        pending = {o for o in half_offsets if o >= self.half_floor}
        if not pending:
            self._done.add(op_offset)
            return
        self._open[op_offset] = pending
        for o in pending:
            self._by_half[o] = op_offset

    def take(self, half_offset: int) -> bool:
        """Whether an op names this half offset; the scan passes it either way."""
        op = self._by_half.pop(half_offset, None)
        if op is None:
            return False
        left = self._open[op]
        left.discard(half_offset)
        if not left:
            del self._open[op]
            self._done.add(op)
        return True

    def named(self, half_offset: int) -> bool:
        return half_offset in self._by_half

    def next_op_offset(self, start: int) -> int:
        """The op scan offset: past every op from ``start`` on that is fully done."""
        nxt = start
        while nxt in self._done:
            nxt += 1
        return nxt


class DecidedSet:
    """UNIQ_KEYs of transactions decided (committed, rolled back or discarded) while a copy of
    their half may still lie ahead of the check scan. ``horizon`` is the half queue's end when
    the decision was made: no copy of a decided transaction is written after it, so the key is
    forgotten once the scan passed the horizon."""

    def __init__(self) -> None:
        self._horizon: dict[str, int] = {}

    def __contains__(self, uniq: str) -> bool:
        return uniq in self._horizon

    def __len__(self) -> int:
        return len(self._horizon)

    def add(self, uniq: str, horizon: int) -> None:
        self._horizon[uniq] = max(horizon, self._horizon.get(uniq, horizon))

    def discard(self, uniq: str) -> None:
        """The decision could not be written: the transaction is open again."""
        self._horizon.pop(uniq, None)

    def prune(self, half_offset: int) -> None:
        """The scan reached ``half_offset``: forget keys whose copies all lie behind it."""
        for uniq in [u for u, h in self._horizon.items() if h <= half_offset]:
            del self._horizon[uniq]
