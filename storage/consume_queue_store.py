"""The store's ConsumeQueues (upstream ConsumeQueueStore): the table of queues under
``<store>/consumequeue/<topic>/<queueId>``, the next queue offset of every queue (upstream's
topicQueueTable) and the queues that got entries since the broker last asked (what long-polling
pulls wait for).

The next queue offsets run ahead of the queues on a replicated master (the put path assigns
them, the entries come when confirmOffset passes) and are reset to the queues' ends when the
derived data is cut or rebuilt. Synchronous file code, no trio (same contract as
message_store.py).

With ``ext_root`` (enableConsumeQueueExt) every queue has a `ConsumeQueueExt` beside it for the
SQL92 filter bit-maps (cq_ext.py), kept in step here: whatever cuts, deletes or restarts a
queue fits its ext to the queue's range after, and `flush` syncs both. Without it, an ext
directory left by an earlier run is deleted at `load` (a later run with it on would otherwise
find units the cuts of this run never saw).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

from rocketrio.storage.consume_queue import ConsumeQueue
from rocketrio.storage.cq_ext import ConsumeQueueExt
from rocketrio.storage.dispatch_request import QueueKey
from rocketrio.storage.fs import FileSystem


class ConsumeQueueStore:
    """Every ConsumeQueue of a store, and the queue offsets assigned to them (docstring)."""

    def __init__(
        self,
        root: str,
        file_size: int,
        *,
        fs: FileSystem,
        ext_root: str | None = None,
        ext_bits: int = 0,
        ext_off_root: str | None = None,
    ) -> None:
        """``ext_root``/``ext_bits``: keep bit-maps of ``ext_bits`` bits (module docstring);
        ``ext_off_root``: where an earlier run's ext lies, deleted at `load` when off."""
        self.root = root
        self._file_size = file_size
        self._fs = fs
        self._cqs: dict[QueueKey, ConsumeQueue] = {}
        self._exts: dict[QueueKey, ConsumeQueueExt] = {}
        self._ext_root = ext_root
        self._ext_bits = ext_bits
        self._ext_off_root = ext_off_root
        # the latest calcTimeMillis of the units on disk at `load` (cq_ext.py)
        self.ext_floor_ms = -1
        self._next: dict[QueueKey, int] = {}  # the queue offset the next put gets
        self._arrived: dict[QueueKey, int] = {}  # new entries since `take_arrivals`

    # ------------------------------------------------------------------ the queues

    def get(self, key: QueueKey) -> ConsumeQueue | None:
        return self._cqs.get(key)

    def live_queues(self) -> Mapping[QueueKey, ConsumeQueue]:
        """The table of queues itself, for a reader that keeps it and looks a queue up per
        message (an ACK's offset check: pop/ack.py): the same dict for this store's lifetime,
        changed in place (a queue made by a put, deleted with its topic or by `destroy`), and
        each queue's ``min_offset`` / ``max_offset`` moved in place by its puts, truncations and
        clean-ups, so what the keeper reads is always the live range. Read it, never write it."""
        return self._cqs

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int]:
        """The queue's (min offset, max offset), (0, 0) for a queue the store does not have:
        upstream's getMinOffsetInQueue and getMaxOffsetInQueue read together (the store
        reader's `queue_range`, and an ACK's offset check straight, once per message)."""
        cq = self._cqs.get((topic, queue_id))
        return cq.offset_range() if cq else (0, 0)

    def ext(self, key: QueueKey) -> ConsumeQueueExt | None:
        return self._exts.get(key)

    @property
    def ext_bits(self) -> int:
        """The bit-map length of the ext units; 0 when there is no ext."""
        return self._ext_bits if self._ext_root is not None else 0

    def _open_ext(self, key: QueueKey, cq: ConsumeQueue) -> None:
        if self._ext_root is None:
            return
        ext = ConsumeQueueExt(
            self._ext_root, key[0], key[1], cq.entries_per_file, self._ext_bits, fs=self._fs
        )
        ext.open()
        ext.fit(cq.min_offset, cq.max_offset)
        self._exts[key] = ext

    def _fit_exts(self) -> None:
        for key, ext in self._exts.items():
            cq = self._cqs[key]
            ext.fit(cq.min_offset, cq.max_offset)

    def __iter__(self) -> Iterator[ConsumeQueue]:
        return iter(self._cqs.values())

    def keys(self) -> list[QueueKey]:
        return list(self._cqs)

    def count(self) -> int:
        return len(self._cqs)

    def topic_queue_ids(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self._cqs):
            out.setdefault(topic, []).append(qid)
        return out

    def load(self) -> int:
        """Open every queue on disk (cutting torn tails); returns the bytes cut."""
        fs = self._fs
        torn = 0
        if self._ext_root is None and self._ext_off_root and fs.isdir(self._ext_off_root):
            fs.rmtree(self._ext_off_root)
            fs.fsync_dir(os.path.dirname(self._ext_off_root))
        if not fs.isdir(self.root):
            return 0
        for topic in sorted(fs.listdir(self.root)):
            topic_dir = os.path.join(self.root, topic)
            if not fs.isdir(topic_dir):
                continue
            for qid in fs.listdir(topic_dir):
                if not qid.isdigit() or not fs.isdir(os.path.join(topic_dir, qid)):
                    continue
                cq = ConsumeQueue(self.root, topic, int(qid), self._file_size, fs=fs)
                torn += cq.open()
                self._cqs[(topic, int(qid))] = cq
                self._open_ext((topic, int(qid)), cq)
        for ext in self._exts.values():
            self.ext_floor_ms = max(self.ext_floor_ms, ext.find_last_calc())
        return torn

    def end_phy(self) -> int:
        """The highest CommitLog end any queue's last entry references (0: none)."""
        cq_end = 0
        for cq in self._cqs.values():
            last = cq.last_entry()
            if last is not None:
                cq_end = max(cq_end, last[0] + last[1])
        return cq_end

    def append(
        self,
        key: QueueKey,
        entries: bytes,
        first_queue_offset: int,
        units: list[tuple[int, bytes]] | None = None,
    ) -> None:
        """Append entries to a queue (created when new) and note the arrival; ``units``:
        (entry index, ext unit) of the entries that have a filter bit-map."""
        cq = self._cqs.get(key)
        if cq is None:
            cq = ConsumeQueue(self.root, key[0], key[1], self._file_size, fs=self._fs)
            self._cqs[key] = cq
            self._open_ext(key, cq)
        restart = cq.max_offset != first_queue_offset
        cq.append(entries, first_queue_offset)
        self._arrived[key] = cq.max_offset
        ext = self._exts.get(key)
        if ext is None:
            return
        if restart:  # the queue started again elsewhere: no unit of its old life may stay
            ext.fit(first_queue_offset, first_queue_offset)
        if units:
            try:
                ext.append(units)
            except BaseException:
                ext.fit(first_queue_offset, first_queue_offset)
                raise

    def truncate_by_phy(self, offset: int) -> int:
        """Drop every entry pointing at or above CommitLog ``offset``; returns how many."""
        dropped = 0
        for cq in self._cqs.values():
            dropped += cq.truncate_by_phy(offset)
        self._fit_exts()
        return dropped

    def truncate_and_correct(self, offset: int, commitlog_min: int) -> int:
        """`truncate_by_phy`, and each queue skips entries below ``commitlog_min`` (recovery)."""
        dropped = 0
        for cq in self._cqs.values():
            dropped += cq.truncate_by_phy(offset)
            cq.correct_min_offset(commitlog_min)
        self._fit_exts()
        return dropped

    def delete_files_below_phy(self, commitlog_min: int) -> None:
        """Retention: delete the files whose entries all point below ``commitlog_min``."""
        for cq in self._cqs.values():
            cq.delete_files_below_phy(commitlog_min)
        self._fit_exts()

    def flush(self) -> None:
        for cq in list(self._cqs.values()):
            cq.flush()
        for ext in list(self._exts.values()):
            ext.flush()

    def close(self) -> None:
        for cq in self._cqs.values():
            cq.close_files()
        self._cqs.clear()
        for ext in self._exts.values():
            ext.close()
        self._exts.clear()

    def has_topic(self, topic: str) -> bool:
        return any(k[0] == topic for k in self._cqs)

    def delete_topic(self, topic: str) -> int:
        """Drop the topic's queues (files and directory) and queue offsets; returns how many.
        The root's fsync makes the removal durable: a power cut must not bring the queues back
        (a new master would find records of a deleted topic)."""
        keys = [k for k in self._cqs if k[0] == topic]
        for key in keys:
            self._cqs.pop(key).destroy()
            self._next.pop(key, None)
            ext = self._exts.pop(key, None)
            if ext is not None:
                ext.destroy()
        self._fs.rmtree(os.path.join(self.root, topic))
        if self._ext_root is not None:
            self._fs.rmtree(os.path.join(self._ext_root, topic))
        if self._fs.isdir(self.root):
            self._fs.fsync_dir(self.root)
        return len(keys)

    def destroy_all(self) -> None:
        """Drop every queue, its files and the whole directory, and every queue offset."""
        for cq in self._cqs.values():
            cq.destroy()
        self._cqs.clear()
        self._next.clear()
        self._fs.rmtree(self.root)
        for ext in self._exts.values():
            ext.destroy()
        self._exts.clear()
        if self._ext_root is not None:
            self._fs.rmtree(self._ext_root)

    # ------------------------------------------------------------------ queue offsets

    def next_offset(self, key: QueueKey) -> int:
        """The queue offset the next message to ``key`` gets."""
        return self._next.get(key, 0)

    def set_next_offset(self, key: QueueKey, offset: int) -> None:
        self._next[key] = offset

    def set_next_offsets(self, offsets: dict[QueueKey, int]) -> None:
        self._next.update(offsets)

    def raise_next_offset(self, key: QueueKey, offset: int) -> None:
        """Count a record in the log: the next queue offset is past ``offset - 1``."""
        if offset > self._next.get(key, 0):
            self._next[key] = offset

    def reset_next_offsets(self) -> None:
        """Every queue's next offset is its end (nothing in the log past the queues)."""
        self._next = {key: cq.max_offset for key, cq in self._cqs.items()}

    def queues_with_records(self) -> dict[str, int]:
        """Per topic, 1 + the highest queue id with entries or an assigned queue offset."""
        out: dict[str, int] = {}
        for topic, qid in [*self._cqs, *self._next]:
            out[topic] = max(out.get(topic, 0), qid + 1)
        return out

    # ------------------------------------------------------------------ arrivals

    def take_arrivals(self) -> dict[QueueKey, int]:
        """Queues that got new entries since the last call, with their new max offset."""
        arrived, self._arrived = self._arrived, {}
        return arrived

    def clear_arrivals(self) -> None:
        self._arrived.clear()

    def drop_arrivals_past_end(self) -> None:
        """Forget arrivals whose entries were cut again (an undone put)."""
        self._arrived = {k: v for k, v in self._arrived.items() if v <= self._cqs[k].max_offset}
