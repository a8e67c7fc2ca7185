"""Stored-message codec (sans-io): the CommitLog record layout, properties, batch bodies, ids.

Owns the byte layout upstream RocketMQ writes into its CommitLog and sends as a pull response
body (MessageDecoder / CommitLog order, big-endian)::

    int totalSize | int magic | int bodyCRC | int queueId | int flag | long queueOffset
    | long physicalOffset | int sysFlag | long bornTimestamp | bornHost ip(4|16) + int port
    | long storeTimestamp | storeHost ip(4|16) + int port | int reconsumeTimes
    | long preparedTransactionOffset | int bodyLen + body | topicLen(byte V1|short V2) + topic
    | short propertiesLen + properties

bodyCRC is ``crc32(body) & 0x7FFFFFFF`` like upstream's UtilAll.crc32. The record-level check
follows upstream's ``enabledAppendPropCRC``: the properties end with a 20-byte trailer
``__CRC32#\\x01<10 digits>\\x02`` whose digits are the CRC32 (& 0x7FFFFFFF) of every record byte
before the trailer, written least-significant digit first (upstream's MessageDecoder.createCrc32
order). A record may carry no trailer (upstream's default) and still decode; the CommitLog
requires it so recovery can tell a whole record from a torn one.

The put hot path (`append_record`, `build_batch_records`) builds records as a few byte parts
that already carry their final physical offset, chaining the record CRC over the parts, so a
batch is joined once and nothing is patched or decoded again. CRC-32 comes from zlib-ng when
that package is installed (same values, several times faster), else from zlib.

No files, no sockets, no trio.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import struct
import zlib
from collections.abc import Callable, Iterator, Mapping
from mmap import mmap
from typing import AnyStr, Literal, TypeAlias

import attrs

try:  # zlib-ng computes the same CRC-32 several times faster (SIMD); optional
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - depends on the installed packages
    from zlib import crc32

MAGIC_CODE_V1 = -626843481  # 0xDAA320A7, 1-byte topic length
MAGIC_CODE_V2 = -626843477  # 2-byte topic length
BLANK_MAGIC_CODE = -875286124  # end-of-segment filler (0xCBD43194)

# MessageSysFlag bits
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4_TYPE = 0x100
COMPRESSION_ZSTD_TYPE = 0x200
COMPRESSION_ZLIB_TYPE = 0x300

# MessageConst property keys
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"
PROPERTY_DELAY_TIME_LEVEL = "DELAY"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_MIN_OFFSET = "MIN_OFFSET"
PROPERTY_MAX_OFFSET = "MAX_OFFSET"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MSG_REGION = "MSG_REGION"
PROPERTY_TRACE_SWITCH = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_MESSAGE_TYPE = "MSG_TYPE"
PROPERTY_POP_CK = "POP_CK"
PROPERTY_POP_CK_OFFSET = "POP_CK_OFFSET"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_CRC32 = "__CRC32#"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
# short aliases used across rocketrio
UNIQ_KEY = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
WAIT = PROPERTY_WAIT_STORE_MSG_OK
DELAY = PROPERTY_DELAY_TIME_LEVEL
REAL_TOPIC = PROPERTY_REAL_TOPIC
REAL_QID = PROPERTY_REAL_QUEUE_ID
RETRY_TOPIC = PROPERTY_RETRY_TOPIC
ORIGIN_MESSAGE_ID = PROPERTY_ORIGIN_MESSAGE_ID
MAX_RECONSUME_TIMES = PROPERTY_MAX_RECONSUME_TIMES
RECONSUME_TIME = PROPERTY_RECONSUME_TIME
TRAN_MSG = PROPERTY_TRANSACTION_PREPARED
PGROUP = PROPERTY_PRODUCER_GROUP
DLQ_ORIGIN_TOPIC = PROPERTY_DLQ_ORIGIN_TOPIC
KEY_SEPARATOR = " "

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

QUEUE_OFFSET_POSITION = 20
PHY_POS_POSITION = 28
SYSFLAG_POSITION = 36
BORN_TIMESTAMP_POSITION = 40
BORN_HOST_POSITION = 48

# "__CRC32#" + separator + 10 digits + separator, upstream's CommitLog.CRC32_RESERVED_LEN
CRC32_RESERVED_LEN = len(PROPERTY_CRC32) + 1 + 10 + 1
CRC32_TRAILER_PREFIX = (PROPERTY_CRC32 + NAME_VALUE_SEPARATOR).encode()
_CRC_PLACEHOLDER = CRC32_TRAILER_PREFIX + b"0000000000" + PROPERTY_SEPARATOR.encode()

_HEAD = struct.Struct(">ii")  # totalSize, magic
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I64 = struct.Struct(">q")


def _fixed_struct(born_ip_len: int, store_ip_len: int) -> struct.Struct:
    # everything from totalSize up to and including bodyLen
    return struct.Struct(f">iiiiiqqiq{born_ip_len}siq{store_ip_len}siiqi")


_FIXED = {
    (4, 4): _fixed_struct(4, 4),
    (4, 16): _fixed_struct(4, 16),
    (16, 4): _fixed_struct(16, 4),
    (16, 16): _fixed_struct(16, 16),
}
_FIXED_BY_FLAGS = {
    0: _FIXED[(4, 4)],
    BORNHOST_V6_FLAG: _FIXED[(16, 4)],
    STOREHOSTADDRESS_V6_FLAG: _FIXED[(4, 16)],
    BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG: _FIXED[(16, 16)],
}
_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
# Smallest possible record: IPv4 hosts, empty body, topic and properties (1-byte topic length).
MIN_RECORD_SIZE = _FIXED[(4, 4)].size + 1 + 2

Buffer: TypeAlias = bytes | bytearray | memoryview | mmap


class MessageDecodeError(ValueError):
    """A stored record, batch body or message id that is truncated or malformed."""


class MessageSizeError(ValueError):
    """A body or properties above its limit (the store turns it into MessageTooLarge)."""


RecordCrcMode = Literal["seal", "reserve", "none"]


def crc32_masked(data: bytes | bytearray | memoryview) -> int:
    """Upstream's UtilAll.crc32: zlib CRC32 with the sign bit cleared."""
    return crc32(data) & 0x7FFFFFFF


