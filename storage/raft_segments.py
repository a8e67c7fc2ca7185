"""Raft log segment files: the record format, the in-memory `Segment` index, the recovery scan.

A segment is a run of records ``int32 length | uint32 crc32 | int64 index | int64 term | data``
(big-endian; ``length`` is ``len(data)``; the crc covers index, term and data), named after its
first index (20 digits). `RaftLog` (raft_log.py) owns the directory, the write path and the
multi-step operations; this module reads and classifies what is on disk.

Torn tail or corruption? Recovery checks every record (complete header, length inside the file,
crc, index = previous + 1, terms never decreasing). A bad record in any segment but the last is
corruption. In the last segment a bad record is a torn tail only if no valid record follows it:
every byte offset after it is tried as a record start (an int64 index in the range a later record
could have, then a full crc check). If one is found the bad record sits in the middle of good data
and start-up stops with ``RaftLogCorruption`` naming the file and offset; otherwise the file is cut
at the bad record, fsynced, and the cut is described in ``recovery_report``. Repairs are made only
after every check passed, so a refused start-up leaves the files as it found them. A crc-valid
record with an unexpected index, a gap between segments or between the snapshot and the log, or a
bad hard-state/snapshot file are always corruption: silent loss is never an option.
"""

from __future__ import annotations

import os
import re
import struct
import sys
import zlib
from array import array

import attrs

from rocketrio.protocol.raft import Entry, SnapshotMeta
from rocketrio.storage.durable import read_file
from rocketrio.storage.fs import FileSystem

RECORD_HEADER = struct.Struct(">iIqq")
HEADER_SIZE = RECORD_HEADER.size
RECORD_CRC = struct.Struct(">I")
MAX_ENTRY_BYTES = 2**31 - 1
SEGMENT_NAME = re.compile(r"\d{20}")


class RaftLogCorruption(Exception):
    """The store holds damaged data that recovery must not silently drop."""

    def __init__(self, file: str, offset: int, reason: str) -> None:
        super().__init__(
            f"raft store corrupted: {file} at offset {offset}: {reason}; "
            "repair the file or wipe this replica's store so it is re-seeded from its peers"
        )
        self.file = file
        self.offset = offset
        self.reason = reason


@attrs.frozen
class TornTail:
    file: str
    offset: int
    dropped_bytes: int
    reason: str


@attrs.define(eq=False)
class Segment:
    """In-memory index of one segment file: record start offsets and terms by position."""

    first_index: int
    path: str
    size: int = 0
    offsets: array = attrs.Factory(lambda: array("q"))
    terms: array = attrs.Factory(lambda: array("q"))

    @property
    def last_index(self) -> int:
        return self.first_index + len(self.offsets) - 1

    def offset_of(self, index: int) -> int:
        return self.offsets[index - self.first_index]

    def end_of(self, index: int) -> int:
        """File offset just after the record of ``index``."""
        pos = index - self.first_index + 1
        return self.offsets[pos] if pos < len(self.offsets) else self.size


def cut_file(fs: FileSystem, path: str, size: int) -> None:
    fd = fs.open(path, os.O_RDWR)
    try:
        fs.ftruncate(fd, size)
        fs.fsync(fd)
    finally:
        fs.close(fd)


def _record_problem(buf: bytes, pos: int) -> str | None:
    """Why the record at ``pos`` is unreadable, or None when it is whole and crc-valid."""
    end = len(buf)
    if end - pos < HEADER_SIZE:
        return f"incomplete record header ({end - pos} of {HEADER_SIZE} bytes)"
    length, crc, _, _ = RECORD_HEADER.unpack_from(buf, pos)
    if length < 0 or pos + HEADER_SIZE + length > end:
        return f"record length {length} runs past the end of the file"
    if zlib.crc32(memoryview(buf)[pos + 8 : pos + HEADER_SIZE + length]) != crc:
        return "crc mismatch"
    return None


