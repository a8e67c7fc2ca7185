"""Stored-record reading (sans-io): validation, decoding and the consume hot path.

`check_stored_record` validates one CommitLog record (lengths, physical offset, the
``__CRC32#`` record CRC trailer that the CommitLog requires so recovery can tell a whole
record from a torn one). `decode_stored` / `iter_stored` decode records into `MessageExt`;
a record may carry no trailer (upstream's default) and still decode. `decode_all` is the pull
path, with a one-struct-call fast path for records of the usual shape.

No files, no sockets, no trio.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from rocketrio.protocol.message_format import (
    _FIXED,
    _FIXED_BY_FLAGS,
    _HEAD,
    _HOST_FLAGS,
    _I16,
    _I32,
    _I64,
    BLANK_MAGIC_CODE,
    BORN_HOST_POSITION,
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB_TYPE,
    CRC32_RESERVED_LEN,
    CRC32_TRAILER_PREFIX,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
    PHY_POS_POSITION,
    QUEUE_ID_POSITION,
    SYSFLAG_POSITION,
    Buffer,
    MessageDecodeError,
    MessageExt,
    crc32_masked,
    decode_properties,
)


def has_crc_trailer(buf: Buffer, pos: int, size: int) -> bool:
    start = pos + size - CRC32_RESERVED_LEN
    return start >= pos and bytes(buf[start : start + 9]) == CRC32_TRAILER_PREFIX


def check_stored_record(
    buf: Buffer,
    pos: int,
    *,
    expected_offset: int | None = None,
    limit: int | None = None,
    verify_crc: bool = True,
) -> int:
    """Validate one CommitLog record at ``pos`` and return its size.

    Checks the size against the buffer (and ``limit``, the last byte position the record may
    reach), the magic code, that every inner length adds up to totalSize, the physical offset
    (when ``expected_offset`` is given) and the ``__CRC32#`` record CRC, which must be present
    (with ``verify_crc=False`` the trailer must be there but its CRC is not computed: upstream's
    checkCRCOnRecover=false). Raises MessageDecodeError saying what is wrong. ``buf`` may be
    anything with the buffer protocol and slicing (bytes, bytearray, mmap).
    """
    return _check_record(buf, pos, expected_offset, limit, verify_crc)[0]


def checked_dispatch_fields(
    buf: Buffer, pos: int, *, expected_offset: int, limit: int
) -> tuple[int, str, int, int, int, int, bytes]:
    """`check_stored_record` and `dispatch_fields` in one pass: validate the record at ``pos``
    in full, then return (size, topic, queueId, queueOffset, sysFlag, storeTimestamp, encoded
    properties). A slave's append: every replicated record is checked once and its dispatch
    data kept, so nothing is parsed again when confirmOffset passes it.

    A record of the usual shape in a bytes buffer (magic V1, IPv4 hosts) is checked with one
    struct call and no copy but the properties; anything else, and any record that fails a
    check, goes the general way, which accepts it or raises the precise error."""
    if buf.__class__ is bytes:
        fields = _replica_fast(buf, pos, expected_offset, min(len(buf), limit))  # type: ignore[arg-type]
        if fields is not None:
            return fields
    total, sys_flag, topic_at, topic_len = _check_record(buf, pos, expected_offset, limit)
    queue_id, queue_offset = _QID_QOFFSET.unpack_from(buf, pos + QUEUE_ID_POSITION)
    born_ip = 16 if sys_flag & BORNHOST_V6_FLAG else 4
    store_ts = _I64.unpack_from(buf, pos + BORN_HOST_POSITION + born_ip + 4)[0]
    try:
        topic = _topic_str(bytes(buf[topic_at : topic_at + topic_len]))
    except UnicodeDecodeError as e:
        raise MessageDecodeError(f"topic of the record at {pos} is not UTF-8: {e}") from None
    props = bytes(buf[topic_at + topic_len + 2 : pos + total])
    return total, topic, queue_id, queue_offset, sys_flag, store_ts, props


_MIN_CHECKED_SIZE = MIN_RECORD_SIZE + CRC32_RESERVED_LEN
# the IPv4 fixed part (`_FIXED_V4`) reading only what a replica's check and dispatch use:
# totalSize, magic, queueId, queueOffset, physicalOffset, sysFlag, storeTimestamp, bodyLength
_REPLICA_V4 = struct.Struct(">ii4xi4xqqi8x8xq8x4x8xi")


def _replica_fast(
    buf: bytes, pos: int, expected: int, n: int
) -> tuple[int, str, int, int, int, int, bytes] | None:
    """`checked_dispatch_fields` of a usual record that passes every check, else None (the
    caller then runs the general checks, which accept it or say what is wrong)."""
    if n - pos < _REPLICA_V4.size:
        return None
    total, magic, queue_id, queue_offset, phy, sys_flag, store_ts, body_len = (
        _REPLICA_V4.unpack_from(buf, pos)
    )
    end = pos + total
    q = pos + _REPLICA_V4.size + body_len  # the topic length byte
    if (
        magic != MAGIC_CODE_V1
        or sys_flag & _HOST_FLAGS
        or phy != expected
        or total < _MIN_CHECKED_SIZE
        or end > n
        or body_len < 0
        or q + 3 > end
    ):
        return None
    t = q + 1 + buf[q]  # the properties length
    if t + 2 > end:
        return None
    props_len = (buf[t] << 8) | buf[t + 1]
    c = end - CRC32_RESERVED_LEN  # the CRC trailer
    if props_len > 0x7FFF or t + 2 + props_len != end or c < t + 2:
        return None
    if not buf.startswith(CRC32_TRAILER_PREFIX, c) or buf[end - 1] != 2:
        return None
    digits = buf[c + 9 : end - 1]
    if not digits.isdigit() or zlib.crc32(memoryview(buf)[pos:c]) & 0x7FFFFFFF != int(digits[::-1]):
        return None
    raw_topic = buf[q + 1 : t]
    topic = _TOPIC_CACHE.get(raw_topic)
    if topic is None:
        try:
            topic = _topic_str(raw_topic)
        except UnicodeDecodeError:
            return None
    return total, topic, queue_id, queue_offset, sys_flag, store_ts, buf[t + 2 : end]


def _check_record(
    buf: Buffer, pos: int, expected_offset: int | None, limit: int | None, verify_crc: bool = True
) -> tuple[int, int, int, int]:
    """The checks of `check_stored_record`; returns (size, sysFlag, topic position, topic
    length)."""
    n = len(buf) if limit is None else min(len(buf), limit)
    if n - pos < 8:
        raise MessageDecodeError("truncated record header")
    total, magic = _HEAD.unpack_from(buf, pos)
    if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2):
        raise MessageDecodeError(f"bad magic code {magic:#x}")
    if total < MIN_RECORD_SIZE + CRC32_RESERVED_LEN:
        raise MessageDecodeError(f"record size {total} is below the minimum")
    if pos + total > n:
        raise MessageDecodeError(f"record of {total} bytes runs past the end of the data")
    sys_flag, topic_at, topic_len = _check_layout(buf, pos, total, magic, expected_offset)
    trailer = bytes(buf[pos + total - CRC32_RESERVED_LEN : pos + total])
    digits = trailer[9:19]
    if not trailer.startswith(CRC32_TRAILER_PREFIX) or trailer[-1:] != b"\x02":
        raise MessageDecodeError("record has no __CRC32# trailer")
    if not digits.isdigit():
        raise MessageDecodeError("record CRC trailer is not decimal")
    if verify_crc and crc32_masked(memoryview(buf)[pos : pos + total - CRC32_RESERVED_LEN]) != int(
        digits[::-1]
    ):
        raise MessageDecodeError("record CRC mismatch")
    return total, sys_flag, topic_at, topic_len


def _check_layout(
    buf: Buffer, pos: int, total: int, magic: int, expected: int | None
) -> tuple[int, int, int]:
    """Inner lengths and the physical offset; returns (sysFlag, topic position, topic
    length)."""
    end = pos + total
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    fixed = _FIXED_BY_FLAGS[sys_flag & _HOST_FLAGS]
    if total < fixed.size + 3:
        raise MessageDecodeError("record too short for its host addresses")
    if expected is not None:
        phy = _I64.unpack_from(buf, pos + PHY_POS_POSITION)[0]
        if phy != expected:
            raise MessageDecodeError(f"physical offset field {phy} != record position {expected}")
    p = pos + fixed.size
    body_len = _I32.unpack_from(buf, p - 4)[0]
    if body_len < 0 or p + body_len + 3 > end:
        raise MessageDecodeError(f"body length {body_len} does not fit the record")
    p += body_len
    if magic == MAGIC_CODE_V1:
        topic_len = buf[p]
        p += 1
    else:
        topic_len = _I16.unpack_from(buf, p)[0]
        p += 2
    if topic_len < 0 or p + topic_len + 2 > end:
        raise MessageDecodeError(f"topic length {topic_len} does not fit the record")
    topic_at = p
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    if props_len < 0 or p + 2 + props_len != end:
        raise MessageDecodeError(f"properties length {props_len} does not match totalSize")
    return sys_flag, topic_at, topic_len


def decode_stored(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    check_crc: bool = False,
    decompress_body: bool = False,
) -> tuple[MessageExt, int]:
    """Decode the record at ``pos``; returns (message, position after it).

    ``check_crc`` verifies bodyCRC (and the record CRC trailer when present);
    ``decompress_body`` inflates a COMPRESSED_FLAG body (zlib; LZ4/ZSTD are refused).
    Any truncated or inconsistent input raises MessageDecodeError.
    """
    try:
        return _decode_stored(buf, pos, check_crc, decompress_body)
    except MessageDecodeError:
        raise
    except (struct.error, IndexError, KeyError, UnicodeDecodeError, ValueError, zlib.error) as e:
        raise MessageDecodeError(f"malformed stored message at {pos}: {e}") from None


_TOPIC_CACHE: dict[bytes, str] = {}
_QID_QOFFSET = struct.Struct(">i4xq")  # queueId, (flag), queueOffset
_FIXED_V4 = _FIXED[(4, 4)]


def _topic_str(raw: bytes) -> str:
    """The topic name of its stored bytes; cached, topics repeat."""
    topic = _TOPIC_CACHE.get(raw)
    if topic is None:
        topic = raw.decode()
        if len(_TOPIC_CACHE) < 4096:
            _TOPIC_CACHE[raw] = topic
    return topic


def _decode_stored(buf: Buffer, pos: int, check_crc: bool, inflate: bool) -> tuple[MessageExt, int]:
    n = len(buf)
    if pos < 0 or n - pos < 8:
        raise MessageDecodeError(f"truncated stored message at {pos}: {n - pos} bytes left")
    total, magic = _HEAD.unpack_from(buf, pos)
    if magic == BLANK_MAGIC_CODE:
        raise MessageDecodeError(f"end-of-segment blank record at {pos}, not a message")
    if magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2:
        raise MessageDecodeError(f"bad magic code {magic:#x} at {pos}")
    end = pos + total
    if total < MIN_RECORD_SIZE or end > n:
        raise MessageDecodeError(f"stored message at {pos} declares {total} bytes, {n - pos} left")
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    fixed = _FIXED_BY_FLAGS[sys_flag & _HOST_FLAGS]
    if total < fixed.size + 3:
        raise MessageDecodeError("record too short for its host addresses")
    (
        _, _, body_crc, queue_id, flag, queue_offset, phy, _, born_ts, born_ip, born_port,
        store_ts, store_ip, store_port, reconsume, prepared, body_len,
    ) = fixed.unpack_from(buf, pos)  # fmt: skip
    p = pos + fixed.size
    if body_len < 0 or p + body_len + 3 > end:
        raise MessageDecodeError(f"body length {body_len} does not fit the record")
    body = bytes(buf[p : p + body_len])
    p += body_len
    if magic == MAGIC_CODE_V1:
        topic_len = buf[p]
        p += 1
    else:
        topic_len = _I16.unpack_from(buf, p)[0]
        p += 2
    if topic_len < 0 or p + topic_len + 2 > end:
        raise MessageDecodeError(f"topic length {topic_len} does not fit the record")
    topic = _topic_str(bytes(buf[p : p + topic_len]))
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    p += 2
    if props_len < 0 or p + props_len != end:
        raise MessageDecodeError(f"properties length {props_len} does not match totalSize")
    props = bytes(buf[p : p + props_len]).decode() if props_len else ""
    if check_crc:
        if crc32_masked(body) != body_crc:
            raise MessageDecodeError(f"body CRC mismatch in stored message at {pos}")
        if has_crc_trailer(buf, pos, total):
            check_stored_record(buf, pos)
        props = decode_properties(props)  # type: ignore[assignment]  # validated now
    if inflate and sys_flag & COMPRESSED_FLAG:
        ctype = sys_flag & COMPRESSION_TYPE_MASK
        if ctype not in (0, COMPRESSION_ZLIB_TYPE):
            raise MessageDecodeError(f"unsupported compression type {ctype:#x}")
        body = zlib.decompress(body)
    msg = MessageExt(
        topic, body, flag, props, queue_id, queue_offset, phy, sys_flag, born_ts,
        (born_ip, born_port), store_ts, (store_ip, store_port), reconsume, prepared, body_crc,
        total,
    )  # fmt: skip
    return msg, end


def decode_all(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = False, decompress_body: bool = False
) -> list[MessageExt]:
    """Every record of a concatenation (a pull response body) as a list: the consume hot path.
    Raises MessageDecodeError like `decode_stored`.

    Records of the usual shape (a bytes buffer, IPv4 hosts, magic V1, no CRC check, nothing to
    inflate) are decoded in one loop with one struct call each; any other record, and any
    record that fails a check, goes through `_decode_stored`, which decodes it or raises the
    precise error."""
    if check_crc or buf.__class__ is not bytes:
        return _decode_all_general(buf, check_crc, decompress_body)
    return _decode_all_usual(buf, decompress_body)  # type: ignore[arg-type]  # bytes here


def _decode_all_usual(buf: bytes, decompress_body: bool) -> list[MessageExt]:
    """`decode_all` of a bytes buffer: the one-struct-call loop (one call per buffer, not per
    record, separates it from the dispatch above)."""
    out: list[MessageExt] = []
    append = out.append
    unpack = _FIXED_V4.unpack_from
    fixed_size = _FIXED_V4.size
    inflate = COMPRESSED_FLAG if decompress_body else 0
    odd_flags = _HOST_FLAGS | inflate
    last_raw, last_len, last_topic = b"", 0, ""
    pos, n = 0, len(buf)
    try:
        while pos < n:
            if n - pos < fixed_size:
                msg, pos = _decode_stored(buf, pos, False, decompress_body)  # raises
                append(msg)
                continue
            (
                total, magic, body_crc, queue_id, flag, queue_offset, phy, sys_flag, born_ts,
                born_ip, born_port, store_ts, store_ip, store_port, reconsume, prepared, body_len,
            ) = unpack(buf, pos)  # fmt: skip
            end = pos + total
            p = pos + fixed_size
            q = p + body_len  # topic length byte
            if (
                magic != MAGIC_CODE_V1
                or sys_flag & odd_flags
                or end > n
                or body_len < 0
                or q + 3 > end
                or q + 3 + buf[q] > end  # topic length byte, topic, properties length
            ):
                msg, pos = _decode_stored(buf, pos, False, decompress_body)
                append(msg)
                continue
            topic_len = buf[q]
            q += 1
            if topic_len == last_len and buf.startswith(last_raw, q):
                topic = last_topic
            else:
                last_raw, last_len = buf[q : q + topic_len], topic_len
                topic = last_topic = _topic_str(last_raw)
            q += topic_len
            props_len = (buf[q] << 8) | buf[q + 1]
            q += 2
            if props_len > 0x7FFF or q + props_len != end:  # the field is a signed short
                msg, pos = _decode_stored(buf, pos, False, decompress_body)
                append(msg)
                continue
            props = buf[q:end].decode() if props_len else ""
            msg = MessageExt(
                topic, buf[p : p + body_len], flag, props, queue_id, queue_offset, phy, sys_flag,
                born_ts, (born_ip, born_port), store_ts, (store_ip, store_port), reconsume,
                prepared, body_crc, total,
            )  # fmt: skip
            append(msg)
            pos = end
    except MessageDecodeError:
        raise
    except (struct.error, IndexError, KeyError, UnicodeDecodeError, ValueError, zlib.error) as e:
        raise MessageDecodeError(f"malformed stored message at {pos}: {e}") from None
    return out


def _decode_all_general(buf: Buffer, check_crc: bool, decompress_body: bool) -> list[MessageExt]:
    out: list[MessageExt] = []
    append = out.append
    pos, n = 0, len(buf)
    try:
        while pos < n:
            msg, pos = _decode_stored(buf, pos, check_crc, decompress_body)
            append(msg)
    except MessageDecodeError:
        raise
    except (struct.error, IndexError, KeyError, UnicodeDecodeError, ValueError, zlib.error) as e:
        raise MessageDecodeError(f"malformed stored message at {pos}: {e}") from None
    return out


def iter_stored(buf: bytes | bytearray | memoryview, **kwargs: bool) -> Iterator[MessageExt]:
    """Every record of a concatenation (a pull response body), in order."""
    pos = 0
    n = len(buf)
    while pos < n:
        msg, pos = decode_stored(buf, pos, **kwargs)
        yield msg


def dispatch_fields(buf: bytes, pos: int = 0) -> tuple[str, int, int, int, int, bytes]:
    """What ConsumeQueue / index dispatch needs of the record at ``pos``, without building a
    message: (topic, queueId, queueOffset, sysFlag, storeTimestamp, encoded properties).

    The store's hot path on a slave (every replicated record is dispatched once confirmed);
    the record was already checked in full when it was written. MessageDecodeError if it does
    not hold together.
    """
    try:
        total, magic = _HEAD.unpack_from(buf, pos)
        sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
        fixed = _FIXED_BY_FLAGS[sys_flag & _HOST_FLAGS]
        fields = fixed.unpack_from(buf, pos)
        queue_id, queue_offset, store_ts, body_len = fields[3], fields[5], fields[11], fields[16]
        p = pos + fixed.size + body_len
        if magic == MAGIC_CODE_V1:
            topic_len = buf[p]
            p += 1
        else:
            topic_len = _I16.unpack_from(buf, p)[0]
            p += 2
        topic = _topic_str(buf[p : p + topic_len])
        p += topic_len
        props_len = _I16.unpack_from(buf, p)[0]
        p += 2
        if magic not in (MAGIC_CODE_V1, MAGIC_CODE_V2) or p + props_len != pos + total:
            raise MessageDecodeError(f"record at {pos} does not hold together")
        return topic, queue_id, queue_offset, sys_flag, store_ts, buf[p : p + props_len]
    except (struct.error, IndexError, KeyError, UnicodeDecodeError) as e:
        raise MessageDecodeError(f"malformed stored message at {pos}: {e}") from None


def stored_properties(buf: bytes) -> bytes:
    """The encoded properties of the stored record ``buf`` (one whole record), without decoding
    anything else: what a SQL92 selector judges. MessageDecodeError if it does not hold
    together."""
    try:
        magic = _I32.unpack_from(buf, 4)[0]
        sys_flag = _I32.unpack_from(buf, SYSFLAG_POSITION)[0]
        size = _FIXED_BY_FLAGS[sys_flag & _HOST_FLAGS].size
        p = size + _I32.unpack_from(buf, size - 4)[0]  # bodyLength is the last fixed field
        if magic == MAGIC_CODE_V1:
            p += 1 + buf[p]
        elif magic == MAGIC_CODE_V2:
            p += 2 + _I16.unpack_from(buf, p)[0]
        else:
            raise MessageDecodeError(f"bad magic code {magic}")
        n = _I16.unpack_from(buf, p)[0]
        if n < 0 or p + 2 + n > len(buf):
            raise MessageDecodeError("properties run past the record")
        return buf[p + 2 : p + 2 + n]
    except (struct.error, IndexError, KeyError) as e:
        raise MessageDecodeError(f"malformed stored message: {e}") from None


def stored_timestamp(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """storeTimestamp of the record at ``pos`` (needs the first 72 bytes of the record)."""
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    born_ip_len = 16 if sys_flag & BORNHOST_V6_FLAG else 4
    return _I64.unpack_from(buf, pos + BORN_HOST_POSITION + born_ip_len + 4)[0]
