"""Message index: lookup by message key (KEYS) and by client id (UNIQ_KEY) (M2, issue 14).

An on-disk hash index shaped like upstream's IndexService / IndexFile. ``<store>/index/``
holds files named by the 20-digit global number of their first entry (``000...000``, then
``000...<maxIndexNum>`` ...): name order is entry order is commitlog order. Each file is a
header, ``maxHashSlotNum`` hash slots and up to ``maxIndexNum`` 20-byte entries
``key hash | commitlog offset | previous entry of the slot``; index_segment.py has the byte
layout and the crash rules of one file. Only the newest file takes appends; a full one is
sealed and the next append rolls a new file.

The hash is over ``topic#key`` (upstream's buildKey), 64 bits: CRC32 in the high half (it
also picks the slot), Adler-32 in the low half. Collisions only add candidates: the store
re-reads every candidate record and keeps exact matches.

Memory does not grow with the entries: per file an fd and a few ints (~300 bytes); the
appended-to file's slot table (4 * maxHashSlotNum bytes: 20 MB at upstream's default) and its
page flags (maxHashSlotNum / 1024 bytes); written-behind entries up to 64 KiB. A sealed file's
slots are read from the file (``pread``, the page cache) once its last flush is done.

Put path (`add_keys`): hashes with C-level maps, then one small Python step per entry (the
slot's previous head becomes the entry's ``prev``, the entry heads the slot) into one
buffer per batch; entries wait in memory until `flush` or 64 KiB of them (one write for many
puts). About 1.4 us a key on the project's VM, where the old log's append took 0.4 us: the
chaining step is the price of not holding every key in RAM.

Lookups (`iter_lookup`) walk each file's chain newest first, one 20-byte ``pread`` per entry,
at most MAX_WALK entries per lookup in all, so a hot key or slot cannot make a query
unbounded.

Durability and crashes: between flushes nothing is promised; `flush` makes every entry
durable (two fdatasyncs of the appended-to file, and one of the directory when a file was
created); the slot pages are written back only every SLOT_FLUSH_ENTRIES entries, when a file
is full and at close (random keys dirty nearly every 4 KiB slot page between two flushes, so
writing them back each time would cost kilobytes a key; index_segment.py has the protocol).
`open(redo_from)` first makes what it reads durable (the directory, its entry in the store
directory, every file: a kill -9 leaves writes only the page cache knows, which a later power
cut would undo under a recovery that trusted them). It reads the file headers (O(files)),
deletes the first file without a valid header and all later ones (never flushed: a flush
goes through the files in order), redoes the slots of the entries flushed since the last
slot write-back (at most about SLOT_FLUSH_ENTRIES), and cuts every entry at or above
``redo_from`` (a binary search, then a walk over the cut entries only; later files are
deleted whole); the store then re-dispatches them. It never scans the entries it keeps.
`truncate_from` flushes and cuts the same way, durably. `delete_below` (retention) deletes
whole files whose newest entry lies below the commitlog minimum; it never rewrites one.

Rebuild and migration: `exists` is False when there is no index directory, when it holds the
old format's ``index.log`` (one 16-byte record per key, loaded into a dict at start: replaced
by this format), or while a rebuild is unfinished (``index/rebuilding``). The store then
re-dispatches from the oldest commitlog record; `open` deletes the old files durably and
writes the ``rebuilding`` marker, which the first complete `flush` removes, so a crash during a
rebuild starts it again instead of trusting a dispatch checkpoint the new index never reached.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import threading
import zlib
from collections.abc import Iterable, Iterator, Sequence

from rocketrio.storage.durable import makedirs_synced, write_synced
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.index_segment import ENTRY, IndexSegment

INDEX_DIR = "index"
LEGACY_INDEX_LOG = "index.log"  # the old format (one append-only log loaded into a dict)
REBUILD_MARKER = "rebuilding"
DEFAULT_MAX_HASH_SLOT_NUM = 5_000_000  # upstream maxHashSlotNum
DEFAULT_MAX_INDEX_NUM = 5_000_000 * 4  # upstream maxIndexNum
MAX_WALK = 4096  # chain entries one lookup may read, all files together
# a flush writes the slot pages back once this many entries wait for it (and when a file is
# full, and at close); recovery redoes at most about this many entries
SLOT_FLUSH_ENTRIES = 1 << 18
_WRITE_BEHIND = 64 * 1024  # pending entry bytes that trigger a write
_NAME = re.compile(r"\d{20}")
_LOW = 0xFFFFFFFF


def key_hash(topic: str, key: str) -> int:
    """Stable 64-bit hash of ``topic#key``."""
    raw = f"{topic}#{key}".encode()
    return (zlib.crc32(raw) << 32) | zlib.adler32(raw)


