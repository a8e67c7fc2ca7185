"""Stored-record building (sans-io): single records, client batch bodies, the put hot path.

`build_stored_message` writes one record in upstream's CommitLog layout (see
`rocketrio.protocol.message_format`). The record-level check follows upstream's
``enabledAppendPropCRC``: the properties end with a 20-byte trailer ``__CRC32#\\x01<10
digits>\\x02`` whose digits are the CRC32 (& 0x7FFFFFFF) of every record byte before the
trailer, written least-significant digit first (upstream's MessageDecoder.createCrc32 order).

The put hot path (`append_record`, `build_batch_records`) builds records as a few byte parts
that already carry their final physical offset, chaining the record CRC over the parts, so a
batch is joined once and nothing is patched or decoded again. Client MessageBatch bodies are
encoded and decoded here too (`BatchItem`). `append_record` and the batch loop have compiled
twins (`rocketrio.protocol._speedups`, chosen in `compiled.py`); the ``_py`` functions here are
the reference and the fallback.

No files, no sockets, no trio.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable

import attrs

from rocketrio.protocol.compiled import COMBINE_MIN
from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.message_format import (
    _CRC_PLACEHOLDER,
    _FIXED,
    _HOST_FLAGS,
    _I16,
    _U16,
    BORNHOST_V6_FLAG,
    CRC32_RESERVED_LEN,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    STOREHOSTADDRESS_V6_FLAG,
    Buffer,
    MessageDecodeError,
    MessageSizeError,
    RecordCrcMode,
    crc32,
    crc32_combine,
    decode_properties,
    encode_properties,
    find_property,
    find_stored_property,
    tags_code_of_bytes,
)


@functools.lru_cache(maxsize=1024)
def _topic_part(topic: str, magic: int | None) -> tuple[int, bytes]:
    """(magic, topic length + topic bytes) for the record; cached, topics repeat."""
    topic_b = topic.encode()
    if magic is None:
        magic = MAGIC_CODE_V1 if len(topic_b) <= 127 else MAGIC_CODE_V2
    if magic == MAGIC_CODE_V1:
        if len(topic_b) > 127:
            raise ValueError(f"topic of {len(topic_b)} bytes needs magic V2")
        return magic, bytes((len(topic_b),)) + topic_b
    if magic == MAGIC_CODE_V2:
        if len(topic_b) > 32767:
            raise ValueError(f"topic of {len(topic_b)} bytes is too long")
        return magic, _I16.pack(len(topic_b)) + topic_b
    raise ValueError(f"unknown magic code {magic}")


def build_stored_message(
    *,
    topic: str,
    queue_id: int,
    body: bytes,
    flag: int,
    properties: str | bytes,
    sys_flag: int,
    born_timestamp: int,
    born_host: tuple[bytes, int],
    store_timestamp: int,
    store_host: tuple[bytes, int],
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    magic: int | None = None,
    record_crc: RecordCrcMode = "seal",
) -> bytes:
    """One stored record.

    The host bits of ``sys_flag`` are set from the address lengths (4 or 16 bytes), so they
    cannot disagree with the layout. ``magic=None`` picks V1 unless the topic is longer than
    127 bytes (upstream's autoMessageVersionOnTopicLen). ``record_crc``: "seal" appends the
    ``__CRC32#`` trailer with its CRC, "reserve" appends it with zero digits for the CommitLog
    to seal after patching the physical offset (`seal_record_crc`), "none" leaves it out.
    Raises ValueError for a field that does not fit its width.
    """
    born_ip, born_port = born_host
    store_ip, store_port = store_host
    fixed = _FIXED.get((len(born_ip), len(store_ip)))
    if fixed is None:
        raise ValueError("born and store ip must be 4 or 16 bytes")
    sys_flag &= ~_HOST_FLAGS
    if len(born_ip) == 16:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_ip) == 16:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    magic, topic_part = _topic_part(topic, magic)
    props = properties.encode() if isinstance(properties, str) else properties
    if record_crc == "none":
        sep = trailer = b""
    else:
        # the trailer must start a property of its own
        sep = b"\x02" if props and props[-1] != 2 else b""
        trailer = _CRC_PLACEHOLDER
    props_len = len(props) + len(sep) + len(trailer)
    if props_len > 32767:
        raise ValueError(f"properties of {props_len} bytes exceed 32767")
    total = fixed.size + len(body) + len(topic_part) + 2 + props_len
    try:
        head = fixed.pack(
            total, magic, crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
            physical_offset, sys_flag, born_timestamp, born_ip, born_port, store_timestamp,
            store_ip, store_port, reconsume_times, prepared_transaction_offset, len(body),
        )  # fmt: skip
    except struct.error as e:
        raise ValueError(f"stored message field out of range: {e}") from None
    record = b"".join((head, body, topic_part, _I16.pack(props_len), props, sep, trailer))
    if record_crc != "seal":
        return record
    buf = bytearray(record)
    seal_record_crc(buf, 0, total)
    return bytes(buf)


def seal_record_crc(buf: bytearray, pos: int, size: int) -> None:
    """Write the record CRC into the reserved ``__CRC32#`` trailer of buf[pos:pos+size]."""
    end = pos + size
    crc = crc32(memoryview(buf)[pos : end - CRC32_RESERVED_LEN]) & 0x7FFFFFFF
    buf[end - 11 : end - 1] = crc_digits(crc)


def crc_digits(crc: int) -> bytes:
    """The 10 trailer digits of a record CRC, least-significant first."""
    return (b"%010d" % crc)[::-1]


# The whole 20-byte trailer reversed, so one format and one reversal write it (the digits
# come least-significant first): ``(_TRAILER_REVERSED % crc)[::-1]``.
_TRAILER_REVERSED = b"\x02%010d\x01#23CRC__"


# --------------------------------------------------------------------------- batch bodies

_BATCH_HEAD = struct.Struct(">iiiii")  # totalSize, magic(0), bodyCRC(0), flag, bodyLen


@attrs.define(slots=True)
class BatchItem:
    """One message of a client MessageBatch body."""

    flag: int
    body: bytes
    properties: dict[str, str] = attrs.field(factory=dict)


def encode_batch_body(items: list[BatchItem]) -> bytes:
    """The client's MessageBatch.encode: encodeMessage records back to back."""
    parts: list[bytes] = []
    for item in items:
        props = encode_properties(item.properties).encode()
        if len(props) > 32767:
            raise ValueError(f"properties of {len(props)} bytes exceed 32767")
        total = _BATCH_HEAD.size + len(item.body) + 2 + len(props)
        parts.append(_BATCH_HEAD.pack(total, 0, 0, item.flag, len(item.body)))
        parts.append(item.body)
        parts.append(_I16.pack(len(props)))
        parts.append(props)
    return b"".join(parts)


def decode_batch_body(data: bytes | bytearray | memoryview) -> list[BatchItem]:
    """Inverse of `encode_batch_body`; malformed input raises MessageDecodeError."""
    out: list[BatchItem] = []
    pos = 0
    n = len(data)
    while pos < n:
        if n - pos < _BATCH_HEAD.size + 2:
            raise MessageDecodeError(f"truncated batch message header at {pos}")
        total, _magic, _crc, flag, body_len = _BATCH_HEAD.unpack_from(data, pos)
        end = pos + total
        p = pos + _BATCH_HEAD.size
        if total < _BATCH_HEAD.size + 2 or end > n or body_len < 0 or p + body_len + 2 > end:
            raise MessageDecodeError(f"batch message at {pos} has inconsistent lengths")
        body = bytes(data[p : p + body_len])
        p += body_len
        props_len = _I16.unpack_from(data, p)[0]
        p += 2
        if props_len < 0 or p + props_len != end:
            raise MessageDecodeError(f"batch message at {pos}: properties length mismatch")
        try:
            props = decode_properties(bytes(data[p:end]).decode())
        except UnicodeDecodeError:
            raise MessageDecodeError(f"batch message at {pos}: properties not UTF-8") from None
        out.append(BatchItem(flag, body, props))
        pos = end
    return out


# --------------------------------------------------------------------------- put hot path
#
# The store builds each record as a few parts (head, body, tail, trailer) that already carry
# the final physical offset, so the record CRC is computed once, chained over the parts, and
# the batch is joined once: no per-message objects, nothing patched or decoded again.


def _host_flags(sys_flag: int, born_ip: bytes, store_ip: bytes) -> int:
    sys_flag &= ~_HOST_FLAGS
    if len(born_ip) == 16:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_ip) == 16:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    return sys_flag