# --------------------------------------------------------------------------- properties


def encode_properties(props: Mapping[str, str]) -> str:
    """``k\\x01v\\x02`` for every pair, like upstream's messageProperties2String."""
    if not props:
        return ""
    try:
        text = "\x02".join(map("\x01".join, props.items())) + "\x02"  # no Python per pair
        n = len(props)
    except TypeError:  # a None value (dropped) or a value that is not a str
        pairs = [(k, v) for k, v in props.items() if v is not None]
        text = "".join([f"{k}\x01{v}\x02" for k, v in pairs])
        n = len(pairs)
    # one count per separator instead of a check per key and value: a separator inside a key
    # or value would silently change the properties on decode
    if text.count("\x01") != n or text.count("\x02") != n:
        raise ValueError("property keys and values must not contain \\x01 or \\x02")
    return text


def decode_properties(text: str) -> dict[str, str]:
    """Upstream's string2messageProperties: pairs with an empty key or value are dropped."""
    out: dict[str, str] = {}
    for item in text.split("\x02"):
        key, sep, value = item.partition("\x01")
        if sep and key and value:
            out[key] = value
    return out


# --------------------------------------------------------------------------- hosts and ids


def _ip_to_str(ip: bytes) -> str:
    if len(ip) == 4:
        return f"{ip[0]}.{ip[1]}.{ip[2]}.{ip[3]}"
    return ipaddress.IPv6Address(ip).compressed


def host_to_str(ip: bytes, port: int) -> str:
    """``ip:port`` as upstream prints socket addresses (no brackets around IPv6)."""
    return f"{_ip_to_str(ip)}:{port}"


def parse_host(text: str) -> tuple[bytes, int]:
    """``ip:port`` (IPv4 or IPv6, brackets optional) -> (packed ip, port)."""
    ip, _, port = text.rpartition(":")
    ip = ip.strip("[]")
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        return socket.inet_pton(family, ip), int(port)
    except (OSError, ValueError):
        raise ValueError(f"not an ip:port address: {text!r}") from None


