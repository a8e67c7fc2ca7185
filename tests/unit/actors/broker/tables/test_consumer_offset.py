"""The consumer offset table (actors/broker/tables/consumer_offset.py): its DataVersion."""

from __future__ import annotations

from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager


def test_offsets_version_bumps_once_per_persisted_change() -> None:
    now = [1000]
    mgr = ConsumerOffsetManager(lambda: now[0])
    assert mgr.snapshot_for_persist() is None
    mgr.commit("G", "T", 0, 5)
    mgr.commit("G", "T", 0, 6)
    now[0] = 2000
    snap = mgr.snapshot_for_persist()
    assert snap is not None and snap.offsetTable == {"T@G": {0: 6}}
    assert (snap.dataVersion.counter, snap.dataVersion.timestamp) == (1, 2000)
    assert mgr.snapshot_for_persist() is None
    mgr.commit("G", "T", 0, 6)  # unchanged value: nothing to write
    assert mgr.snapshot_for_persist() is None
    assert mgr.query("G", "T", 0) == 6 and mgr.query("G", "T", 1) == -1
    assert mgr.remove_topic("T") and mgr.query("G", "T", 0) == -1