def _append_record_py(
    out: list[Buffer],
    topic: str,
    queue_id: int,
    body: bytes,
    flag: int,
    properties: bytes,
    sys_flag: int,
    born_timestamp: int,
    born_host: tuple[bytes, int],
    store_timestamp: int,
    store_host: tuple[bytes, int],
    reconsume_times: int,
    prepared_transaction_offset: int,
    queue_offset: int,
    physical_offset: int,
) -> int:
    """Append one sealed record to ``out`` as parts; returns its size.

    The bytes equal `build_stored_message` with ``record_crc="seal"`` and the default magic.
    Raises MessageSizeError for properties above 32767 bytes, ValueError for other fields
    that do not fit.
    """
    born_ip, born_port = born_host
    store_ip, store_port = store_host
    layout = _LAYOUTS.get((len(born_ip), len(store_ip)))
    if layout is None:
        raise ValueError("born and store ip must be 4 or 16 bytes")
    fixed, host_flags = layout
    magic, topic_part = _topic_part(topic, None)
    if properties and properties[-1] != 2:  # the trailer must start a pair of its own
        properties += b"\x02"
    props_len = len(properties) + CRC32_RESERVED_LEN
    if props_len > 32767:
        raise MessageSizeError(f"properties of {props_len} bytes exceed 32767")
    tail = b"".join((topic_part, props_len.to_bytes(2, "big"), properties))
    size = fixed.size + len(body) + len(tail) + CRC32_RESERVED_LEN
    body_crc = crc32(body)
    try:
        head = fixed.pack(
            size, magic, body_crc & 0x7FFFFFFF, queue_id, flag, queue_offset,
            physical_offset, sys_flag & ~_HOST_FLAGS | host_flags, born_timestamp, born_ip,
            born_port, store_timestamp, store_ip, store_port, reconsume_times,
            prepared_transaction_offset, len(body),
        )  # fmt: skip
    except struct.error as e:
        raise ValueError(f"stored message field out of range: {e}") from None
    if len(body) < _COMBINE_MIN:
        crc = crc32(tail, crc32(body, crc32(head))) & 0x7FFFFFFF
    else:  # the body's CRC reused: the body is read once
        crc = crc32(tail, _COMBINE(crc32(head), body_crc, len(body))) & 0x7FFFFFFF
    out += (head, body, tail, (_TRAILER_REVERSED % crc)[::-1])
    return size