def _find_valid_record(buf: bytes, start: int, last_good_index: int) -> int | None:
    """Offset of a whole, crc-valid record after ``start`` that could follow the good prefix.

    Tries every byte offset. To stay fast it reads the would-be index fields eight at a time as
    an int64 array (one pass per alignment) and runs the crc only where the index is plausible;
    zero-filled or random tails almost never pass that filter.
    """
    lo = last_good_index + 1
    hi = last_good_index + (len(buf) - start) // HEADER_SIZE + 1
    for align in range(8):
        first = start + 1 + align
        # the index field of a record at q is buf[q+8:q+16]; q + HEADER_SIZE must fit in buf
        count = max(0, (len(buf) - HEADER_SIZE - first) // 8 + 1)
        if count == 0:
            continue
        words = array("q")
        words.frombytes(buf[first + 8 : first + 8 + 8 * count])
        if sys.byteorder == "little":
            words.byteswap()
        for k, value in enumerate(words):
            if lo <= value <= hi:
                pos = first + 8 * k
                if _record_problem(buf, pos) is None:
                    return pos
    return None


def decode_records(buf: bytes, first_index: int, count: int, file: str, base: int) -> list[Entry]:
    """Parse ``count`` consecutive records; a re-check of crc and index catches rot since start."""
    out: list[Entry] = []
    view = memoryview(buf)
    pos = 0
    unpack = RECORD_HEADER.unpack_from
    crc32 = zlib.crc32
    for expected in range(first_index, first_index + count):
        length, crc, index, term = unpack(buf, pos)
        end = pos + HEADER_SIZE + length
        if index != expected or end > len(buf) or crc32(view[pos + 8 : end]) != crc:
            raise RaftLogCorruption(file, base + pos, f"record of index {expected} is damaged")
        out.append(Entry(index, term, bytes(view[pos + HEADER_SIZE : end])))
        pos = end
    return out


def scan_segment(
    fs: FileSystem, path: str, first: int, term_floor: int, is_last: bool
) -> tuple[Segment, TornTail | None]:
    buf = read_file(path, fs=fs)
    seg = Segment(first, path)
    pos = 0
    while pos < len(buf):
        problem = _record_problem(buf, pos)
        if problem is not None:
            return seg, _torn_tail(seg, buf, pos, problem, is_last)
        length, _, index, term = RECORD_HEADER.unpack_from(buf, pos)
        if index != seg.last_index + 1:
            want = seg.last_index + 1
            raise RaftLogCorruption(path, pos, f"record has index {index}, expected {want}")
        if term < term_floor:
            raise RaftLogCorruption(path, pos, f"term {term} below earlier term {term_floor}")
        seg.offsets.append(pos)
        seg.terms.append(term)
        term_floor = term
        pos += HEADER_SIZE + length
    seg.size = pos
    return seg, None


def _torn_tail(seg: Segment, buf: bytes, pos: int, problem: str, is_last: bool) -> TornTail:
    """Classify the bad record at ``pos``: a torn tail to cut, or corruption (raised)."""
    if not is_last:
        raise RaftLogCorruption(seg.path, pos, f"{problem} in a segment that is not the last")
    later = _find_valid_record(buf, pos, seg.last_index)
    if later is not None:
        raise RaftLogCorruption(
            seg.path, pos, f"{problem}, yet a valid record follows at offset {later}"
        )
    seg.size = pos
    return TornTail(seg.path, pos, len(buf) - pos, problem)


def load_segments(
    fs: FileSystem, directory: str
) -> tuple[list[Segment], TornTail | None, str | None]:
    """Index every segment without writing: the segments, the torn tail and empty last file
    to repair."""
    names = sorted(n for n in fs.listdir(directory) if SEGMENT_NAME.fullmatch(n))
    segments: list[Segment] = []
    term_floor = 0
    torn: TornTail | None = None
    for pos, name in enumerate(names):
        path = os.path.join(directory, name)
        first = int(name)
        if segments and first != segments[-1].last_index + 1:
            want = segments[-1].last_index + 1
            raise RaftLogCorruption(path, 0, f"segment should start at index {want}")
        seg, torn = scan_segment(fs, path, first, term_floor, pos == len(names) - 1)
        if not seg.offsets:
            if pos != len(names) - 1:
                raise RaftLogCorruption(path, 0, "empty segment that is not the last one")
            return segments, torn, path
        term_floor = seg.terms[-1]
        segments.append(seg)
    return segments, torn, None


def check_log_start(segments: list[Segment], snapshot: SnapshotMeta | None) -> None:
    """The log must start at 1, or inside or right after the snapshot."""
    if not segments:
        return
    first = segments[0]
    if snapshot is None and first.first_index != 1:
        raise RaftLogCorruption(
            first.path, 0, f"log starts at index {first.first_index} but there is no snapshot"
        )
    if snapshot is not None and first.first_index > snapshot.index + 1:
        raise RaftLogCorruption(
            first.path,
            0,
            f"gap: snapshot ends at index {snapshot.index}, log starts at {first.first_index}",
        )
