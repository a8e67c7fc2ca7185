"""The store's read paths: pull messages from a ConsumeQueue, look records up by offset, key
or time (M1, M2).

`StoreReader` is the part of `MessageStore` that serves reads; it owns the get counter and
writes nothing. `get_messages` follows upstream DefaultMessageStore.getMessage (with a
MessageFilter's isMatchedByConsumeQueue: a set of tag codes, or a `BitMapProbe` asking the
ConsumeQueue ext whether a SQL92 filter matched; cq_ext.py) and checks every
record it serves with `CommitLog.check_read` (StoreConfig checkCRCOnPull, default on): a record
that fails raises RecordCorrupt instead of being served. Records this process appended, or
recovery checked, are not checked again (commitlog/read_check.py).

Synchronous file code, no trio (same contract as message_store.py).
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.protocol.message import (
    UNIQ_KEY,
    MessageDecodeError,
    MessageExt,
    check_stored_record,
    decode_stored,
    stored_timestamp,
)
from rocketrio.storage.commitlog import CommitLog, RecordNotFound
from rocketrio.storage.consume_queue import ENTRY, Boundary
from rocketrio.storage.consume_queue_store import ConsumeQueueStore
from rocketrio.storage.cq_ext import BitMapProbe, ConsumeQueueExt
from rocketrio.storage.index_file import MessageIndex
from rocketrio.storage.store_types import GetMessageStatus, GetResult, StoreConfig

# upstream reads at most 16000 bytes (800 entries) of ConsumeQueue per pull when filtering
MAX_FILTER_SCAN_ENTRIES = 800
_STORE_TS_HEAD = 80  # enough of a record to find storeTimestamp with an IPv6 born host
_MAX_READ_GAP = 16 * 1024  # bytes of other queues' records a pull read may step over
_MAX_SPAN = 1024 * 1024  # bytes one pull read may cover


# what `get_messages` may skip on the ConsumeQueue: tag codes or a SQL92 filter's bit-map probe
CqMatch = set[int] | BitMapProbe | None


class _BitMapScan:
    """Which entries of a scan (``raw``, from ``offset``) the bit-maps say the filter did not
    match (`BitMapProbe.rejected`), judged a chunk at a time as the scan gets there: a pull
    that fills up early does not judge the rest of its 800 entries."""

    __slots__ = ("_ext", "_offset", "_probe", "_raw", "flags")
    CHUNK = 128

    def __init__(self, ext: ConsumeQueueExt, probe: BitMapProbe, offset: int, raw: bytes):
        self._ext, self._probe, self._offset, self._raw = ext, probe, offset, raw
        self.flags: list[bool] = []

    def extend(self) -> None:
        """Judge the next chunk of entries."""
        start = len(self.flags)
        entries = self._raw[start * ENTRY.size : (start + self.CHUNK) * ENTRY.size]
        phys = [phy for phy, _, _ in ENTRY.iter_unpack(entries)]
        self.flags += self._probe.rejected(self._ext.read(self._offset + start, len(phys)), phys)


class StoreReader:
    """The read paths of a `MessageStore` (see module docstring)."""

    def __init__(
        self,
        config: StoreConfig,
        commitlog: CommitLog,
        queues: ConsumeQueueStore,
        index: MessageIndex | None,
    ) -> None:
        self.config = config
        self._commitlog = commitlog
        self._queues = queues
        self._index = index
        self._get_count = 0

    @property
    def get_count(self) -> int:
        return self._get_count

    # ------------------------------------------------------------------ get

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        cq_match: CqMatch = None,
    ) -> GetResult:
        """Read up to ``max_count`` messages / ``max_bytes`` (at least one) from a queue;
        ``cq_match`` skips entries on the ConsumeQueue (module docstring).

        Statuses and next_begin_offset follow upstream DefaultMessageStore.getMessage; the
        corrected offsets are returned as they are (the broker decides whether to use them).
        """
        cq = self._queues.get((topic, queue_id))
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
        scan = max_count if cq_match is None else max(max_count, MAX_FILTER_SCAN_ENTRIES)
        raw = cq.read_raw(offset, scan)
        if not raw:  # no entry file here: skip to the next one, like upstream rollNextFile
            next_file = (offset // cq.entries_per_file + 1) * cq.entries_per_file
            return GetResult(GetMessageStatus.OFFSET_FOUND_NULL, min(next_file, hi), lo, hi)
        result = GetResult(GetMessageStatus.NO_MATCHED_MESSAGE, offset, lo, hi)
        tag_codes = cq_match if isinstance(cq_match, set) else None
        bitmaps = None
        if isinstance(cq_match, BitMapProbe) and cq_match.topic == topic:
            ext = self._queues.ext((topic, queue_id))
            if ext is not None and ext.bit_count == cq_match.bit_count:
                bitmaps = _BitMapScan(ext, cq_match, offset, raw)
        self._collect(raw, offset, max_count, max_bytes, tag_codes, bitmaps, result)
        self._get_count += result.message_count
        return result

    def _collect(
        self,
        raw: bytes,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: set[int] | None,
        bitmaps: _BitMapScan | None,
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
            if bitmaps is not None:
                if consumed >= len(bitmaps.flags):
                    bitmaps.extend()
                if bitmaps.flags[consumed]:
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
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return offset, []
        first = max(offset, cq.min_offset)
        return first, cq.get(first, max_count)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """(`get_min_offset`, `get_max_offset`) in one look-up (`ConsumeQueueStore.queue_range`)."""
        return self._queues.queue_range(topic, queue_id)

    def store_timestamp_at(self, phy: int, _size: int = 0) -> int | None:
        """The store time of the record at CommitLog ``phy`` (None: no record there)."""
        head = self._commitlog.read(phy, _STORE_TS_HEAD)
        return stored_timestamp(head) if len(head) == _STORE_TS_HEAD else None

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int | None:
        cq = self._queues.get((topic, queue_id))
        entry = cq.entry(offset) if cq else None
        return self.store_timestamp_at(entry[0]) if entry else None

    def get_earliest_message_time(self) -> int:
        """Store time of the first record in the CommitLog, -1 when it holds none (upstream
        DefaultMessageStore.getEarliestMessageTime)."""
        lo = self._commitlog.min_offset
        if lo >= self._commitlog.max_offset:
            return -1
        ts = self.store_timestamp_at(lo)
        return -1 if ts is None else ts

    def get_earliest_msg_store_time(self, topic: str, queue_id: int) -> int | None:
        return self.get_message_store_timestamp(
            topic, queue_id, self.get_min_offset(topic, queue_id)
        )

    def search_offset_by_timestamp(
        self, topic: str, queue_id: int, timestamp_ms: int, boundary: Boundary = "LOWER"
    ) -> int:
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return 0
        return cq.search_by_timestamp(timestamp_ms, self.store_timestamp_at, boundary)

    def look_message_by_offset(self, commitlog_offset: int) -> MessageExt | None:
        """The message whose record starts at ``commitlog_offset``, or None.

        The record's layout and physical offset are always checked; its CRC only below the
        CommitLog's `verified_from` (the pull path's rule, read_check.py: bytes at or above it
        were appended by this process or checked by recovery). A transaction's half read back
        by its END_TRANSACTION is such a record."""
        log = self._commitlog
        try:
            record = log.read_record(commitlog_offset)
            check_stored_record(
                record,
                0,
                expected_offset=commitlog_offset,
                verify_crc=commitlog_offset < log.verified_from,
            )
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
