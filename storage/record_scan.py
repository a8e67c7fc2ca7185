"""The CommitLog record scan: walk one segment's bytes, checking every record, and say where
and why it stops. Pure functions over a buffer, plus one helper that maps a segment through
the `FileSystem` interface, so recovery (commitlog.py), ``rocketrio admin checkStore``
(store_check.py), the simulated-disk tests and the benchmark all run the same scan.

A segment is valid when it is a sequence of whole message records (each checked by
`check_stored_record`: totalSize, magic, inner lengths, physical offset = its position, and the
``__CRC32#`` record CRC unless ``check_crc`` is off), optionally ended by a BLANK record that
covers exactly the rest of the segment. `scan_segment` returns the first position where that
stops holding and the reason; `find_valid_record` answers the question that decides between a
torn tail and corruption: does a valid record (or end-of-segment BLANK) start anywhere after
that position?
"""

from __future__ import annotations

import contextlib
import mmap
import struct
from collections.abc import Iterator

import attrs

from rocketrio.protocol.message import (
    BLANK_MAGIC_CODE,
    CRC32_RESERVED_LEN,
    CRC32_TRAILER_PREFIX,
    MAGIC_CODE_V1,
    MAGIC_CODE_V2,
    MIN_RECORD_SIZE,
    PHY_POS_POSITION,
    MessageDecodeError,
    check_stored_record,
    crc32,
)
from rocketrio.storage.fs import FileSystem, ReadMap

END_FILE_MIN_BLANK_LENGTH = 8
_HEAD = struct.Struct(">ii")
# totalSize, magic, physicalOffset: one call for the three fields the cheap check compares
_HEAD_PHY = struct.Struct(">ii20xq")
assert _HEAD_PHY.size == PHY_POS_POSITION + 8
_MIN_SIZE = MIN_RECORD_SIZE + CRC32_RESERVED_LEN


def crc_intact(buf: ReadMap | bytes, pos: int, expected_offset: int, limit: int) -> int:
    """The size of the record at ``pos`` when its record CRC, totalSize (within ``limit``, the
    last byte position it may reach), magic and physical offset hold; 0 otherwise (the caller
    then runs `check_stored_record`, which says what is wrong).

    The cheap check the pull path and the recovery scan run per record: a record whose CRC
    matches is byte for byte what was sealed, and a record is sealed only after its layout was
    built or checked in full, so the inner lengths need no second look.
    """
    if pos + _HEAD_PHY.size > limit:
        return 0
    total, magic, phy = _HEAD_PHY.unpack_from(buf, pos)
    end = pos + total
    c = end - CRC32_RESERVED_LEN
    if (
        (magic != MAGIC_CODE_V1 and magic != MAGIC_CODE_V2)
        or total < _MIN_SIZE
        or end > limit
        or phy != expected_offset
        or buf[c : c + 9] != CRC32_TRAILER_PREFIX
        or buf[end - 1] != 2
    ):
        return 0
    digits = buf[c + 9 : end - 1]
    if digits.isdigit() and crc32(memoryview(buf)[pos:c]) & 0x7FFFFFFF == int(digits[::-1]):
        return total
    return 0


_MAGICS = tuple(struct.pack(">i", m) for m in (MAGIC_CODE_V1, MAGIC_CODE_V2, BLANK_MAGIC_CODE))


@attrs.frozen
class SegmentScan:
    """What `scan_segment` found in one segment.

    ``end``: the position (in the segment) where the valid records stop: the BLANK record's
    position when ``blank``, the data's length when the data ends cleanly, else the position
    of the first bad record, whose problem is ``reason``. ``records``: whole message records
    checked before ``end``.
    """

    base: int
    end: int
    blank: bool
    reason: str | None
    records: int

    @property
    def ok(self) -> bool:
        return self.reason is None


def scan_segment(
    data: ReadMap | bytes,
    base: int,
    segment_size: int,
    *,
    check_crc: bool = True,
    start: int = 0,
) -> SegmentScan:
    """Check every record of the segment starting at CommitLog offset ``base`` (see module
    docstring), from position ``start`` (a record boundary); ``data`` is the segment file's
    content."""
    n = len(data)
    pos = start
    records = 0
    limit = segment_size - END_FILE_MIN_BLANK_LENGTH
    fast_limit = min(n, limit)
    while pos < n:
        if n - pos < 8:
            return SegmentScan(base, pos, False, "partial record header", records)
        total, magic = _HEAD.unpack_from(data, pos)
        if magic == BLANK_MAGIC_CODE:
            if total != segment_size - pos:
                reason = f"blank record size {total} != {segment_size - pos} bytes left"
                return SegmentScan(base, pos, False, reason, records)
            return SegmentScan(base, pos, True, None, records)
        size = crc_intact(data, pos, base + pos, fast_limit) if check_crc else 0
        if size:
            pos += size
            records += 1
            continue
        try:
            pos += check_stored_record(
                data, pos, expected_offset=base + pos, limit=limit, verify_crc=check_crc
            )
        except MessageDecodeError as e:
            return SegmentScan(base, pos, False, str(e), records)
        records += 1
    return SegmentScan(base, pos, False, None, records)


def find_valid_record(
    data: ReadMap | bytes, base: int, segment_size: int, start: int
) -> int | None:
    """The CommitLog offset of the first whole valid record, or of a BLANK record covering the
    rest of the segment, starting at or after position ``start``; None when there is none."""
    best: int | None = None
    for pattern in _MAGICS:
        blank = pattern == _MAGICS[2]
        hit = data.find(pattern, start + 4)
        while hit >= 0 and (best is None or hit - 4 < best):
            pos = hit - 4
            if blank:
                if _HEAD.unpack_from(data, pos)[0] == segment_size - pos:
                    best = pos
                    break
            else:
                try:
                    check_stored_record(data, pos, expected_offset=base + pos)
                    best = pos
                    break
                except MessageDecodeError:
                    pass
            hit = data.find(pattern, hit + 1)
    return None if best is None else base + best


@contextlib.contextmanager
def mapped(fs: FileSystem, fd: int) -> Iterator[ReadMap]:
    """The whole file behind ``fd``, read-only, for the length of the ``with`` block."""
    data = fs.map_read(fd)
    try:
        yield data
    finally:
        if isinstance(data, mmap.mmap):
            data.close()
