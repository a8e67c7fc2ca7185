"""The read-only view of the MessageStore, and the gate that lets big reads run off the loop.

`StoreView` wraps the `MessageStore` with only the reads the processors, the admin calls and the
ReplicasManager use. Nobody but the store actor holds the store itself for writing.

Consistency rule:

- Readers see only what has been dispatched to the ConsumeQueues: a pull, an offset or a
  timestamp query never shows a message the queue does not index yet. Once replication
  exists, dispatch never passes confirmOffset, so a reader never sees a message a failover
  could truncate.
- CommitLog reads (records by offset, the CommitLog end) are clipped to the written end.
- The store has ONE writer, the store actor (store_actor.py). Every mutation goes through it:
  puts, topic deletion, and later truncation and role changes.

Big reads off the event loop. A pull that may read more than ``off_loop_read_bytes`` (the
``pullReadOffLoopBytes`` key, default 256 KiB, the default per-pull byte limit, so ordinary
pulls never leave the loop) runs `MessageStore.get_messages` in a worker thread. Smaller reads
stay inline: a thread hop costs ~90 us on the project's VM, about what reading 256 KiB from
the page cache costs inline, while a 32-message pull of 1 KiB records reads in ~15 us.

The `ReadGate` makes that safe against the store actor, which keeps changing the store on the
Trio thread while a worker thread reads:

- Appends run beside off-loop reads. The CommitLog and ConsumeQueue threading contracts allow
  a read beside the owner's appends: an append publishes the new end (``max_offset``) only
  after its bytes are written, reads are clipped to the published end, and the file tables a
  read looks up change under the file's lock. (The store's statistics counter of messages read
  may miss an increment when two reads race: statistics only.)
- Every other mutation (topic deletion; later truncation, retention, role changes) runs inside
  `ReadGate.exclusive()`: it first closes the gate to new off-loop reads, then waits until the
  running ones have finished, and reopens the gate when done. Off-loop reads that arrive
  meanwhile wait for it. Inline reads need no gate: they run on the Trio thread, which a
  mutation occupies until it is done.

A read in a worker thread cannot be abandoned: ``run_blocking`` must be a non-abandoning
runner (``trio.to_thread.run_sync`` by default), so the gate's reader count is exact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, TypeVar

import trio

from rocketrio.protocol.message import MessageExt
from rocketrio.storage.commitlog import RecordNotFound
from rocketrio.storage.consume_queue import Boundary, ConsumeQueue
from rocketrio.storage.dispatch_request import QueueKey
from rocketrio.storage.message_store import GetResult, MessageStore, StoreStats
from rocketrio.storage.scrub import ScrubBounds
from rocketrio.storage.store_read import CqMatch

T = TypeVar("T")

# runs a blocking function off the Trio thread (trio.to_thread.run_sync; tests may inject one)
RunBlocking = Callable[[Callable[[], Any]], Awaitable[Any]]

DEFAULT_OFF_LOOP_READ_BYTES = 256 * 1024


class ReadGate:
    """Off-loop readers on one side, the store actor's non-append mutations on the other."""

    def __init__(self, run_blocking: RunBlocking = trio.to_thread.run_sync) -> None:
        self.run_blocking = run_blocking
        self.readers = 0  # reads running in worker threads now
        self.off_loop_reads = 0  # every off-loop read so far
        self._waiting_since: dict[int, float] = {}  # read -> when it asked (runtime info)
        self._closed = False  # a mutation waits or runs: no new off-loop read starts
        self._opened = trio.Event()
        self._readers_done = trio.Event()
        self._mutation_lock = trio.Lock()

    async def read(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a worker thread, never while an exclusive mutation runs."""
        ticket = self.off_loop_reads
        self.off_loop_reads += 1
        self._waiting_since[ticket] = trio.current_time()
        try:
            while self._closed:
                await self._opened.wait()
            self.readers += 1
            try:
                result: T = await self.run_blocking(fn)
                return result
            finally:
                self.readers -= 1
                if self.readers == 0:
                    self._readers_done.set()
        finally:
            del self._waiting_since[ticket]

    def pending(self) -> int:
        """Off-loop reads waiting for the gate or running in a worker thread."""
        return len(self._waiting_since)

    def capacity(self) -> int:
        """How many off-loop reads may run at once (trio's worker-thread limiter)."""
        return int(trio.to_thread.current_default_thread_limiter().total_tokens)

    def oldest_wait_ms(self) -> int:
        """How long the oldest pending off-loop read has been waiting or running; 0: none."""
        if not self._waiting_since:
            return 0
        oldest = next(iter(self._waiting_since.values()))  # dicts keep insertion order
        return round((trio.current_time() - oldest) * 1000)

    @asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Hold off off-loop reads for a mutation: closes the gate, waits for running reads."""
        async with self._mutation_lock:
            self._closed = True
            self._opened = trio.Event()
            try:
                while self.readers:
                    self._readers_done = trio.Event()
                    await self._readers_done.wait()
                yield
            finally:
                self._closed = False
                self._opened.set()


class StoreView:
    """Read-only access to the MessageStore (see the module docstring for the rule)."""

    def __init__(
        self,
        store: MessageStore,
        gate: ReadGate,
        *,
        off_loop_read_bytes: int = DEFAULT_OFF_LOOP_READ_BYTES,
    ) -> None:
        self._store = store
        self.gate = gate
        self.off_loop_read_bytes = off_loop_read_bytes

    # -- pulls
    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: CqMatch = None,
    ) -> GetResult:
        """Read inline (on the Trio thread): for reads known to be small."""
        return self._store.get_messages(topic, queue_id, offset, max_count, max_bytes, tag_codes)

    async def read_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: CqMatch = None,
    ) -> GetResult:
        """`get_messages`, in a worker thread when it may read more than the threshold."""
        if max_bytes <= self.off_loop_read_bytes:
            return self._store.get_messages(
                topic, queue_id, offset, max_count, max_bytes, tag_codes
            )
        fn = partial(
            self._store.get_messages, topic, queue_id, offset, max_count, max_bytes, tag_codes
        )
        return await self.gate.read(fn)

    # -- queues
    def get_max_offset(self, topic: str, queue_id: int) -> int:
        return self._store.get_max_offset(topic, queue_id)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        return self._store.get_min_offset(topic, queue_id)

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(min, max) offsets of a queue, read together (as `get_min_offset`, `get_max_offset`)."""
        return self._store.queue_range(topic, queue_id)

    def queue_range_reader(self) -> Callable[[str, int], tuple[int, int]]:
        """`queue_range` as a callable kept by a caller asking once per message (an ACK's
        offset check): the store's reader's own, so neither this layer nor the store's is a
        call per message (`MessageStore.queue_range_reader`; the range is read live)."""
        return self._store.queue_range_reader()

    def live_queues(self) -> Mapping[QueueKey, ConsumeQueue]:
        """The store's consume queues as a live table kept by a caller that reads a queue's
        range per message without a call (an ACK's offset check: `MessageStore.live_queues`)."""
        return self._store.live_queues()

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int | None:
        return self._store.get_message_store_timestamp(topic, queue_id, offset)

    def get_earliest_msg_store_time(self, topic: str, queue_id: int) -> int | None:
        return self._store.get_earliest_msg_store_time(topic, queue_id)

    def search_offset_by_timestamp(
        self, topic: str, queue_id: int, timestamp_ms: int, boundary: Boundary = "LOWER"
    ) -> int:
        return self._store.search_offset_by_timestamp(topic, queue_id, timestamp_ms, boundary)

    def topic_queue_ids(self) -> dict[str, list[int]]:
        return self._store.topic_queue_ids()

    def queues_with_records(self) -> dict[str, int]:
        return self._store.queues_with_records()

    def undispatched_records(self, topic: str) -> list[bytes]:
        """Records of ``topic`` in the log but in no ConsumeQueue yet (above confirmOffset)."""
        return self._store.undispatched_records(topic)

    def queue_count(self) -> int:
        """How many ConsumeQueues the store holds (O(1))."""
        return self._store.queue_count()

    # -- messages by CommitLog offset or key
    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        return self._store.look_message_by_offset(commitlog_offset)

    def read_record(self, commitlog_offset: int) -> bytes | None:
        """The stored record at ``commitlog_offset`` as bytes, or None."""
        try:
            return self._store.commitlog.read_record(commitlog_offset)
        except RecordNotFound:
            return None

    def query_by_key(
        self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int
    ) -> list[MessageExt]:
        return self._store.query_by_key(topic, key, max_num, begin_ts, end_ts)

    def query_by_uniq_key(self, topic: str, uniq_key: str, max_num: int) -> list[MessageExt]:
        return self._store.query_by_uniq_key(topic, uniq_key, max_num)

    # -- the CommitLog as a whole
    def commitlog_min_offset(self) -> int:
        return self._store.get_commitlog_min_offset()

    def commitlog_max_offset(self) -> int:
        """The written end (puts still queued in the store actor are not counted)."""
        return self._store.get_commitlog_max_offset()

    def stats(self) -> StoreStats:
        return self._store.stats()

    def earliest_message_time(self) -> int:
        """Store time of the CommitLog's first record, -1 when it is empty."""
        return self._store.get_earliest_message_time()

    def dispatch_behind_bytes(self) -> int:
        """CommitLog bytes not yet in the ConsumeQueues (with replicas: above confirmOffset)."""
        return max(0, self._store.get_commitlog_max_offset() - self._store.dispatched_offset)

    def flush_behind_bytes(self) -> int:
        """CommitLog bytes written but not fsynced yet."""
        stats = self._store.stats()
        return max(0, stats.commitlog_max_offset - stats.commitlog_flushed_offset)

    # -- the background scrub (scrub_service.py): bounds and reads run in its worker thread
    def scrub_bounds(self) -> ScrubBounds:
        """What the scrub may verify: the CommitLog below the read check's watermark."""
        clog = self._store.commitlog
        return ScrubBounds(clog.min_offset, clog.verified_from, clog.mapped_file_size)

    def read_commitlog(self, offset: int, size: int) -> bytes:
        """Raw CommitLog bytes, clipped to the written end."""
        return self._store.commitlog.read(offset, size)

    def distrust(self, offset: int) -> None:
        """The record at ``offset`` is damaged: every read of it is checked (and refused). Only
        the read check's watermark changes, never the data."""
        self._store.commitlog.distrust(offset)

    # -- the schedule service's scan (schedule_service.py)
    def read_queue_entries(
        self, topic: str, queue_id: int, offset: int, max_count: int
    ) -> tuple[int, list[tuple[int, int, int]]]:
        """(first index, (commitlog offset, size, tagsCode) entries) of a ConsumeQueue; inline
        (at most ``max_count`` * 20 bytes)."""
        return self._store.read_queue_entries(topic, queue_id, offset, max_count)
