"""The store's write paths: put a batch of messages, put a client batch body, append
replicated bytes (M1, H4).

`PutPath` is the part of `MessageStore` that turns messages into CommitLog records and hands
their dispatch on; it owns the offset message id prefix (store host and port) and the put
counters. Put path: assign queue offsets (`ConsumeQueueStore.next_offset`), build every record
already sealed for its final CommitLog offset (one CRC pass per record), append the batch with
one write, then dispatch: at once without replication (a dispatch that fails undoes the put,
store_repair.py), or held in the `DispatchGate` until confirmOffset passes it (a classic
SYNC_FLUSH master's: until the fsync does). `put_messages`
takes `MessageToStore` objects; `put_batch_body` takes a client's encoded SEND_BATCH_MESSAGE
body as is and never builds a Python object per message. Transaction PREPARED / ROLLBACK
records get queue offset 0 and no ConsumeQueue entry, like upstream; ROLLBACK records are not
indexed either. No write path fsyncs (`MessageStore.flush`).

Synchronous file code, no trio (same contract as message_store.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

from rocketrio.protocol.message import (
    TRANSACTION_ROLLBACK_TYPE,
    BatchConstants,
    Buffer,
    BuiltBatch,
    MessageSizeError,
    append_record,
    build_batch_records,
    encode_properties,
    tags_hash_code,
)
from rocketrio.storage.commitlog import CommitLog, RecordFields
from rocketrio.storage.consume_queue_store import ConsumeQueueStore
from rocketrio.storage.dispatch_gate import DispatchGate, Held
from rocketrio.storage.dispatch_request import (
    NO_CQ_TRAN,
    SCHEDULE_TOPIC,
    DispatchRequest,
    DispatchRequests,
    QueueKey,
    key_hashes,
    wire_properties,
)
from rocketrio.storage.record_fields import record_fields
from rocketrio.storage.store_dispatch import StoreDispatch
from rocketrio.storage.store_repair import StoreRepair
from rocketrio.storage.store_types import (
    BatchPutResult,
    InvalidMessage,
    MessageTooLarge,
    MessageToStore,
    PutResult,
    StoreConfig,
)
from rocketrio.storage.timer_wheel import TIMER_TOPIC


class PutPath:
    """The write paths of a `MessageStore` (see module docstring)."""

    # `put_messages` encodes a plain message inline; False: every message through `_encode`
    # (the reference the inline path is tested against, tests/unit/storage/test_put_inline.py)
    inline_encode = True

    def __init__(
        self,
        config: StoreConfig,
        store_host: tuple[bytes, int],
        commitlog: CommitLog,
        queues: ConsumeQueueStore,
        gate: DispatchGate,
        dispatch: StoreDispatch,
        repair: StoreRepair,
        requests: DispatchRequests,
    ) -> None:
        self.config = config
        self._store_host = store_host
        self._commitlog = commitlog
        self._queues = queues
        self._gate = gate
        self._dispatch = dispatch
        self._repair = repair
        self._requests = requests
        self._indexed = requests.indexed
        self._msg_id_prefix = (store_host[0] + store_host[1].to_bytes(4, "big")).hex().upper()
        self._put_count = 0
        self._put_bytes = 0

    @property
    def put_count(self) -> int:
        return self._put_count

    @property
    def put_bytes(self) -> int:
        return self._put_bytes

    def _release(self, start: int, dispatch: Callable[[], None]) -> None:
        """Dispatch a put written at ``start`` now, or hold it until confirmOffset (or, with
        ``after_flush``, the CommitLog's fsync) passes it."""
        if self._gate.holds:
            self._gate.hold(Held(start, self._commitlog.max_offset, dispatch))
        else:
            self._repair.dispatch_at_put(start, dispatch)

    # ------------------------------------------------------------------ put_messages

    def put_messages(
        self, msgs: Sequence[MessageToStore], store_timestamp_ms: int
    ) -> list[PutResult]:
        """Store a batch with one CommitLog write and dispatch it; no fsync (see flush).

        Validates every message before writing anything: InvalidMessage / MessageTooLarge
        leave the store unchanged.
        """
        if not msgs:
            return []
        self._repair.check()
        parts: list[Buffer] = []
        sizes: list[int] = []
        pending: list[DispatchRequest] = []
        next_qo: dict[QueueKey, int] = {}
        phy = start = self._commitlog.max_offset
        # the hot case inline (no `_encode` frame per message): a plain message (not a
        # PREPARED / COMMIT / ROLLBACK record) to a topic that is neither the schedule nor the
        # timer topic, with a body within maxMessageSize and a record within a segment.
        # Anything else goes through `_encode`, and so does every error (it raises the store's
        # own: the put is abandoned, nothing written)
        # (the reference, every message through `_encode`: a body bound no message is within)
        max_body = self.config.maxMessageSize if self.inline_encode else -1
        max_record = self.config.mappedFileSizeCommitLog - 8
        store_host, indexed = self._store_host, self._indexed
        next_offset = self._queues.next_offset
        for i, m in enumerate(msgs):
            topic = m.topic
            if (
                m.sys_flag & TRANSACTION_ROLLBACK_TYPE
                or len(m.body) > max_body
                or topic == TIMER_TOPIC
                or topic == SCHEDULE_TOPIC
            ):
                size, req = self._encode(i, m, store_timestamp_ms, phy, next_qo, parts)
            else:
                key = (topic, m.queue_id)
                qo = next_qo.get(key, -1)
                if qo < 0:
                    qo = next_offset(key)
                try:
                    size, code, hashes = record_fields(
                        parts, topic, m.queue_id, m.body, m.flag, m.properties, m.sys_flag,
                        m.born_timestamp, m.born_host, store_timestamp_ms, store_host,
                        m.reconsume_times, m.prepared_transaction_offset, qo, phy, indexed,
                    )  # fmt: skip
                except ValueError:  # (MessageSizeError too) `_encode` raises the store's error
                    self._encode(i, m, store_timestamp_ms, phy, next_qo, parts)
                    raise
                if size > max_record:  # `_encode` raises MessageTooLarge for it
                    self._encode(i, m, store_timestamp_ms, phy, next_qo, parts)
                    raise AssertionError("a record over a segment was not refused")
                next_qo[key] = qo + 1
                req = (key, qo, code, hashes, True)
            sizes.append(size)
            pending.append(req)
            phy += size
        positions = self._commitlog.append_sealed(b"".join(parts), sizes)
        self._queues.set_next_offsets(next_qo)
        self._release(start, functools.partial(self._dispatch.dispatch, positions, sizes, pending))
        prefix = self._msg_id_prefix
        results = [
            PutResult(pos, n, req[1], f"{prefix}{pos:016X}", store_timestamp_ms)
            for pos, n, req in zip(positions, sizes, pending, strict=True)
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
        next_qo: dict[QueueKey, int],
        parts: list[Buffer],
    ) -> tuple[int, DispatchRequest]:
        """Append message i's sealed record (for commitlog offset ``phy``) to ``parts``."""
        cfg = self.config
        topic = m.topic
        if len(m.body) > cfg.maxMessageSize:
            raise MessageTooLarge(
                f"message {i} to {topic}: body of {len(m.body)} bytes exceeds "
                f"maxMessageSize={cfg.maxMessageSize}"
            )
        tran = m.sys_flag & TRANSACTION_ROLLBACK_TYPE
        to_cq = tran not in NO_CQ_TRAN
        if topic == TIMER_TOPIC or topic == SCHEDULE_TOPIC:
            size, key, qo, code, hashes = self._encode_timed(i, m, store_ts, phy, next_qo, parts)
        else:
            key = (topic, m.queue_id)
            qo = 0
            if to_cq:
                qo = next_qo.get(key, -1)
                if qo < 0:
                    qo = self._queues.next_offset(key)
            try:
                size, code, hashes = record_fields(
                    parts, topic, m.queue_id, m.body, m.flag, m.properties, m.sys_flag,
                    m.born_timestamp, m.born_host, store_ts, self._store_host, m.reconsume_times,
                    m.prepared_transaction_offset, qo, phy, self._indexed,
                )  # fmt: skip
            except MessageSizeError as e:
                raise MessageTooLarge(f"message {i} to {topic}: {e}") from None
            except ValueError as e:  # a separator in a property, text that is not UTF-8, a field
                raise InvalidMessage(f"message {i} to {topic}: {e}") from None
        if size > cfg.mappedFileSizeCommitLog - 8:
            raise MessageTooLarge(
                f"message {i} to {topic}: record of {size} bytes exceeds a commitlog "
                f"segment (mappedFileSizeCommitLog={cfg.mappedFileSizeCommitLog})"
            )
        if to_cq:
            next_qo[key] = qo + 1
        return size, (key, qo, code, hashes, to_cq)

    def _encode_timed(
        self,
        i: int,
        m: MessageToStore,
        store_ts: int,
        phy: int,
        next_qo: dict[QueueKey, int],
        parts: list[Buffer],
    ) -> tuple[int, QueueKey, int, int, list[int] | None]:
        """`_encode`'s record of a SCHEDULE_TOPIC_XXXX or timer wheel message, whose queue or
        tagsCode comes from its properties: (size, queue, queue offset, tagsCode, hashes)."""
        topic = m.topic
        try:
            raw, tags, keys, uniq = wire_properties(m.properties)
        except ValueError as e:  # a separator inside a key or value, or text that is not UTF-8
            raise InvalidMessage(f"message {i} to {topic}: {e}") from None
        tran = m.sys_flag & TRANSACTION_ROLLBACK_TYPE
        queue_id = m.queue_id
        if topic == TIMER_TOPIC:  # the store picks the wheel queue from its own timestamp
            queue_id = self._requests.timer_queue(raw, store_ts, i)
        key = (topic, queue_id)
        qo = 0
        if tran not in NO_CQ_TRAN:
            qo = next_qo.get(key, -1)
            if qo < 0:
                qo = self._queues.next_offset(key)
        try:
            size = append_record(
                parts, topic, queue_id, m.body, m.flag, raw, m.sys_flag, m.born_timestamp,
                m.born_host, store_ts, self._store_host, m.reconsume_times,
                m.prepared_transaction_offset, qo, phy,
            )  # fmt: skip
        except MessageSizeError as e:
            raise MessageTooLarge(f"message {i} to {topic}: {e}") from None
        except ValueError as e:
            raise InvalidMessage(f"message {i} to {topic}: {e}") from None
        code = tags_hash_code(tags) if tags else 0
        if topic == SCHEDULE_TOPIC:
            code = self._requests.deliver_time(raw, store_ts, code)
        else:
            code = self._requests.timer_due(raw, queue_id, code)
        hashes = None
        if (keys or uniq) and self._indexed and tran != TRANSACTION_ROLLBACK_TYPE:
            hashes = key_hashes(topic, keys, uniq)
        return size, key, qo, code, hashes

    # ------------------------------------------------------------------ put_batch_body

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
        self._repair.check()
        if sys_flag & TRANSACTION_ROLLBACK_TYPE:
            raise InvalidMessage(f"batch to {topic}: batch messages cannot be transactional")
        key = (topic, queue_id)
        first_qo = self._queues.next_offset(key)
        try:
            text = properties if isinstance(properties, str) else encode_properties(properties)
            const = BatchConstants(
                topic, queue_id, sys_flag, born_timestamp, born_host, store_timestamp_ms,
                self._store_host, reconsume_times, text.encode(),
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
        return self._write_batch(key, first_qo, built, store_timestamp_ms)

    def _write_batch(
        self, key: QueueKey, first_qo: int, built: BuiltBatch, store_timestamp_ms: int
    ) -> BatchPutResult:
        """Check the built batch's sizes, append it and release its dispatch."""
        topic, queue_id = key
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
        self._queues.set_next_offset(key, first_qo + len(sizes))
        dispatch = self._dispatch.dispatch_batch
        self._release(start, functools.partial(dispatch, key, first_qo, positions, sizes, built))
        self._put_count += len(sizes)
        self._put_bytes += len(built.data)
        return BatchPutResult(
            topic, queue_id, first_qo, positions, sizes, built.uniq_keys, store_timestamp_ms,
            self._msg_id_prefix,
        )  # fmt: skip

    # ------------------------------------------------------------------ replication

    def append_replicated(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """A slave writes whole records received from its master (checked in full by the
        CommitLog); nothing is dispatched until confirmOffset passes them, and what the check
        read of each record is kept for that moment. No fsync."""
        self._repair.check()
        records: list[RecordFields] = []
        end = self._commitlog.append_raw(offset, data, records)
        self._put_bytes += len(data)
        if self._gate.gated:
            self._dispatch.hold_replicated(offset, end, records)
        return end
