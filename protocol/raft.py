"""Raft wire types: log entries, hard state, snapshots, the RPC messages and their binary codec.

The RPCs follow DLedger's split: VoteRequest/VoteResponse and HeartBeatRequest/HeartBeatResponse
drive elections and leader liveness (result codes named as in DLedger's `VoteResponse.RESULT` and
`DLedgerResponseCode`), AppendEntries and InstallSnapshot carry the log. `round` ties a response
to the vote or heartbeat round that asked for it (DLedger does this with futures).

Codec: `encode_message(msg) -> bytes` / `decode_message(buf) -> msg`, no framing (the transport
frames). Layout: one tag byte, the fixed-size fields (network order), then the ids as
u8-length-prefixed UTF-8, then the variable part (entries or snapshot data). Entries are
`u64 index | u64 term | u32 length | data`, also exposed for the log storage (`ENTRY_HEADER`,
`encode_entry`, `decode_entry_from`). Malformed input raises `RaftCodecError`.
"""

from __future__ import annotations

import enum
import struct
from typing import Final, TypeVar

import attrs


@attrs.frozen(slots=True)
class Entry:
    """One Raft log entry; `data` is opaque to the core (b"" is the leader's no-op)."""

    index: int
    term: int
    data: bytes = b""


@attrs.frozen(slots=True)
class HardState:
    """What a node must persist (fsync) before it answers or sends anything for a term."""

    term: int = 0
    voted_for: str | None = None


@attrs.frozen(slots=True)
class SnapshotMeta:
    """Position of the last log entry folded into a snapshot."""

    index: int
    term: int


@attrs.frozen(slots=True)
class Snapshot:
    """A state-machine snapshot: `data` reproduces the state after applying `meta.index`."""

    meta: SnapshotMeta
    data: bytes


class VoteResult(enum.IntEnum):
    """DLedger `VoteResponse.RESULT`, same order (the values are the Java ordinals)."""

    UNKNOWN = 0
    ACCEPT = 1
    REJECT_UNKNOWN_LEADER = 2
    REJECT_UNEXPECTED_LEADER = 3
    REJECT_EXPIRED_VOTE_TERM = 4
    REJECT_ALREADY_VOTED = 5
    REJECT_ALREADY_HAS_LEADER = 6
    REJECT_TERM_NOT_READY = 7
    REJECT_TERM_SMALL_THAN_LEDGER = 8
    REJECT_EXPIRED_LEDGER_TERM = 9
    REJECT_SMALL_LEDGER_END_INDEX = 10


class ResponseCode(enum.IntEnum):
    """The subset of `DLedgerResponseCode` the heartbeat and replication RPCs answer with."""

    UNKNOWN = -1
    SUCCESS = 200
    UNKNOWN_MEMBER = 401
    UNEXPECTED_MEMBER = 402
    EXPIRED_TERM = 403
    INCONSISTENT_STATE = 406
    INCONSISTENT_LEADER = 409
    TERM_NOT_READY = 416


@attrs.frozen(slots=True)
class VoteRequest:
    """A candidate (`leader_id`) asks `to_id` for its vote in `term`."""

    from_id: str
    to_id: str
    leader_id: str
    term: int
    ledger_end_term: int
    ledger_end_index: int
    round: int


@attrs.frozen(slots=True)
class VoteResponse:
    """`term` is the voter's current term (its ledger end term for TERM_SMALL_THAN_LEDGER)."""

    from_id: str
    to_id: str
    term: int
    round: int
    result: VoteResult


@attrs.frozen(slots=True)
class HeartBeatRequest:
    from_id: str
    to_id: str
    leader_id: str
    term: int
    round: int
    commit_index: int = 0  # ours: min(member's match, leader commit), so idle members apply


@attrs.frozen(slots=True)
class HeartBeatResponse:
    from_id: str
    to_id: str
    term: int
    round: int
    code: ResponseCode


