"""MessageStore: the facade the broker actor calls: put, get, flush, recover (M1, M2).

Wires the CommitLog (truth), the ConsumeQueues and the key index (both derived) under
``<store>/commitlog``, ``<store>/consumequeue`` and ``<store>/index``, and owns the topic-queue
offset table. Synchronous file code, no trio: the broker actor calls `put_messages` and
`get_messages` on its own thread and runs `flush_commitlog` / `flush` (fsync) in a worker
thread (same contract as `CommitLog.flush`: appends may continue, truncation may not).

Put path: assign queue offsets, build every record already sealed for its final CommitLog
offset (one CRC pass per record), append the batch with one write, then dispatch
synchronously (ConsumeQueue entries with one write per queue, index records written behind).
`put_messages` takes `MessageToStore` objects; `put_batch_body` takes a client's encoded
SEND_BATCH_MESSAGE body as is and never builds a Python object per message. Transaction
PREPARED / ROLLBACK records get queue offset 0 and no ConsumeQueue entry, like upstream;
ROLLBACK records are not indexed either.

Durability: SYNC_FLUSH acks need only `flush_commitlog`; `flush` also syncs ConsumeQueues and
the index and then writes ``dispatch.checkpoint``, the CommitLog offset below which they are
known to be durable. `open` recovers the CommitLog, cuts ConsumeQueue and index records at or
above ``min(dispatch checkpoint, highest CommitLog end any ConsumeQueue references)`` and
re-dispatches the records from there, so a crash never leaves an entry pointing past the log
and deleting the ConsumeQueue files rebuilds them. A missing index (or one in the old
``index.log`` format, or a rebuild a crash interrupted) is rebuilt from the oldest record.

Clean or not. Like upstream, ``<store>/abort`` exists while the store is open: `open` creates it
(durably, before any write) and `close` removes it after the last flush. Finding it at `open`
means the last run did not shut down cleanly (kill -9, power cut, a crash); the report says so.
Either way the CommitLog checks the records from its flushed checkpoint on (`CommitLog.open`),
so restart time does not grow with the store; the records below are checked when read.

Reads. `get_messages` checks every record it serves with `CommitLog.check_read` (StoreConfig
checkCRCOnPull, default on): a record that fails raises RecordCorrupt instead of being served.
Records this process appended, or recovery checked, are not checked again.

Write faults (a full disk): what a failed write or fsync leaves, the rule for each write path,
and the `repair` that lets the store write again live in the base class `StoreRepair`
(store_repair.py); while one is pending every append raises `WritesFenced`.

Recovery, re-dispatch and the dispatch of ConsumeQueue entries and index records live in the
base class `StoreDispatch` (store_dispatch.py). Types (`StoreConfig`, `MessageToStore`, the
results, the errors) live in store_types.py and are re-exported here.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence

from rocketrio.protocol.message import (
    TRANSACTION_ROLLBACK_TYPE,
    UNIQ_KEY,
    BatchConstants,
    Buffer,
    MessageDecodeError,
    MessageExt,
    MessageSizeError,
    append_record,
    build_batch_records,
    check_stored_record,
    decode_stored,
    encode_properties,
    stored_timestamp,
    tags_hash_code,
)
from rocketrio.storage.commitlog import (
    CommitLog,
    OffsetCheckpoint,
    RecordCorrupt,
    RecordFields,
    RecordNotFound,
    WritesFenced,
)
from rocketrio.storage.consume_queue import ENTRY, Boundary, ConsumeQueue
from rocketrio.storage.dispatch_gate import CONFIRM_CHECKPOINT, DispatchGate, Held
from rocketrio.storage.durable import makedirs_synced, write_synced
from rocketrio.storage.epoch_file import EpochFile, EpochRecord
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.index_file import MessageIndex
from rocketrio.storage.store_dispatch import (
    _NO_CQ_TRAN,
    SCHEDULE_TOPIC,
    Progress,
    _key_hashes,
    _Pending,
    _wire_properties,
)
from rocketrio.storage.store_repair import StoreRepair
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
from rocketrio.storage.timer_wheel import TIMER_TOPIC

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
# upstream reads at most 16000 bytes (800 entries) of ConsumeQueue per pull when filtering
MAX_FILTER_SCAN_ENTRIES = 800
_STORE_TS_HEAD = 80  # enough of a record to find storeTimestamp with an IPv6 born host
_MAX_READ_GAP = 16 * 1024  # bytes of other queues' records a pull read may step over
_MAX_SPAN = 1024 * 1024  # bytes one pull read may cover


class MessageStore(StoreRepair):
    """Facade over CommitLog, ConsumeQueues and the index (see module docstring)."""

    def __init__(
        self,
        store_path: str,
        config: StoreConfig | None = None,
        *,
        store_host: tuple[bytes, int] = (b"\x7f\x00\x00\x01", 10911),
        fs: FileSystem = OS_FS,
        replicated: bool = False,
        epoch_file_path: str | None = None,
    ) -> None:
        """``replicated``: dispatch only up to confirmOffset (a broker with replicas);
        ``epoch_file_path``: the store keeps the epoch file in step with the CommitLog."""
        self.store_path = store_path
        self.config = config or StoreConfig()
        self.store_host = store_host
        self.fs = fs
        self._msg_id_prefix = (store_host[0] + store_host[1].to_bytes(4, "big")).hex().upper()
        self._commitlog = CommitLog(
            os.path.join(store_path, COMMITLOG_DIR), self.config.mappedFileSizeCommitLog, fs=fs
        )
        self._cq_root = os.path.join(store_path, CONSUME_QUEUE_DIR)
        self._cqs: dict[tuple[str, int], ConsumeQueue] = {}
        self._queue_offsets: dict[tuple[str, int], int] = {}
        self._index = (
            MessageIndex(
                store_path,
                fs=fs,
                max_hash_slot_num=self.config.maxHashSlotNum,
                max_index_num=self.config.maxIndexNum,
            )
            if self.config.messageIndexEnable
            else None
        )
        self._dispatch_ckpt = OffsetCheckpoint(os.path.join(store_path, DISPATCH_CHECKPOINT), fs=fs)
        self._dispatched = 0
        self._dispatch_flushed = 0  # what the last flush made durable in queues and index
        self._derived_from: int | None = None  # store_repair.py
        self._derived_cause = ""
        self._gate = DispatchGate(os.path.join(store_path, CONFIRM_CHECKPOINT), fs=fs)
        self._gate.gated = replicated
        self._arrived: dict[tuple[str, int], int] = {}
        self._epoch_file_path = epoch_file_path
        self.epochs: EpochFile | None = None
        # told how recovery's re-dispatch advances (called from `open`'s thread)
        self.on_progress: Progress | None = None
        self._delay_ms = parse_delay_levels(self.config.messageDelayLevel)
        self._put_count = 0
        self._put_bytes = 0
        self._get_count = 0

    @property
    def commitlog(self) -> CommitLog:
        return self._commitlog

    # ------------------------------------------------------------------ open / close

    def open(self) -> RecoveryReport:
        """Recover the CommitLog, reconcile ConsumeQueues and index, re-dispatch the rest.

        Raises CorruptionError (with every file closed again) when the data cannot be
        recovered without losing acknowledged messages.
        """
        makedirs_synced(self.store_path, fs=self.fs)
        self._derived_from = None
        abort = os.path.join(self.store_path, ABORT_FILE)
        unclean = self.fs.exists(abort)
        if not unclean:
            # durable before anything is written: a crash from here on is seen as unclean
            write_synced(abort, b"", fs=self.fs)
            self.fs.fsync_dir(self.store_path)
        # clean or not, the scan starts at the flushed checkpoint: restart time does not grow
        # with the store; what lies below it is checked when read (`_read_spans`)
        clog_report = self._commitlog.open(check_crc=self.config.checkCRCOnRecover)
        try:
            report = self._recover(clog_report, unclean_shutdown=unclean)
            self._dispatch_flushed = max(
                self._commitlog.min_offset, min(self._dispatch_ckpt.load() or 0, self._dispatched)
            )
            if self._epoch_file_path is not None:
                self.epochs = EpochFile(self._epoch_file_path, fs=self.fs)
                # entries starting beyond the recovered log (a crash between cutting the log
                # and the epoch file, or a lost tail) label nothing: drop them
                self.epochs.truncate_suffix(self._commitlog.max_offset + 1)
            return report
        except BaseException:
            self._close_files()
            raise

    def close(self) -> None:
        """Flush everything, close the files, then remove the abort marker: a clean shutdown.
        With a write fault pending (store_repair.py) the marker stays: the next open checks
        every record, as after a crash."""
        self.flush()
        fault = self.write_fault
        self._close_files()
        if fault is not None:
            return
        abort = os.path.join(self.store_path, ABORT_FILE)
        if self.fs.exists(abort):
            self.fs.unlink(abort)
            self.fs.fsync_dir(self.store_path)

    def _close_files(self) -> None:
        for cq in self._cqs.values():
            cq.close_files()
        self._cqs.clear()
        if self._index is not None:
            self._index.close()
        self._commitlog.close()
        self._dispatch_ckpt.close()
        self._gate.close()

    # ------------------------------------------------------------------ put

    def put_messages(
        self, msgs: Sequence[MessageToStore], store_timestamp_ms: int
    ) -> list[PutResult]:
        """Store a batch with one CommitLog write and dispatch it; no fsync (see flush).

        Validates every message before writing anything: InvalidMessage / MessageTooLarge
        leave the store unchanged.
        """
        if not msgs:
            return []
        self._check_derived()
        parts: list[Buffer] = []
        sizes: list[int] = []
        pending: list[_Pending] = []
        next_qo: dict[tuple[str, int], int] = {}
        phy = start = self._commitlog.max_offset
        for i, m in enumerate(msgs):
            size, meta = self._encode(i, m, store_timestamp_ms, phy, next_qo, parts)
            sizes.append(size)
            pending.append(meta)
            phy += size
        positions = self._commitlog.append_sealed(b"".join(parts), sizes)
        self._queue_offsets.update(next_qo)
        dispatch = functools.partial(self._dispatch, positions, sizes, pending)
        if self._gate.gated:
            self._gate.hold(Held(start, self._commitlog.max_offset, dispatch))
        else:
            self._dispatch_at_put(start, dispatch)
        prefix = self._msg_id_prefix
        results = [
            PutResult(pos, n, meta[1], f"{prefix}{pos:016X}", store_timestamp_ms)
            for pos, n, meta in zip(positions, sizes, pending, strict=True)
        ]
        self._put_count += len(sizes)
        self._put_bytes += phy - start
        return results

    def _encode(
        self,
        i: int,
        m: MessageToStore,
        store_ts: int,
        phy: int,
        next_qo: dict[tuple[str, int], int],
        parts: list[Buffer],
    ) -> tuple[int, _Pending]:
        """Append message i's sealed record (for commitlog offset ``phy``) to ``parts``."""
        cfg = self.config
        topic = m.topic
        if len(m.body) > cfg.maxMessageSize:
            raise MessageTooLarge(
                f"message {i} to {topic}: body of {len(m.body)} bytes exceeds "
                f"maxMessageSize={cfg.maxMessageSize}"
            )
        try:
            raw, tags, keys, uniq = _wire_properties(m.properties)
        except ValueError as e:  # a separator inside a key or value, or text that is not UTF-8
            raise InvalidMessage(f"message {i} to {topic}: {e}") from None
        tran = m.sys_flag & TRANSACTION_ROLLBACK_TYPE
        queue_id = m.queue_id
        if topic == TIMER_TOPIC:  # the store picks the wheel queue from its own timestamp
            queue_id = self._timer_queue(raw, store_ts, i)
        key = (topic, queue_id)
        to_cq = tran not in _NO_CQ_TRAN
        qo = 0
        if to_cq:
            qo = next_qo.get(key, -1)
            if qo < 0:
                qo = self._queue_offsets.get(key, 0)
        try:
            size = append_record(
                parts, topic, queue_id, m.body, m.flag, raw, m.sys_flag, m.born_timestamp,
                m.born_host, store_ts, self.store_host, m.reconsume_times,
                m.prepared_transaction_offset, qo, phy,
            )  # fmt: skip
        except MessageSizeError as e:
            raise MessageTooLarge(f"message {i} to {topic}: {e}") from None
        except ValueError as e:
            raise InvalidMessage(f"message {i} to {topic}: {e}") from None
        if size > cfg.mappedFileSizeCommitLog - 8:
            raise MessageTooLarge(
                f"message {i} to {topic}: record of {size} bytes exceeds a commitlog "
                f"segment (mappedFileSizeCommitLog={cfg.mappedFileSizeCommitLog})"
            )
        if to_cq:
            next_qo[key] = qo + 1
        code = tags_hash_code(tags) if tags else 0
        if topic == SCHEDULE_TOPIC:
            code = self._deliver_time(raw, store_ts, code)
        elif topic == TIMER_TOPIC:
            code = self._timer_due(raw, queue_id, code)
        hashes = None
        if (keys or uniq) and self._index is not None and tran != TRANSACTION_ROLLBACK_TYPE:
            hashes = _key_hashes(topic, keys, uniq)
        return size, (key, qo, code, hashes, to_cq)

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
        """Store a client batch body (SEND_BATCH_MESSAGE) as is: the fast put path.

        Builds the records straight from the encoded batch (`encode_batch_body` layout) into
        one buffer, writes it with one pwrite and appends the queue's entries with one write.
        ``properties`` (the request's batch-level properties plus what the broker adds, e.g.
        CLUSTER) are appended to every message's own, so they win like a dict update; a message
        with no UNIQ_KEY gets ``new_uniq_key()``. Like upstream, a batch cannot be
        transactional nor go to SCHEDULE_TOPIC_XXXX. Raises InvalidMessage / MessageTooLarge
        (nothing written) for a malformed or empty body or a message over a limit.
        """
        if topic == SCHEDULE_TOPIC:
            raise InvalidMessage(f"a batch cannot be sent to {SCHEDULE_TOPIC}")
        self._check_derived()
        if sys_flag & TRANSACTION_ROLLBACK_TYPE:
            raise InvalidMessage(f"batch to {topic}: batch messages cannot be transactional")
        key = (topic, queue_id)
        first_qo = self._queue_offsets.get(key, 0)
        try:
            text = properties if isinstance(properties, str) else encode_properties(properties)
            const = BatchConstants(
                topic, queue_id, sys_flag, born_timestamp, born_host, store_timestamp_ms,
                self.store_host, reconsume_times, text.encode(),
            )  # fmt: skip
            built = build_batch_records(
                body,
                const,
                first_queue_offset=first_qo,
                first_physical_offset=self._commitlog.max_offset,
                max_body_size=self.config.maxMessageSize,
                new_uniq_key=new_uniq_key,
            )
        except MessageSizeError as e:
            raise MessageTooLarge(f"batch to {topic}: {e}") from None
        except ValueError as e:
            raise InvalidMessage(f"batch to {topic}: {e}") from None
        sizes = built.sizes
        if not sizes:
            raise InvalidMessage(f"batch to {topic} holds no message")
        seg = self.config.mappedFileSizeCommitLog
        if max(sizes) > seg - 8:
            raise MessageTooLarge(
                f"batch to {topic}: a record of {max(sizes)} bytes exceeds a commitlog segment "
                f"(mappedFileSizeCommitLog={seg})"
            )
        start = self._commitlog.max_offset
        positions = self._commitlog.append_sealed(built.data, sizes)
        self._queue_offsets[key] = first_qo + len(sizes)

        def dispatch() -> None:
            entries = b"".join(map(ENTRY.pack, positions, sizes, built.tags_codes()))
            cq = self._consume_queue(key)
            cq.append(entries, first_qo)
            self._arrived[key] = cq.max_offset
            if self._index is not None:
                self._index_batch(self._index, topic, positions, built)
            self._dispatched = positions[-1] + sizes[-1]

        if self._gate.gated:
            self._gate.hold(Held(start, self._commitlog.max_offset, dispatch))
        else:
            self._dispatch_at_put(start, dispatch)
        self._put_count += len(sizes)
        self._put_bytes += len(built.data)
        return BatchPutResult(
            topic, queue_id, first_qo, positions, sizes, built.uniq_keys, store_timestamp_ms,
            self._msg_id_prefix,
        )  # fmt: skip

    # ------------------------------------------------------------------ flush

    def flush_commitlog(self) -> int:
        """fsync the CommitLog only (what a SYNC_FLUSH ack needs); returns flushed offset."""
        return self._commitlog.flush()

    def flush(self) -> int:
        """fsync CommitLog, then ConsumeQueues and index; advance the dispatch checkpoint
        (never past derived data a failed write left unreliable, store_repair.py)."""
        dispatched = self._dispatched
        if self._derived_from is not None:
            dispatched = min(dispatched, self._derived_from)
        flushed = self._commitlog.flush()
        self._flush_derived()
        self._dispatch_ckpt.store(dispatched)
        self._dispatch_flushed = dispatched
        if self._gate.gated:
            self._gate.persist()
        return flushed

    @property
    def flushed_offset(self) -> int:
        return self._commitlog.flushed_offset

    # ------------------------------------------------------------------ get

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: set[int] | None = None,
    ) -> GetResult:
        """Read up to ``max_count`` messages / ``max_bytes`` (at least one) from a queue.

        Statuses and next_begin_offset follow upstream DefaultMessageStore.getMessage; the
        corrected offsets are returned as they are (the broker decides whether to use them).
        """
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return GetResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        lo, hi = cq.min_offset, cq.max_offset
        if hi == 0:
            return GetResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, 0, lo, hi)
        if offset < lo:
            return GetResult(GetMessageStatus.OFFSET_TOO_SMALL, lo, lo, hi)
        if offset == hi:
            return GetResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
        if offset > hi:
            return GetResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, lo if lo == 0 else hi, lo, hi)
        scan = max_count if tag_codes is None else max(max_count, MAX_FILTER_SCAN_ENTRIES)
        raw = cq.read_raw(offset, scan)
        if not raw:  # no entry file here: skip to the next one, like upstream rollNextFile
            next_file = (offset // cq.entries_per_file + 1) * cq.entries_per_file
            return GetResult(GetMessageStatus.OFFSET_FOUND_NULL, min(next_file, hi), lo, hi)
        result = GetResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, lo, hi)
        self._collect(raw, offset, max_count, max_bytes, tag_codes, result)
        self._get_count += result.message_count
        return result

    def _collect(
        self,
        raw: bytes,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: set[int] | None,
        result: GetResult,
    ) -> None:
        clog_min = self._commitlog.min_offset
        # spans of the commitlog to read with one pread each: records of one queue are
        # usually near each other (other queues' records in between), so a span takes a
        # record if the gap is small, and skips the gap bytes when slicing
        spans: list[tuple[int, int, list[int]]] = []  # (start, end, [start, size, ...])
        span_start = span_end = -_MAX_READ_GAP - 1
        parts: list[int] = []
        count = total = consumed = removed = 0
        for phy, size, tags in ENTRY.iter_unpack(raw):
            if phy < clog_min:
                consumed += 1
                removed += 1
                continue
            if tag_codes is not None and tags not in tag_codes:
                consumed += 1
                continue
            if count and total + size > max_bytes:
                break
            consumed += 1
            if 0 <= phy - span_end <= _MAX_READ_GAP and phy + size - span_start <= _MAX_SPAN:
                parts.append(phy - span_start)
                parts.append(size)
            else:
                if parts:
                    spans.append((span_start, span_end, parts))
                span_start, parts = phy, [0, size]
            span_end = phy + size
            count += 1
            total += size
            if count >= max_count:
                break
        if parts:
            spans.append((span_start, span_end, parts))
        self._read_spans(spans, result.buffers, self.config.checkCRCOnPull)
        result.message_count = len(result.buffers)
        result.next_begin_offset = offset + consumed
        if result.buffers:
            result.status = GetMessageStatus.FOUND
        elif removed and removed == consumed:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING

    def _read_spans(
        self, spans: list[tuple[int, int, list[int]]], out: list[bytes], check: bool
    ) -> None:
        """Read the spans; with ``check``, every record below the CommitLog's verified
        watermark is checked (`CommitLog.check_read`) before it joins ``out``."""
        clog = self._commitlog
        read = clog.read_span
        verified_from = clog.verified_from if check else -1
        for start, end, parts in spans:
            data = read(start, end - start)
            if len(data) != end - start:
                break  # the log moved under us (retention); what was read stays valid
            if start < verified_from:
                for i in range(0, len(parts), 2):
                    clog.check_read(start + parts[i], parts[i + 1], data, parts[i])
            if len(parts) == 2:
                out.append(data)
                continue
            for i in range(0, len(parts), 2):
                p = parts[i]
                out.append(data[p : p + parts[i + 1]])

    # ------------------------------------------------------------------ queries

    def read_queue_entries(
        self, topic: str, queue_id: int, offset: int, max_count: int
    ) -> tuple[int, list[tuple[int, int, int]]]:
        """(first index, entries) of a ConsumeQueue from ``offset`` (moved up to the queue's
        minimum when retention removed it): (commitlog offset, size, tagsCode) each."""
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return offset, []
        first = max(offset, cq.min_offset)
        return first, cq.get(first, max_count)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self._cqs.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def get_commitlog_max_offset(self) -> int:
        return self._commitlog.max_offset

    def get_commitlog_min_offset(self) -> int:
        return self._commitlog.min_offset

    def _store_timestamp_at(self, phy: int, _size: int = 0) -> int | None:
        head = self._commitlog.read(phy, _STORE_TS_HEAD)
        return stored_timestamp(head) if len(head) == _STORE_TS_HEAD else None

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int | None:
        cq = self._cqs.get((topic, queue_id))
        entry = cq.entry(offset) if cq else None
        return self._store_timestamp_at(entry[0]) if entry else None

    def get_earliest_message_time(self) -> int:
        """Store time of the first record in the CommitLog, -1 when it holds none (upstream
        DefaultMessageStore.getEarliestMessageTime)."""
        lo = self._commitlog.min_offset
        if lo >= self._commitlog.max_offset:
            return -1
        ts = self._store_timestamp_at(lo)
        return -1 if ts is None else ts

    def get_earliest_msg_store_time(self, topic: str, queue_id: int) -> int | None:
        return self.get_message_store_timestamp(
            topic, queue_id, self.get_min_offset(topic, queue_id)
        )

    def search_offset_by_timestamp(
        self, topic: str, queue_id: int, timestamp_ms: int, boundary: Boundary = "LOWER"
    ) -> int:
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            return 0
        return cq.search_by_timestamp(timestamp_ms, self._store_timestamp_at, boundary)

    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        """The message whose record starts at ``commitlog_offset``, or None."""
        try:
            record = self._commitlog.read_record(commitlog_offset)
            check_stored_record(record, 0, expected_offset=commitlog_offset)
            return decode_stored(record)[0]
        except (RecordNotFound, MessageDecodeError):
            return None

    def query_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = 32,
        begin_ts: int = 0,
        end_ts: int = 2**63 - 1,
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS contain ``key``, newest first."""
        return self._query(
            topic, key, max_num, lambda m: key in m.keys and begin_ts <= m.store_timestamp <= end_ts
        )

    def query_by_uniq_key(self, topic: str, uniq_key: str, max_num: int = 32) -> list[MessageExt]:
        """Messages of ``topic`` whose UNIQ_KEY is ``uniq_key`` (retries keep it), newest first."""
        return self._query(
            topic, uniq_key, max_num, lambda m: m.properties.get(UNIQ_KEY) == uniq_key
        )

    def _query(
        self, topic: str, key: str, max_num: int, match: Callable[[MessageExt], bool]
    ) -> list[MessageExt]:
        if self._index is None:
            return []
        out: list[MessageExt] = []
        for offset in self._index.iter_lookup(topic, key):  # stops reading when enough
            msg = self.look_message_by_offset(offset)
            if msg is not None and msg.topic == topic and match(msg):
                out.append(msg)
                if len(out) >= max_num:
                    break
        return out

    def topic_queue_ids(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self._cqs):
            out.setdefault(topic, []).append(qid)
        return out

    def queue_count(self) -> int:
        """How many ConsumeQueues exist (a slave's metadata sync watches it for new ones)."""
        return len(self._cqs)

    def queues_with_records(self) -> dict[str, int]:
        """Per topic, 1 + the highest queue id of any record in the log: dispatched ones and,
        on a master, those above confirmOffset that `begin_epoch` counted (a topic config must
        cover them, or their messages could not be read)."""
        out: dict[str, int] = {}
        for topic, qid in [*self._cqs, *self._queue_offsets]:
            out[topic] = max(out.get(topic, 0), qid + 1)
        return out

    def delete_topic(self, topic: str) -> int:
        """Drop the topic's ConsumeQueues and queue offsets; returns how many queues.

        Flushes first so the dispatch checkpoint is past every record of the topic: recovery
        must not resurrect the queues.
        """
        keys = [k for k in self._cqs if k[0] == topic]
        if not keys:
            return 0
        self.flush()
        for key in keys:
            self._cqs.pop(key).destroy()
            self._queue_offsets.pop(key, None)
        self.fs.rmtree(os.path.join(self._cq_root, topic))
        return len(keys)

    # ------------------------------------------------------------------ truncation / retention

    def truncate_to(self, commitlog_offset: int) -> None:
        """Drop every record at or after ``commitlog_offset`` and what was derived from them,
        durably and in an order a crash cannot undo (upstream #10666): confirmOffset and the
        dispatch checkpoint are lowered and fsynced first, then the CommitLog is cut
        (ftruncate + fdatasync + directory fsync), then the ConsumeQueues and the index, then
        the epoch file (atomically). A crash in between leaves records the next handshake cuts
        again, never a checkpoint or epoch vouching for data that is gone (recovery also drops
        epochs starting beyond the log)."""
        if self._gate.gated:
            self._gate.lower(commitlog_offset)
        else:  # no confirm.checkpoint without replication (a full disk may be cutting here)
            self._gate.confirm = min(self._gate.confirm, commitlog_offset)
            self._gate.drop_held()
        ckpt = self._dispatch_ckpt.load()
        if ckpt is None or ckpt > commitlog_offset:
            self._dispatch_ckpt.store(commitlog_offset, sync=True)
        self._commitlog.truncate_to(commitlog_offset)
        for cq in self._cqs.values():
            cq.truncate_by_phy(commitlog_offset)
        if self._index is not None:
            self._index.truncate_from(commitlog_offset)
        if self.epochs is not None:
            self.epochs.truncate_suffix(commitlog_offset)
        self._queue_offsets = {key: cq.max_offset for key, cq in self._cqs.items()}
        self._dispatched = min(self._dispatched, commitlog_offset)
        self._dispatch_flushed = min(self._dispatch_flushed, commitlog_offset)
        if self._derived_from is not None and commitlog_offset <= self._derived_from:
            self._derived_from = None  # what was unreliable is gone

    def reset_to(self, commitlog_offset: int) -> None:
        """Drop EVERY record, queue, index record and epoch, durably; the empty log continues
        at ``commitlog_offset`` (a segment boundary): a slave re-syncing from its master's
        oldest data."""
        self._gate.lower(0)
        self._dispatch_ckpt.store(0, sync=True)
        for cq in self._cqs.values():
            cq.destroy()
        self._cqs.clear()
        self._queue_offsets.clear()
        self.fs.rmtree(self._cq_root)
        self.fs.fsync_dir(self.store_path)
        if self._index is not None:
            self._index.truncate_from(0)
        self._commitlog.reset_to(commitlog_offset)
        if self.epochs is not None:
            self.epochs.replace_all([])
        self._dispatched = self._gate.confirm = commitlog_offset
        self._dispatch_flushed = commitlog_offset
        self._derived_from = None

    def append_replicated(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """A slave writes whole records received from its master (checked in full by the
        CommitLog); nothing is dispatched until confirmOffset passes them, and what the check
        read of each record is kept for that moment. No fsync."""
        self._check_derived()
        records: list[RecordFields] = []
        end = self._commitlog.append_raw(offset, data, records)
        self._put_bytes += len(data)
        if self._gate.gated:
            self.hold_replicated(offset, end, records)
        return end

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

    @property
    def dispatch_flushed(self) -> int:
        """CommitLog offset below which every record's ConsumeQueue entries and index records
        are durable (the last flush's dispatch checkpoint): retention never deletes above it,
        so recovery never needs a deleted record."""
        return self._dispatch_flushed

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
                out.append((base, base + seg, self._store_timestamp_at(nxt)))
        return out

    def delete_oldest_segment(self, base: int) -> list[str]:
        """Retention, one segment: delete the CommitLog segment at ``base`` if it is still the
        oldest, not the last, and wholly below `dispatch_flushed`, then the ConsumeQueue files
        and index records that only point below the new oldest data and the epochs wholly
        below it. Returns the deleted segment names ([] when the segment may not go)."""
        bases = self._commitlog.segment_bases()
        end = base + self._commitlog.mapped_file_size
        if len(bases) < 2 or bases[0] != base or end > self._dispatch_flushed:
            return []
        return self.delete_files_below(end)

    def delete_files_below(self, commitlog_offset: int) -> list[str]:
        """Retention: delete CommitLog segments wholly below the offset, then what indexes them
        and the epochs wholly below the new oldest data."""
        deleted = self._commitlog.delete_segments_below(commitlog_offset)
        clog_min = self._commitlog.min_offset
        for cq in self._cqs.values():
            cq.delete_files_below_phy(clog_min)
        if self._index is not None:
            self._index.delete_below(clog_min)
        if deleted and self.epochs is not None:
            self.epochs.truncate_prefix(clog_min)
        return deleted

    def stats(self) -> StoreStats:
        return StoreStats(
            put_message_count=self._put_count,
            put_message_bytes=self._put_bytes,
            get_message_count=self._get_count,
            commitlog_min_offset=self._commitlog.min_offset,
            commitlog_max_offset=self._commitlog.max_offset,
            commitlog_flushed_offset=self._commitlog.flushed_offset,
        )
