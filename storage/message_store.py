"""MessageStore: the facade the broker actor calls: put, get, flush, recover (M1, M2).

Wires the CommitLog (truth), the ConsumeQueues and the key index (both derived) under
``<store>/commitlog``, ``<store>/consumequeue`` and ``<store>/index``. Synchronous file code,
no trio: the broker actor calls `put_messages` and `get_messages` on its own thread and runs
`flush_commitlog` / `flush` (fsync) in a worker thread (same contract as `CommitLog.flush`:
appends may continue, truncation may not).

The store is composed of parts, each owning its data; this class holds them, runs the steps
that span several of them (open, close, flush, truncation, reset, retention, epochs) in their
order, and hands every other call to the part that answers it:

- `CommitLog` (commitlog/): the records, their segments, recovery and write fence;
- `ConsumeQueueStore` (consume_queue_store.py): the ConsumeQueues and next queue offsets;
- `MessageIndex` (index_file.py): the key index, when messageIndexEnable;
- `DispatchGate` (dispatch_gate.py): confirmOffset and the dispatch data waiting for it;
- `StoreDispatch` (store_dispatch.py): how far the derived data is dispatched and durable,
  recovery's re-dispatch and confirmOffset's dispatch;
- `StoreRepair` (store_repair.py): what a failed write or fsync left, and the `repair`;
- `PutPath` (store_put.py): `put_messages`, `put_batch_body`, `append_replicated`;
- `StoreReader` (store_read.py): `get_messages` and the lookups.

Durability: SYNC_FLUSH acks need only `flush_commitlog`; `flush` also syncs ConsumeQueues and
the index and then writes ``dispatch.checkpoint``, the CommitLog offset below which they are
known to be durable. `open` recovers the CommitLog, cuts ConsumeQueue and index records at or
above ``min(dispatch checkpoint, highest CommitLog end any ConsumeQueue references)`` and
re-dispatches the records from there, so a crash never leaves an entry pointing past the log and
deleting the ConsumeQueue files rebuilds them. Whatever cuts derived data (recovery, repair,
truncation) first lowers ``dispatch.checkpoint`` to the cut, durably: a checkpoint left above it
(or unreadable after a crash, its old value still on the disk) would let a later recovery skip
re-dispatching entries that were cut and never rewritten. A missing index (or one in the old
``index.log`` format, or a rebuild a crash interrupted) is rebuilt from the oldest record.

Clean or not. Like upstream, ``<store>/abort`` exists while the store is open: `open` creates it
(durably, before any write) and `close` removes it after the last flush. Finding it at `open`
means the last run did not shut down cleanly (kill -9, power cut, a crash); the report says so.
Either way the CommitLog checks the records from its flushed checkpoint on (`CommitLog.open`),
so restart time does not grow with the store; the records below are checked when read.

Types (`StoreConfig`, `MessageToStore`, the results, the errors): store_types.py, re-exported.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

from rocketrio.protocol.message import MessageExt
from rocketrio.storage.commitlog import CommitLog, RecordCorrupt, RecordFields, WritesFenced
from rocketrio.storage.consume_queue import Boundary, ConsumeQueue
from rocketrio.storage.consume_queue_store import ConsumeQueueStore
from rocketrio.storage.cq_ext import CONSUME_QUEUE_EXT_DIR, ConsumeQueueExt, FilterBitMaps
from rocketrio.storage.dispatch_gate import CONFIRM_CHECKPOINT, DispatchGate
from rocketrio.storage.dispatch_request import SCHEDULE_TOPIC, DispatchRequests, QueueKey
from rocketrio.storage.durable import makedirs_synced, write_synced
from rocketrio.storage.epoch_file import EpochFile, EpochRecord
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.index_file import MessageIndex
from rocketrio.storage.store_dispatch import Progress, StoreDispatch
from rocketrio.storage.store_put import PutPath
from rocketrio.storage.store_read import MAX_FILTER_SCAN_ENTRIES, CqMatch, StoreReader
from rocketrio.storage.store_repair import SPACE_PROBE_BYTES, SPACE_PROBE_FILE, StoreRepair
from rocketrio.storage.store_repair import probe_space as _probe_space
from rocketrio.storage.store_types import (
    BatchPutResult,
    GetMessageStatus,
    GetResult,
    InvalidMessage,
    MessageTooLarge,
    MessageToStore,
    PutResult,
    RecoveryReport,
    StoreConfig,
    StoreStats,
    parse_delay_levels,
)

# the types moved to store_types.py; callers keep importing them here
__all__ = [
    "ABORT_FILE",
    "COMMITLOG_DIR",
    "CONSUME_QUEUE_DIR",
    "DISPATCH_CHECKPOINT",
    "MAX_FILTER_SCAN_ENTRIES",
    "SCHEDULE_TOPIC",
    "BatchPutResult",
    "GetMessageStatus",
    "GetResult",
    "InvalidMessage",
    "MessageStore",
    "MessageToStore",
    "MessageTooLarge",
    "PutResult",
    "RecordCorrupt",
    "RecoveryReport",
    "StoreConfig",
    "StoreStats",
    "WritesFenced",
    "parse_delay_levels",
]

ABORT_FILE = "abort"  # upstream StorePathConfigHelper.getAbortFile
COMMITLOG_DIR = "commitlog"
CONSUME_QUEUE_DIR = "consumequeue"
DISPATCH_CHECKPOINT = "dispatch.checkpoint"


class MessageStore:
    """Facade over CommitLog, ConsumeQueues and the index (see module docstring)."""

    def __init__(
        self,
        store_path: str,
        config: StoreConfig | None = None,
        *,
        store_host: tuple[bytes, int] = (b"\x7f\x00\x00\x01", 10911),
        fs: FileSystem = OS_FS,
        replicated: bool = False,
        dispatch_after_flush: bool = False,
        epoch_file_path: str | None = None,
    ) -> None:
        """``replicated``: dispatch only up to confirmOffset (a broker with replicas), else with
        ``dispatch_after_flush`` once the fsync passes a put (`DispatchGate.after_flush`);
        ``epoch_file_path``: the store keeps the epoch file in step with the CommitLog."""
        self.store_path = store_path
        self.config = cfg = config or StoreConfig()
        self.store_host = store_host
        self.fs = fs
        self._commitlog = clog = CommitLog(
            os.path.join(store_path, COMMITLOG_DIR), cfg.mappedFileSizeCommitLog, fs=fs
        )
        ext_root = os.path.join(store_path, CONSUME_QUEUE_EXT_DIR)
        self._queues = queues = ConsumeQueueStore(
            os.path.join(store_path, CONSUME_QUEUE_DIR),
            cfg.mappedFileSizeConsumeQueue,
            fs=fs,
            ext_root=ext_root if cfg.enableConsumeQueueExt else None,
            ext_bits=cfg.bitMapLengthConsumeQueueExt,
            ext_off_root=ext_root,
        )
        self._index = index = (
            MessageIndex(
                store_path,
                fs=fs,
                max_hash_slot_num=cfg.maxHashSlotNum,
                max_index_num=cfg.maxIndexNum,
            )
            if cfg.messageIndexEnable
            else None
        )
        self._gate = gate = DispatchGate(os.path.join(store_path, CONFIRM_CHECKPOINT), fs=fs)
        gate.gated, gate.after_flush = replicated, dispatch_after_flush and not replicated
        requests = DispatchRequests(
            parse_delay_levels(cfg.messageDelayLevel), indexed=index is not None
        )
        self._dispatch = dispatch = StoreDispatch(
            os.path.join(store_path, DISPATCH_CHECKPOINT),
            clog,
            queues,
            index,
            gate,
            requests,
            fs=fs,
        )
        self._repair = repair = StoreRepair(clog, queues, index, gate, dispatch)
        self._put = PutPath(cfg, store_host, clog, queues, gate, dispatch, repair, requests)
        self._reader = StoreReader(cfg, clog, queues, index)
        self._epoch_file_path = epoch_file_path
        self.epochs: EpochFile | None = None

    def set_filter_bitmaps(self, bitmaps: FilterBitMaps | None) -> None:
        """Compute SQL92 filter bit-maps at dispatch (enableCalcFilterBitMap); they are kept
        only with a ConsumeQueue ext (StoreConfig.enableConsumeQueueExt)."""
        self._dispatch.bitmaps = bitmaps

    @property
    def filter_bitmap_floor_ms(self) -> int:
        """The latest time a filter bit-map on disk was computed, as `open` found it (-1:
        none): filters registered later must be born after it (dispatch/filter_data.py)."""
        return self._queues.ext_floor_ms

    def reconfigure(self, config: StoreConfig) -> None:
        """A live change (maxMessageSize, UPDATE_BROKER_CONFIG): every part reads the new
        config from its next call."""
        self.config = self._put.config = self._reader.config = config

    @property
    def commitlog(self) -> CommitLog:
        return self._commitlog

    @property
    def on_progress(self) -> Progress | None:
        """Told how recovery's re-dispatch advances (called from `open`'s thread)."""
        return self._dispatch.on_progress

    @on_progress.setter
    def on_progress(self, progress: Progress | None) -> None:
        self._dispatch.on_progress = progress

    # ------------------------------------------------------------------ open / close

    def open(self) -> RecoveryReport:
        """Recover the CommitLog, reconcile ConsumeQueues and index, re-dispatch the rest.

        Raises CorruptionError (with every file closed again) when the data cannot be
        recovered without losing acknowledged messages.
        """
        makedirs_synced(self.store_path, fs=self.fs)
        self._repair.lift()
        abort = os.path.join(self.store_path, ABORT_FILE)
        unclean = self.fs.exists(abort)
        if not unclean:
            # durable before anything is written: a crash from here on is seen as unclean
            write_synced(abort, b"", fs=self.fs)
            self.fs.fsync_dir(self.store_path)
        # clean or not, the scan starts at the flushed checkpoint: restart time does not grow
        # with the store; what lies below it is checked when read (`CommitLog.check_read`)
        clog_report = self._commitlog.open(check_crc=self.config.checkCRCOnRecover)
        try:
            report = self._dispatch.recover(clog_report, unclean_shutdown=unclean)
            self._dispatch.load_flushed()
            if self._epoch_file_path is not None:
                self.epochs = EpochFile(self._epoch_file_path, fs=self.fs)
                # entries starting beyond the recovered log (a crash between cutting the log
                # and the epoch file, or a lost tail) label nothing: drop them
                self.epochs.truncate_suffix(self._commitlog.max_offset + 1)
            return report
        except BaseException:
            self.close_files()
            raise

    def close(self) -> None:
        """Flush everything, close the files, then remove the abort marker: a clean shutdown.
        With a write fault pending (store_repair.py) the marker stays: the next open checks
        every record, as after a crash."""
        self.flush()
        fault = self.write_fault
        self.close_files()
        if fault is not None:
            return
        abort = os.path.join(self.store_path, ABORT_FILE)
        if self.fs.exists(abort):
            self.fs.unlink(abort)
            self.fs.fsync_dir(self.store_path)

    def close_files(self) -> None:
        """Close every file without a flush and keep the abort marker: what a crash leaves
        (the next `open` recovers as after one)."""
        self._queues.close()
        if self._index is not None:
            self._index.close()
        self._commitlog.close()
        self._dispatch.close()
        self._gate.close()

    # ------------------------------------------------------------------ put

    def put_messages(
        self, msgs: Sequence[MessageToStore], store_timestamp_ms: int
    ) -> list[PutResult]:
        """`PutPath.put_messages` (store_put.py): one CommitLog write, then dispatch."""
        return self._put.put_messages(msgs, store_timestamp_ms)

    def put_batch_body(
        self,
        topic: str,
        queue_id: int,
        body: bytes,
        store_timestamp_ms: int,
        *,
        properties: Mapping[str, str] | str = "",
        sys_flag: int = 0,
        born_timestamp: int = 0,
        born_host: tuple[bytes, int] = (b"\x7f\x00\x00\x01", 0),
        reconsume_times: int = 0,
        new_uniq_key: Callable[[], str] | None = None,
    ) -> BatchPutResult:
        """`PutPath.put_batch_body` (store_put.py): a client batch body stored as is."""
        return self._put.put_batch_body(
            topic, queue_id, body, store_timestamp_ms, properties=properties,
            sys_flag=sys_flag, born_timestamp=born_timestamp, born_host=born_host,
            reconsume_times=reconsume_times, new_uniq_key=new_uniq_key,
        )  # fmt: skip

    def append_replicated(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """`PutPath.append_replicated` (store_put.py): a slave writes its master's records."""
        return self._put.append_replicated(offset, data)

    # ------------------------------------------------------------------ flush

    def flush_commitlog(self) -> int:
        """fsync the CommitLog only (what a SYNC_FLUSH ack needs); returns flushed offset."""
        return self._commitlog.flush()

    def flush(self) -> int:
        """fsync CommitLog, then ConsumeQueues and index; advance the dispatch checkpoint
        (never past derived data a failed write left unreliable, store_repair.py)."""
        dispatched = self._dispatch.dispatched_offset
        derived_from = self._repair.derived_from
        if derived_from is not None:
            dispatched = min(dispatched, derived_from)
        flushed = self._commitlog.flush()
        self._repair.flush_derived()
        self._dispatch.store_checkpoint(dispatched)
        if self._gate.gated:
            self._gate.persist()
        return flushed

    @property
    def flushed_offset(self) -> int:
        return self._commitlog.flushed_offset

    # ------------------------------------------------------------------ get and lookups

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        cq_match: CqMatch = None,
    ) -> GetResult:
        """`StoreReader.get_messages` (store_read.py): a pull, every record checked."""
        return self._reader.get_messages(topic, queue_id, offset, max_count, max_bytes, cq_match)

    def read_queue_entries(
        self, topic: str, queue_id: int, offset: int, max_count: int
    ) -> tuple[int, list[tuple[int, int, int]]]:
        return self._reader.read_queue_entries(topic, queue_id, offset, max_count)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        return self._reader.get_max_offset(topic, queue_id)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        return self._reader.get_min_offset(topic, queue_id)

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        return self._reader.queue_range(topic, queue_id)

    def queue_range_reader(self) -> Callable[[str, int], tuple[int, int]]:
        """`queue_range` without this layer's and the reader's calls: the consume queues' own,
        bound (they are this store's for its lifetime, and read the queue's range live at each
        call). For a caller that asks once per message (an ACK's offset check) and keeps it."""
        return self._queues.queue_range

    def live_queues(self) -> Mapping[QueueKey, ConsumeQueue]:
        """The consume queues' live table (`ConsumeQueueStore.live_queues`): this store's for
        its lifetime, for a caller that keeps it and reads a queue's range per message."""
        return self._queues.live_queues()

    def get_commitlog_max_offset(self) -> int:
        return self._commitlog.max_offset

    def get_commitlog_min_offset(self) -> int:
        return self._commitlog.min_offset

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int | None:
        return self._reader.get_message_store_timestamp(topic, queue_id, offset)

    def get_earliest_message_time(self) -> int:
        return self._reader.get_earliest_message_time()

    def get_earliest_msg_store_time(self, topic: str, queue_id: int) -> int | None:
        return self._reader.get_earliest_msg_store_time(topic, queue_id)

    def search_offset_by_timestamp(
        self, topic: str, queue_id: int, timestamp_ms: int, boundary: Boundary = "LOWER"
    ) -> int:
        return self._reader.search_offset_by_timestamp(topic, queue_id, timestamp_ms, boundary)

    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        return self._reader.look_message_by_offset(commitlog_offset)

    def query_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = 32,
        begin_ts: int = 0,
        end_ts: int = 2**63 - 1,
    ) -> list[MessageExt]:
        return self._reader.query_by_key(topic, key, max_num, begin_ts, end_ts)

    def query_by_uniq_key(self, topic: str, uniq_key: str, max_num: int = 32) -> list[MessageExt]:
        return self._reader.query_by_uniq_key(topic, uniq_key, max_num)

    # ------------------------------------------------------------------ queues

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The ConsumeQueue of (topic, queue id), None when it has no entries yet."""
        return self._queues.get((topic, queue_id))

    def consume_queue_ext(self, topic: str, queue_id: int) -> ConsumeQueueExt | None:
        """The ConsumeQueue ext of (topic, queue id), None without one (cq_ext.py)."""
        return self._queues.ext((topic, queue_id))

    def topic_queue_ids(self) -> dict[str, list[int]]:
        return self._queues.topic_queue_ids()

    def queue_topics(self) -> set[str]:
        """The topics that have at least one ConsumeQueue."""
        return {topic for topic, _queue_id in self._queues.keys()}

    def queue_count(self) -> int:
        """How many ConsumeQueues exist (a slave's metadata sync watches it for new ones)."""
        return self._queues.count()

    def queues_with_records(self) -> dict[str, int]:
        """Per topic, 1 + the highest queue id of any record in the log: dispatched ones and,
        on a master, those above confirmOffset that `begin_epoch` counted (a topic config must
        cover them, or their messages could not be read)."""
        return self._queues.queues_with_records()

    def undispatched_records(self, topic: str) -> list[bytes]:
        """The records of ``topic`` in the log above the dispatched offset (a new master's
        tail above confirmOffset), whole, in log order."""
        return self._dispatch.undispatched(topic)

    def take_arrivals(self) -> dict[tuple[str, int], int]:
        """Queues that got new ConsumeQueue entries since the last call, with their new max
        offset (what long-polling pulls wait for)."""
        return self._queues.take_arrivals()

    def delete_topic(self, topic: str) -> int:
        """Drop the topic's ConsumeQueues and queue offsets; returns how many queues.

        Flushes first so the dispatch checkpoint is past every record of the topic: recovery
        must not resurrect the queues.
        """
        if not self._queues.has_topic(topic):
            return 0
        self.flush()
        return self._queues.delete_topic(topic)

    # ------------------------------------------------------------------ confirmOffset

    @property
    def confirm_offset(self) -> int:
        return self._gate.confirm

    @property
    def dispatched_offset(self) -> int:
        return self._dispatch.dispatched_offset

    def advance_confirm(self, offset: int) -> None:
        """confirmOffset moved: dispatch up to it (`StoreDispatch.advance_confirm`), unless a
        write fault left the derived data unreliable (`StoreRepair.advance_confirm`)."""
        self._repair.advance_confirm(offset)

    @property
    def dispatch_after_flush(self) -> bool:
        return self._gate.after_flush

    def release_flushed(self) -> None:  # after an fsync: `StoreRepair.release_flushed`
        self._repair.release_flushed(self._commitlog.flushed_offset)

    def hold_replicated(self, start: int, end: int, records: list[RecordFields]) -> None:
        self._dispatch.hold_replicated(start, end, records)

    def compensate_queue_offsets(self) -> int:
        return self._dispatch.compensate_queue_offsets()

    # ------------------------------------------------------------------ write faults

    @property
    def write_fault(self) -> WritesFenced | None:
        """Why the store takes no append now (None: it does; store_repair.py)."""
        return self._repair.write_fault

    def repair(self, *, cut_log: bool) -> WritesFenced | None:
        """Resolve what failed writes left (`StoreRepair.repair`); returns the fault that
        remains, None when the store takes appends again."""
        return self._repair.repair(cut_log=cut_log, truncate_to=self.truncate_to)

    def probe_space(self, nbytes: int = SPACE_PROBE_BYTES) -> None:
        """Write and fsync ``nbytes`` in a scratch file of the store directory, then delete
        it: raises OSError (ENOSPC) while the disk has no room for them."""
        _probe_space(self.fs, os.path.join(self.store_path, SPACE_PROBE_FILE), nbytes)

    # ------------------------------------------------------------------ truncation / retention

    def truncate_to(self, commitlog_offset: int) -> None:
        """Drop every record at or after ``commitlog_offset`` and what was derived from them,
        durably and in an order a crash cannot undo (upstream #10666): confirmOffset and the
        dispatch checkpoint are lowered and fsynced first, then the CommitLog is cut
        (ftruncate + fdatasync + directory fsync), then the ConsumeQueues and the index, then
        the epoch file (atomically). A crash in between leaves records the next handshake cuts
        again, never a checkpoint or epoch vouching for data that is gone (recovery also drops
        epochs starting beyond the log)."""
        gate = self._gate
        if gate.gated:
            gate.lower(commitlog_offset)
        else:  # no confirm.checkpoint without replication (a full disk may be cutting here)
            gate.confirm = min(gate.confirm, commitlog_offset)
            gate.drop_held()
        self._dispatch.lower_checkpoint(commitlog_offset)
        self._commitlog.truncate_to(commitlog_offset)
        self._queues.truncate_by_phy(commitlog_offset)
        if self._index is not None:
            self._index.truncate_from(commitlog_offset)
        if self.epochs is not None:
            self.epochs.truncate_suffix(commitlog_offset)
        self._queues.reset_next_offsets()
        self._dispatch.truncated(commitlog_offset)
        self._repair.lift_at_or_below(commitlog_offset)  # what was unreliable is gone

    def reset_to(self, commitlog_offset: int) -> None:
        """Drop EVERY record, queue, index record and epoch, durably; the empty log continues
        at ``commitlog_offset`` (a segment boundary): a slave re-syncing from its master's
        oldest data."""
        self._gate.lower(0)
        self._dispatch.clear_checkpoint()
        self._queues.destroy_all()
        self.fs.fsync_dir(self.store_path)
        if self._index is not None:
            self._index.truncate_from(0)
        self._commitlog.reset_to(commitlog_offset)
        if self.epochs is not None:
            self.epochs.replace_all([])
        self._dispatch.restart_at(commitlog_offset)
        self._gate.confirm = commitlog_offset
        self._repair.lift()

    @property
    def dispatch_flushed(self) -> int:
        """CommitLog offset below which every record's ConsumeQueue entries and index records
        are durable (the last flush's dispatch checkpoint): retention never deletes above it,
        so recovery never needs a deleted record."""
        return self._dispatch.dispatch_flushed

    def retention_segments(self) -> list[tuple[int, int, int | None]]:
        """(base, end, closed at) of every CommitLog segment, oldest first: ``closed at`` is
        the store time of the next segment's first record (None for the last segment, or
        when that record cannot be read)."""
        clog = self._commitlog
        bases = clog.segment_bases()
        seg = clog.mapped_file_size
        out: list[tuple[int, int, int | None]] = []
        for i, base in enumerate(bases):
            if i == len(bases) - 1:
                out.append((base, clog.max_offset, None))
            else:
                nxt = bases[i + 1]
                out.append((base, base + seg, self._reader.store_timestamp_at(nxt)))
        return out

    def delete_oldest_segment(self, base: int) -> list[str]:
        """Retention, one segment: delete the CommitLog segment at ``base`` if it is still the
        oldest, not the last, and wholly below `dispatch_flushed`, then the ConsumeQueue files
        and index records that only point below the new oldest data and the epochs wholly
        below it. Returns the deleted segment names ([] when the segment may not go)."""
        bases = self._commitlog.segment_bases()
        end = base + self._commitlog.mapped_file_size
        if len(bases) < 2 or bases[0] != base or end > self.dispatch_flushed:
            return []
        return self.delete_files_below(end)

    def delete_files_below(self, commitlog_offset: int) -> list[str]:
        """Retention: delete CommitLog segments wholly below the offset, then what indexes them
        and the epochs wholly below the new oldest data."""
        deleted = self._commitlog.delete_segments_below(commitlog_offset)
        clog_min = self._commitlog.min_offset
        self._queues.delete_files_below_phy(clog_min)
        if self._index is not None:
            self._index.delete_below(clog_min)
        if deleted and self.epochs is not None:
            self.epochs.truncate_prefix(clog_min)
        return deleted

    # ------------------------------------------------------------------ epochs

    def record_epoch(self, epoch: int, start_offset: int) -> bool:
        """Append an epoch entry (durable); False when it is already the last one."""
        if self.epochs is None:
            raise RuntimeError("this store keeps no epoch file (not replicated)")
        return self.epochs.append(epoch, start_offset)

    def epoch_records(self) -> list[EpochRecord]:
        return [] if self.epochs is None else self.epochs.records

    def begin_epoch(self, epoch: int) -> int:
        """This broker becomes master in ``epoch``: record ``<epoch, log end>`` (durable) before
        any write of the epoch, and set the next queue offsets past every record in the log
        (dispatched or not). Returns the epoch's start offset."""
        start = self._commitlog.max_offset
        self._gate.drop_held()
        self.record_epoch(epoch, start)
        self.compensate_queue_offsets()
        return start

    def stats(self) -> StoreStats:
        return StoreStats(
            put_message_count=self._put.put_count,
            put_message_bytes=self._put.put_bytes,
            get_message_count=self._reader.get_count,
            commitlog_min_offset=self._commitlog.min_offset,
            commitlog_max_offset=self._commitlog.max_offset,
            commitlog_flushed_offset=self._commitlog.flushed_offset,
        )