def _combine_fallback(crc_a: int, crc_b: int, len_b: int) -> int:  # pragma: no cover
    raise AssertionError("only called when crc32_combine exists")


# The record CRC covers the body, whose own CRC (bodyCRC) is computed first: from this body
# size on, combining the two CRCs (zlib-ng's crc32_combine, ~0.2 us whatever the length) costs
# less than reading the body a second time (zlib-ng: ~0.17 us per KiB on this VM)
_COMBINE_MIN = COMBINE_MIN
_COMBINE: Callable[[int, int, int], int] = crc32_combine or _combine_fallback

# (born ip length, store ip length) -> (fixed layout, host bits of sysFlag)
_LAYOUTS = {
    (4, 4): (_FIXED[(4, 4)], 0),
    (16, 4): (_FIXED[(16, 4)], BORNHOST_V6_FLAG),
    (4, 16): (_FIXED[(4, 16)], STOREHOSTADDRESS_V6_FLAG),
    (16, 16): (_FIXED[(16, 16)], BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG),
}


@attrs.define(slots=True)
class BuiltBatch:
    """Stored records built from a client batch body by `build_batch_records`.

    ``data`` holds the records back to back, sealed for consecutive physical offsets from
    the ``first_physical_offset`` given; the lists have one item per message.
    """

    data: bytes
    sizes: list[int]
    tags: list[bytes]  # TAGS value, b"" when absent (`tags_codes` hashes them)
    # raw KEYS values (space separated), None for a message without; None when no message has
    keys: list[bytes | None] | None
    uniq_keys: list[bytes]  # UNIQ_KEY, b"" when the message has none

    def tags_codes(self) -> list[int]:
        """ConsumeQueue tagsCode of every message (a batch holds few distinct tags)."""
        codes = {t: tags_code_of_bytes(t) if t else 0 for t in set(self.tags)}
        return list(map(codes.__getitem__, self.tags))


