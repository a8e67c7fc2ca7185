"""User-facing message types of the clients: `Message`, `SendResult`, `SendStatus`,
`ConsumeStatus`, and client-side message ids (upstream MessageClientIDSetter).

A `Message` is what an application sends: topic, body, tags, keys, user properties, flag.
`wire_properties` turns it into the property map that goes on the wire (TAGS, KEYS, WAIT,
UNIQ_KEY plus the user's). Consumers receive `MessageExt` (the stored-message codec's class,
re-exported here).

Message ids follow upstream's UNIQ_KEY layout, 16 bytes as 32 upper-case hex digits:
``ip(4) | pid(2, low 16 bits) | client hash(4) | ms since the start of the month(4) |
counter(2)``. The month starts at local midnight of day 1, like upstream's Calendar.
"""

from __future__ import annotations

import enum
import os
import socket
import struct
from collections.abc import Callable, Sequence
from datetime import datetime

import attrs

from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import (
    DELAY,
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    UNIQ_KEY,
    WAIT,
    MessageExt,
)

__all__ = [
    "ConsumeStatus",
    "Message",
    "MessageExt",
    "MessageQueue",
    "SendResult",
    "SendStatus",
    "UniqIdGenerator",
]

# properties the client sets itself; a user property with one of these names is refused
_SYSTEM_KEYS = frozenset({PROPERTY_TAGS, PROPERTY_KEYS, UNIQ_KEY, WAIT})


@attrs.define(slots=True)
class Message:
    """A message to send. ``keys`` may be one string (space-separated) or a list."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | Sequence[str] | None = None
    properties: dict[str, str] | None = None
    flag: int = 0
    wait_store_msg_ok: bool = True
    delay_time_level: int = 0

    def keys_string(self) -> str | None:
        if self.keys is None:
            return None
        if isinstance(self.keys, str):
            return self.keys or None
        return KEY_SEPARATOR.join(self.keys) or None

    def wire_properties(self, uniq_id: str | None) -> dict[str, str]:
        """The properties sent to the broker, in upstream's order (user properties last)."""
        props: dict[str, str] = {}
        if self.tags:
            props[PROPERTY_TAGS] = self.tags
        keys = self.keys_string()
        if keys:
            props[PROPERTY_KEYS] = keys
        props[WAIT] = "true" if self.wait_store_msg_ok else "false"
        if self.delay_time_level > 0:
            props[DELAY] = str(self.delay_time_level)
        if uniq_id is not None:
            props[UNIQ_KEY] = uniq_id
        if self.properties:
            clash = _SYSTEM_KEYS.intersection(self.properties)
            if clash:
                raise ValueError(f"properties {sorted(clash)} are set by the client")
            props.update(self.properties)
        return props


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


@attrs.frozen
class SendResult:
    """Outcome of a send. ``msg_id`` is the client id (UNIQ_KEY; comma-joined for a batch),
    ``offset_msg_id`` the broker's id (store host + commitlog offset)."""

    send_status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None


# --- message ids -----------------------------------------------------------------------------

_ID_TAIL = struct.Struct(">IH")


def month_bounds(now_ms: int) -> tuple[int, int]:
    """(start of this month, start of next month) in ms, local time, like upstream."""
    dt = datetime.fromtimestamp(now_ms / 1000)
    start = dt.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = (
        start.replace(year=start.year + 1, month=1)
        if start.month == 12
        else start.replace(month=start.month + 1)
    )
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


def id_prefix(ip: str, pid: int, client_hash: int, now_ms: int) -> str:
    """The fixed first 10 bytes of every id of one client, as hex."""
    try:
        ip_b = socket.inet_aton(ip)
    except OSError:
        # upstream's createFakeIP for an address that is not IPv4: low 4 bytes of the time
        ip_b = struct.pack(">q", now_ms)[4:]
    return (ip_b + struct.pack(">HI", pid & 0xFFFF, client_hash & 0xFFFFFFFF)).hex().upper()


class UniqIdGenerator:
    """Upstream MessageClientIDSetter for one client: ``next_id()`` -> 32 hex digits."""

    def __init__(
        self,
        ip: str,
        *,
        pid: int | None = None,
        client_hash: int | None = None,
        clock_ms: Callable[[], int] = wallclock_ms,
    ) -> None:
        self._clock = clock_ms
        now = clock_ms()
        pid = os.getpid() if pid is None else pid
        client_hash = id(self) if client_hash is None else client_hash
        self.prefix = id_prefix(ip, pid, client_hash, now)
        self._start, self._next_start = month_bounds(now)
        self._counter = 0

    def next_id(self) -> str:
        now = self._clock()
        if now >= self._next_start:
            self._start, self._next_start = month_bounds(now)
        counter = self._counter
        self._counter = (counter + 1) & 0xFFFF
        # upstream casts the span to int: the same 4 bytes as the unsigned low 32 bits
        span = (now - self._start) & 0xFFFFFFFF
        return self.prefix + _ID_TAIL.pack(span, counter).hex().upper()


@attrs.frozen
class UniqIdParts:
    ip: str
    pid: int
    client_hash: int
    ms_since_month_start: int
    counter: int


def parse_uniq_id(uniq_id: str) -> UniqIdParts:
    """Split a UNIQ_KEY into its fields (upstream getIPStrFromID / getNearlyTimeFromID)."""
    if len(uniq_id) != 32:
        raise ValueError(f"a message id has 32 hex digits, got {len(uniq_id)}: {uniq_id!r}")
    raw = bytes.fromhex(uniq_id)
    pid, client_hash, span, counter = struct.unpack(">HIIH", raw[4:])
    return UniqIdParts(socket.inet_ntoa(raw[:4]), pid, client_hash, span, counter)


def nearly_time_from_id(uniq_id: str, now_ms: int) -> int:
    """Approximate born time (ms) of an id made within the last month before ``now_ms``."""
    span = parse_uniq_id(uniq_id).ms_since_month_start
    start, _ = month_bounds(now_ms)
    if start + span >= now_ms:
        start, _ = month_bounds(start - 1)
    return start + span


def user_properties(msg: MessageExt) -> dict[str, str]:
    """A received message's properties without the system ones the client sets."""
    return {k: v for k, v in msg.properties.items() if k not in _SYSTEM_KEYS}
