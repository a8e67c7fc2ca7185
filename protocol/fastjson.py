"""Bodies as upstream's Java tools write and read them (fastjson 1.2.83, default mode).

Upstream encodes every admin body with ``JSON.toJSONString(obj)``; the result is not always
RFC-8259 JSON. This module owns the rules, in one place, for every body rocketrio sends to or
reads from a Java tool (``../shared/reference/admin-bodies/README.md`` §1):

- bean properties in alphabetical order, ``None`` omitted, empty collections written;
- doubles as Java's ``Double.toString`` (``0.0``, ``4.166666666666667``, ``1.0E-5``), NaN and
  infinities as ``null``; enums by name;
- map keys that are not strings are written unquoted with their own serializer: ``{0:"..."}``
  for Long keys and, for maps keyed by MessageQueue, the key object itself:
  ``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``;
- maps keyed by MessageQueue iterate in Java ``HashMap`` order (`java_hashmap_order`), so a
  body built in the broker's insertion order comes out byte-identical to upstream's.

`loads` reads all of that back: standard JSON through orjson, anything else through a small
tolerant reader that accepts bare object and number keys (a bare object key becomes an
`ObjectKey`). It is the reader behind `serde.from_json`, whose converter turns a MessageQueue
key given as a bare object, as the quoted JSON text of one (what a standard-JSON writer
produces) or as a dict into a `MessageQueue`. So: ``fastjson.encode(body)`` to answer,
``serde.from_json(Cls, body)`` to read.

A map upstream keeps in a Java ``TreeMap`` keyed by MessageQueue is a `TreeMap` here (a dict
written in its insertion order, which its builder makes the key order).

A class adds getter-only properties (upstream's ``*TimeStampStr``) with a ``fastjson_extra()``
method returning them; fields whose attrs metadata has ``fastjson=False`` are not written.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import attrs
import orjson

from rocketrio.protocol.bodies import MessageQueue

T = TypeVar("T")

# ---------------------------------------------------------------------------- Java hashing


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` (UTF-16 code units, 32-bit wrap-around), as a signed int."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _utf16_units(s: str) -> Iterable[int]:
    for ch in s:
        cp = ord(ch)
        if cp < 0x10000:
            yield cp
        else:
            cp -= 0x10000
            yield 0xD800 + (cp >> 10)
            yield 0xDC00 + (cp & 0x3FF)


def message_queue_hash(mq: MessageQueue) -> int:
    """``MessageQueue.hashCode()``: 31-based over brokerName, queueId, topic."""
    h = 31 + java_string_hash(mq.brokerName)
    h = 31 * h + mq.queueId
    h = 31 * h + java_string_hash(mq.topic)
    h &= 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_hashmap_order(keys: list[T], hash_of: Callable[[T], int]) -> list[T]:
    """``keys`` (given in insertion order) in the order a ``new HashMap<>()`` filled by
    ``put`` iterates them: by bucket ``(h ^ h >>> 16) & (capacity - 1)``, insertion order
    within a bucket; the capacity doubles from 16 whenever the size passes 3/4 of it."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(item: tuple[int, T]) -> tuple[int, int]:
        h = hash_of(item[1]) & 0xFFFFFFFF
        return ((h ^ (h >> 16)) & (capacity - 1), item[0])

    return [k for _, k in sorted(enumerate(keys), key=bucket)]


# ---------------------------------------------------------------------------- writing


def java_double(x: float) -> str:
    """Java's ``Double.toString`` for a finite double (shortest round-trip digits)."""
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    mantissa, _, exp_text = f"{abs(x)!r}".partition("e")
    whole, _, frac = mantissa.partition(".")
    all_digits = whole + frac
    digits = all_digits.lstrip("0")
    # the decimal point sits after `point` digits of `digits` (negative: zeros before them)
    point = len(whole) + int(exp_text or 0) - (len(all_digits) - len(digits))
    digits = digits.rstrip("0") or "0"
    magnitude = abs(x)
    if 1e-3 <= magnitude < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _string(s: str) -> str:
    return orjson.dumps(s).decode()  # escapes ", \\ and control characters; / and UTF-8 raw


def _key(k: Any) -> str:
    if isinstance(k, str):
        return _string(k)
    if isinstance(k, bool):
        return "true" if k else "false"
    if isinstance(k, int):
        return str(k)
    if isinstance(k, enum.Enum):
        return _string(k.name)
    if attrs.has(type(k)):
        return _value(k)  # a bean as a map key: written bare, as fastjson does
    raise TypeError(f"cannot write a map key of type {type(k).__name__}")


