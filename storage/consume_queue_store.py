"""The store's ConsumeQueues (upstream ConsumeQueueStore): the table of queues under
``<store>/consumequeue/<topic>/<queueId>``, the next queue offset of every queue (upstream's
topicQueueTable) and the queues that got entries since the broker last asked (what long-polling
pulls wait for).

The next queue offsets run ahead of the queues on a replicated master (the put path assigns
them, the entries come when confirmOffset passes) and are reset to the queues' ends when the
derived data is cut or rebuilt. Synchronous file code, no trio (same contract as
message_store.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from rocketrio.storage.consume_queue import ConsumeQueue
from rocketrio.storage.dispatch_request import QueueKey
from rocketrio.storage.fs import FileSystem


class ConsumeQueueStore:
    """Every ConsumeQueue of a store, and the queue offsets assigned to them (docstring)."""

    def __init__(self, root: str, file_size: int, *, fs: FileSystem) -> None:
        self.root = root
        self._file_size = file_size
        self._fs = fs
        self._cqs: dict[QueueKey, ConsumeQueue] = {}
        self._next: dict[QueueKey, int] = {}  # the queue offset the next put gets
        self._arrived: dict[QueueKey, int] = {}  # new entries since `take_arrivals`

    # ------------------------------------------------------------------ the queues

    def get(self, key: QueueKey) -> ConsumeQueue | None:
        return self._cqs.get(key)

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
        return torn

    def end_phy(self) -> int:
        """The highest CommitLog end any queue's last entry references (0: none)."""
        cq_end = 0
        for cq in self._cqs.values():
            last = cq.last_entry()
            if last is not None:
                cq_end = max(cq_end, last[0] + last[1])
        return cq_end

    def append(self, key: QueueKey, entries: bytes, first_queue_offset: int) -> None:
        """Append entries to a queue (created when new) and note the arrival."""
        cq = self._cqs.get(key)
        if cq is None:
            cq = ConsumeQueue(self.root, key[0], key[1], self._file_size, fs=self._fs)
            self._cqs[key] = cq
        cq.append(entries, first_queue_offset)
        self._arrived[key] = cq.max_offset

    def truncate_by_phy(self, offset: int) -> int:
        """Drop every entry pointing at or above CommitLog ``offset``; returns how many."""
        dropped = 0
        for cq in self._cqs.values():
            dropped += cq.truncate_by_phy(offset)
        return dropped

    def truncate_and_correct(self, offset: int, commitlog_min: int) -> int:
        """`truncate_by_phy`, and each queue skips entries below ``commitlog_min`` (recovery)."""
        dropped = 0
        for cq in self._cqs.values():
            dropped += cq.truncate_by_phy(offset)
            cq.correct_min_offset(commitlog_min)
        return dropped

    def delete_files_below_phy(self, commitlog_min: int) -> None:
        """Retention: delete the files whose entries all point below ``commitlog_min``."""
        for cq in self._cqs.values():
            cq.delete_files_below_phy(commitlog_min)

    def flush(self) -> None:
        for cq in list(self._cqs.values()):
            cq.flush()

    def close(self) -> None:
        for cq in self._cqs.values():
            cq.close_files()
        self._cqs.clear()

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
        self._fs.rmtree(os.path.join(self.root, topic))
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
