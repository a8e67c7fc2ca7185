"""Recently stored halves, so END_TRANSACTION need not read its half back from the CommitLog.

A producer ends its transaction within milliseconds of the half's answer. The END used to read
the half back by its CommitLog offset (pread, layout check, record decode) and, to build the
commit, decode its properties a second time (the stored text carries the ``__CRC32#`` trailer
the commit must not keep). `HalfCache` keeps each half's put as the send path made it (the
`MessageToStore` with its encoded properties, and the store's `PutResult`), filled by the half
send's store callback (`CachingHalfPut`) once the half is stored, and taken (removed) by the
END that names its CommitLog offset: `take` rebuilds the `MessageExt` the read-back would give,
without the trailer (tests/unit/actors/broker/transaction/test_half_cache.py proves the commit
record built from it byte-identical to the one built from the disk).

Bounded by count and body bytes (the oldest go first); emptied when the broker's role changes
(a slave's CommitLog may be truncated, a new master's halves were written elsewhere). An entry
is served only while the CommitLog still spans its record (`take`'s bounds); a miss, or a half
put with a ``__CRC32#`` property of its own (stored re-encoded), reads the disk as before.
Pure: no trio, no store.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.transaction.policy import HALF_QUEUE_ID, HALF_TOPIC
from rocketrio.protocol.message import PROPERTY_CRC32, MessageExt
from rocketrio.storage.message_store import MessageToStore, PutResult

MAX_HALVES = 4096  # halves between their put and their END (32 tasks in the bench: ~32)
MAX_BYTES = 16 << 20  # their bodies, at most

PutCallback = Callable[[list[PutResult], PutStatus, str | None], None]


class HalfCache:
    """Halves by CommitLog offset, oldest first (module docstring)."""

    def __init__(self, max_halves: int = MAX_HALVES, max_bytes: int = MAX_BYTES) -> None:
        self.max_halves = max_halves
        self.max_bytes = max_bytes
        self._halves: dict[int, tuple[MessageToStore, PutResult]] = {}
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._halves)

    @property
    def bytes(self) -> int:
        return self._bytes

    def add(self, msg: MessageToStore, put: PutResult) -> None:
        """Remember the stored half ``msg`` (``put`` is where the store wrote it)."""
        props = msg.properties
        if not isinstance(props, str) or PROPERTY_CRC32 in props or msg.topic != HALF_TOPIC:
            return  # stored re-encoded (wire_properties): the disk holds other text
        size = len(msg.body)
        if size > self.max_bytes:
            return
        halves = self._halves
        while halves and (len(halves) >= self.max_halves or self._bytes + size > self.max_bytes):
            _, (old, _) = _pop_oldest(halves)
            self._bytes -= len(old.body)
        halves[put.commitlog_offset] = (msg, put)
        self._bytes += size

    def take(self, offset: int, log_min: int, log_max: int) -> MessageExt | None:
        """The half stored at CommitLog ``offset``, removed from the cache, as the read-back
        would decode it; None when not cached or when the CommitLog [log_min, log_max) no
        longer spans its record (truncated or cleaned: the disk decides)."""
        entry = self._halves.pop(offset, None)
        if entry is None:
            self.misses += 1
            return None
        msg, put = entry
        self._bytes -= len(msg.body)
        if offset < log_min or offset + put.size > log_max:
            self.misses += 1
            return None
        self.hits += 1
        return MessageExt(
            HALF_TOPIC, msg.body, msg.flag, msg.properties, HALF_QUEUE_ID, put.queue_offset,
            offset, msg.sys_flag, msg.born_timestamp, msg.born_host, put.store_timestamp,
            _store_host(put.msg_id), msg.reconsume_times, msg.prepared_transaction_offset,
            0, put.size,
        )  # fmt: skip

    def on_put(self, msg: MessageToStore, done: PutCallback) -> PutCallback:
        """The half ``msg``'s store callback: caches it once stored, then ``done``."""
        return CachingHalfPut(self, msg, done)

    def clear(self) -> None:
        self._halves.clear()
        self._bytes = 0


def _pop_oldest(
    halves: dict[int, tuple[MessageToStore, PutResult]],
) -> tuple[int, tuple[MessageToStore, PutResult]]:
    key = next(iter(halves))
    return key, halves.pop(key)


def _store_host(msg_id: str) -> tuple[bytes, int]:
    """(ip, port) of an offset message id (hex: ip, 4-byte port, 8-byte offset)."""
    raw = bytes.fromhex(msg_id)
    return raw[:-12], int.from_bytes(raw[-12:-8], "big")


class CachingHalfPut:
    """A half send's store callback: caches the stored half (`HalfCache.add`), then calls the
    send path's own callback. One slots object, like the send path's `PendingSend`."""

    __slots__ = ("cache", "done", "msg")

    def __init__(self, cache: HalfCache, msg: MessageToStore, done: PutCallback) -> None:
        self.cache = cache
        self.msg = msg
        self.done = done

    def __call__(self, results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        if results and status.stored:
            self.cache.add(self.msg, results[0])
        self.done(results, status, remark)
