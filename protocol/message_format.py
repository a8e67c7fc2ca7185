"""Stored-message vocabulary (sans-io): constants, properties, hosts and ids, MessageExt.

Owns what every other message module shares: the magic codes, MessageSysFlag bits, MessageConst
property keys and record field positions of upstream's CommitLog layout (big-endian)::

    int totalSize | int magic | int bodyCRC | int queueId | int flag | long queueOffset
    | long physicalOffset | int sysFlag | long bornTimestamp | bornHost ip(4|16) + int port
    | long storeTimestamp | storeHost ip(4|16) + int port | int reconsumeTimes
    | long preparedTransactionOffset | int bodyLen + body | topicLen(byte V1|short V2) + topic
    | short propertiesLen + properties

plus the ``k\\x01v\\x02`` properties codec, tags hash codes, ``ip:port`` helpers, offset
message ids and the lazily decoded `MessageExt`. bodyCRC is ``crc32(body) & 0x7FFFFFFF`` like
upstream's UtilAll.crc32; CRC-32 comes from zlib-ng (a dependency: same values, 4-5x faster),
else from zlib; ``crc32_combine`` is zlib-ng's, None without it.

No files, no sockets, no trio.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import struct
from collections.abc import Callable, Mapping
from mmap import mmap
from typing import AnyStr, Literal, TypeAlias

try:  # zlib-ng computes the same CRC-32 4-5x faster (SIMD); a dependency, zlib if absent
    from zlib_ng.zlib_ng import crc32
except ImportError:  # pragma: no cover - depends on the installed packages
    from zlib import crc32
try:  # crc32(b, crc32(a)) from crc32(a), crc32(b) and len(b), without reading b again
    from zlib_ng.zlib_ng import crc32_combine as _combine
except ImportError:  # pragma: no cover - depends on the installed packages
    _combine = None
crc32_combine: Callable[[int, int, int], int] | None = _combine

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

QUEUE_ID_POSITION = 12
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

    def born_host_packed(self) -> tuple[bytes, int]:
        """``born_host`` as (packed ip, port), its stored form, without a text round trip.
        Raises ValueError for a text host that does not parse."""
        h = self._born_host
        return h if h.__class__ is tuple else parse_host(h)  # type: ignore[return-value]

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


# ----------------------------------------------------------- property and tag lookups (put path)


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


def find_stored_property(props: bytes, key: bytes) -> bytes | None:
    """`find_property` on encoded bytes, with a fast path for a key that occurs once (the put
    and dispatch hot paths read TAGS, KEYS and UNIQ_KEY of every record)."""
    p = props.rfind(key)
    if p < 0:
        return None
    v = p + len(key)
    e = props.find(b"\x02", v)
    if e > v and (p == 0 or props[p - 1] == 2):
        return props[v:e]
    return find_property(props, key)


@functools.lru_cache(maxsize=4096)
def tags_code_of_bytes(tag: bytes) -> int:
    """`tags_hash_code` of an encoded tag (cached: a few tags repeat across messages)."""
    return tags_hash_code(tag.decode())
