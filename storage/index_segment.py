"""One on-disk hash index file (upstream's IndexFile): a header, hash slots, linked entries.

Layout (every integer little-endian; S = hash slots, N = capacity in entries):

    [0, 4096)               header: two 44-byte copies, at 0 and at 512 (different sectors)
    [4096, 4096 + 4*S)      slots, u32: the newest entry whose key hash falls in the slot (0: none)
    [E, E + 20*N)           entries numbered from 1, E = 4096 + 4*S, each 20 bytes:
                            u64 key hash | i64 commitlog offset | u32 previous entry of the slot

A key hash's slot is its high 32 bits (the CRC32 half of `key_hash`) modulo S; a slot heads a
chain newest -> oldest through the ``prev`` numbers, which always decrease (a ``prev`` that
does not is corruption and ends a walk). Entries are appended in commitlog order. Header copy:
``b"RQIX" | u16 version | u16 0 | u64 seq | u64 base | u32 S | u32 N | u32 count | u32 end |
u32 CRC32 of the 40 bytes before``; ``base`` is the global number of the file's first entry
(also its name). The valid copy with the higher ``seq`` wins, and a header write goes to the
copy not known to be durable, so a torn header write always leaves the other copy.

The durable state keeps this invariant (what any crash leaves):

- entries 1..end are durable and whole; nothing past ``end`` is ever read;
- every slot either reflects exactly entries 1..count (count <= end), or was changed by the
  write-back of entries in (count, end]: a torn or half-written slot page can only hold wrong
  values in slots that some entry of (count, end] hashes to.

`repair` restores exact slots from that state in O(entries it touches): the *redo* sets the
slot of each entry of (count, end], in ascending order, to that entry (exact whatever the slot
held), then the *cut* to ``keep`` sets the slot of each entry of (keep, end], in descending
order, to the entry's ``prev`` (the last write per slot comes from its oldest cut entry, whose
``prev`` is the newest kept one). Neither reads a slot, so torn slot values do not matter. A
cut is atomic: it first makes the header ``{min(count, keep), end}`` durable (true of the
slots as they are), writes the slots, fdatasyncs, then writes ``{keep, keep}``; a crash in
between recovers the uncut file exactly, which the next ``open(redo_from)`` cuts again.

The flush protocol that keeps the invariant (`take_flush` under the owner's lock, then
`FlushJob.run` outside it): write the entries, fdatasync; write the header ``{count, end}``,
fdatasync. That makes every entry durable and recoverable (recovery redoes their slots); the
slot pages stay dirty in RAM. Only when the slots are due (``slot_flush_entries`` entries past
the last write-back, a full file, a close) does the flush go on: that header is then the
intent (slots may now change for (count, end]); write the dirty slot pages, fdatasync; write
``{end, end}`` without fdatasync (the next flush's first fdatasync makes it durable; until
then a crash leaves the intent, which recovery redoes exactly). So an ordinary flush writes
20 bytes an entry and two headers, and recovery redoes at most about ``slot_flush_entries``
entries (plus one flush's worth), however big the file.

Memory: a handful of ints and one fd per file; the file that takes appends also holds its slot
table (4 * S bytes: 20 MB at upstream's maxHashSlotNum of 5,000,000) and one dirty flag per
4 KiB slot page (S / 1024 bytes). Nothing is held per entry but the written-behind ones.
"""

from __future__ import annotations

import mmap
import os
import struct
import sys
import zlib
from array import array
from collections.abc import Iterator

from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.storage.durable import pwrite_all
from rocketrio.storage.fs import FileSystem

HEADER_SIZE = 4096
_HEADER_AT = (0, 512)
_HEADER = struct.Struct("<4sHHQQIIII")
_CRC = struct.Struct("<I")
_MAGIC = b"RQIX"
_VERSION = 1
ENTRY = struct.Struct("<QqI")  # key hash, commitlog offset, previous entry of the slot
# the same 20 bytes from the two 32-bit halves of the hash: Adler-32 (low), CRC32 (high)
ENTRY_HALVES = struct.Struct("<IIqI")
SLOT = struct.Struct("<I")
_PAGE_SHIFT = 10  # slot write-back unit: 1024 slots, one 4 KiB page of the file
_PAGE_SLOTS = 1 << _PAGE_SHIFT
_CHUNK = 65536  # entries read at once by repair and search
_READ = 1 << 20  # slot table bytes read at once
_LITTLE = sys.byteorder == "little"


