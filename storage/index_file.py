"""Message index: lookup by message key (KEYS) and by client id (UNIQ_KEY) (M2).

Persistent and append-only: ``<store>/index/index.log`` holds 16-byte records
``unsigned long keyHash | long commitLogOffset``, appended in CommitLog order. Lookups use a
dict ``keyHash -> offset`` (a list when several messages share a hash), so a restart never
rescans the CommitLog. The hash is over ``topic#key`` (upstream's buildKey), 64 bits: CRC32
in the high half, Adler-32 in the low half; collisions only add candidates, because the store
re-reads every candidate record and keeps exact matches.

The put path only appends records (`add_keys` hashes a batch with C-level maps, no Python
per key), and they wait in memory until `flush` or 64 KiB of them (one write for many puts);
the dict catches up with the log when it is next needed (`lookup`, truncation). Queries are
rare and puts are hot, so a query after many puts pays for the dict inserts those puts
skipped (about a second per million keys).

Memory is about 100 bytes per indexed key once loaded (a Python dict entry with two ints);
upstream's mmap'd hash-slot files would avoid that, at the price of much more code.

Durability: appends are written behind, without fsync; `flush` writes them and fdatasyncs,
and may run in a worker thread beside appends (a lock guards the pending records and the file
end). Records lost in a crash lie above the store's dispatch checkpoint, which only moves
after a flush: `open(redo_from)` drops a torn record and every record at or above
``redo_from``, which the store then re-dispatches, so the log never holds a record twice.
"""

from __future__ import annotations

import functools
import itertools
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Sequence

from rocketrio.storage.commitlog import pwrite_all
from rocketrio.storage.durable import makedirs_synced, write_synced
from rocketrio.storage.fs import OS_FS, FileSystem

INDEX_DIR = "index"
INDEX_LOG = "index.log"
RECORD = struct.Struct(">Qq")
_RECORD_HALVES = struct.Struct(">IIq")  # the same bytes: CRC32 half, Adler-32 half, offset
_WRITE_BEHIND = 64 * 1024  # pending record bytes that trigger a write


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