def offset_msg_id(store_ip: bytes, port: int, commitlog_offset: int) -> str:
    """Upstream's offsetMsgId: hex(store ip + int port + long offset), upper case."""
    if len(store_ip) not in (4, 16):
        raise ValueError(f"store ip must be 4 or 16 bytes, got {len(store_ip)}")
    return (store_ip + struct.pack(">iq", port, commitlog_offset)).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """offsetMsgId -> (store ip, port, commitlog offset)."""
    if len(msg_id) not in (32, 56):
        raise MessageDecodeError(f"offset message id must have 32 or 56 hex digits: {msg_id!r}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise MessageDecodeError(f"offset message id is not hex: {msg_id!r}") from None
    ip_len = len(raw) - 12
    port, offset = struct.unpack_from(">iq", raw, ip_len)
    return _ip_to_str(raw[:ip_len]), port, offset


@functools.lru_cache(maxsize=4096)
def tags_hash_code(tag: str) -> int:
    """Java ``String.hashCode`` of the tag (signed 32-bit): the ConsumeQueue tagsCode."""
    h = 0
    if tag.isascii():
        for c in tag.encode():
            h = (31 * h + c) & 0xFFFFFFFF
    else:
        # Java hashes UTF-16 code units, so characters outside the BMP count twice
        units = tag.encode("utf-16-be", "surrogatepass")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


# --------------------------------------------------------------------------- stored records


class MessageExt:
    """One decoded stored message (upstream MessageExt / MessageClientExt).

    Built by the pull path for every consumed message, so the costly parts stay encoded until
    read: ``properties`` may be given as the encoded ``k\x01v\x02`` text and ``born_host`` /
    ``store_host`` as ``(packed ip, port)``; the attributes decode on first access and keep the
    result. Equality compares the decoded values.
    """

    __slots__ = (
        "_born_host", "_properties", "_store_host", "body", "body_crc", "born_timestamp",
        "commitlog_offset", "flag", "prepared_transaction_offset", "queue_id", "queue_offset",
        "reconsume_times", "store_size", "store_timestamp", "sys_flag", "topic",
    )  # fmt: skip

    def __init__(
        self,
        topic: str,
        body: bytes,
        flag: int = 0,
        properties: dict[str, str] | str | None = None,
        queue_id: int = 0,
        queue_offset: int = 0,
        commitlog_offset: int = 0,
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: str | tuple[bytes, int] = "",
        store_timestamp: int = 0,
        store_host: str | tuple[bytes, int] = "",
        reconsume_times: int = 0,
        prepared_transaction_offset: int = 0,
        body_crc: int = 0,
        store_size: int = 0,
    ) -> None:
        self.topic = topic
        self.body = body
        self.flag = flag
        self._properties: dict[str, str] | str = {} if properties is None else properties
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commitlog_offset = commitlog_offset
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self._born_host = born_host
        self.store_timestamp = store_timestamp
        self._store_host = store_host
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.body_crc = body_crc
        self.store_size = store_size

    @property
    def properties(self) -> dict[str, str]:
        props = self._properties
        if props.__class__ is str:
            props = self._properties = decode_properties(props)  # type: ignore[arg-type]
        return props  # type: ignore[return-value]

    @properties.setter
    def properties(self, value: dict[str, str]) -> None:
        self._properties = value

    @property
    def born_host(self) -> str:
        h = self._born_host
        if h.__class__ is tuple:
            h = self._born_host = host_to_str(*h)  # type: ignore[misc]
        return h  # type: ignore[return-value]

    @born_host.setter
    def born_host(self, value: str) -> None:
        self._born_host = value

    @property
    def store_host(self) -> str:
        h = self._store_host
        if h.__class__ is tuple:
            h = self._store_host = host_to_str(*h)  # type: ignore[misc]
        return h  # type: ignore[return-value]

    @store_host.setter
    def store_host(self, value: str) -> None:
        self._store_host = value

    _FIELDS = (
        "topic", "body", "flag", "properties", "queue_id", "queue_offset", "commitlog_offset",
        "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host",
        "reconsume_times", "prepared_transaction_offset", "body_crc", "store_size",
    )  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not MessageExt:
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._FIELDS)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS if f != "body")
        return f"MessageExt({inner}, body={self.body[:32]!r}{'...' if len(self.body) > 32 else ''})"

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(PROPERTY_KEYS, "").split(KEY_SEPARATOR) if k]

    @property
    def offset_msg_id(self) -> str:
        h = self._store_host
        ip, port = h if h.__class__ is tuple else parse_host(h)  # type: ignore[misc]
        return offset_msg_id(ip, port, self.commitlog_offset)

    @property
    def msg_id(self) -> str:
        """The client's unique id (UNIQ_KEY) when present, else the offset message id."""
        return self.properties.get(UNIQ_KEY) or self.offset_msg_id


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