def _slot_table(slot_num: int) -> memoryview:
    """A zeroed slot table in RAM: u32 values over anonymous memory (a page costs RAM once
    written, and all of it goes back to the system with the table)."""
    return memoryview(mmap.mmap(-1, 4 * slot_num)).cast("I")


def _index_entries_py(
    slots: memoryview,
    dirty: bytearray,
    ns: int,
    his: list[int],
    los: list[int],
    offsets: list[int],
    a: int,
    b: int,
    count: int,
) -> tuple[bytes, int]:
    """The entries of keys a..b-1 (``his`` picks the slot of each) after entry ``count``, each
    slot pointing at its new newest entry and its page marked dirty; (entries, new count). The
    compiled twin is `rocketrio.protocol._speedups.index_entries` (protocol/speedups/
    index_append.c)."""
    pack = ENTRY_HALVES.pack
    e = count
    out = []
    push = out.append
    if a or b < len(offsets):
        his, los, offsets = his[a:b], los[a:b], offsets[a:b]
    for hi, lo, off in zip(his, los, offsets, strict=True):
        s = hi % ns
        e += 1
        push(pack(lo, hi, off, slots[s]))
        slots[s] = e
        dirty[s >> _PAGE_SHIFT] = 1
    return b"".join(out), e


def _swapped(raw: bytes) -> bytes:
    """u32s between little-endian (the file) and this big-endian machine's order."""
    values = array("I", raw)
    values.byteswap()
    return values.tobytes()


