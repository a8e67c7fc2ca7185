"""Recovery and dispatch for MessageStore: the derived data kept in step with the CommitLog.

`StoreDispatch` is the base class of `MessageStore` that owns what is derived from CommitLog
records: loading the ConsumeQueues and reconciling them (and the key index) with the recovered
CommitLog on open, re-dispatching records after a crash, and the dispatch of ConsumeQueue
entries (one write per queue) and index records. Also the per-message helpers the put path
shares with re-dispatch: wire properties, key hashes, SCHEDULE_TOPIC_XXXX deliver time and
the rmq_sys_wheel_timer queue and due time (timer_wheel.py).

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

import os
from collections.abc import Callable, Sequence

from rocketrio.protocol.message import (
    PROPERTY_CRC32,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    UNIQ_KEY,
    BuiltBatch,
    MessageDecodeError,
    decode_properties,
    dispatch_fields,
    encode_properties,
    find_property,
    find_stored_property,
    tags_code_of_bytes,
)
from rocketrio.storage.commitlog import (
    CommitLog,
    CommitLogRecovery,
    CorruptionError,
    OffsetCheckpoint,
    RecordFields,
)
from rocketrio.storage.consume_queue import ENTRY, ConsumeQueue
from rocketrio.storage.dispatch_gate import DispatchGate
from rocketrio.storage.epoch_file import EpochFile
from rocketrio.storage.fs import FileSystem
from rocketrio.storage.index_file import MessageIndex, key_hash_from, key_hash_seed
from rocketrio.storage.store_types import InvalidMessage, RecoveryReport, StoreConfig
from rocketrio.storage.timer_wheel import TIMER_TOPIC, hop_due_ms, timer_queue_id

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
_REDISPATCH_BATCH = 1024
PROGRESS_EVERY = 64 * 1024 * 1024  # re-dispatched CommitLog bytes between progress reports
# (phase, bytes done, bytes in all): what recovery tells the broker's log while it runs
Progress = Callable[[str, int, int], None]

# what dispatch needs of a record besides its offset and size:
# ((topic, queue id), queue offset, tags code, index hashes, goes to the ConsumeQueue)
_Pending = tuple[tuple[str, int], int, int, list[int] | None, bool]


class StoreDispatch:
    """Recovery and dispatch half of `MessageStore` (see module docstring).

    Holds no state of its own: `MessageStore.__init__` sets the attributes below.
    """

    config: StoreConfig
    fs: FileSystem
    _commitlog: CommitLog
    _cq_root: str
    _cqs: dict[tuple[str, int], ConsumeQueue]
    _queue_offsets: dict[tuple[str, int], int]
    _index: MessageIndex | None
    _dispatch_ckpt: OffsetCheckpoint
    _dispatched: int
    _delay_ms: list[int]
    _gate: DispatchGate
    _arrived: dict[tuple[str, int], int]
    epochs: EpochFile | None
    on_progress: Progress | None

    def _recover(
        self, clog_report: CommitLogRecovery, *, unclean_shutdown: bool = False
    ) -> RecoveryReport:
        clog_min, clog_max = self._commitlog.min_offset, self._commitlog.max_offset
        torn = self._load_consume_queues()
        ckpt = self._dispatch_ckpt.load()
        cq_end = 0
        for cq in self._cqs.values():
            last = cq.last_entry()
            if last is not None:
                cq_end = max(cq_end, last[0] + last[1])
        redo = max(clog_min, min(clog_max, cq_end, clog_min if ckpt is None else ckpt))
        limit = clog_max
        gate = self._gate
        if gate.gated:
            limit = max(clog_min, min(clog_max, max(gate.load() or 0, ckpt or 0)))
            redo = min(redo, limit)
        gate.confirm = limit
        dropped = 0
        for cq in self._cqs.values():
            dropped += cq.truncate_by_phy(redo)
            cq.correct_min_offset(clog_min)
        index_rebuilt = False
        index_dropped = 0
        start = redo
        if self._index is not None:
            index_rebuilt = not self._index.exists() and clog_max > clog_min
            start = clog_min if index_rebuilt else redo
            index_dropped = self._index.open(start)
        self._queue_offsets = {key: cq.max_offset for key, cq in self._cqs.items()}
        redispatched, dispatched_end = self._redispatch(start, redo, limit)
        # no flush here: re-dispatched entries lie above the unchanged dispatch checkpoint,
        # so a crash before the next flush just re-dispatches them again
        self._dispatched = clog_max if limit >= clog_max else dispatched_end
        self._arrived.clear()
        return RecoveryReport(
            commitlog=clog_report,
            redispatch_from=start,
            redispatched=redispatched,
            cq_entries_dropped=dropped,
            cq_torn_bytes=torn,
            index_records_dropped=index_dropped,
            index_rebuilt=index_rebuilt,
            queues=len(self._cqs),
            confirm_offset=limit,
            unclean_shutdown=unclean_shutdown,
        )

    def _load_consume_queues(self) -> int:
        fs = self.fs
        torn = 0
        if not fs.isdir(self._cq_root):
            return 0
        for topic in sorted(fs.listdir(self._cq_root)):
            topic_dir = os.path.join(self._cq_root, topic)
            if not fs.isdir(topic_dir):
                continue
            for qid in fs.listdir(topic_dir):
                if not qid.isdigit() or not fs.isdir(os.path.join(topic_dir, qid)):
                    continue
                cq = ConsumeQueue(
                    self._cq_root, topic, int(qid), self.config.mappedFileSizeConsumeQueue, fs=fs
                )
                torn += cq.open()
                self._cqs[(topic, int(qid))] = cq
        return torn

    def _redispatch(self, start: int, cq_from: int, limit: int) -> tuple[int, int]:
        """Dispatch the records from ``start`` that end at or below ``limit`` (ConsumeQueue
        entries only from ``cq_from``); count the ones above ``limit`` into the next queue
        offsets without dispatching them. Returns (records dispatched, end of the last one)."""
        offsets: list[int] = []
        sizes: list[int] = []
        batch: list[_Pending] = []
        count = 0
        end = max(start, self._commitlog.min_offset)
        first, total = end, self._commitlog.max_offset - end
        report_at = first + PROGRESS_EVERY
        for offset, record in self._commitlog.iter_records(start):
            if offset >= report_at and self.on_progress is not None:
                self.on_progress("redispatch", offset - first, total)
                report_at = offset + PROGRESS_EVERY
            visible = offset + len(record) <= limit
            meta = self._pending_of(offset, record, cq_from if visible else limit + 1)
            if meta[4]:
                nxt = meta[1] + 1
                if nxt > self._queue_offsets.get(meta[0], 0):
                    self._queue_offsets[meta[0]] = nxt
            if not visible:
                continue
            offsets.append(offset)
            sizes.append(len(record))
            batch.append(meta)
            end = offset + len(record)
            count += 1
            if len(batch) >= _REDISPATCH_BATCH:
                self._dispatch(offsets, sizes, batch)
                offsets, sizes, batch = [], [], []
        self._dispatch(offsets, sizes, batch)
        return count, end

    def _pending_of(self, offset: int, record: bytes, cq_from: int) -> _Pending:
        """What dispatch needs of one stored record (it goes to the ConsumeQueue only from
        ``cq_from`` on, and never as a transaction half/rollback). Reads the fields in place:
        no message object, and only the properties dispatch uses."""
        try:
            topic, queue_id, queue_offset, sys_flag, store_ts, props = dispatch_fields(record)
        except MessageDecodeError as e:
            raise CorruptionError(f"cannot dispatch commitlog record at {offset}: {e}") from None
        return self._pending_from(
            offset, topic, queue_id, queue_offset, sys_flag, store_ts, props, cq_from
        )

    def _pending_from(
        self,
        offset: int,
        topic: str,
        queue_id: int,
        queue_offset: int,
        sys_flag: int,
        store_ts: int,
        props: bytes,
        cq_from: int,
    ) -> _Pending:
        """`_pending_of` from fields already read out of the record."""
        tran = sys_flag & TRANSACTION_ROLLBACK_TYPE
        to_cq = offset >= cq_from and tran not in _NO_CQ_TRAN
        code = 0
        tags = find_stored_property(props, b"TAGS\x01") if props else None
        if tags:
            code = tags_code_of_bytes(tags)
        if topic == SCHEDULE_TOPIC:
            code = self._deliver_time(props, store_ts, code)
        elif topic == TIMER_TOPIC:
            code = self._timer_due(props, queue_id, code)
        hashes = None
        if self._index is not None and props and tran != TRANSACTION_ROLLBACK_TYPE:
            keys = find_stored_property(props, b"KEYS\x01") if b"KEYS\x01" in props else None
            uniq = find_stored_property(props, b"UNIQ_KEY\x01")
            if keys or uniq:
                hashes = _key_hashes_bytes(topic, keys, uniq)
        return (topic, queue_id), queue_offset, code, hashes, to_cq

    # ------------------------------------------------------------------ confirmOffset

    @property
    def confirm_offset(self) -> int:
        return self._gate.confirm

    @property
    def dispatched_offset(self) -> int:
        return self._dispatched

    def advance_confirm(self, offset: int) -> None:
        """confirmOffset moved (master: the SyncStateSet holds it; slave: min(master's value,
        own end)): dispatch everything up to it. Never lowers it (truncation does that)."""
        gate = self._gate
        limit = min(offset, self._commitlog.max_offset)
        if limit > gate.confirm:
            gate.confirm = limit
        if self._dispatched < gate.confirm:
            self._dispatch_to(gate.confirm)

    def hold_replicated(self, start: int, end: int, records: list[RecordFields]) -> None:
        """A slave appended [start, end): keep what the CommitLog's check read of its records
        until confirmOffset passes them."""
        self._gate.hold_replicated(start, end, records, self._dispatched)

    def _dispatch_replicated(self, limit: int) -> bool:
        """Dispatch held replicated records that end at or below ``limit``; False when there
        are none to continue from where dispatch stands (it must scan)."""
        gate = self._gate
        replica = gate.replica
        if not replica:
            return False
        if replica[0][0] != self._dispatched:
            replica.clear()  # cannot happen unless the log moved under the held data
            return False
        positions: list[int] = []
        sizes: list[int] = []
        pending: list[_Pending] = []
        pending_from = self._pending_from
        while replica and replica[0][0] + replica[0][1] <= limit:
            offset, size, topic, queue_id, queue_offset, sys_flag, ts, props = replica.popleft()
            positions.append(offset)
            sizes.append(size)
            pending.append(
                pending_from(offset, topic, queue_id, queue_offset, sys_flag, ts, props, 0)
            )
        if not positions:
            return False
        self._dispatch(positions, sizes, pending)
        if not replica and gate.replica_end <= limit:
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
                self._dispatch(offsets, sizes, [self._pending_of(o, r, 0) for o, r in records])
            self._dispatched = max(before, reached)
            if reached <= before:
                return

    def compensate_queue_offsets(self) -> int:
        """Next queue offsets = past every record in the log, dispatched or not (a broker
        about to write as master, #7689). Returns how many undispatched records were counted."""
        self._queue_offsets = {key: cq.max_offset for key, cq in self._cqs.items()}
        records, _ = self._commitlog.scan_records(self._dispatched, self._commitlog.max_offset)
        for offset, record in records:
            key, qo, _code, _h, to_cq = self._pending_of(offset, record, 0)
            if to_cq and qo + 1 > self._queue_offsets.get(key, 0):
                self._queue_offsets[key] = qo + 1
        return len(records)

    def take_arrivals(self) -> dict[tuple[str, int], int]:
        """Queues that got new ConsumeQueue entries since the last call, with their new max
        offset (what long-polling pulls wait for)."""
        arrived, self._arrived = self._arrived, {}
        return arrived

    @staticmethod
    def _index_batch(
        index: MessageIndex, topic: str, positions: list[int], built: BuiltBatch
    ) -> None:
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

    def _deliver_time(self, props: bytes | str, store_ts: int, tags_code: int) -> int:
        """SCHEDULE_TOPIC_XXXX tagsCode: the deliver time (upstream computeDeliverTimestamp)."""
        level = find_property(props, b"DELAY\x01" if isinstance(props, bytes) else "DELAY\x01")
        if level is None or not level.isdigit() or int(level) <= 0:
            return tags_code
        delays = self._delay_ms
        return store_ts + delays[min(int(level), len(delays)) - 1]

    def _timer_due(self, props: bytes | str, queue_id: int, tags_code: int) -> int:
        """rmq_sys_wheel_timer tagsCode: when the message's hop is due (timer_wheel.py)."""
        if isinstance(props, bytes):
            raw = find_property(props, b"TIMER_OUT_MS\x01")
            out = None if raw is None else raw.decode("latin-1")
        else:
            out = find_property(props, "TIMER_OUT_MS\x01")
        if out is None or not out.isdigit():
            return tags_code
        return hop_due_ms(int(out), queue_id)

    def _timer_queue(self, props: bytes, store_ts: int, i: int) -> int:
        """The wheel queue of a timer message stored at ``store_ts``."""
        out = find_property(props, b"TIMER_OUT_MS\x01")
        if out is None or not out.isdigit():
            raise InvalidMessage(f"message {i} to {TIMER_TOPIC}: no valid TIMER_OUT_MS property")
        return timer_queue_id(int(out), store_ts)

    def _dispatch(
        self, positions: Sequence[int], sizes: Sequence[int], pending: Sequence[_Pending]
    ) -> None:
        """ConsumeQueue entries (one write per queue) and index records for stored records."""
        if not pending:
            return
        groups: dict[tuple[str, int], list[bytes]] = {}
        firsts: dict[tuple[str, int], int] = {}
        hashes: list[int] = []
        offsets: list[int] = []
        pack = ENTRY.pack
        for offset, size, (key, qo, tags, key_hashes, to_cq) in zip(
            positions, sizes, pending, strict=True
        ):
            if to_cq:
                group = groups.get(key)
                if group is None:
                    groups[key] = group = []
                    firsts[key] = qo
                elif qo != firsts[key] + len(group):
                    raise CorruptionError(
                        f"queue offsets of {key[0]}:{key[1]} jump to {qo} at commitlog {offset}"
                    )
                group.append(pack(offset, size, tags))
            if key_hashes:
                hashes += key_hashes
                offsets += [offset] * len(key_hashes)
        arrived = self._arrived
        for key, parts in groups.items():
            cq = self._consume_queue(key)
            cq.append(b"".join(parts), firsts[key])
            arrived[key] = cq.max_offset
        if hashes and self._index is not None:
            self._index.add_pairs(hashes, offsets)
        self._dispatched = positions[-1] + sizes[-1]

    def _consume_queue(self, key: tuple[str, int]) -> ConsumeQueue:
        cq = self._cqs.get(key)
        if cq is None:
            cq = ConsumeQueue(
                self._cq_root, key[0], key[1], self.config.mappedFileSizeConsumeQueue, fs=self.fs
            )
            self._cqs[key] = cq
        return cq


_NO_CQ_TRAN = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def _wire_properties(
    props: dict[str, str] | str,
) -> tuple[bytes, str | None, str | None, str | None]:
    """(encoded properties, TAGS, KEYS, UNIQ_KEY) of a message to store.

    A properties text is looked up in place (no dict); a stale ``__CRC32#`` is dropped, the
    CommitLog writes its own.
    """
    if isinstance(props, str):
        if props.find(PROPERTY_CRC32) < 0:
            return (
                props.encode(),
                _text_property(props, "TAGS\x01"),
                _text_property(props, "KEYS\x01"),
                _text_property(props, "UNIQ_KEY\x01"),
            )
        props = decode_properties(props)
    if PROPERTY_CRC32 in props:
        props = {k: v for k, v in props.items() if k != PROPERTY_CRC32}
    get = props.get
    return encode_properties(props).encode(), get(PROPERTY_TAGS), get(PROPERTY_KEYS), get(UNIQ_KEY)


def _text_property(text: str, key: str) -> str | None:
    """`find_property` with a fast path for a key that occurs once."""
    p = text.rfind(key)
    if p < 0:
        return None
    v = p + len(key)
    e = text.find("\x02", v)
    if e > v and (p == 0 or text[p - 1] == "\x02"):
        return text[v:e]
    return find_property(text, key)


def _key_hashes_bytes(topic: str, keys: bytes | None, uniq: bytes | None) -> list[int]:
    """`_key_hashes` of encoded KEYS / UNIQ_KEY values (the dispatch scan reads bytes)."""
    seed = key_hash_seed(topic)
    hashes = [key_hash_from(seed, k) for k in keys.split(b" ") if k] if keys else []
    if uniq:
        hashes.append(key_hash_from(seed, uniq))
    return hashes


def _key_hashes(topic: str, keys: str | None, uniq: str | None) -> list[int]:
    """Index hashes of a message's KEYS (space separated) and UNIQ_KEY."""
    seed = key_hash_seed(topic)
    hashes = [key_hash_from(seed, k.encode()) for k in keys.split(" ") if k] if keys else []
    if uniq:
        hashes.append(key_hash_from(seed, uniq.encode()))
    return hashes
