"""Dispatch: the ConsumeQueue entries and index records kept in step with the CommitLog.

`StoreDispatch` is the part of `MessageStore` that owns how far the derived data (ConsumeQueues
and the key index) has been dispatched (`dispatched_offset`), the ``dispatch.checkpoint`` file
(the CommitLog offset below which the derived data is known to be durable) and how far the last
flush made it so (`dispatch_flushed`). It dispatches records as the put path and confirmOffset
release them (one ConsumeQueue write per queue, index records written behind), reconciles the
derived data with the recovered CommitLog on open and re-dispatches records after a crash.

A classic SYNC_FLUSH master's store dispatches a put once the CommitLog's fsync passes it
(`release_flushed`, the same held data); its recovery fsyncs the recovered log first.

Replicated stores dispatch only up to confirmOffset (`DispatchGate`, dispatch_gate.py):
`advance_confirm` dispatches what the master's put path held back, or scans the CommitLog for
records without held data (replicated or recovered ones). Recovery re-dispatches only up to the
recovered confirmOffset (never the persisted value's stale-high twin: it is the larger of the
confirm and dispatch checkpoints, both of which only ever vouch for confirmed records) and
counts the records above it into the next queue offsets, so a new write can never reuse the
queue offset of a record that is in the log but not yet visible (upstream #7689 / #6609).

Synchronous file code, no trio (same contract as message_store.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rocketrio.protocol.message import BuiltBatch
from rocketrio.protocol.message_decode import MessageDecodeError, stored_properties
from rocketrio.storage.commitlog import (
    CommitLog,
    CommitLogRecovery,
    OffsetCheckpoint,
    RecordFields,
)
from rocketrio.storage.consume_queue import ENTRY
from rocketrio.storage.consume_queue_store import ConsumeQueueStore
from rocketrio.storage.cq_ext import FilterBitMaps, encode_unit
from rocketrio.storage.dispatch_gate import DispatchGate
from rocketrio.storage.dispatch_request import (
    SCHEDULE_TOPIC,
    DispatchRequest,
    DispatchRequests,
    QueueKey,
    queue_runs,
    replica_runs,
)
from rocketrio.storage.fs import FileSystem
from rocketrio.storage.index_file import MessageIndex
from rocketrio.storage.store_types import RecoveryReport

__all__ = ["PROGRESS_EVERY", "SCHEDULE_TOPIC", "Progress", "StoreDispatch"]

_REDISPATCH_BATCH = 1024
PROGRESS_EVERY = 64 * 1024 * 1024  # re-dispatched CommitLog bytes between progress reports
# (phase, bytes done, bytes in all): what recovery tells the broker's log while it runs
Progress = Callable[[str, int, int], None]


# a dispatch without filter bit-maps: no ext units (read only)
_NO_UNITS: dict[QueueKey, list[tuple[int, bytes]]] = {}


class StoreDispatch:
    """The dispatch of derived data (see module docstring)."""

    def __init__(
        self,
        checkpoint_path: str,
        commitlog: CommitLog,
        queues: ConsumeQueueStore,
        index: MessageIndex | None,
        gate: DispatchGate,
        requests: DispatchRequests,
        *,
        fs: FileSystem,
    ) -> None:
        self._commitlog = commitlog
        self._queues = queues
        self._index = index
        self._gate = gate
        self._requests = requests
        self._ckpt = OffsetCheckpoint(checkpoint_path, fs=fs)
        self._dispatched = 0
        self._flushed = 0  # what the last flush made durable in queues and index
        # told how re-dispatch advances (recovery and repair, on `open`'s thread)
        self.on_progress: Progress | None = None
        # the SQL92 filter bit-maps computed for dispatched records (with a ConsumeQueue ext)
        self.bitmaps: FilterBitMaps | None = None

    @property
    def dispatched_offset(self) -> int:
        return self._dispatched

    @property
    def dispatch_flushed(self) -> int:
        return self._flushed

    # ------------------------------------------------------------------ the checkpoint

    def load_checkpoint(self) -> int | None:
        return self._ckpt.load()

    def load_flushed(self) -> None:
        """After `recover`: what the dispatch checkpoint vouches for (never below the log)."""
        self._flushed = max(
            self._commitlog.min_offset, min(self._ckpt.load() or 0, self._dispatched)
        )

    def store_checkpoint(self, dispatched: int) -> None:
        """A flush made the derived data durable below ``dispatched`` (written behind)."""
        self._ckpt.store(dispatched)
        self._flushed = dispatched

    def lower_checkpoint(self, offset: int) -> None:
        """The checkpoint is at or below ``offset``, durably, before the caller cuts data."""
        ckpt = self._ckpt.load()
        if ckpt is None or ckpt > offset:
            self._ckpt.store(offset, sync=True)

    def clear_checkpoint(self) -> None:
        """The checkpoint says 0, durably (before a reset deletes everything)."""
        self._ckpt.store(0, sync=True)

    def close(self) -> None:
        self._ckpt.close()

    # ------------------------------------------------------------------ cuts

    def lower_to(self, offset: int) -> None:
        """Derived data was cut at ``offset``: dispatch stands there at most."""
        self._dispatched = min(self._dispatched, offset)

    def truncated(self, offset: int) -> None:
        """The log and the derived data were cut at ``offset``."""
        self._dispatched = min(self._dispatched, offset)
        self._flushed = min(self._flushed, offset)

    def restart_at(self, offset: int) -> None:
        """The store was reset: an empty log continues at ``offset``."""
        self._dispatched = offset
        self._flushed = offset

    def cut_derived(self, offset: int) -> None:
        """Drop the ConsumeQueue entries and index records of records at or above ``offset``."""
        self._queues.truncate_by_phy(offset)
        if self._index is not None:
            self._index.truncate_from(offset)

    def redo_from(self, start: int) -> None:
        """Cut the derived data at ``start`` and dispatch the CommitLog's records from there,
        up to confirmOffset (everything, without replication), as recovery does."""
        clog = self._commitlog
        gate = self._gate
        self.lower_checkpoint(start)  # as `recover`: never vouching for what is cut
        self.cut_derived(start)
        gate.drop_held()
        self._dispatched = start
        limit = gate.limit(clog.max_offset, clog.flushed_offset)
        _, end = self.redispatch(start, start, limit)
        self._dispatched = clog.max_offset if limit >= clog.max_offset else end
        if not gate.gated and limit >= clog.max_offset:
            # every record is dispatched: the queues say what comes next (records still held
            # for an fsync keep the queue offsets the put path gave them)
            self._queues.reset_next_offsets()

    # ------------------------------------------------------------------ recovery

    def recover(
        self, clog_report: CommitLogRecovery, *, unclean_shutdown: bool = False
    ) -> RecoveryReport:
        """Load the ConsumeQueues, cut them and the index where they may run ahead of the
        recovered CommitLog or the dispatch checkpoint, and re-dispatch from there."""
        gate = self._gate
        if gate.after_flush:  # what a kill -9 left in the page cache is fsynced before it is read
            self._commitlog.flush_recovered()
        clog_min, clog_max = self._commitlog.min_offset, self._commitlog.max_offset
        queues = self._queues
        torn = queues.load()
        ckpt = self._ckpt.load()
        cq_end = queues.end_phy()
        redo = max(clog_min, min(clog_max, cq_end, clog_min if ckpt is None else ckpt))
        limit = clog_max
        stored_confirm = gate.load() if gate.gated else None
        if gate.gated:
            limit = max(clog_min, min(clog_max, max(stored_confirm or 0, ckpt or 0)))
            redo = min(redo, limit)
        gate.confirm = limit
        if gate.gated and (stored_confirm is None or stored_confirm > limit):
            # the same rule for confirmOffset: a persisted value above what recovery trusts (a
            # log cut shorter, or a file unreadable now whose old value is still on the disk)
            # must not come back and vouch for records written after this restart
            gate.persist(sync=True)
        index_rebuilt = False
        index_dropped = 0
        start = redo
        if self._index is not None:
            index_rebuilt = not self._index.exists() and clog_max > clog_min
            start = clog_min if index_rebuilt else redo
        # what is cut below is no longer vouched for: the checkpoint says so, durably, first.
        # Left as it was (above the cut, or unreadable now and its old value still on disk), a
        # crash before the next flush would let the next recovery trust it and skip
        # re-dispatching a queue whose new entries were lost while another queue's were not
        self.lower_checkpoint(start)
        dropped = queues.truncate_and_correct(redo, clog_min)
        if self._index is not None:
            index_dropped = self._index.open(start)
        queues.reset_next_offsets()
        redispatched, dispatched_end = self.redispatch(start, redo, limit)
        # no flush here: re-dispatched entries lie above the unchanged dispatch checkpoint,
        # so a crash before the next flush just re-dispatches them again
        self._dispatched = clog_max if limit >= clog_max else dispatched_end
        queues.clear_arrivals()
        return RecoveryReport(
            commitlog=clog_report,
            redispatch_from=start,
            redispatched=redispatched,
            cq_entries_dropped=dropped,
            cq_torn_bytes=torn,
            index_records_dropped=index_dropped,
            index_rebuilt=index_rebuilt,
            queues=queues.count(),
            confirm_offset=limit,
            unclean_shutdown=unclean_shutdown,
        )

    def redispatch(self, start: int, cq_from: int, limit: int) -> tuple[int, int]:
        """Dispatch the records from ``start`` that end at or below ``limit`` (ConsumeQueue
        entries only from ``cq_from``); count the ones above ``limit`` into the next queue
        offsets without dispatching them. Returns (records dispatched, end of the last one)."""
        offsets: list[int] = []
        sizes: list[int] = []
        batch: list[DispatchRequest] = []
        count = 0
        clog = self._commitlog
        end = max(start, clog.min_offset)
        first, total = end, clog.max_offset - end
        report_at = first + PROGRESS_EVERY
        of_record = self._requests.of_record
        raise_next = self._queues.raise_next_offset
        for offset, record in clog.iter_records(start):
            if offset >= report_at and self.on_progress is not None:
                self.on_progress("redispatch", offset - first, total)
                report_at = offset + PROGRESS_EVERY
            visible = offset + len(record) <= limit
            req = of_record(offset, record, cq_from if visible else limit + 1)
            if req[4]:
                raise_next(req[0], req[1] + 1)
            if not visible:
                continue
            offsets.append(offset)
            sizes.append(len(record))
            batch.append(req)
            end = offset + len(record)
            count += 1
            if len(batch) >= _REDISPATCH_BATCH:
                self.dispatch(offsets, sizes, batch)
                offsets, sizes, batch = [], [], []
        self.dispatch(offsets, sizes, batch)
        return count, end

    def compensate_queue_offsets(self) -> int:
        """Next queue offsets = past every record in the log, dispatched or not (a broker
        about to write as master, #7689). Returns how many undispatched records were counted."""
        queues = self._queues
        queues.reset_next_offsets()
        records, _ = self._commitlog.scan_records(self._dispatched, self._commitlog.max_offset)
        for offset, record in records:
            key, qo, _code, _h, to_cq = self._requests.of_record(offset, record, 0)
            if to_cq:
                queues.raise_next_offset(key, qo + 1)
        return len(records)

    def undispatched(self, topic: str) -> list[bytes]:
        """The whole records of ``topic`` above the dispatched offset (above confirmOffset:
        counted into the queue offsets, in no ConsumeQueue yet), in log order."""
        records, _ = self._commitlog.scan_records(self._dispatched, self._commitlog.max_offset)
        of_record = self._requests.of_record
        return [r for o, r in records if of_record(o, r, 0)[0][0] == topic]

    # ------------------------------------------------------------------ confirmOffset

    def advance_confirm(self, offset: int) -> None:
        """confirmOffset moved (master: the SyncStateSet holds it; slave: min(master's value,
        own end)): dispatch everything up to it. Never lowers it (truncation does that)."""
        gate = self._gate
        limit = min(offset, self._commitlog.max_offset)
        if limit > gate.confirm:
            gate.confirm = limit
        if self._dispatched < gate.confirm:
            self._dispatch_to(gate.confirm)

    def release_flushed(self, flushed: int) -> None:
        """The CommitLog is fsynced up to ``flushed``: dispatch the puts held for it
        (``DispatchGate.after_flush``)."""
        limit = min(flushed, self._commitlog.max_offset)
        if self._dispatched < limit:
            self._dispatch_to(limit)

    def hold_replicated(self, start: int, end: int, records: list[RecordFields]) -> None:
        """A slave appended [start, end): keep what the CommitLog's check read of its records
        until confirmOffset passes them."""
        self._gate.hold_replicated(start, end, records, self._dispatched)

    def _dispatch_replicated(self, limit: int) -> bool:
        """Dispatch held replicated records that end at or below ``limit``; False when there
        are none to continue from where dispatch stands (it must scan)."""
        gate = self._gate
        if not gate.replica:
            return False
        if gate.replica[0][0][0] != self._dispatched:
            gate.drop_replica()  # cannot happen unless the log moved under the held data
            return False
        items = gate.release_replica(limit)
        if not items:
            return False
        if self._queues.ext_bits:  # filter bit-maps: `dispatch` reads the records back
            of_fields = self._requests.of_fields
            self.dispatch(
                [r[0] for r in items],
                [r[1] for r in items],
                [of_fields(o, t, q, qo, f, ts, p, 0) for o, _, t, q, qo, f, ts, p in items],
            )
        else:
            runs, hashes, offsets = replica_runs(items, self._requests)
            queues = self._queues
            for key, first, entries in runs:
                queues.append(key, entries, first)
            if hashes and self._index is not None:
                self._index.add_pairs(hashes, offsets)
            self._dispatched = items[-1][0] + items[-1][1]
        if not gate.replica and gate.replica_end <= limit:
            self._dispatched = gate.replica_end  # past a BLANK record closing a segment
        return True

    def _dispatch_to(self, limit: int) -> None:
        held = self._gate.held
        while self._dispatched < limit:
            if self._dispatch_replicated(limit):
                continue
            if held and held[0].start < self._dispatched:
                held.clear()  # cannot happen unless the log moved under the held data
            if held and held[0].start == self._dispatched:
                item = held[0]
                if item.end > limit:
                    return
                held.popleft()
                item.dispatch()
                self._dispatched = item.end
                continue
            stop = min(limit, held[0].start) if held else limit
            before = self._dispatched
            records, reached = self._commitlog.scan_records(before, stop)
            if records:
                offsets = [o for o, _ in records]
                sizes = [len(r) for _, r in records]
                of_record = self._requests.of_record
                self.dispatch(offsets, sizes, [of_record(o, r, 0) for o, r in records])
            self._dispatched = max(before, reached)
            if reached <= before:
                return

    # ------------------------------------------------------------------ dispatch

    def dispatch(
        self,
        positions: Sequence[int],
        sizes: Sequence[int],
        requests: Sequence[DispatchRequest],
    ) -> None:
        """ConsumeQueue entries (one write per queue) and index records for stored records."""
        if not requests:
            return
        runs, hashes, offsets = queue_runs(positions, sizes, requests)
        units = self._units(positions, sizes, requests) if self._queues.ext_bits else _NO_UNITS
        queues = self._queues
        for key, first, entries in runs:
            queues.append(key, entries, first, units.get(key))
        if hashes and self._index is not None:
            self._index.add_pairs(hashes, offsets)
        self._dispatched = positions[-1] + sizes[-1]

    def _units(
        self,
        positions: Sequence[int],
        sizes: Sequence[int],
        requests: Sequence[DispatchRequest],
    ) -> dict[QueueKey, list[tuple[int, bytes]]]:
        """The ext units (filter bit-maps) of the records that go to a ConsumeQueue of a topic
        with SQL92 filters, per queue, each with its queue offset."""
        bitmaps = self.bitmaps
        units: dict[QueueKey, list[tuple[int, bytes]]] = {}
        if bitmaps is None:
            return units
        for offset, size, (key, qo, _, _, to_cq) in zip(positions, sizes, requests, strict=True):
            if to_cq and bitmaps.wants(key[0]):
                unit = self._unit(bitmaps, key[0], offset, size)
                if unit is not None:
                    units.setdefault(key, []).append((qo, unit))
        return units

    def dispatch_batch(
        self,
        key: QueueKey,
        first_queue_offset: int,
        positions: list[int],
        sizes: list[int],
        built: BuiltBatch,
    ) -> None:
        """Dispatch a client batch body stored at ``positions`` (`MessageStore.put_batch_body`):
        one ConsumeQueue write, its keys indexed."""
        entries = b"".join(map(ENTRY.pack, positions, sizes, built.tags_codes()))
        bitmaps = self.bitmaps if self._queues.ext_bits else None
        units: list[tuple[int, bytes]] = []
        if bitmaps is not None and bitmaps.wants(key[0]):
            for i, (offset, size) in enumerate(zip(positions, sizes, strict=True)):
                unit = self._unit(bitmaps, key[0], offset, size)
                if unit is not None:
                    units.append((first_queue_offset + i, unit))
        self._queues.append(key, entries, first_queue_offset, units)
        if self._index is not None:
            _index_batch(self._index, key[0], positions, built)
        self._dispatched = positions[-1] + sizes[-1]

    def _unit(self, bitmaps: FilterBitMaps, topic: str, offset: int, size: int) -> bytes | None:
        """The ext unit of the record at ``offset``: its properties judged by every filter of
        its topic (the record is read back: only topics with SQL92 filters pay for it)."""
        try:
            props = stored_properties(self._commitlog.read(offset, size))
        except MessageDecodeError:
            return None  # not ours to judge here: the record is read and checked on a pull
        got = bitmaps.bitmap(topic, props)
        return None if got is None else encode_unit(offset, got[0], got[1])


def _index_batch(index: MessageIndex, topic: str, positions: list[int], built: BuiltBatch) -> None:
    uniqs = built.uniq_keys
    if built.keys is None and all(uniqs):  # the usual batch: one UNIQ_KEY each, no KEYS
        index.add_keys(topic, uniqs, positions)
        return
    keys: list[bytes] = []
    offsets: list[int] = []
    all_keys = built.keys or [None] * len(uniqs)
    for pos, msg_keys, uniq in zip(positions, all_keys, uniqs, strict=True):
        for k in [*(msg_keys.split(b" ") if msg_keys else ()), uniq]:
            if k:
                keys.append(k)
                offsets.append(pos)
    index.add_keys(topic, keys, offsets)