def _read_full(fs: FileSystem, fd: int, size: int, pos: int) -> bytes:
    """``size`` bytes at ``pos``, fewer only at the end of the file."""
    data = fs.pread(fd, size, pos)
    if len(data) == size or not data:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = fs.pread(fd, size - got, pos + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


class PageSnapshot:
    """Copies of slot pages, in anonymous memory handed back to the system by `close` (a
    bytes object this size would stay in the allocator's heap once freed)."""

    def __init__(self, table: memoryview, slot_num: int, pages: list[int]) -> None:
        self.pages = pages
        self.runs: list[tuple[int, int, int]] = []  # (file position, start, end in buf)
        spans = []
        i = 0
        while i < len(pages):  # runs of consecutive pages: one write each
            j = i + 1
            while j < len(pages) and pages[j] == pages[j - 1] + 1:
                j += 1
            lo, hi = pages[i] * _PAGE_SLOTS, min(slot_num, (pages[j - 1] + 1) * _PAGE_SLOTS)
            spans.append((4 * lo, 4 * hi))
            i = j
        self._buf = mmap.mmap(-1, max(1, sum(hi - lo for lo, hi in spans)))
        at = 0
        raw = table.cast("B")
        for lo, hi in spans:
            self._buf[at : at + hi - lo] = raw[lo:hi]
            self.runs.append((HEADER_SIZE + lo, at, at + hi - lo))
            at += hi - lo

    def write(self, fs: FileSystem, fd: int) -> None:
        with memoryview(self._buf) as view:
            for pos, start, end in self.runs:
                with view[start:end] as data:
                    pwrite_all(fs, fd, data if _LITTLE else _swapped(bytes(data)), pos)

    def close(self) -> None:
        self._buf.close()


class FlushJob:
    """The I/O of one file's flush, from a snapshot taken under the owner's lock; with a
    ``snapshot`` of the dirty slot pages it is a slot write-back, without one it only makes
    the entries durable (the header's ``end`` moves, recovery redoes their slots)."""

    def __init__(self, seg: IndexSegment, end: int, snapshot: PageSnapshot | None) -> None:
        self.seg = seg
        self.end = end
        self.snapshot = snapshot  # the dirty slot pages taken: marked again if the flush fails

    @property
    def pages(self) -> list[int]:
        return self.snapshot.pages if self.snapshot is not None else []

    def run(self) -> None:
        try:
            self._run()
        finally:
            if self.snapshot is not None:
                self.snapshot.close()

    def _run(self) -> None:
        seg, fs = self.seg, self.seg.fs
        fs.fdatasync(seg.fd)  # the entries up to end, and the last commit header
        seg.header_synced()
        if self.snapshot is None:
            if self.end > seg.header_end:  # the entries up to end are durable and redoable
                seg.write_header(seg.committed, self.end)
                fs.fdatasync(seg.fd)
                seg.header_synced()
            return
        seg.write_header(seg.committed, self.end)  # intent: slots may change for (count, end]
        fs.fdatasync(seg.fd)
        seg.header_synced()
        self.snapshot.write(fs, seg.fd)
        fs.fdatasync(seg.fd)
        seg.write_header(self.end, self.end)  # commit: synced by the next flush, or redone
        seg.committed = self.end


class IndexSegment:
    """One index file (see module docstring). Entry numbers are 1-based within the file."""

    def __init__(
        self, fs: FileSystem, path: str, fd: int, base: int, slot_num: int, capacity: int
    ) -> None:
        self.fs = fs
        self.path = path
        self.fd = fd
        self.base = base
        self.slot_num = slot_num
        self.capacity = capacity
        self.entries_at = HEADER_SIZE + 4 * slot_num
        self.count = 0  # entries added (written behind or not)
        self.written = 0  # entries written to the file
        self.committed = 0  # count of the last commit header written: slots exact up to it
        self.header_end = 0  # end of the last header written: entries durable up to it
        self.slot_flush_entries = 1  # a flush writes the slots back this far past committed
        self.pending: list[bytes] = []  # entries count - written, not yet written
        self.slots: memoryview | None = None  # u32 slot table in RAM while taking appends
        self.dirty: bytearray | None = None  # one flag per slot page changed since a flush
        self._seq = 0
        self._durable_copy = 0
        self._written_copy = 0

    # ------------------------------------------------------------------ create / load

    @classmethod
    def create(
        cls, fs: FileSystem, path: str, base: int, slot_num: int, capacity: int
    ) -> IndexSegment:
        """A new empty file taking appends; nothing synced (the owner's flush does)."""
        fd = fs.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        seg = cls(fs, path, fd, base, slot_num, capacity)
        head = seg._header_bytes(0, 0)
        pwrite_all(fs, fd, head, _HEADER_AT[0])
        pwrite_all(fs, fd, head, _HEADER_AT[1])
        seg.slots = _slot_table(slot_num)
        seg.dirty = bytearray(-(-slot_num // _PAGE_SLOTS))
        return seg

    @classmethod
    def load(cls, fs: FileSystem, path: str, base: int) -> IndexSegment | None:
        """Open an existing file; None (file closed) when neither header copy is valid or the
        header disagrees with the name. ``count`` is the header's ``end``: every entry up to it
        is whole, and `repair` must run first when ``committed < count``."""
        fd = fs.open(path, os.O_RDWR)
        best: tuple[int, int, int, int, int, int] | None = None
        for copy, at in enumerate(_HEADER_AT):
            raw = fs.pread(fd, _HEADER.size + _CRC.size, at)
            if len(raw) < _HEADER.size + _CRC.size:
                continue
            body = raw[: _HEADER.size]
            if zlib.crc32(body) != _CRC.unpack_from(raw, _HEADER.size)[0]:
                continue
            magic, version, _, seq, hbase, slots, cap, count, end = _HEADER.unpack(body)
            ok = magic == _MAGIC and version == _VERSION and hbase == base
            if ok and slots > 0 and cap > 0 and count <= end <= cap:
                if best is None or seq > best[1]:
                    best = (copy, seq, slots, cap, count, end)
        if best is None:
            fs.close(fd)
            return None
        copy, seq, slots, cap, count, end = best
        seg = cls(fs, path, fd, base, slots, cap)
        # entries the file does not hold (lost outside any crash rule) are not trusted
        whole = max(0, (fs.fsize(fd) - seg.entries_at) // ENTRY.size)
        seg.count = seg.written = seg.header_end = min(end, whole)
        seg.committed = min(count, seg.count)
        seg._seq, seg._durable_copy, seg._written_copy = seq, copy, copy
        return seg

    def close(self) -> None:
        self.fs.close(self.fd)
        self.slots = self.dirty = None

    # ------------------------------------------------------------------ header

    def _header_bytes(self, count: int, end: int) -> bytes:
        body = _HEADER.pack(
            _MAGIC, _VERSION, 0, self._seq, self.base, self.slot_num, self.capacity, count, end
        )
        return body + _CRC.pack(zlib.crc32(body))

    def write_header(self, count: int, end: int) -> None:
        """Write the header into the copy not known to be durable (no fdatasync)."""
        self.header_end = end
        self._seq += 1
        copy = 1 - self._durable_copy
        pwrite_all(self.fs, self.fd, self._header_bytes(count, end), _HEADER_AT[copy])
        self._written_copy = copy

    def header_synced(self) -> None:
        """An fdatasync of the file succeeded: the last header written is durable."""
        self._durable_copy = self._written_copy

    @property
    def header_unsynced(self) -> bool:
        return self._written_copy != self._durable_copy

    # ------------------------------------------------------------------ entries

    def entry(self, e: int) -> tuple[int, int, int] | None:
        """(key hash, commitlog offset, prev) of entry ``e``; None when the file is short."""
        raw = self.fs.pread(self.fd, ENTRY.size, self.entries_at + (e - 1) * ENTRY.size)
        return ENTRY.unpack(raw) if len(raw) == ENTRY.size else None

    def offset_of(self, e: int) -> int:
        found = self.entry(e)
        if found is None:
            raise OSError(f"{self.path}: entry {e} of {self.count} is missing")
        return found[1]

    def first_at_or_above(self, commitlog_offset: int) -> int:
        """The first entry number whose offset is >= ``commitlog_offset`` (count + 1: none);
        entries are in commitlog order, so a binary search."""
        lo, hi = 1, self.count + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.offset_of(mid) >= commitlog_offset:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def _chunks(self, first: int, last: int, *, descending: bool = False) -> Iterator[int]:
        """Start numbers of chunks of at most _CHUNK entries covering [first, last]."""
        starts = range(first, last + 1, _CHUNK)
        return iter(reversed(starts) if descending else starts)

    def _read_entries(self, first: int, n: int) -> list[tuple[int, int, int]]:
        raw = _read_full(
            self.fs, self.fd, n * ENTRY.size, self.entries_at + (first - 1) * ENTRY.size
        )
        if len(raw) != n * ENTRY.size:
            raise OSError(f"{self.path}: entries {first}..{first + n - 1} are missing")
        return list(ENTRY.iter_unpack(raw))

    def append(self, his: list[int], los: list[int], offsets: list[int], a: int, b: int) -> None:
        """Add entries for items a..b-1: hash halves (``his`` picks the slot) and offsets."""
        slots, dirty = self.slots, self.dirty
        assert slots is not None and dirty is not None, "append to a sealed index file"
        got = None
        if _speedups is not None:
            got = _speedups.index_entries(
                slots, dirty, self.slot_num, his, los, offsets, a, b, self.count
            )
        if got is None:
            ns = self.slot_num
            got = _index_entries_py(slots, dirty, ns, his, los, offsets, a, b, self.count)
        data, self.count = got
        self.pending.append(data)

    def write_pending(self) -> None:
        if self.pending:
            data = b"".join(self.pending)
            pwrite_all(self.fs, self.fd, data, self.entries_at + self.written * ENTRY.size)
            self.written += len(data) // ENTRY.size
            self.pending.clear()

    # ------------------------------------------------------------------ lookup

    def walk(self, h: int, budget: int) -> Iterator[int | None]:
        """For each entry of ``h``'s chain, newest first and at most ``budget`` of them: its
        commitlog offset when its hash is ``h``, else None (the caller counts every step)."""
        s = (h >> 32) % self.slot_num
        slots = self.slots
        if slots is not None:
            e = slots[s]
        else:
            raw = self.fs.pread(self.fd, 4, HEADER_SIZE + 4 * s)
            e = SLOT.unpack(raw)[0] if len(raw) == 4 else 0
        count = self.count
        pread, fd, at = self.fs.pread, self.fd, self.entries_at - ENTRY.size
        unpack = ENTRY.unpack
        while 0 < e <= count and budget > 0:
            raw = pread(fd, ENTRY.size, at + e * ENTRY.size)
            if len(raw) < ENTRY.size:
                return
            eh, off, prev = unpack(raw)
            yield off if eh == h else None
            budget -= 1
            if prev >= e:
                return  # corrupt: a chain only goes back
            e = prev

    # ------------------------------------------------------------------ slots

    def _load_slots(self) -> None:
        """The slot table into RAM, read a MiB at a time (an unwritten tail reads as zeros)."""
        if self.slots is not None:
            return
        table = _slot_table(self.slot_num)
        raw = table.cast("B")
        for at in range(0, len(raw), _READ):
            part = _read_full(self.fs, self.fd, min(_READ, len(raw) - at), HEADER_SIZE + at)
            if part.count(0) != len(part):  # a sparse file's holes stay untouched memory
                raw[at : at + len(part)] = part if _LITTLE else _swapped(part)
            if len(part) < _READ:
                break
        self.slots = table
        self.dirty = bytearray(-(-self.slot_num // _PAGE_SLOTS))

    def _snapshot(self, pages: list[int]) -> PageSnapshot | None:
        if not pages:
            return None
        assert self.slots is not None  # pages are only dirty in a table in RAM
        return PageSnapshot(self.slots, self.slot_num, pages)

    def take_dirty_pages(self) -> list[int]:
        dirty = self.dirty
        if dirty is None:
            return []
        pages = []
        p = dirty.find(1)
        while p >= 0:
            pages.append(p)
            p = dirty.find(1, p + 1)
        dirty[:] = bytes(len(dirty))
        return pages

    def mark_dirty(self, pages: list[int]) -> None:
        if self.dirty is not None:
            for p in pages:
                self.dirty[p] = 1

    # ------------------------------------------------------------------ flush / repair

    def take_flush(self, write_slots: bool) -> FlushJob | None:
        """Under the owner's lock: write the pending entries and, when the slots are due to be
        written back (``write_slots``, ``slot_flush_entries`` past the last write-back, or the
        file full), snapshot the dirty slot pages; None when there is nothing to do."""
        self.write_pending()
        behind = self.count - self.committed
        due = behind > 0 and (
            write_slots or behind >= self.slot_flush_entries or self.count == self.capacity
        )
        if not due and self.count == self.header_end and not self.header_unsynced:
            return None
        return FlushJob(self, self.count, self._snapshot(self.take_dirty_pages()) if due else None)

    def repair(self, keep: int) -> int:
        """Redo (committed, count], cut to ``keep`` entries, make it durable; returns the
        entries cut. Atomic: an intent header first, so a crash before the final header
        leaves a state whose recovery redoes every entry (the cut undone, exactly). Runs alone
        (no flush beside it), on a file whose state is durable. Leaves the slot table in
        RAM."""
        fs, fd = self.fs, self.fd
        self.write_pending()
        # the caller made the file durable as it is (open syncs what it loads, truncation
        # flushes first). Slots exact for `committed` are exact for any smaller count, except
        # the slots the entries above it hash to: the redo covers those
        self.write_header(min(self.committed, keep), self.count)
        fs.fdatasync(fd)
        self.header_synced()
        self._load_slots()
        slots, dirty, ns = self.slots, self.dirty, self.slot_num
        assert slots is not None and dirty is not None
        end = self.count
        for first in self._chunks(self.committed + 1, end):
            n = min(_CHUNK, end - first + 1)
            for i, (h, _, _) in enumerate(self._read_entries(first, n)):
                s = (h >> 32) % ns
                slots[s] = first + i
                dirty[s >> _PAGE_SHIFT] = 1
        for first in self._chunks(keep + 1, end, descending=True):
            n = min(_CHUNK, end - first + 1)
            part = self._read_entries(first, n)
            for i in range(n - 1, -1, -1):
                h, _, prev = part[i]
                s = (h >> 32) % ns
                slots[s] = prev if prev < first + i else 0
                dirty[s >> _PAGE_SHIFT] = 1
        snapshot = self._snapshot(self.take_dirty_pages())
        if snapshot is not None:
            try:
                snapshot.write(fs, fd)
            finally:
                snapshot.close()
        fs.fdatasync(fd)
        self.write_header(keep, keep)
        fs.fdatasync(fd)
        self.header_synced()
        if fs.fsize(fd) > self.entries_at + keep * ENTRY.size:
            fs.ftruncate(fd, self.entries_at + keep * ENTRY.size)
            fs.fdatasync(fd)
        self.count = self.written = self.committed = keep
        return end - keep

    def activate(self) -> None:
        """This file takes appends: its slot table in RAM; a tail past its entries (a crash's
        leftovers, never read) is cut off."""
        self._load_slots()
        size = self.entries_at + self.written * ENTRY.size
        if self.fs.fsize(self.fd) > size:
            self.fs.ftruncate(self.fd, size)

    def drop_slots(self) -> None:
        """Sealed and durable: lookups read the slots from the file from now on."""
        self.slots = self.dirty = None