class MessageIndex:
    """Append-only key -> commitlog offsets index (see module docstring)."""

    def __init__(self, store_path: str, *, fs: FileSystem = OS_FS) -> None:
        self.dir = os.path.join(store_path, INDEX_DIR)
        self.path = os.path.join(self.dir, INDEX_LOG)
        self._fs = fs
        self._fd: int | None = None
        self._size = 0  # log end, pending records included
        self._written = 0  # log end on file
        self._pending: list[bytes] = []
        self._lock = threading.Lock()
        self._loaded = 0  # bytes of the log the dict reflects
        self._map: dict[int, int | list[int]] = {}

    @property
    def count(self) -> int:
        """Records in the index."""
        return self._size // RECORD.size

    def exists(self) -> bool:
        return self._fs.exists(self.path)

    def open(self, redo_from: int) -> int:
        """Load the log, cutting records at or above ``redo_from``; returns records dropped."""
        fs = self._fs
        makedirs_synced(self.dir, fs=fs)
        created = not fs.exists(self.path)
        self._fd = fs.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if created:
            fs.fsync_dir(self.dir)
        size = fs.fsize(self._fd)
        data = fs.pread(self._fd, size, 0) if size else b""
        whole = size - size % RECORD.size
        keep = 0
        last = -1
        for h, offset in RECORD.iter_unpack(memoryview(data)[:whole]):
            # records are in commitlog order; a step back is a page lost in a crash
            if offset >= redo_from or offset < last:
                break
            self._insert(h, offset)
            last = offset
            keep += RECORD.size
        dropped = (size - keep) // RECORD.size
        if keep != size:
            fs.ftruncate(self._fd, keep)
            fs.fdatasync(self._fd)
        self._size = self._written = self._loaded = keep
        return dropped

    def _insert(self, h: int, offset: int) -> None:
        old = self._map.get(h)
        if old is None:
            self._map[h] = offset
        elif isinstance(old, int):
            self._map[h] = [old, offset]
        else:
            old.append(offset)

    def _catch_up(self) -> None:
        """Insert the records appended since the dict was last brought up to date."""
        self._write_pending()
        if self._fd is None or self._loaded >= self._size:
            return
        data = self._fs.pread(self._fd, self._size - self._loaded, self._loaded)
        insert = self._insert
        for h, offset in RECORD.iter_unpack(data):
            insert(h, offset)
        self._loaded = self._size

    def _append(self, data: bytes) -> None:
        if data and self._fd is not None:
            with self._lock:
                self._pending.append(data)
                self._size += len(data)
                if self._size - self._written >= _WRITE_BEHIND:
                    self._write_pending_locked()

    def _write_pending(self) -> None:
        with self._lock:
            self._write_pending_locked()

    def _write_pending_locked(self) -> None:
        if self._pending and self._fd is not None:
            data = b"".join(self._pending)
            pwrite_all(self._fs, self._fd, data, self._written)
            self._written += len(data)
            self._pending.clear()

    def add(self, entries: Iterable[tuple[int, int]]) -> None:
        """Append (key hash, commitlog offset) pairs, in commitlog order, with one write."""
        self._append(b"".join([RECORD.pack(h, off) for h, off in entries]))

    def add_pairs(self, hashes: Sequence[int], offsets: Sequence[int]) -> None:
        """`add` for parallel lists of key hashes and commitlog offsets."""
        self._append(b"".join(map(RECORD.pack, hashes, offsets)))

    def add_keys(self, topic: str, keys: Sequence[bytes], offsets: Sequence[int]) -> None:
        """Index encoded keys of ``topic`` at their commitlog offsets (the put hot path)."""
        crc_seed, adler_seed = key_hash_seed(topic)
        crcs = map(zlib.crc32, keys, itertools.repeat(crc_seed))
        adlers = map(zlib.adler32, keys, itertools.repeat(adler_seed))
        self._append(b"".join(map(_RECORD_HALVES.pack, crcs, adlers, offsets)))

    def lookup(self, topic: str, key: str) -> list[int]:
        """Candidate commitlog offsets for ``key`` in ``topic``, newest first."""
        self._catch_up()
        found = self._map.get(key_hash(topic, key))
        if found is None:
            return []
        if isinstance(found, int):
            return [found]
        return found[::-1]

    def flush(self) -> None:
        if self._fd is not None:
            self._write_pending()
            self._fs.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            self.flush()
            self._fs.close(self._fd)
            self._fd = None

    def truncate_from(self, commitlog_offset: int) -> int:
        """Drop the records at or above ``commitlog_offset``; returns how many."""
        if self._fd is None:
            return 0
        self._catch_up()  # also writes the pending records the search below reads
        fs = self._fs
        n = self._size // RECORD.size
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if (
                RECORD.unpack(fs.pread(self._fd, RECORD.size, mid * RECORD.size))[1]
                >= commitlog_offset
            ):
                hi = mid
            else:
                lo = mid + 1
        if lo == n:
            return 0
        tail = fs.pread(self._fd, (n - lo) * RECORD.size, lo * RECORD.size)
        for h, offset in RECORD.iter_unpack(tail):
            self._remove(h, offset)
        fs.ftruncate(self._fd, lo * RECORD.size)
        fs.fdatasync(self._fd)
        self._size = self._written = self._loaded = lo * RECORD.size
        return n - lo

    def _remove(self, h: int, offset: int) -> None:
        old = self._map.get(h)
        if isinstance(old, int):
            if old == offset:
                del self._map[h]
        elif old is not None and offset in old:
            old.reverse()
            old.remove(offset)  # the newest occurrence
            old.reverse()
            if len(old) == 1:
                self._map[h] = old[0]

    def delete_below(self, commitlog_min: int) -> int:
        """Retention: rewrite the log without records below ``commitlog_min``."""
        if self._fd is None:
            return 0
        self._write_pending()
        fs = self._fs
        data = fs.pread(self._fd, self._size, 0)
        kept = [(h, off) for h, off in RECORD.iter_unpack(data) if off >= commitlog_min]
        dropped = self._size // RECORD.size - len(kept)
        if dropped == 0:
            return 0
        tmp = self.path + ".tmp"
        write_synced(tmp, b"".join([RECORD.pack(h, off) for h, off in kept]), fs=fs)
        fs.replace(tmp, self.path)
        fs.fsync_dir(self.dir)
        fs.close(self._fd)
        self._fd = fs.open(self.path, os.O_RDWR)
        self._size = self._written = self._loaded = len(kept) * RECORD.size
        self._map.clear()
        for h, off in kept:
            self._insert(h, off)
        return dropped