def _bean(obj: Any) -> str:
    props: dict[str, Any] = {}
    for a in attrs.fields(type(obj)):
        if a.metadata.get("fastjson", True):
            v = getattr(obj, a.name)
            if v is not None:
                props[a.name] = v
    extra = getattr(obj, "fastjson_extra", None)
    if extra is not None:
        props.update({k: v for k, v in extra().items() if v is not None})
    return "{" + ",".join(f"{_string(k)}:{_value(props[k])}" for k in sorted(props)) + "}"


class TreeMap(dict[Any, Any]):
    """A map upstream keeps in a Java TreeMap: written in its own (insertion) order, which the
    builder makes the key order, instead of Java HashMap order."""


def _map(d: dict[Any, Any]) -> str:
    keys = list(d)
    if keys and isinstance(keys[0], MessageQueue) and not isinstance(d, TreeMap):
        keys = java_hashmap_order(keys, message_queue_hash)
    return "{" + ",".join(f"{_key(k)}:{_value(d[k])}" for k in keys) + "}"


def _value(v: Any) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return java_double(v) if math.isfinite(v) else "null"
    if isinstance(v, enum.Enum):
        return _string(v.name)
    if isinstance(v, dict):
        return _map(v)
    if isinstance(v, (list, tuple, set, frozenset)):
        return "[" + ",".join(_value(x) for x in v) + "]"
    if attrs.has(type(v)):
        return _bean(v)
    raise TypeError(f"cannot write a value of type {type(v).__name__}")


def dumps(value: Any) -> str:
    """The fastjson text of ``value`` (an attrs bean, dict, list or scalar)."""
    return _value(value)


def encode(obj: Any) -> bytes:
    """A body's bytes, as upstream's ``RemotingSerializable.encode()`` writes them."""
    return _value(obj).encode()


# ---------------------------------------------------------------------------- reading


class ObjectKey(tuple[tuple[str, Any], ...]):
    """A map key that was a bare JSON object (hashable; `dict(key)` gives its fields)."""


class _Reader:
    """A JSON reader that also takes fastjson's unquoted number and object map keys."""

    _WS = " \t\r\n"

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    def fail(self, what: str) -> ValueError:
        return ValueError(f"{what} at character {self.i}")

    def ws(self) -> None:
        s, i = self.s, self.i
        while i < len(s) and s[i] in self._WS:
            i += 1
        self.i = i

    def value(self) -> Any:
        self.ws()
        if self.i >= len(self.s):
            raise self.fail("unexpected end")
        c = self.s[self.i]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        if c == '"':
            return self.string()
        return self.scalar()

    def string(self) -> str:
        dec = orjson.loads  # one string token, decoded by orjson (escapes, surrogates)
        s, i = self.s, self.i + 1
        while True:
            j = s.find('"', i)
            if j < 0:
                raise self.fail("unterminated string")
            backslashes = 0
            k = j - 1
            while s[k] == "\\":
                backslashes += 1
                k -= 1
            if backslashes % 2 == 0:
                break
            i = j + 1
        token = s[self.i : j + 1]
        self.i = j + 1
        result: str = dec(token)
        return result

    def scalar(self) -> Any:
        s, start = self.s, self.i
        i = start
        while i < len(s) and s[i] not in ",:]} \t\r\n":
            i += 1
        token = s[start:i]
        self.i = i
        if token in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[token]
        try:
            return int(token)
        except ValueError:
            pass
        try:
            return float(token)
        except ValueError:
            raise self.fail(f"bad token {token!r}") from None

    def key(self) -> Any:
        self.ws()
        c = self.s[self.i] if self.i < len(self.s) else ""
        if c == '"':
            return self.string()
        if c == "{":
            return ObjectKey(self.obj().items())
        if c == "[":
            raise self.fail("a list cannot be a map key")
        return self.scalar()

    def obj(self) -> dict[Any, Any]:
        self.i += 1
        out: dict[Any, Any] = {}
        self.ws()
        if self.s.startswith("}", self.i):
            self.i += 1
            return out
        while True:
            k = self.key()
            self.ws()
            if not self.s.startswith(":", self.i):
                raise self.fail("expected ':'")
            self.i += 1
            out[k] = self.value()
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("}", self.i):
                self.i += 1
                return out
            raise self.fail("expected ',' or '}'")

    def arr(self) -> list[Any]:
        self.i += 1
        out: list[Any] = []
        self.ws()
        if self.s.startswith("]", self.i):
            self.i += 1
            return out
        while True:
            out.append(self.value())
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("]", self.i):
                self.i += 1
                return out
            raise self.fail("expected ',' or ']'")


def loads(data: bytes | str) -> Any:
    """Parse standard JSON or fastjson's output (bare number and object map keys)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    text = data.decode() if isinstance(data, (bytes, bytearray)) else data
    reader = _Reader(text)
    value = reader.value()
    reader.ws()
    if reader.i != len(text):
        raise reader.fail("extra data")
    return value