@attrs.frozen(slots=True)
class AppendEntriesRequest:
    """Entries `prev_index+1 ..` if the follower's entry at `prev_index` has `prev_term`."""

    from_id: str
    to_id: str
    leader_id: str
    term: int
    prev_index: int
    prev_term: int
    leader_commit: int
    entries: tuple[Entry, ...]


@attrs.frozen(slots=True)
class AppendEntriesResponse:
    """SUCCESS: `index` is the last index known to match the leader (durable on the follower).

    INCONSISTENT_STATE: `index` is the rejected `prev_index`; the leader should retry from
    `hint_index` (follower's last index + 1, or the first index of its conflicting term).
    """

    from_id: str
    to_id: str
    term: int
    code: ResponseCode
    index: int
    hint_index: int = 0


@attrs.frozen(slots=True)
class InstallSnapshotRequest:
    from_id: str
    to_id: str
    leader_id: str
    term: int
    snapshot_index: int
    snapshot_term: int
    data: bytes


@attrs.frozen(slots=True)
class InstallSnapshotResponse:
    from_id: str
    to_id: str
    term: int
    code: ResponseCode
    index: int


RaftMessage = (
    VoteRequest
    | VoteResponse
    | HeartBeatRequest
    | HeartBeatResponse
    | AppendEntriesRequest
    | AppendEntriesResponse
    | InstallSnapshotRequest
    | InstallSnapshotResponse
)


class RaftCodecError(ValueError):
    """Bytes that are not a well-formed Raft message or entry."""


_E = TypeVar("_E", VoteResult, ResponseCode)

ENTRY_HEADER: Final = struct.Struct("!QQI")
_TAG = struct.Struct("!B")
_ID_LEN = struct.Struct("!B")
_COUNT = struct.Struct("!I")

# fixed-size part of each message, after the tag byte
_VOTE_REQ = struct.Struct("!QQQQ")
_VOTE_RESP = struct.Struct("!QQB")
_HB_REQ = struct.Struct("!QQQ")
_HB_RESP = struct.Struct("!QQh")
_APPEND_REQ = struct.Struct("!QQQQ")
_APPEND_RESP = struct.Struct("!QhQQ")
_SNAP_REQ = struct.Struct("!QQQ")
_SNAP_RESP = struct.Struct("!QhQ")

_T_VOTE_REQ, _T_VOTE_RESP, _T_HB_REQ, _T_HB_RESP = 1, 2, 3, 4
_T_APPEND_REQ, _T_APPEND_RESP, _T_SNAP_REQ, _T_SNAP_RESP = 5, 6, 7, 8


def encode_entry(entry: Entry) -> bytes:
    return ENTRY_HEADER.pack(entry.index, entry.term, len(entry.data)) + entry.data


def decode_entry_from(buf: bytes | memoryview, offset: int) -> tuple[Entry, int]:
    """Decode one entry at `offset`; returns it and the offset just past it."""
    end = offset + ENTRY_HEADER.size
    if end > len(buf):
        raise RaftCodecError(f"truncated entry header at offset {offset}")
    index, term, size = ENTRY_HEADER.unpack_from(buf, offset)
    if end + size > len(buf):
        raise RaftCodecError(f"entry {index} claims {size} bytes, only {len(buf) - end} left")
    return Entry(index, term, bytes(buf[end : end + size])), end + size


def encode_entries(entries: tuple[Entry, ...] | list[Entry]) -> bytes:
    parts = [_COUNT.pack(len(entries))]
    header = ENTRY_HEADER.pack
    for e in entries:
        parts.append(header(e.index, e.term, len(e.data)))
        parts.append(e.data)
    return b"".join(parts)


def _decode_entries_from(buf: bytes | memoryview, offset: int) -> tuple[list[Entry], int]:
    if offset + _COUNT.size > len(buf):
        raise RaftCodecError("truncated entry count")
    (count,) = _COUNT.unpack_from(buf, offset)
    offset += _COUNT.size
    # a count larger than the bytes could hold is garbage, not a reason to loop for long
    if count * ENTRY_HEADER.size > len(buf) - offset:
        raise RaftCodecError(f"entry count {count} does not fit in {len(buf) - offset} bytes")
    out = []
    for _ in range(count):
        entry, offset = decode_entry_from(buf, offset)
        out.append(entry)
    return out, offset