def has_crc_trailer(buf: Buffer, pos: int, size: int) -> bool:
    start = pos + size - CRC32_RESERVED_LEN
    return start >= pos and bytes(buf[start : start + 9]) == CRC32_TRAILER_PREFIX


def check_stored_record(
    buf: Buffer,
    pos: int,
    *,
    expected_offset: int | None = None,
    limit: int | None = None,
) -> int:
    """Validate one CommitLog record at ``pos`` and return its size.

    Checks the size against the buffer (and ``limit``, the last byte position the record may
    reach), the magic code, that every inner length adds up to totalSize, the physical offset
    (when ``expected_offset`` is given) and the ``__CRC32#`` record CRC, which must be present.
    Raises MessageDecodeError saying what is wrong. ``buf`` may be anything with the buffer
    protocol and slicing (bytes, bytearray, mmap).
    """
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
    _check_layout(buf, pos, total, magic, expected_offset)
    trailer = bytes(buf[pos + total - CRC32_RESERVED_LEN : pos + total])
    digits = trailer[9:19]
    if not trailer.startswith(CRC32_TRAILER_PREFIX) or trailer[-1:] != b"\x02":
        raise MessageDecodeError("record has no __CRC32# trailer")
    if not digits.isdigit():
        raise MessageDecodeError("record CRC trailer is not decimal")
    if crc32_masked(memoryview(buf)[pos : pos + total - CRC32_RESERVED_LEN]) != int(digits[::-1]):
        raise MessageDecodeError("record CRC mismatch")
    return total


def _check_layout(buf: Buffer, pos: int, total: int, magic: int, expected: int | None) -> None:
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
    p += topic_len
    props_len = _I16.unpack_from(buf, p)[0]
    if props_len < 0 or p + 2 + props_len != end:
        raise MessageDecodeError(f"properties length {props_len} does not match totalSize")


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


def stored_timestamp(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """storeTimestamp of the record at ``pos`` (needs the first 72 bytes of the record)."""
    sys_flag = _I32.unpack_from(buf, pos + SYSFLAG_POSITION)[0]
    born_ip_len = 16 if sys_flag & BORNHOST_V6_FLAG else 4
    return _I64.unpack_from(buf, pos + BORN_HOST_POSITION + born_ip_len + 4)[0]


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


def find_property(
    data: AnyStr, key: AnyStr, start: int = 0, end: int | None = None
) -> AnyStr | None:
    """Value of ``key`` (given with its ``\\x01``) in encoded properties ``data[start:end]``.

    Same answer as `decode_properties` (the last non-empty value of a pair whose key starts at
    a property boundary) without splitting everything; None when there is none.
    """
    if end is None:
        end = len(data)
    sep = b"\x02" if isinstance(data, bytes) else "\x02"
    p = data.rfind(key, start, end)
    while p >= 0:
        if p == start or data.startswith(sep, p - 1):
            v = p + len(key)
            e = data.find(sep, v, end)
            if e < 0:
                e = end
            if e > v:
                return data[v:e]
        # keys hold no \x01 but their last byte, so occurrences never overlap
        p = data.rfind(key, start, p)
    return None


@functools.lru_cache(maxsize=4096)
def tags_code_of_bytes(tag: bytes) -> int:
    """`tags_hash_code` of an encoded tag (cached: a few tags repeat across messages)."""
    return tags_hash_code(tag.decode())


def _host_flags(sys_flag: int, born_ip: bytes, store_ip: bytes) -> int:
    sys_flag &= ~_HOST_FLAGS
    if len(born_ip) == 16:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_ip) == 16:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    return sys_flag


