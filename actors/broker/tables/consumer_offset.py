"""Committed consumer offsets (upstream ConsumerOffsetManager): consumerOffset.json content.

Offsets are kept per ``topic@group`` key (upstream's TOPIC_GROUP_SEPARATOR) and queue id. A
commit only marks the table dirty; the broker persists it every flushConsumerOffsetInterval
and on shutdown. The DataVersion is bumped once per persisted change set (not per commit, which
would churn on the hot path), like upstream's consumerOffsetUpdateVersionStep idea.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.protocol.bodies import ConsumerOffsetSerializeWrapper, DataVersion

TOPIC_GROUP_SEPARATOR = "@"


def offset_key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def split_key(key: str) -> tuple[str, str]:
    """``topic@group`` -> (topic, group); neither topic nor group names may contain '@'."""
    topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
    return topic, group


class ConsumerOffsetManager:
    def __init__(self, now_ms: Callable[[], int]) -> None:
        self.now_ms = now_ms
        self.table: dict[str, dict[int, int]] = {}
        # where each group's last pull on a queue ended (upstream pullOffsetTable): memory only
        self.pull_table: dict[str, dict[int, int]] = {}
        self.data_version = DataVersion()
        self.dirty = False

    def load(self, wrapper: ConsumerOffsetSerializeWrapper) -> None:
        self.table = {k: dict(v) for k, v in wrapper.offsetTable.items()}
        self.data_version = wrapper.dataVersion
        self.dirty = False

    def snapshot_for_persist(self) -> ConsumerOffsetSerializeWrapper | None:
        """A copy to write to consumerOffset.json with a bumped DataVersion, or None when
        nothing changed since the last one."""
        if not self.dirty:
            return None
        self.data_version = self.data_version.next_version(self.now_ms())
        self.dirty = False
        return self.snapshot()

    def snapshot(self) -> ConsumerOffsetSerializeWrapper:
        v = self.data_version
        return ConsumerOffsetSerializeWrapper(
            offsetTable={k: dict(q) for k, q in self.table.items()},
            dataVersion=DataVersion(v.stateVersion, v.timestamp, v.counter),
        )

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = offset_key(topic, group)
        queues = self.table.get(key)
        if queues is None:
            queues = self.table[key] = {}
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed on that queue."""
        queues = self.table.get(offset_key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def commit_pull(self, group: str, topic: str, queue_id: int, next_offset: int) -> None:
        """A pull of ``group`` on the queue ended at ``next_offset`` (GET_CONSUME_STATS's
        pullOffset); kept in memory only, as upstream."""
        key = offset_key(topic, group)
        queues = self.pull_table.get(key)
        if queues is None:
            queues = self.pull_table[key] = {}
        queues[queue_id] = next_offset

    def query_pull(self, group: str, topic: str, queue_id: int) -> int:
        """Where the group's last pull on the queue ended, or -1."""
        queues = self.pull_table.get(offset_key(topic, group))
        return -1 if queues is None else queues.get(queue_id, -1)

    def groups_of_topic(self, topic: str) -> set[str]:
        """Groups with a committed offset on ``topic`` (upstream whichGroupByTopic)."""
        return {g for t, g in map(split_key, self.table) if t == topic}

    def queue_offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(offset_key(topic, group), {}))

    def topics_of_group(self, group: str) -> set[str]:
        return {t for t, g in map(split_key, self.table) if g == group}

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> bool:
        """destGroup's offsets on ``topic`` become a copy of srcGroup's (upstream
        cloneOffset: the whole queue map is replaced); False when srcGroup has none there."""
        queues = self.table.get(offset_key(topic, src_group))
        if queues is None:
            return False
        self.table[offset_key(topic, dest_group)] = dict(queues)
        self.dirty = True
        return True

    def remove_topic(self, topic: str) -> bool:
        doomed = [k for k in self.table if split_key(k)[0] == topic]
        for k in doomed:
            del self.table[k]
        for k in [k for k in self.pull_table if split_key(k)[0] == topic]:
            del self.pull_table[k]
        self.dirty = self.dirty or bool(doomed)
        return bool(doomed)

    def remove_group(self, group: str) -> bool:
        doomed = [k for k in self.table if split_key(k)[1] == group]
        for k in doomed:
            del self.table[k]
        for k in [k for k in self.pull_table if split_key(k)[1] == group]:
            del self.pull_table[k]
        self.dirty = self.dirty or bool(doomed)
        return bool(doomed)
