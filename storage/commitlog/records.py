"""Whole records in CommitLog bytes: walking them (`iter_records`, `scan_records`, which read
through a `CommitLog`) and checking replicated bytes before they are appended
(`check_replicated`). No state: the log owns its offsets and files.

`check_replicated` runs the compiled twin (`rocketrio.protocol._speedups.check_replicated`,
protocol/speedups/replica.c) when it is built: it takes a chunk whose records all have the usual
shape and pass every check, and declines anything else, which `_check_replicated_py` (the
reference) then checks and accepts or rejects with its exact error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING

from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.message import (
    BLANK_MAGIC_CODE,
    MessageDecodeError,
    check_stored_record,
    checked_dispatch_fields,
)
from rocketrio.storage.commitlog.errors import CorruptionError
from rocketrio.storage.record_scan import END_FILE_MIN_BLANK_LENGTH

if TYPE_CHECKING:
    from rocketrio.storage.commitlog.log import CommitLog

_HEAD = struct.Struct(">ii")
# a replicated record as `CommitLog.append_raw` found it: (offset, size, topic, queueId,
# queueOffset, sysFlag, storeTimestamp, encoded properties)
RecordFields = tuple[int, int, str, int, int, int, int, bytes]


def iter_records(log: CommitLog, start: int, chunk_size: int) -> Iterator[tuple[int, bytes]]:
    """(offset, record) for every message record from ``start`` (a record boundary)."""
    offset = max(start, log.min_offset)
    seg = log.mapped_file_size
    while offset < log.max_offset:
        chunk = log.read(offset, min(chunk_size, seg - offset % seg))
        if len(chunk) >= 8:
            total = _HEAD.unpack_from(chunk)[0]
            if total > len(chunk):  # a record bigger than the chunk: read it whole
                chunk = log.read(offset, total)
        pos = 0
        while len(chunk) - pos >= 8:
            total, magic = _HEAD.unpack_from(chunk, pos)
            if magic == BLANK_MAGIC_CODE:
                pos += total
                break
            if total <= 8 or pos + total > len(chunk):
                break
            yield offset + pos, chunk[pos : pos + total]
            pos += total
        if pos == 0:
            raise CorruptionError(f"cannot read a record at commitlog offset {offset}")
        offset += pos


def scan_records(
    log: CommitLog, start: int, end: int, chunk_size: int
) -> tuple[list[tuple[int, bytes]], int]:
    """The whole message records from ``start`` (a record boundary) that end at or below
    ``end``, and the position after the last whole unit read (a BLANK record and its fill
    count as one unit): (records, stop). Reads at most ``chunk_size`` at a time."""
    out: list[tuple[int, bytes]] = []
    offset = max(start, log.min_offset)
    end = min(end, log.max_offset)
    seg = log.mapped_file_size
    while offset < end:
        seg_end = offset - offset % seg + seg
        want = min(end, seg_end, offset + chunk_size) - offset
        chunk = log.read(offset, want)
        if len(chunk) >= 8:
            total, magic = _HEAD.unpack_from(chunk)
            if magic != BLANK_MAGIC_CODE and want < total <= min(end, seg_end) - offset:
                chunk = log.read(offset, total)  # one record bigger than a chunk
        pos = 0
        stepped_blank = False
        while len(chunk) - pos >= 8:
            total, magic = _HEAD.unpack_from(chunk, pos)
            if magic == BLANK_MAGIC_CODE:
                if seg_end <= end:
                    pos = seg_end - offset
                    stepped_blank = True
                break
            if total <= 8:
                raise CorruptionError(f"no record at commitlog offset {offset + pos}")
            if pos + total > len(chunk):
                break
            out.append((offset + pos, chunk[pos : pos + total]))
            pos += total
        chunk_end = offset + len(chunk)
        offset += pos
        if pos == 0:
            break
        if not stepped_blank and pos < len(chunk) and chunk_end >= min(end, seg_end):
            break  # the last record crosses `end`
    return out, offset


def check_replicated(
    offset: int,
    data: bytes | bytearray | memoryview,
    segment_size: int,
    with_fields: bool,
) -> list[RecordFields]:
    """`_check_replicated_py`, by the compiled twin for a chunk it takes (module docstring)."""
    if _speedups is not None:
        found: list[RecordFields] | None = _speedups.check_replicated(
            offset, data, segment_size, with_fields
        )
        if found is not None:
            return found
    return _check_replicated_py(offset, data, segment_size, with_fields)


def _check_replicated_py(
    offset: int,
    data: bytes | bytearray | memoryview,
    segment_size: int,
    with_fields: bool,
) -> list[RecordFields]:
    """Check replicated bytes meant for CommitLog ``offset`` (`CommitLog.append_raw`): every
    message record in full (sizes, magic, inner lengths, physical offset = its position, CRC),
    none crossing a segment, a BLANK record covering the rest of its segment. ValueError
    otherwise. With ``with_fields``, returns the dispatch fields of every message record
    (`checked_dispatch_fields`), each with its offset first; else an empty list."""
    seg = segment_size
    view = memoryview(data)
    n = len(view)
    # the record checks read a bytes object fastest (replicated data usually is one)
    raw = data if data.__class__ is bytes or not with_fields else bytes(data)
    found: list[RecordFields] = []
    pos = 0
    while pos < n:
        at = offset + pos
        room = seg - at % seg
        if n - pos < 8:
            raise ValueError(f"partial record header at {at}")
        total, magic = _HEAD.unpack_from(view, pos)
        if magic == BLANK_MAGIC_CODE:
            if total != room or pos + total > n:
                raise ValueError(f"blank record at {at} of {total} bytes, {room} left in segment")
        else:
            limit = pos + room - END_FILE_MIN_BLANK_LENGTH
            try:
                if not with_fields:
                    check_stored_record(view, pos, expected_offset=at, limit=limit)
                else:
                    fields = checked_dispatch_fields(raw, pos, expected_offset=at, limit=limit)
                    found.append((at, *fields))
            except MessageDecodeError as e:
                raise ValueError(f"replicated record at {at}: {e}") from None
        pos += total
    return found
