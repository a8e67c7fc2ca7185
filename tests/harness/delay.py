"""Delay-message helpers: the delay levels, how late a delivery may be, and reading what a
broker delivered and what it still holds.
"""

from __future__ import annotations

from rocketrio.actors.broker.broker import Broker

LEVELS = "1s 3s 7s 15s 30s"


LATE_MS = 100  # the promise: re-put within 100 ms of the due time


def waiting(broker: Broker, topic: str, queues: range) -> dict[str, int]:
    """UNIQ_KEY -> due time (the ConsumeQueue's tagsCode) of every entry of the wait topic."""
    out: dict[str, int] = {}
    for q in queues:
        _, entries = broker.store.view.read_queue_entries(topic, q, 0, 1 << 30)
        for phy, _size, due in entries:
            msg = broker.store.view.look_message_by_offset(phy)
            assert msg is not None
            out[msg.properties["UNIQ_KEY"]] = due
    return out


def delivered(broker: Broker, topic: str, queues: int) -> list[tuple[str, int, dict[str, str]]]:
    """(UNIQ_KEY, store time, properties) of every message in the real topic."""
    out = []
    for q in range(queues):
        _, entries = broker.store.view.read_queue_entries(topic, q, 0, 1 << 30)
        for phy, _size, _tags in entries:
            msg = broker.store.view.look_message_by_offset(phy)
            assert msg is not None
            out.append((msg.properties["UNIQ_KEY"], msg.store_timestamp, msg.properties))
    return out
