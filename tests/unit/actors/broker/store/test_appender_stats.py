"""The store turn's per-topic put statistics (actors/broker/store/appender.py): a run of single
sends is counted per topic with one call, not one per send, and must count what one call per
send counted: every message, every request (a "time") and every stored byte, by topic."""

from __future__ import annotations

import logging
from pathlib import Path

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.appender import Appender
from rocketrio.actors.broker.store.disk_faults import FaultState
from rocketrio.actors.broker.store.messages import AnyPut, PutMessages
from rocketrio.storage.message_store import (
    MessageStore,
    MessageToStore,
    PutResult,
    StoreConfig,
)


def test_a_turns_single_sends_are_counted_per_topic_as_one_call_per_send_counted(
    tmp_path: Path,
) -> None:
    store = MessageStore(str(tmp_path), StoreConfig(mappedFileSizeCommitLog=1 << 20))
    store.open()
    stats = BrokerStats()
    appender = Appender(store, FaultState(None), stats, lambda: 5, logging.getLogger("t"))
    answered: list[tuple[str, int]] = []

    def put(topic: str, *bodies: bytes) -> PutMessages:
        def done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
            assert status is PutStatus.PUT_OK
            answered.extend((topic, r.size) for r in results)

        return PutMessages([MessageToStore(topic, 0, b) for b in bodies], done)

    # runs of one topic of one to three sends, a topic coming back, the last run of two
    singles = ["A", "A", "B", "A", "C", "C", "C", "B", "B"]
    turns: list[list[AnyPut]] = [
        [put(t, b"x" * (i + 1)) for i, t in enumerate(singles)],
        [put("A", b"solo")],
        [put("A", b"1"), put("B", b"22", b"333"), put("A", b"4444")],  # a batch among them
    ]
    want: dict[str, list[int]] = {}
    for puts in turns:
        for p, stored in appender.append(puts):
            p.on_done(stored, PutStatus.PUT_OK, None)  # type: ignore[arg-type]
            c = want.setdefault(p.messages[0].topic, [0, 0, 0])  # type: ignore[union-attr]
            c[0] += len(stored)  # type: ignore[arg-type]
            c[1] += 1
            c[2] += sum(r.size for r in stored)  # type: ignore[union-attr]
    assert stats.items.topic_put == want
    assert want["A"][:2] == [6, 6] and want["B"][:2] == [5, 4] and want["C"][:2] == [3, 3]
    assert sum(size for _, size in answered) == sum(c[2] for c in want.values())
    store.close()
