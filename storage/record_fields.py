"""One plain message's stored record and what its dispatch needs, in one call (put path).

`record_fields` appends a message's sealed record to the put's parts and returns (record size,
tagsCode, index key hashes or None): the work `PutPath._encode` did in four calls
(`wire_properties`, `append_record`, `tags_hash_code`, `key_hashes`). The compiled twin
(`rocketrio.protocol._speedups.record_fields`, protocol/speedups/record_fields.c) takes a
message whose properties are a text with no stale ``__CRC32#`` pair to a topic that is neither
SCHEDULE_TOPIC_XXXX nor rmq_sys_wheel_timer and hands what it declines to `record_fields_py`,
the reference (same bytes, same values, same exceptions): `record_fields` is the C function
itself, no Python frame between `PutPath._encode` and the C.

Sans-io, no trio.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.message import (
    TRANSACTION_ROLLBACK_TYPE,
    Buffer,
    append_record,
    tags_hash_code,
)
from rocketrio.storage.dispatch_request import key_hashes, wire_properties

# (record size, tagsCode, index hashes or None)
RecordFields = tuple[int, int, list[int] | None]


def record_fields_py(
    parts: list[Buffer],
    topic: str,
    queue_id: int,
    body: bytes,
    flag: int,
    properties: dict[str, str] | str,
    sys_flag: int,
    born_timestamp: int,
    born_host: tuple[bytes, int],
    store_timestamp: int,
    store_host: tuple[bytes, int],
    reconsume_times: int,
    prepared_transaction_offset: int,
    queue_offset: int,
    physical_offset: int,
    indexed: bool,
) -> RecordFields:
    """The reference: the record appended to ``parts`` (append_record of the wire properties),
    its size, the TAGS hash code (0 without tags) and the KEYS / UNIQ_KEY index hashes (None
    without keys, when not ``indexed`` or for a transaction ROLLBACK). ValueError for
    properties that cannot be stored, and append_record's errors."""
    raw, tags, keys, uniq = wire_properties(properties)
    size = append_record(
        parts, topic, queue_id, body, flag, raw, sys_flag, born_timestamp, born_host,
        store_timestamp, store_host, reconsume_times, prepared_transaction_offset,
        queue_offset, physical_offset,
    )  # fmt: skip
    code = tags_hash_code(tags) if tags else 0
    hashes = None
    rollback = sys_flag & TRANSACTION_ROLLBACK_TYPE == TRANSACTION_ROLLBACK_TYPE
    if (keys or uniq) and indexed and not rollback:
        hashes = key_hashes(topic, keys, uniq)
    return size, code, hashes


# the product's choice: the compiled twin, which hands what it declines to the reference
record_fields: Callable[..., RecordFields] = record_fields_py
if _speedups is not None:
    _speedups.configure_record_fields(record_fields_py)
    record_fields = _speedups.record_fields