def decode_entries(buf: bytes | memoryview) -> list[Entry]:
    entries, end = _decode_entries_from(buf, 0)
    if end != len(buf):
        raise RaftCodecError(f"{len(buf) - end} trailing bytes after entries")
    return entries


def _pack_ids(*ids: str) -> bytes:
    parts = []
    for i in ids:
        raw = i.encode()
        if len(raw) > 255:
            raise RaftCodecError(f"node id longer than 255 bytes: {i[:40]!r}...")
        parts.append(_ID_LEN.pack(len(raw)))
        parts.append(raw)
    return b"".join(parts)


def _unpack_ids(buf: bytes | memoryview, offset: int, n: int) -> tuple[list[str], int]:
    ids = []
    for _ in range(n):
        if offset >= len(buf):
            raise RaftCodecError("truncated node id")
        size = buf[offset]
        offset += 1
        if offset + size > len(buf):
            raise RaftCodecError("truncated node id")
        try:
            ids.append(bytes(buf[offset : offset + size]).decode())
        except UnicodeDecodeError as exc:
            raise RaftCodecError(f"node id is not UTF-8: {exc}") from None
        offset += size
    return ids, offset


def encode_message(msg: RaftMessage) -> bytes:
    match msg:
        case VoteRequest():
            fixed = _VOTE_REQ.pack(msg.term, msg.ledger_end_term, msg.ledger_end_index, msg.round)
            return b"".join(
                (_TAG.pack(_T_VOTE_REQ), fixed, _pack_ids(msg.from_id, msg.to_id, msg.leader_id))
            )
        case VoteResponse():
            fixed = _VOTE_RESP.pack(msg.term, msg.round, msg.result)
            return b"".join((_TAG.pack(_T_VOTE_RESP), fixed, _pack_ids(msg.from_id, msg.to_id)))
        case HeartBeatRequest():
            fixed = _HB_REQ.pack(msg.term, msg.round, msg.commit_index)
            ids = _pack_ids(msg.from_id, msg.to_id, msg.leader_id)
            return b"".join((_TAG.pack(_T_HB_REQ), fixed, ids))
        case HeartBeatResponse():
            fixed = _HB_RESP.pack(msg.term, msg.round, msg.code)
            return b"".join((_TAG.pack(_T_HB_RESP), fixed, _pack_ids(msg.from_id, msg.to_id)))
        case AppendEntriesRequest():
            fixed = _APPEND_REQ.pack(msg.term, msg.prev_index, msg.prev_term, msg.leader_commit)
            ids = _pack_ids(msg.from_id, msg.to_id, msg.leader_id)
            return b"".join((_TAG.pack(_T_APPEND_REQ), fixed, ids, encode_entries(msg.entries)))
        case AppendEntriesResponse():
            fixed = _APPEND_RESP.pack(msg.term, msg.code, msg.index, msg.hint_index)
            return b"".join((_TAG.pack(_T_APPEND_RESP), fixed, _pack_ids(msg.from_id, msg.to_id)))
        case InstallSnapshotRequest():
            fixed = _SNAP_REQ.pack(msg.term, msg.snapshot_index, msg.snapshot_term)
            ids = _pack_ids(msg.from_id, msg.to_id, msg.leader_id)
            body = _COUNT.pack(len(msg.data)) + msg.data
            return b"".join((_TAG.pack(_T_SNAP_REQ), fixed, ids, body))
        case InstallSnapshotResponse():
            fixed = _SNAP_RESP.pack(msg.term, msg.code, msg.index)
            return b"".join((_TAG.pack(_T_SNAP_RESP), fixed, _pack_ids(msg.from_id, msg.to_id)))
    raise TypeError(f"not a Raft message: {type(msg).__name__}")