@attrs.frozen
class BatchConstants:
    """What every record of one client batch shares (from the request and the broker)."""

    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[bytes, int]
    store_timestamp: int
    store_host: tuple[bytes, int]
    reconsume_times: int = 0
    # batch-level properties, appended to every message's own (so they win, like upstream)
    properties: bytes = b""

    def mid(self) -> bytes:
        """The record bytes from sysFlag to preparedTransactionOffset."""
        born_ip, born_port = self.born_host
        store_ip, store_port = self.store_host
        if len(born_ip) not in (4, 16) or len(store_ip) not in (4, 16):
            raise ValueError("born and store ip must be 4 or 16 bytes")
        try:
            return _mid_struct(len(born_ip), len(store_ip)).pack(
                _host_flags(self.sys_flag, born_ip, store_ip), self.born_timestamp,
                born_ip, born_port, self.store_timestamp, store_ip, store_port,
                self.reconsume_times, 0,
            )  # fmt: skip
        except struct.error as e:
            raise ValueError(f"stored message field out of range: {e}") from None


def build_batch_records(
    data: bytes,
    const: BatchConstants,
    *,
    first_queue_offset: int,
    first_physical_offset: int,
    max_body_size: int,
    new_uniq_key: Callable[[], str] | None = None,
) -> BuiltBatch:
    """Stored records for every message of a client batch body (`encode_batch_body` layout).

    Each record's properties are the message's own bytes (a stale ``__CRC32#`` removed), then
    ``const.properties``, then ``UNIQ_KEY`` from ``new_uniq_key()`` when neither has one, then
    the CRC trailer. Queue offsets count up from ``first_queue_offset``. Raises
    MessageDecodeError for a malformed body, MessageSizeError for a body above
    ``max_body_size`` or properties above 32767 bytes, ValueError for a field out of range.
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    if not -(2**31) <= const.queue_id < 2**31:
        raise ValueError(f"queue id {const.queue_id} out of range")
    generated: list[str] = []

    def fresh_uniq_key() -> str:
        generated.append(new_uniq_key())  # type: ignore[misc]
        return generated[-1]

    args = (data, const, first_queue_offset, first_physical_offset, max_body_size)
    built, props = _build_records(*args, new_uniq_key and fresh_uniq_key, strip_crc=False)
    # checks that are rare to fail run once over all properties instead of once per message
    every = b"\x02".join(props)
    if every.find(b"__CRC32#") >= 0:  # build again without them, with the same new ids
        replay = iter(generated).__next__
        built, props = _build_records(*args, new_uniq_key and replay, strip_crc=True)
    if not every.isascii():
        for i, one in enumerate(props):
            try:
                one.decode()
            except UnicodeDecodeError:
                raise MessageDecodeError(f"batch message {i}: properties not UTF-8") from None
    keys_all = find_stored_property(const.properties, b"KEYS\x01")
    if keys_all is not None:
        built.keys = [keys_all] * len(props)
    elif every.find(b"KEYS\x01") >= 0:
        built.keys = [find_stored_property(one, b"KEYS\x01") for one in props]
    return built


def _build_records_c(
    data: bytes,
    const: BatchConstants,
    first_queue_offset: int,
    first_physical_offset: int,
    max_body_size: int,
    new_uniq_key: Callable[[], str] | None,
    *,
    strip_crc: bool,
) -> tuple[BuiltBatch, list[bytes]]:
    """`_build_records_py` by the compiled twin (`rocketrio.protocol._speedups`)."""
    extra, uniq_all, tags_all, mid, _pack, magic, topic_part = _batch_layout(const)
    out, sizes, tags, uniqs, props = _speedups.build_records(  # type: ignore[union-attr]
        data, extra, uniq_all, tags_all, mid, magic, topic_part, const.queue_id,
        first_queue_offset, first_physical_offset, max_body_size, new_uniq_key, strip_crc,
    )  # fmt: skip
    if not sizes:
        return BuiltBatch(b"", [], [], None, []), []
    return BuiltBatch(out, sizes, tags, None, uniqs), props


def _build_records_py(
    data: bytes,
    const: BatchConstants,
    first_queue_offset: int,
    first_physical_offset: int,
    max_body_size: int,
    new_uniq_key: Callable[[], str] | None,
    *,
    strip_crc: bool,
) -> tuple[BuiltBatch, list[bytes]]:
    """The loop of `build_batch_records`; also returns each message's own properties."""
    extra, uniq_all, tags_all, mid, head_pack, magic, topic_part = _batch_layout(const)
    queue_id, fixed_len = const.queue_id, len(mid) + 40 + CRC32_RESERVED_LEN
    parts: list[Buffer] = []
    metas: list[tuple[int, bytes, bytes]] = []  # one append per message, not three
    unpack, u16, crc, trailer = _BATCH_HEAD.unpack_from, _U16.unpack_from, crc32, _TRAILER_REVERSED
    combine, combine_min, hs = _COMBINE, _COMBINE_MIN, _BATCH_HEAD.size
    view = memoryview(data)
    qo, phy, pos, n = first_queue_offset, first_physical_offset, 0, len(data)
    while pos < n:
        try:
            total, _magic, _crc, flag, body_len = unpack(data, pos)
            end = pos + total
            q = pos + hs + body_len
            # an unsigned propertiesLen that ends the message also puts q + 2 inside it
            bad = body_len < 0 or end > n or q + 2 + u16(data, q)[0] != end
        except struct.error:
            bad, body_len = True, 0
        if bad or body_len > max_body_size:
            raise _refused(bad, pos, len(metas), body_len, max_body_size)
        body = view[pos + hs : q]
        props = data[q + 2 : end]
        if strip_crc:
            props = _strip_crc_property(props)
        if props and props[-1] != 2:  # the batch properties must start a pair of their own
            props += b"\x02"
        # UNIQ_KEY inline (TAGS after the loop): a call per lookup costs more than the lookup
        uniq = uniq_all
        if uniq is None:
            p = props.rfind(b"UNIQ_KEY\x01")
            e = props.find(b"\x02", p + 9)
            if p >= 0 and e > p + 9 and (p == 0 or props[p - 1] == 2):
                uniq = props[p + 9 : e]
            elif p >= 0:
                uniq = find_property(props, b"UNIQ_KEY\x01")
        tail_extra = extra
        if uniq is None:
            uniq = b""
            if new_uniq_key is not None:
                uniq = new_uniq_key().encode()
                tail_extra = b"".join((extra, b"UNIQ_KEY\x01", uniq, b"\x02"))
        props_len = len(props) + len(tail_extra) + 20  # + CRC32_RESERVED_LEN
        if props_len > 32767:
            raise MessageSizeError(
                f"message {len(metas)}: properties of {props_len} bytes exceed 32767"
            )
        tail = b"".join((topic_part, props_len.to_bytes(2, "big"), props, tail_extra))
        size = fixed_len + body_len + len(tail)
        body_crc = crc(body)
        head = head_pack(size, magic, body_crc & 0x7FFFFFFF, queue_id, flag, qo, phy, mid, body_len)
        if body_len < combine_min:  # the record CRC, chained over the parts
            seal = crc(tail, crc(body, crc(head))) & 0x7FFFFFFF
        else:
            seal = crc(tail, combine(crc(head), body_crc, body_len)) & 0x7FFFFFFF
        parts += (head, body, tail, (trailer % seal)[::-1])
        metas.append((size, uniq, props))
        qo += 1
        phy += size
        pos = end
    return _built(parts, metas, tags_all)


