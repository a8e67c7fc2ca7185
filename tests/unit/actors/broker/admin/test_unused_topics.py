"""admin/unused_topics.py's rule (upstream cleanUnusedTopic): only a topic without config that is
neither a system topic nor an LMQ loses its queues."""

from __future__ import annotations

from rocketrio.actors.broker.admin.unused_topics import clean_unused, is_unused


def test_the_rule() -> None:
    assert is_unused("Gone", in_table=False, is_system=False)
    assert not is_unused("Here", in_table=True, is_system=False)
    assert not is_unused("rmq_sys_x", in_table=False, is_system=True)
    assert not is_unused("%LMQ%abc", in_table=False, is_system=False)


class FakeStore:
    def __init__(self, topics: set[str]) -> None:
        self.topics = topics
        self.deleted: list[str] = []

    def queue_topics(self) -> set[str]:
        return set(self.topics)

    def delete_topic(self, topic: str) -> int:
        self.deleted.append(topic)
        self.topics.discard(topic)
        return 1


class FakeTable:
    def select(self, topic: str) -> object | None:
        return object() if topic in ("Here", "%RETRY%g") else None

    def is_system_topic(self, topic: str) -> bool:
        return topic.startswith("rmq_sys_") or topic == "SCHEDULE_TOPIC_XXXX"


def test_clean_unused_deletes_exactly_the_unused_in_name_order() -> None:
    store = FakeStore({"Here", "B", "A", "%RETRY%g", "%LMQ%x", "rmq_sys_t", "SCHEDULE_TOPIC_XXXX"})
    gone = clean_unused(store, FakeTable())  # type: ignore[arg-type]
    assert gone == store.deleted == ["A", "B"]
    assert store.topics == {"Here", "%RETRY%g", "%LMQ%x", "rmq_sys_t", "SCHEDULE_TOPIC_XXXX"}