def append_record(
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
    try:
        head = fixed.pack(
            size, magic, crc32(body) & 0x7FFFFFFF, queue_id, flag, queue_offset,
            physical_offset, sys_flag & ~_HOST_FLAGS | host_flags, born_timestamp, born_ip,
            born_port, store_timestamp, store_ip, store_port, reconsume_times,
            prepared_transaction_offset, len(body),
        )  # fmt: skip
    except struct.error as e:
        raise ValueError(f"stored message field out of range: {e}") from None
    crc = crc32(tail, crc32(body, crc32(head))) & 0x7FFFFFFF
    out += (head, body, tail, (_TRAILER_REVERSED % crc)[::-1])
    return size


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
    keys_all = _bytes_property(const.properties, b"KEYS\x01")
    if keys_all is not None:
        built.keys = [keys_all] * len(props)
    elif every.find(b"KEYS\x01") >= 0:
        built.keys = [_bytes_property(one, b"KEYS\x01") for one in props]
    return built


def _build_records(
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
    extra = _strip_crc_property(const.properties)
    uniq_all = _bytes_property(extra, b"UNIQ_KEY\x01")
    tags_all = _bytes_property(extra, b"TAGS\x01")
    mid = const.mid()
    head_pack = _head_struct(len(mid)).pack
    magic, topic_part = _topic_part(const.topic, None)
    queue_id, fixed_len = const.queue_id, len(mid) + 40 + CRC32_RESERVED_LEN
    parts: list[Buffer] = []
    metas: list[tuple[int, bytes, bytes, bytes]] = []  # one append per message, not four
    hs = _BATCH_HEAD.size
    unpack, u16, crc, trailer = _BATCH_HEAD.unpack_from, _U16.unpack_from, crc32, _TRAILER_REVERSED
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
            bad = True
        if bad:
            raise MessageDecodeError(f"batch message at {pos} is truncated or inconsistent")
        if body_len > max_body_size:
            raise MessageSizeError(
                f"message {len(metas)}: body of {body_len} bytes exceeds {max_body_size}"
            )
        body = view[pos + hs : q]
        props = data[q + 2 : end]
        if strip_crc:
            props = _strip_crc_property(props)
        if props and props[-1] != 2:  # the batch properties must start a pair of their own
            props += b"\x02"
        # UNIQ_KEY and TAGS inline: a call per lookup would cost more than the lookup
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
        head = head_pack(
            size, magic, crc(body) & 0x7FFFFFFF, queue_id, flag, qo, phy, mid, body_len
        )
        seal = crc(tail, crc(body, crc(head))) & 0x7FFFFFFF  # the record CRC, chained
        parts += (head, body, tail, (trailer % seal)[::-1])
        tag = tags_all
        if tag is None:
            p = props.rfind(b"TAGS\x01")
            e = props.find(b"\x02", p + 5)
            if p >= 0 and e > p + 5 and (p == 0 or props[p - 1] == 2):
                tag = props[p + 5 : e]
            elif p >= 0:
                tag = find_property(props, b"TAGS\x01")
        metas.append((size, uniq, tag or b"", props))
        qo += 1
        phy += size
        pos = end
    if not metas:
        return BuiltBatch(b"", [], [], None, []), []
    sizes, uniqs, tags, all_props = map(list, zip(*metas, strict=True))
    return BuiltBatch(b"".join(parts), sizes, tags, None, uniqs), all_props


@functools.lru_cache(maxsize=4)
def _mid_struct(born_ip_len: int, store_ip_len: int) -> struct.Struct:
    """sysFlag .. preparedTransactionOffset of a record."""
    return struct.Struct(f">iq{born_ip_len}siq{store_ip_len}siiq")


@functools.lru_cache(maxsize=8)
def _head_struct(mid_len: int) -> struct.Struct:
    """totalSize .. physicalOffset, the sysFlag..preparedTransactionOffset bytes, bodyLen."""
    return struct.Struct(f">iiiiiqq{mid_len}si")


def _bytes_property(props: bytes, key: bytes) -> bytes | None:
    """`find_property` on whole bytes, with a fast path for a key that occurs once."""
    p = props.rfind(key)
    if p < 0:
        return None
    v = p + len(key)
    e = props.find(b"\x02", v)
    if e > v and (p == 0 or props[p - 1] == 2):
        return props[v:e]
    return find_property(props, key)


def _strip_crc_property(props: bytes) -> bytes:
    """The properties without a ``__CRC32#`` pair (the CommitLog writes its own)."""
    if props.find(b"__CRC32#") < 0:
        return props
    kept = [p for p in props.split(b"\x02") if p and not p.startswith(b"__CRC32#\x01")]
    return b"".join([p + b"\x02" for p in kept])
