"""What dispatch needs of a stored record (upstream DispatchRequest), and how it is made.

A `DispatchRequest` is ((topic, queue id), queue offset, tagsCode, index key hashes, goes to the
ConsumeQueue): the put path makes one per message while it builds the record, re-dispatch and
confirmOffset make one from a record read back (`DispatchRequests.of_record`) or from the fields
`CommitLog.append_raw` read while it checked replicated bytes (`DispatchRequests.of_fields`).
`DispatchRequests` owns the two settings that shape them: the delay levels (the
SCHEDULE_TOPIC_XXXX tagsCode is the deliver time, upstream computeDeliverTimestamp) and whether
keys are indexed. The rmq_sys_wheel_timer queue and due time come from timer_wheel.py.
Transaction PREPARED / ROLLBACK records get no ConsumeQueue entry, ROLLBACK records no index
record, like upstream.

`replica_runs` turns a run of a slave's held records into what dispatch writes for them (the
ConsumeQueue entries per queue, the index hashes): one compiled call
(`rocketrio.protocol._speedups.replica_runs`, protocol/speedups/replica_runs.c) for a run of
ordinary records, else `replica_runs_py`, the reference.

Also the property helpers the put path shares: `wire_properties`, `key_hashes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from zlib import adler32 as _adler32
from zlib import crc32 as _crc32

from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.message import (
    PROPERTY_CRC32,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    UNIQ_KEY,
    MessageDecodeError,
    decode_properties,
    dispatch_fields,
    encode_properties,
    find_property,
    find_stored_property,
    tags_code_of_bytes,
)
from rocketrio.storage.commitlog import CorruptionError, RecordFields
from rocketrio.storage.consume_queue import ENTRY
from rocketrio.storage.index_file import key_hash_from, key_hash_seed
from rocketrio.storage.store_types import InvalidMessage
from rocketrio.storage.timer_wheel import TIMER_TOPIC, hop_due_ms, timer_queue_id

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
NO_CQ_TRAN = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)

QueueKey = tuple[str, int]
# ((topic, queue id), queue offset, tags code, index hashes, goes to the ConsumeQueue)
DispatchRequest = tuple[QueueKey, int, int, list[int] | None, bool]
# ([(queue, first queue offset, ConsumeQueue entries)], index hashes, their CommitLog offsets)
ReplicaRuns = tuple[list[tuple[QueueKey, int, bytes]], list[int], list[int]]


class DispatchRequests:
    """Makes `DispatchRequest` values (module docstring)."""

    def __init__(self, delay_ms: list[int], *, indexed: bool) -> None:
        self._delay_ms = delay_ms
        self._indexed = indexed

    @property
    def indexed(self) -> bool:
        """Whether keys are indexed (messageIndexEnable)."""
        return self._indexed

    def of_record(self, offset: int, record: bytes, cq_from: int) -> DispatchRequest:
        """What dispatch needs of one stored record (it goes to the ConsumeQueue only from
        ``cq_from`` on, and never as a transaction half/rollback). Reads the fields in place:
        no message object, and only the properties dispatch uses."""
        try:
            topic, queue_id, queue_offset, sys_flag, store_ts, props = dispatch_fields(record)
        except MessageDecodeError as e:
            raise CorruptionError(f"cannot dispatch commitlog record at {offset}: {e}") from None
        return self.of_fields(
            offset, topic, queue_id, queue_offset, sys_flag, store_ts, props, cq_from
        )

    def of_fields(
        self,
        offset: int,
        topic: str,
        queue_id: int,
        queue_offset: int,
        sys_flag: int,
        store_ts: int,
        props: bytes,
        cq_from: int,
    ) -> DispatchRequest:
        """`of_record` from fields already read out of the record."""
        tran = sys_flag & TRANSACTION_ROLLBACK_TYPE
        to_cq = offset >= cq_from and tran not in NO_CQ_TRAN
        code = 0
        tags = find_stored_property(props, b"TAGS\x01") if props else None
        if tags:
            code = tags_code_of_bytes(tags)
        if topic == SCHEDULE_TOPIC:
            code = self.deliver_time(props, store_ts, code)
        elif topic == TIMER_TOPIC:
            code = self.timer_due(props, queue_id, code)
        hashes = None
        if self._indexed and props and tran != TRANSACTION_ROLLBACK_TYPE:
            keys = find_stored_property(props, b"KEYS\x01") if b"KEYS\x01" in props else None
            uniq = find_stored_property(props, b"UNIQ_KEY\x01")
            if keys or uniq:
                hashes = key_hashes_bytes(topic, keys, uniq)
        return (topic, queue_id), queue_offset, code, hashes, to_cq

    def deliver_time(self, props: bytes | str, store_ts: int, tags_code: int) -> int:
        """SCHEDULE_TOPIC_XXXX tagsCode: the deliver time (upstream computeDeliverTimestamp)."""
        level = find_property(props, b"DELAY\x01" if isinstance(props, bytes) else "DELAY\x01")
        if level is None or not level.isdigit() or int(level) <= 0:
            return tags_code
        delays = self._delay_ms
        return store_ts + delays[min(int(level), len(delays)) - 1]

    @staticmethod
    def timer_due(props: bytes | str, queue_id: int, tags_code: int) -> int:
        """rmq_sys_wheel_timer tagsCode: when the message's hop is due (timer_wheel.py)."""
        if isinstance(props, bytes):
            raw = find_property(props, b"TIMER_OUT_MS\x01")
            out = None if raw is None else raw.decode("latin-1")
        else:
            out = find_property(props, "TIMER_OUT_MS\x01")
        if out is None or not out.isdigit():
            return tags_code
        return hop_due_ms(int(out), queue_id)

    @staticmethod
    def timer_queue(props: bytes, store_ts: int, i: int) -> int:
        """The wheel queue of a timer message stored at ``store_ts``."""
        out = find_property(props, b"TIMER_OUT_MS\x01")
        if out is None or not out.isdigit():
            raise InvalidMessage(f"message {i} to {TIMER_TOPIC}: no valid TIMER_OUT_MS property")
        return timer_queue_id(int(out), store_ts)