def _fixed(buf: bytes | memoryview, st: struct.Struct) -> tuple[int, ...]:
    if 1 + st.size > len(buf):
        raise RaftCodecError(f"truncated message: {len(buf)} bytes")
    return st.unpack_from(buf, 1)


def _enum(cls: type[_E], value: int) -> _E:
    try:
        return cls(value)
    except ValueError:
        raise RaftCodecError(f"unknown {cls.__name__} {value}") from None


def _decode_body(tag: int, buf: bytes | memoryview) -> tuple[RaftMessage, int]:
    if tag == _T_VOTE_REQ:
        term, let, lei, rnd = _fixed(buf, _VOTE_REQ)
        (f, t, leader), off = _unpack_ids(buf, 1 + _VOTE_REQ.size, 3)
        return VoteRequest(f, t, leader, term, let, lei, rnd), off
    if tag == _T_VOTE_RESP:
        term, rnd, result = _fixed(buf, _VOTE_RESP)
        (f, t), off = _unpack_ids(buf, 1 + _VOTE_RESP.size, 2)
        return VoteResponse(f, t, term, rnd, _enum(VoteResult, result)), off
    if tag == _T_HB_REQ:
        term, rnd, commit = _fixed(buf, _HB_REQ)
        (f, t, leader), off = _unpack_ids(buf, 1 + _HB_REQ.size, 3)
        return HeartBeatRequest(f, t, leader, term, rnd, commit), off
    if tag == _T_HB_RESP:
        term, rnd, code = _fixed(buf, _HB_RESP)
        (f, t), off = _unpack_ids(buf, 1 + _HB_RESP.size, 2)
        return HeartBeatResponse(f, t, term, rnd, _enum(ResponseCode, code)), off
    if tag == _T_APPEND_REQ:
        term, prev_i, prev_t, commit = _fixed(buf, _APPEND_REQ)
        (f, t, leader), off = _unpack_ids(buf, 1 + _APPEND_REQ.size, 3)
        entries, off = _decode_entries_from(buf, off)
        return AppendEntriesRequest(f, t, leader, term, prev_i, prev_t, commit, tuple(entries)), off
    if tag == _T_APPEND_RESP:
        term, code, index, hint = _fixed(buf, _APPEND_RESP)
        (f, t), off = _unpack_ids(buf, 1 + _APPEND_RESP.size, 2)
        code_e = _enum(ResponseCode, code)
        return AppendEntriesResponse(f, t, term, code_e, index, hint), off
    if tag == _T_SNAP_REQ:
        term, s_index, s_term = _fixed(buf, _SNAP_REQ)
        (f, t, leader), off = _unpack_ids(buf, 1 + _SNAP_REQ.size, 3)
        if off + _COUNT.size > len(buf):
            raise RaftCodecError("truncated snapshot length")
        (size,) = _COUNT.unpack_from(buf, off)
        off += _COUNT.size
        if off + size > len(buf):
            raise RaftCodecError(f"snapshot claims {size} bytes, only {len(buf) - off} left")
        data = bytes(buf[off : off + size])
        return InstallSnapshotRequest(f, t, leader, term, s_index, s_term, data), off + size
    if tag == _T_SNAP_RESP:
        term, code, index = _fixed(buf, _SNAP_RESP)
        (f, t), off = _unpack_ids(buf, 1 + _SNAP_RESP.size, 2)
        return InstallSnapshotResponse(f, t, term, _enum(ResponseCode, code), index), off
    raise RaftCodecError(f"unknown Raft message tag {tag}")


def decode_message(buf: bytes | memoryview) -> RaftMessage:
    if not buf:
        raise RaftCodecError("empty Raft message")
    msg, end = _decode_body(buf[0], buf)
    if end != len(buf):
        raise RaftCodecError(f"{len(buf) - end} trailing bytes after {type(msg).__name__}")
    return msg
