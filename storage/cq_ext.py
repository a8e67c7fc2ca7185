"""ConsumeQueue ext: the SQL92 filter bit-map of each ConsumeQueue entry (upstream
ConsumeQueueExt and CqExtUnit, enableConsumeQueueExt), so a pull can skip a record its filter
did not match without reading the CommitLog.

Layout. One ext file per ConsumeQueue file, under ``<store>/consumequeue_ext/<topic>/<queueId>/``,
named like the ConsumeQueue file it belongs to; the unit of entry ``i`` sits at
``(i % entries_per_file) * unit_size`` of file ``i // entries_per_file``, so it needs no address
in the entry (upstream stores one in tagsCode; here the tagsCode stays the tag's). A unit is
``int crc32 | long commitLogOffset | long calcTimeMillis | short bitCount | bitmap``
(`encode_unit`); ``calcTimeMillis`` is when the bit-map was computed (`BitMapProbe`). Entries
dispatched while no SQL92 filter was registered for their topic have no unit: a hole that
reads as zeros.

Every unit is checked when read (`decode_unit`): its CRC, the CommitLog offset of the entry it
claims and its bit count. Anything that fails (a hole, a torn or stale unit, a unit written
with another bit-map length) is "no bit-map": the record is read and judged the slow way. So
a damaged ext can cost speed, never a message.

Consistency with the ConsumeQueue: the ext never holds a unit at or past the queue's end
(`fit`): the store cuts it with every cut of the queue (truncation, a failed append, a queue
that restarts), when it opens (the queue's torn tail and the store's re-dispatch cut) and
deletes its files with the queue's (retention, topic deletion). Units are derived data like
entries: `append` never syncs; `flush` fdatasyncs the files written since and fsyncs new
directories, and the store flushes the ext together with its ConsumeQueue before the dispatch
checkpoint vouches for them, so after a crash every entry below the checkpoint has the unit it
had, and everything above is cut and re-dispatched (with units computed anew).

Map times never go down (dispatch/filter_data.py), so the last whole unit of an ext is its
latest: `find_last_calc` reads it at open, and the broker births no filter at or before it.

Threading contract: as the ConsumeQueue's, `flush` may run in a worker thread while the owner
appends or reads, never together with truncation, deletion or close.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from typing import Protocol

import attrs

from rocketrio.storage.commitlog import list_segments, segment_name
from rocketrio.storage.durable import makedirs_unsynced, pwrite_all
from rocketrio.storage.fs import OS_FS, FileSystem

CONSUME_QUEUE_EXT_DIR = "consumequeue_ext"
UNIT_HEAD = struct.Struct(">Iqqh")  # crc32, commitLogOffset, calcTimeMillis, bitCount
_BODY = struct.Struct(">qqh")


def unit_size(bit_count: int) -> int:
    return UNIT_HEAD.size + bit_count // 8


def encode_unit(phy: int, calc_ms: int, bitmap: bytes) -> bytes:
    """One unit: the bit-map of the record at CommitLog ``phy``, computed at ``calc_ms``."""
    body = _BODY.pack(phy, calc_ms, len(bitmap) * 8) + bitmap
    return struct.pack(">I", zlib.crc32(body)) + body


@attrs.frozen
class ExtUnit:
    calc_ms: int
    bitmap: bytes


def decode_unit(raw: bytes, phy: int, bit_count: int) -> ExtUnit | None:
    """The unit in ``raw`` if it is whole, CRC-valid, of the record at ``phy`` and of
    ``bit_count`` bits; else None (no bit-map: judge the record)."""
    if len(raw) != unit_size(bit_count):
        return None
    crc, at, calc_ms, bits = UNIT_HEAD.unpack_from(raw)
    if at != phy or bits != bit_count or crc != zlib.crc32(memoryview(raw)[4:]):
        return None
    return ExtUnit(calc_ms, raw[UNIT_HEAD.size :])


def _whole(raw: bytes) -> bool:
    """A unit's CRC holds (whatever record it belongs to)."""
    return UNIT_HEAD.unpack_from(raw)[0] == zlib.crc32(raw[4:])


def bits_hit(bitmap: bytes, positions: tuple[int, ...]) -> bool:
    """Every one of ``positions`` is set (upstream BloomFilter.isHit on a BitsArray)."""
    return all(bitmap[p >> 3] & (1 << (p & 7)) for p in positions)