def _built(
    parts: list[Buffer], metas: list[tuple[int, bytes, bytes]], tags_all: bytes | None
) -> tuple[BuiltBatch, list[bytes]]:
    """The batch `_build_records` made, and each message's own properties."""
    if not metas:
        return BuiltBatch(b"", [], [], None, []), []
    sizes, uniqs, all_props = map(list, zip(*metas, strict=True))
    tags = [tags_all] * len(sizes) if tags_all is not None else _tags_of(all_props)
    return BuiltBatch(b"".join(parts), sizes, tags, None, uniqs), all_props


def _batch_layout(
    const: BatchConstants,
) -> tuple[bytes, bytes | None, bytes | None, bytes, Callable[..., bytes], int, bytes]:
    """What every record of a batch shares, once per batch: the batch properties (without a
    ``__CRC32#``), their UNIQ_KEY and TAGS when they set them, the sysFlag..prepared bytes and
    the header packer for them, the magic code and the topic bytes."""
    extra = _strip_crc_property(const.properties)
    mid = const.mid()
    magic, topic_part = _topic_part(const.topic, None)
    uniq_all = find_stored_property(extra, b"UNIQ_KEY\x01")
    tags_all = find_stored_property(extra, b"TAGS\x01")
    return extra, uniq_all, tags_all, mid, _head_struct(len(mid)).pack, magic, topic_part


