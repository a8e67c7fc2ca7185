"""POP records (upstream PopCheckPoint, AckMsg, BatchAckMsg, BatchAck): values and their JSON.

Owns what a POP leaves in the revive topic and what BATCH_ACK_MESSAGE carries:

- `PopCheckPoint` (CK): ``num`` messages of one queue popped at ``pop_time`` from
  ``start_offset`` (``queue_offset_diff`` their offsets minus it), invisible for
  ``invisible_time`` ms, by ``cid`` on broker ``broker_name``. The body of a revive-topic message
  tagged ``ck``; its JSON uses upstream's short names (so, bn, pt, it, ...);
- `AckMsg` / `BatchAckMsg`: one or several acknowledged offsets of the CK identified by (topic,
  group, queue, start offset, pop time, broker name), tagged ``ack`` / ``bAck``;
- the merge key that pairs an ACK with its CK, with brokerName in it (RIP-32: another broker
  scanning its own revive log can cancel a CK that an escaped ACK names);
- the UNIQ_KEYs upstream stamps on CK / ACK messages (genCkUniqueId, genAckUniqueId, ...);
- `BatchAck` (BATCH_ACK_MESSAGE body item) with its bitSet, which fastjson writes as the base64
  of java.util.BitSet.toByteArray (little-endian bytes, trailing zero bytes dropped).

Pure values; JSON encoding sorts keys like fastjson and leaves out absent fields.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable
from typing import Any

import attrs
import orjson

from rocketrio.protocol.pop_extra_info import ACK_TAG, BATCH_ACK_TAG, CK_TAG, SPLIT


class PopRecordError(ValueError):
    """A CK / ACK body or a batch-ack body that cannot be read."""


MergeKey = tuple[str, str, int, int, int, str]  # topic, group, queueId, startOffset, popTime, bn


def _dumps(d: dict[str, Any]) -> bytes:
    """Compact JSON, keys sorted, None left out. Through orjson (a CK per POP and an ACK record
    per turn: the standard encoder cost ~10 us a record); its bytes are the standard encoder's
    (``separators=(",", ":")``, ``sort_keys``) for printable ASCII text, and for any other
    text the same JSON value (orjson writes UTF-8 where the standard one escapes); a number
    orjson refuses (beyond 64 bits) goes through the standard encoder."""
    kept = {k: v for k, v in d.items() if v is not None}
    try:
        return orjson.dumps(kept, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError: an int beyond 64 bits
        return json.dumps(kept, sort_keys=True, separators=(",", ":")).encode()


_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def _loads(body: bytes) -> dict[str, Any]:
    """The record's JSON object. Through orjson (the revive reads every CK and ACK record
    back); what orjson refuses (text that is not UTF-8, a number beyond 64 bits, NaN, a lone
    surrogate...) goes to the standard decoder, whose value or error it is, and so does a
    record with 19 digits in a row: orjson reads an integer beyond 64 bits as a float."""
    try:
        if _LONG_NUMBER.search(body) is not None:
            raise orjson.JSONDecodeError("maybe beyond 64 bits", "", 0)
        d = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:
            d = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise PopRecordError(f"not JSON: {e}") from None
    if not isinstance(d, dict):
        raise PopRecordError("not a JSON object")
    return d


def _get(d: dict[str, Any], short: str, long: str, default: Any = None) -> Any:
    if short in d:
        return d[short]
    return d.get(long, default)


@attrs.frozen
class PopCheckPoint:
    start_offset: int
    pop_time: int
    invisible_time: int
    num: int
    queue_id: int
    topic: str
    cid: str
    broker_name: str
    bit_map: int = 0
    revive_offset: int = 0
    queue_offset_diff: tuple[int, ...] = ()
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def merge_key(self) -> MergeKey:
        return (
            self.topic,
            self.cid,
            self.queue_id,
            self.start_offset,
            self.pop_time,
            self.broker_name,
        )

    def index_of_ack(self, ack_offset: int) -> int:
        """The bit of ``ack_offset`` in this CK, -1 when the CK does not hold it."""
        if ack_offset < self.start_offset:
            return -1
        diff = ack_offset - self.start_offset
        if not self.queue_offset_diff:
            return diff if diff < self.num else -1
        try:
            return self.queue_offset_diff.index(diff)
        except ValueError:
            return -1

    def ack_bits(self) -> dict[int, int]:
        """Every offset this CK holds -> its bit: `index_of_ack` of each at once (the revive
        matches every acknowledged offset against its CK; a dict look-up each, no scan)."""
        start = self.start_offset
        diffs = self.queue_offset_diff
        if not diffs:
            num = max(self.num, 0)
            return dict(zip(range(start, start + num), range(num), strict=True))
        n = len(diffs)
        # built from the last bit to the first: a repeated offset keeps its first bit, as
        # `index_of_ack` finds the first
        bits = dict(zip(map(start.__add__, reversed(diffs)), range(n - 1, -1, -1), strict=True))
        if min(diffs) < 0:  # an offset below the start is never held (`index_of_ack`)
            return {o: i for o, i in bits.items() if o >= start}
        return bits

    def ack_offset_by_index(self, index: int) -> int:
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def unique_id(self) -> str:
        return SPLIT.join(
            map(
                str,
                (
                    self.topic,
                    self.queue_id,
                    self.start_offset,
                    self.cid,
                    self.pop_time,
                    self.broker_name,
                    CK_TAG,
                ),
            )
        )

    def to_json(self) -> bytes:
        return _dumps(
            {
                "so": self.start_offset,
                "pt": self.pop_time,
                "it": self.invisible_time,
                "bm": self.bit_map,
                "n": self.num,
                "q": self.queue_id,
                "t": self.topic,
                "c": self.cid,
                "ro": self.revive_offset,
                "d": list(self.queue_offset_diff) or None,
                "bn": self.broker_name,
                "rp": self.re_put_times,
            }
        )

    @classmethod
    def from_json(cls, body: bytes) -> PopCheckPoint:
        d = _loads(body)
        try:
            return cls(
                start_offset=int(_get(d, "so", "startOffset")),
                pop_time=int(_get(d, "pt", "popTime")),
                invisible_time=int(_get(d, "it", "invisibleTime")),
                num=int(_get(d, "n", "num")),
                queue_id=int(_get(d, "q", "queueId")),
                topic=str(_get(d, "t", "topic")),
                cid=str(_get(d, "c", "cid")),
                broker_name=str(_get(d, "bn", "brokerName", "")),
                bit_map=int(_get(d, "bm", "bitMap", 0)),
                revive_offset=int(_get(d, "ro", "reviveOffset", 0)),
                queue_offset_diff=tuple(map(int, _get(d, "d", "queueOffsetDiff") or ())),
                re_put_times=_get(d, "rp", "rePutTimes"),
            )
        except (TypeError, ValueError) as e:
            raise PopRecordError(f"bad checkpoint {body[:200]!r}: {e}") from None


@attrs.frozen
class AckMsg:
    """One acknowledged offset, or several (``ack_offsets``, a BatchAckMsg)."""

    ack_offsets: tuple[int, ...]
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str
    batch: bool = False

    @classmethod
    def of_key(cls, key: MergeKey, offsets: tuple[int, ...], *, batch: bool = False) -> AckMsg:
        """The ACK of ``offsets`` of the CK ``key`` names (``merge_key`` of the result)."""
        topic, group, queue_id, start_offset, pop_time, broker_name = key
        return cls(offsets, start_offset, group, topic, queue_id, pop_time, broker_name, batch)

    @property
    def merge_key(self) -> MergeKey:
        return (
            self.topic,
            self.consumer_group,
            self.queue_id,
            self.start_offset,
            self.pop_time,
            self.broker_name,
        )

    @property
    def tag(self) -> str:
        return BATCH_ACK_TAG if self.batch else ACK_TAG

    def unique_id(self) -> str:
        if self.batch:
            listed = "[" + ", ".join(map(str, self.ack_offsets)) + "]"  # Java List.toString
            fields: tuple[object, ...] = (
                self.topic,
                self.queue_id,
                listed,
                self.consumer_group,
                self.pop_time,
                BATCH_ACK_TAG,
            )
        else:
            fields = (
                self.topic,
                self.queue_id,
                self.ack_offsets[0],
                self.consumer_group,
                self.pop_time,
                self.broker_name,
                ACK_TAG,
            )
        return SPLIT.join(map(str, fields))

    def to_json(self) -> bytes:
        d: dict[str, Any] = {
            "so": self.start_offset,
            "c": self.consumer_group,
            "t": self.topic,
            "q": self.queue_id,
            "pt": self.pop_time,
            "bn": self.broker_name,
        }
        if self.batch:
            d["ao"] = -1
            d["aol"] = list(self.ack_offsets)
        else:
            d["ao"] = self.ack_offsets[0]
        return _dumps(d)

    @classmethod
    def from_json(cls, body: bytes, *, batch: bool) -> AckMsg:
        d = _loads(body)
        try:
            if batch:
                offsets = tuple(map(int, _get(d, "aol", "ackOffsetList") or ()))
            else:
                offsets = (int(_get(d, "ao", "ackOffset")),)
            return cls(
                ack_offsets=offsets,
                start_offset=int(_get(d, "so", "startOffset")),
                consumer_group=str(_get(d, "c", "consumerGroup")),
                topic=str(_get(d, "t", "topic")),
                queue_id=int(_get(d, "q", "queueId")),
                pop_time=int(_get(d, "pt", "popTime")),
                broker_name=str(_get(d, "bn", "brokerName", "")),
                batch=batch,
            )
        except (TypeError, ValueError) as e:
            raise PopRecordError(f"bad ack {body[:200]!r}: {e}") from None


# ------------------------------------------------------------------ BATCH_ACK_MESSAGE body


def bitset_to_bytes(bits: Iterable[int]) -> bytes:
    """java.util.BitSet.toByteArray of the set bits (little-endian, no trailing zero bytes)."""
    value = 0
    for b in bits:
        if b < 0:
            raise PopRecordError(f"negative bit index {b}")
        value |= 1 << b
    return value.to_bytes((value.bit_length() + 7) // 8, "little")


def bytes_to_bits(data: bytes) -> list[int]:
    value = int.from_bytes(data, "little")
    return [i for i in range(value.bit_length()) if value >> i & 1]


@attrs.frozen
class BatchAck:
    """One CK's acknowledged messages: bit i set = offset ``start_offset + i`` acknowledged."""

    consumer_group: str
    topic: str
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bits: tuple[int, ...]

    def ack_offsets(self) -> list[int]:
        return [self.start_offset + i for i in self.bits]

    def to_dict(self) -> dict[str, Any]:
        return {
            "c": self.consumer_group,
            "t": self.topic,
            "r": self.retry,
            "so": self.start_offset,
            "q": self.queue_id,
            "rq": self.revive_queue_id,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "b": base64.b64encode(bitset_to_bytes(self.bits)).decode(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BatchAck:
        try:
            raw = _get(d, "b", "bitSet") or ""
            bits = bytes_to_bits(base64.b64decode(raw)) if isinstance(raw, str) else []
            if isinstance(raw, list):  # a client that wrote the byte array as numbers
                bits = bytes_to_bits(bytes(x & 0xFF for x in raw))
            return cls(
                consumer_group=str(_get(d, "c", "consumerGroup")),
                topic=str(_get(d, "t", "topic")),
                retry=str(_get(d, "r", "retry", "0")),
                start_offset=int(_get(d, "so", "startOffset")),
                queue_id=int(_get(d, "q", "queueId")),
                revive_queue_id=int(_get(d, "rq", "reviveQueueId")),
                pop_time=int(_get(d, "pt", "popTime")),
                invisible_time=int(_get(d, "it", "invisibleTime")),
                bits=tuple(bits),
            )
        except (TypeError, ValueError) as e:
            raise PopRecordError(f"bad batch ack {d!r}: {e}") from None


@attrs.frozen
class BatchAckMessageRequestBody:
    broker_name: str
    acks: tuple[BatchAck, ...]

    def to_json(self) -> bytes:
        return _dumps({"brokerName": self.broker_name, "acks": [a.to_dict() for a in self.acks]})

    @classmethod
    def from_json(cls, body: bytes) -> BatchAckMessageRequestBody:
        d = _loads(body)
        acks = d.get("acks") or []
        if not isinstance(acks, list):
            raise PopRecordError("acks is not a list")
        return cls(str(d.get("brokerName", "")), tuple(BatchAck.from_dict(a) for a in acks))