@functools.lru_cache(maxsize=1024)
def key_hash_seed(topic: str) -> tuple[int, int]:
    """(CRC32, Adler-32) of ``topic#``: hashing a key continues from them."""
    raw = f"{topic}#".encode()
    return zlib.crc32(raw), zlib.adler32(raw)


def key_hash_from(seed: tuple[int, int], key: bytes) -> int:
    """`key_hash` of an encoded key from its topic's seed, without building ``topic#key``."""
    return (zlib.crc32(key, seed[0]) << 32) | zlib.adler32(key, seed[1])


def segment_name(base: int) -> str:
    return f"{base:020d}"


class MessageIndex:
    """Key -> commitlog offsets, in rolled on-disk hash files (see module docstring).

    Threading: `flush` may run in a worker thread beside `add*` and lookups (a lock guards
    the file list, the pending entries and the slot tables); `open`, `truncate_from`,
    `delete_below` and `close` run alone.
    """

    def __init__(
        self,
        store_path: str,
        *,
        fs: FileSystem = OS_FS,
        max_hash_slot_num: int = DEFAULT_MAX_HASH_SLOT_NUM,
        max_index_num: int = DEFAULT_MAX_INDEX_NUM,
        slot_flush_entries: int = SLOT_FLUSH_ENTRIES,
    ) -> None:
        if max_hash_slot_num <= 0 or max_index_num <= 0:
            raise ValueError(
                f"maxHashSlotNum and maxIndexNum must be positive, got "
                f"{max_hash_slot_num} and {max_index_num}"
            )
        if max_index_num >= 1 << 32 or max_hash_slot_num >= 1 << 30:
            raise ValueError("maxIndexNum must be < 2^32 and maxHashSlotNum < 2^30")
        self.dir = os.path.join(store_path, INDEX_DIR)
        self._fs = fs
        self.max_hash_slot_num = max_hash_slot_num
        self.max_index_num = max_index_num
        self.slot_flush_entries = max(1, slot_flush_entries)
        self._segs: list[IndexSegment] = []
        self._lock = threading.Lock()
        self._opened = False
        self._next_base = 0  # the first entry number of the next file when there is none
        self._dir_dirty = False  # a file was created since the directory was last fsynced
        self._rebuilding = False

    @property
    def count(self) -> int:
        """Entries in the index (written behind or not)."""
        return sum(seg.count for seg in self._segs)

    @property
    def files(self) -> list[str]:
        """The index files' names, oldest first."""
        return [os.path.basename(seg.path) for seg in self._segs]

    def exists(self) -> bool:
        """False: no usable index, rebuild it from the oldest commitlog record."""
        fs = self._fs
        return (
            fs.isdir(self.dir)
            and not fs.exists(os.path.join(self.dir, LEGACY_INDEX_LOG))
            and not fs.exists(os.path.join(self.dir, REBUILD_MARKER))
        )

    # ------------------------------------------------------------------ open

    def open(self, redo_from: int) -> int:
        """Load the files, dropping every entry at or above ``redo_from`` and what a crash
        left unusable; returns how many entries were dropped."""
        if self._opened:
            raise RuntimeError(f"index {self.dir} is already open")
        fs = self._fs
        fresh = not self.exists()
        makedirs_synced(self.dir, fs=fs)
        # an index directory a kill -9 left behind may exist in the page cache only
        fs.fsync_dir(os.path.dirname(self.dir))
        dropped = 0
        if fresh:
            dropped += self._wipe()
            write_synced(os.path.join(self.dir, REBUILD_MARKER), b"", fs=fs)
            fs.fsync_dir(self.dir)
        self._rebuilding = fresh
        dropped += self._load()
        self._opened = True
        dropped += self._cut(redo_from)
        for seg in self._segs:
            if seg.committed < seg.count:  # a flush's intent without its commit: redo it
                seg.repair(seg.count)
                if seg is not self._segs[-1] or seg.count == seg.capacity:
                    seg.drop_slots()
        if self._segs and self._segs[-1].count < self._segs[-1].capacity:
            self._segs[-1].activate()
        return dropped

    def _wipe(self) -> int:
        """Delete the old format's log and any files of an unfinished rebuild, durably."""
        fs = self._fs
        dropped = 0
        names = fs.listdir(self.dir) if fs.isdir(self.dir) else []
        for name in names:
            path = os.path.join(self.dir, name)
            if name == LEGACY_INDEX_LOG:
                fd = fs.open(path, os.O_RDONLY)
                dropped += fs.fsize(fd) // 16
                fs.close(fd)
            elif not _NAME.fullmatch(name):
                continue
            fs.unlink(path)
        if names:
            fs.fsync_dir(self.dir)
        return dropped

    def _load(self) -> int:
        """Open the files in order; delete the first unusable one and every later one."""
        fs = self._fs
        # recovery builds on what it reads, so that is made durable first: a kill -9 may have
        # left writes, creates and unlinks that only the page cache knows, which a later
        # power cut would undo
        fs.fsync_dir(self.dir)
        dropped = 0
        broken = False
        removed = False
        segs: list[IndexSegment] = []
        for name in sorted(n for n in fs.listdir(self.dir) if _NAME.fullmatch(n)):
            path = os.path.join(self.dir, name)
            seg = IndexSegment.load(fs, path, int(name))
            if seg is not None:
                seg.slot_flush_entries = self.slot_flush_entries
            # a file without a valid header was never flushed, nor were the files after it
            # (a flush goes through the files in order)
            if seg is None or broken:
                broken = True
                if seg is not None:
                    dropped += seg.count
                    seg.close()
                fs.unlink(path)
                removed = True
                continue
            fs.fdatasync(seg.fd)  # what was read (a kill -9 leaves the page cache) is durable
            segs.append(seg)
        if removed:
            fs.fsync_dir(self.dir)
        self._segs = segs
        self._next_base = segs[-1].base + segs[-1].count if segs else 0
        return dropped

    # ------------------------------------------------------------------ cut

    def _cut_point(self, commitlog_offset: int) -> tuple[int, int] | None:
        """(file position, entries it keeps) of the first entry at or above the offset."""
        found = None
        for i in range(len(self._segs) - 1, -1, -1):
            seg = self._segs[i]
            if seg.count == 0 or seg.offset_of(1) >= commitlog_offset:
                found = (i, 0)
                continue
            if seg.offset_of(seg.count) < commitlog_offset:
                return found
            return i, seg.first_at_or_above(commitlog_offset) - 1
        return found

    def _cut(self, commitlog_offset: int) -> int:
        """Drop the entries at or above ``commitlog_offset``: later files whole, then a
        repair of the file the cut falls in. Runs alone, after a flush or at open."""
        point = self._cut_point(commitlog_offset)
        if point is None:
            return 0
        i, keep = point
        doomed = self._segs[i + 1 :] if keep else self._segs[i:]
        dropped = 0
        fs = self._fs
        for seg in reversed(doomed):
            dropped += seg.count
            seg.close()
            fs.unlink(seg.path)
        if doomed:
            fs.fsync_dir(self.dir)
            del self._segs[len(self._segs) - len(doomed) :]
            self._next_base = doomed[0].base
        if keep:
            dropped += self._segs[i].repair(keep)
        return dropped

    # ------------------------------------------------------------------ put path

    def add(self, entries: Iterable[tuple[int, int]]) -> None:
        """Index (key hash, commitlog offset) pairs, in commitlog order."""
        pairs = list(entries)
        self.add_pairs([h for h, _ in pairs], [off for _, off in pairs])

    def add_pairs(self, hashes: Sequence[int], offsets: Sequence[int]) -> None:
        """`add` for parallel lists of key hashes and commitlog offsets."""
        self._append([h >> 32 for h in hashes], [h & _LOW for h in hashes], list(offsets))

    def add_keys(self, topic: str, keys: Sequence[bytes], offsets: Sequence[int]) -> None:
        """Index encoded keys of ``topic`` at their commitlog offsets (the put hot path)."""
        crc_seed, adler_seed = key_hash_seed(topic)
        his = list(map(zlib.crc32, keys, itertools.repeat(crc_seed)))
        los = list(map(zlib.adler32, keys, itertools.repeat(adler_seed)))
        self._append(his, los, offsets if isinstance(offsets, list) else list(offsets))

    def _append(self, his: list[int], los: list[int], offsets: list[int]) -> None:
        if not offsets:
            return
        if not self._opened:
            raise RuntimeError(f"index {self.dir} is not open")
        with self._lock:
            i, n = 0, len(offsets)
            while True:
                seg = self._writable()
                take = min(n - i, seg.capacity - seg.count)
                seg.append(his, los, offsets, i, i + take)
                i += take
                if i == n:
                    break
            if (seg.count - seg.written) * ENTRY.size >= _WRITE_BEHIND:
                seg.write_pending()

    def _writable(self) -> IndexSegment:
        """The file taking appends, rolling a new one when the newest is full."""
        last = self._segs[-1] if self._segs else None
        if last is not None and last.count < last.capacity:
            if last.slots is None:
                last.activate()
            return last
        if last is not None:
            last.write_pending()  # sealed: the next flush makes it durable and drops its slots
        base = last.base + last.count if last is not None else self._next_base
        seg = IndexSegment.create(
            self._fs,
            os.path.join(self.dir, segment_name(base)),
            base,
            self.max_hash_slot_num,
            self.max_index_num,
        )
        seg.slot_flush_entries = self.slot_flush_entries
        self._segs.append(seg)
        self._dir_dirty = True
        return seg

    # ------------------------------------------------------------------ lookup

    def iter_lookup(self, topic: str, key: str) -> Iterator[int]:
        """Candidate commitlog offsets for ``key`` in ``topic``, newest first, lazily (a caller
        that stops early reads no further); at most MAX_WALK chain entries are read."""
        if not self._opened:
            return
        h = key_hash(topic, key)
        with self._lock:
            if self._segs:
                self._segs[-1].write_pending()
            segs = list(self._segs)
        budget = MAX_WALK
        for seg in reversed(segs):
            for off in seg.walk(h, budget):
                budget -= 1
                if off is not None:
                    yield off
            if budget <= 0:
                return

    def lookup(self, topic: str, key: str, limit: int | None = None) -> list[int]:
        """Candidate commitlog offsets for ``key`` in ``topic``, newest first (at most
        ``limit``, and at most MAX_WALK chain entries read)."""
        return list(itertools.islice(self.iter_lookup(topic, key), limit))

    # ------------------------------------------------------------------ flush / close

    def flush(self, *, write_slots: bool = False) -> None:
        """Make every entry added so far durable (fdatasync); the slot pages too when they
        are due or ``write_slots``. May run beside appends and lookups."""
        if not self._opened:
            return
        with self._lock:
            jobs = [job for seg in self._segs if (job := seg.take_flush(write_slots))]
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        fs = self._fs
        try:
            if dir_dirty:
                fs.fsync_dir(self.dir)
            for job in jobs:
                job.run()
        except BaseException:
            with self._lock:  # what was taken for this flush is still to be written
                self._dir_dirty = self._dir_dirty or dir_dirty
                for job in jobs:
                    job.seg.mark_dirty(job.pages)
            raise
        with self._lock:
            for job in jobs:
                seg = job.seg
                if seg.committed == seg.count == seg.capacity:
                    seg.drop_slots()
        if self._rebuilding:
            marker = os.path.join(self.dir, REBUILD_MARKER)
            if fs.exists(marker):  # gone if a flush failed on the fsync below: fsync again
                fs.unlink(marker)
            fs.fsync_dir(self.dir)
            self._rebuilding = False

    def close(self) -> None:
        """Flush with the slots written back (a clean restart has nothing to redo); close."""
        if not self._opened:
            return
        self.flush(write_slots=True)
        for seg in self._segs:
            seg.close()
        self._segs = []
        self._opened = False

    # ------------------------------------------------------------------ truncation / retention

    def truncate_from(self, commitlog_offset: int) -> int:
        """Drop the entries at or above ``commitlog_offset``, durably; returns how many."""
        if not self._opened:
            return 0
        self.flush()
        dropped = self._cut(commitlog_offset)
        if self._segs and self._segs[-1].count < self._segs[-1].capacity:
            self._segs[-1].activate()
        return dropped

    def delete_below(self, commitlog_min: int) -> int:
        """Retention: delete the oldest files whose entries all point below
        ``commitlog_min`` (whole files, never a rewrite); returns the entries deleted."""
        if not self._opened:
            return 0
        with self._lock:
            if self._segs:
                self._segs[-1].write_pending()
        gone: list[IndexSegment] = []
        while self._segs:
            seg = self._segs[0]
            if seg.count == 0 or seg.offset_of(seg.count) >= commitlog_min:
                break
            gone.append(self._segs.pop(0))
        if not gone:
            return 0
        fs = self._fs
        for seg in gone:
            seg.close()
            fs.unlink(seg.path)
        fs.fsync_dir(self.dir)
        if not self._segs:
            self._next_base = gone[-1].base + gone[-1].count
        return sum(seg.count for seg in gone)