_wire_text = None if _speedups is None else _speedups.wire_text_properties


def replica_runs(items: list[RecordFields], requests: DispatchRequests) -> ReplicaRuns:
    """`replica_runs_py`, by the compiled twin for a run it takes (module docstring)."""
    if _speedups is not None:
        runs: ReplicaRuns | None = _speedups.replica_runs(items, requests.indexed)
        if runs is not None:
            return runs
    return replica_runs_py(items, requests)


def replica_runs_py(items: list[RecordFields], requests: DispatchRequests) -> ReplicaRuns:
    """What `StoreDispatch.dispatch` writes for a slave's held records (``items``, in CommitLog
    order, none going to the ConsumeQueue before its time: cq_from 0): `queue_runs` of their
    dispatch requests."""
    of_fields = requests.of_fields
    pending = [of_fields(o, t, q, qo, f, ts, p, 0) for o, _, t, q, qo, f, ts, p in items]
    return queue_runs([r[0] for r in items], [r[1] for r in items], pending)


def queue_runs(
    positions: Sequence[int], sizes: Sequence[int], requests: Sequence[DispatchRequest]
) -> ReplicaRuns:
    """The ConsumeQueue entries and index keys of stored records (at ``positions``, of
    ``sizes``): per queue in order of first appearance its first queue offset and its entries
    joined, and the index hashes with the offset of the record each belongs to.
    CorruptionError when a queue's offsets jump."""
    groups: dict[QueueKey, list[bytes]] = {}
    firsts: dict[QueueKey, int] = {}
    hashes: list[int] = []
    offsets: list[int] = []
    pack = ENTRY.pack
    for offset, size, (key, qo, tags, key_hashes, to_cq) in zip(
        positions, sizes, requests, strict=True
    ):
        if to_cq:
            group = groups.get(key)
            if group is None:
                groups[key] = group = []
                firsts[key] = qo
            elif qo != firsts[key] + len(group):
                raise CorruptionError(
                    f"queue offsets of {key[0]}:{key[1]} jump to {qo} at commitlog {offset}"
                )
            group.append(pack(offset, size, tags))
        if key_hashes:
            hashes += key_hashes
            offsets += [offset] * len(key_hashes)
    return [(key, firsts[key], b"".join(group)) for key, group in groups.items()], hashes, offsets


def wire_properties(
    props: dict[str, str] | str,
) -> tuple[bytes, str | None, str | None, str | None]:
    """(encoded properties, TAGS, KEYS, UNIQ_KEY) of a message to store.

    A properties text is looked up in place (no dict); a stale ``__CRC32#`` is dropped, the
    CommitLog writes its own.
    """
    if isinstance(props, str):
        if _wire_text is not None:  # compiled (protocol/speedups/props.c); None: declined
            got = _wire_text(props)
            if got is not None:
                return got  # type: ignore[no-any-return]
        if props.find(PROPERTY_CRC32) < 0:
            return (
                props.encode(),
                _text_property(props, "TAGS\x01"),
                _text_property(props, "KEYS\x01"),
                _text_property(props, "UNIQ_KEY\x01"),
            )
        props = decode_properties(props)
    if PROPERTY_CRC32 in props:
        props = {k: v for k, v in props.items() if k != PROPERTY_CRC32}
    get = props.get
    return encode_properties(props).encode(), get(PROPERTY_TAGS), get(PROPERTY_KEYS), get(UNIQ_KEY)


def _text_property(text: str, key: str) -> str | None:
    """`find_property` with a fast path for a key that occurs once."""
    p = text.rfind(key)
    if p < 0:
        return None
    v = p + len(key)
    e = text.find("\x02", v)
    if e > v and (p == 0 or text[p - 1] == "\x02"):
        return text[v:e]
    return find_property(text, key)


def key_hashes_bytes(topic: str, keys: bytes | None, uniq: bytes | None) -> list[int]:
    """`key_hashes` of encoded KEYS / UNIQ_KEY values (the dispatch scan reads bytes)."""
    seed = key_hash_seed(topic)
    hashes = [key_hash_from(seed, k) for k in keys.split(b" ") if k] if keys else []
    if uniq:
        hashes.append(key_hash_from(seed, uniq))
    return hashes


def key_hashes(topic: str, keys: str | None, uniq: str | None) -> list[int]:
    """Index hashes of a message's KEYS (space separated) and UNIQ_KEY."""
    seed = key_hash_seed(topic)
    hashes = [key_hash_from(seed, k.encode()) for k in keys.split(" ") if k] if keys else []
    if uniq:  # `key_hash_from` inline: one call less per stored message
        u = uniq.encode()
        hashes.append((_crc32(u, seed[0]) << 32) | _adler32(u, seed[1]))
    return hashes