@attrs.frozen
class BitMapProbe:
    """What a pull of ``topic`` by one SQL92 filter asks of the ext (upstream
    ExpressionMessageFilter.isMatchedByConsumeQueue): the filter's bit ``positions`` out of
    ``bit_count``, and ``born_ms``, when the filter was registered. A unit computed at or
    before ``born_ms`` did not evaluate this filter (upstream isMsgInLive): no answer."""

    topic: str
    positions: tuple[int, ...]
    born_ms: int
    bit_count: int
    # (byte in the bit-map, mask) of each position
    _bits: tuple[tuple[int, int], ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        bits = tuple((p >> 3, 1 << (p & 7)) for p in self.positions)
        object.__setattr__(self, "_bits", bits)

    def rejects(self, raw: bytes, phy: int) -> bool:
        """True only when the valid unit ``raw`` says the filter did not match the record at
        ``phy``."""
        return self.rejected(raw, [phy])[0]

    def rejected(self, units: bytes, phys: list[int]) -> list[bool]:
        """`rejects` for consecutive units (of the records at ``phys``), in one pass: the
        same answers as `decode_unit` then `bits_hit`, in the order that is cheapest on a
        scan. The units missing one of the filter's bits are found column by column (a byte
        of every unit at once, in C); only those are checked one by one: their record, their
        time against the filter's birth, their bit count and, last, their CRC."""
        size = unit_size(self.bit_count)
        count = min(len(phys), len(units) // size)
        out = [False] * len(phys)
        if count == 0:
            return out
        body = units[: count * size]
        miss = 0  # byte i: 1 if unit i lacks one of the positions
        for byte, mask in self._bits:
            column = body[UNIT_HEAD.size + byte :: size]
            miss |= int.from_bytes(column.translate(_CLEAR[mask]), "little")
        if not miss:
            return out
        flags = miss.to_bytes(count, "little")
        head, crc32 = UNIT_HEAD.unpack_from, zlib.crc32
        born, bit_count = self.born_ms, self.bit_count
        i = flags.find(1)
        while i >= 0:
            at = i * size
            crc, unit_phy, calc_ms, bits = head(body, at)
            # this record's unit, computed after the filter was born, and whole
            if unit_phy == phys[i] and calc_ms > born and bits == bit_count:
                out[i] = crc == crc32(body[at + 4 : at + size])
            i = flags.find(1, i + 1)
        return out


# per bit mask: a byte maps to 1 where the mask's bit is clear
_CLEAR = {1 << b: bytes(0 if x & (1 << b) else 1 for x in range(256)) for b in range(8)}


class ConsumeQueueExt:
    """The units of one topic/queue (module docstring)."""

    def __init__(
        self,
        root: str,
        topic: str,
        queue_id: int,
        entries_per_file: int,
        bit_count: int,
        *,
        fs: FileSystem = OS_FS,
    ) -> None:
        self.path = os.path.join(root, topic, str(queue_id))
        self.entries_per_file = entries_per_file
        self.bit_count = bit_count
        self.unit = unit_size(bit_count)
        self._fs = fs
        self._fds: dict[int, int] = {}  # ConsumeQueue file number -> fd
        self._dirty: set[int] = set()
        self._new_dirs: list[str] = []
        self._dir_dirty = False
        self._lock = threading.Lock()

    def _file(self, num: int) -> str:
        return os.path.join(self.path, segment_name(num * self.entries_per_file))

    def open(self) -> None:
        for first in list_segments(self.path, self._fs):
            num = first // self.entries_per_file
            self._fds[num] = self._fs.open(self._file(num), os.O_RDWR)

    def find_last_calc(self) -> int:
        """The calcTimeMillis of the last whole unit on disk (-1: none), after `fit`: the
        store's floor for the birth of filters after a restart (units are computed at
        non-decreasing times, so the last one is the latest). Reads back from the end past
        zeros (holes, pages lost in a crash) and units that fail their CRC."""
        size, fs = self.unit, self._fs
        for num in sorted(self._fds, reverse=True):
            fd = self._fds[num]
            end = fs.fsize(fd) // size * size
            while end > 0:
                start = max(0, end - 256 * size)
                chunk = fs.pread(fd, end - start, start)
                for at in range(len(chunk) - size, -1, -size):
                    unit = chunk[at : at + size]
                    if any(unit) and _whole(unit):
                        return int(UNIT_HEAD.unpack_from(unit)[2])
                end = start
        return -1

    def fit(self, lo: int, hi: int) -> None:
        """Keep no unit at or past entry ``hi`` nor a file wholly below entry ``lo`` (the
        ConsumeQueue's min and max offsets). A cut is synced: a unit past the queue's end must
        not come back after a crash and meet a different record at the same offset."""
        fs, epf = self._fs, self.entries_per_file
        hi_num, slot = divmod(hi, epf)
        for num in sorted(self._fds, reverse=True):
            fd = self._fds[num]
            if num > hi_num or (num == hi_num and slot == 0) or num < lo // epf:
                with self._lock:
                    del self._fds[num]
                    self._dirty.discard(num)
                fs.close(fd)
                fs.unlink(self._file(num))
                self._dir_dirty = True
            elif num == hi_num and fs.fsize(fd) > slot * self.unit:
                fs.ftruncate(fd, slot * self.unit)
                fs.fdatasync(fd)
        if self._dir_dirty and fs.isdir(self.path):
            fs.fsync_dir(self.path)
            self._dir_dirty = False

    def append(self, units: list[tuple[int, bytes]]) -> None:
        """Write ``(entry index, encoded unit)`` pairs (no sync, module docstring)."""
        epf, size = self.entries_per_file, self.unit
        run: list[bytes] = []  # units of consecutive entries in one file: one write
        start = prev = -2
        for index, raw in [*units, (-2, b"")]:
            if index == prev + 1 and index % epf:
                run.append(raw)
            else:
                if run:
                    num, slot = divmod(start, epf)
                    pwrite_all(self._fs, self._fd_for_write(num), b"".join(run), slot * size)
                    with self._lock:
                        self._dirty.add(num)
                run, start = [raw], index
            prev = index

    def _fd_for_write(self, num: int) -> int:
        fd = self._fds.get(num)
        if fd is None:
            new_dirs = makedirs_unsynced(self.path, fs=self._fs)
            fd = self._fs.open(self._file(num), os.O_RDWR | os.O_CREAT, 0o644)
            with self._lock:
                self._fds[num] = fd
                self._new_dirs += new_dirs
                self._dir_dirty = True
        return fd

    def read(self, index: int, count: int) -> bytes:
        """The raw units of entries [index, index + count) (shorter where files end; a unit
        that is not there reads as missing bytes or zeros)."""
        epf, size = self.entries_per_file, self.unit
        parts: list[bytes] = []
        end = index + count
        while index < end:
            num, slot = divmod(index, epf)
            n = min(end - index, epf - slot)
            fd = self._fds.get(num)
            raw = self._fs.pread(fd, n * size, slot * size) if fd is not None else b""
            parts.append(raw.ljust(n * size, b"\x00"))
            index += n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def flush(self) -> None:
        with self._lock:
            fds = [self._fds[n] for n in self._dirty if n in self._fds]
            self._dirty = set()
            new_dirs, self._new_dirs = self._new_dirs, []
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        try:
            for fd in fds:
                self._fs.fdatasync(fd)
            for directory in new_dirs:
                self._fs.fsync_dir(directory)
            if dir_dirty:
                self._fs.fsync_dir(self.path)
        except BaseException:  # the next flush syncs it all again
            with self._lock:
                self._dirty.update(n for n, fd in self._fds.items() if fd in fds)
                self._new_dirs[:0] = new_dirs
                self._dir_dirty = self._dir_dirty or dir_dirty
            raise

    def close(self) -> None:
        for fd in self._fds.values():
            self._fs.close(fd)
        self._fds.clear()

    def destroy(self) -> None:
        self.close()
        self._fs.rmtree(self.path)


class FilterBitMaps(Protocol):
    """What the store asks at dispatch (upstream CommitLogDispatcherCalcBitMap): the broker's
    registered SQL92 filters, evaluated on a record's properties."""

    def wants(self, topic: str) -> bool:
        """Whether ``topic`` has filters (else its records get no unit)."""
        ...

    def bitmap(self, topic: str, properties: bytes) -> tuple[int, bytes] | None:
        """(calcTimeMillis, bit-map of the filters that match), or None (no unit)."""
        ...