def _refused(bad: bool, pos: int, index: int, body_len: int, max_body_size: int) -> Exception:
    """Why `_build_records` refuses the message at ``pos`` (the ``index``-th)."""
    if bad:
        return MessageDecodeError(f"batch message at {pos} is truncated or inconsistent")
    return MessageSizeError(f"message {index}: body of {body_len} bytes exceeds {max_body_size}")


def _tags_of(all_props: list[bytes]) -> list[bytes]:
    """Each message's TAGS (b"" for none), after the loop: the lookup is inline, a call per
    lookup would cost more than the lookup."""
    tags: list[bytes] = []
    for props in all_props:
        tag = None
        p = props.rfind(b"TAGS\x01")
        e = props.find(b"\x02", p + 5)
        if p >= 0 and e > p + 5 and (p == 0 or props[p - 1] == 2):
            tag = props[p + 5 : e]
        elif p >= 0:
            tag = find_property(props, b"TAGS\x01")
        tags.append(tag or b"")
    return tags


@functools.lru_cache(maxsize=4)
def _mid_struct(born_ip_len: int, store_ip_len: int) -> struct.Struct:
    """sysFlag .. preparedTransactionOffset of a record."""
    return struct.Struct(f">iq{born_ip_len}siq{store_ip_len}siiq")


@functools.lru_cache(maxsize=8)
def _head_struct(mid_len: int) -> struct.Struct:
    """totalSize .. physicalOffset, the sysFlag..preparedTransactionOffset bytes, bodyLen."""
    return struct.Struct(f">iiiiiqq{mid_len}si")


def _strip_crc_property(props: bytes) -> bytes:
    """The properties without a ``__CRC32#`` pair (the CommitLog writes its own)."""
    if props.find(b"__CRC32#") < 0:
        return props
    kept = [p for p in props.split(b"\x02") if p and not p.startswith(b"__CRC32#\x01")]
    return b"".join([p + b"\x02" for p in kept])


# The compiled twin when the extension imports and ROCKETRIO_PURE_PYTHON is not set
_build_records = _build_records_c if _speedups is not None else _build_records_py

# `append_record` is the compiled twin when it is there (it hands what it declines to
# `_append_record_py`, so it appends one part where the twin appends four: the same bytes)
append_record: Callable[..., int] = _append_record_py
if _speedups is not None:
    _speedups.configure_record(_append_record_py)
    append_record = _speedups.append_record
