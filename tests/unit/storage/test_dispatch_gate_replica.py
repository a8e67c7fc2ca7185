"""A slave's held records (`DispatchGate.replica`): released in CommitLog order up to any
confirmOffset, whole appends or part of one, and counted against the bound."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rocketrio.storage import dispatch_gate
from rocketrio.storage.commitlog import RecordFields
from rocketrio.storage.dispatch_gate import DispatchGate


def _appends(rng: random.Random, n: int) -> list[tuple[int, int, list[RecordFields]]]:
    """``n`` contiguous appends of 1-9 records of random sizes: (start, end, records)."""
    out, at = [], 0
    for _ in range(n):
        start, records = at, []
        for _ in range(rng.randint(1, 9)):
            size = rng.randint(60, 400)
            records.append((at, size, "T", 0, len(records), 0, 0, b""))
            at += size
        out.append((start, at, records))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_release_takes_exactly_the_records_that_end_at_or_below_the_limit(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    gate = DispatchGate(str(tmp_path / "confirm.checkpoint"))
    appends = _appends(rng, 12)
    every = [r for _, _, records in appends for r in records]
    ends = sorted({0} | {r[0] + r[1] for r in every} | {r[0] + r[1] // 2 for r in every})
    released: list[RecordFields] = []
    limit = dispatched = 0
    for start, end, records in appends:
        gate.hold_replicated(start, end, list(records), dispatched)
        # a confirm on a record's end, inside a record, or not moved at all
        limit = max(limit, rng.choice([e for e in ends if e <= end]))
        released += gate.release_replica(limit)
        dispatched = released[-1][0] + released[-1][1] if released else 0
        assert released == [r for r in every if r[0] + r[1] <= limit]
        assert gate.replica_held == sum(len(x) for x in gate.replica)
    released += gate.release_replica(appends[-1][1])
    assert released == every
    assert gate.replica_held == 0 and not gate.replica


def test_the_bound_counts_records_not_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past `REPLICA_HELD_MAX` held records the gate drops them all (dispatch scans); records
    released make room again."""
    monkeypatch.setattr(dispatch_gate, "REPLICA_HELD_MAX", 10)
    gate = DispatchGate(str(tmp_path / "confirm.checkpoint"))
    records = [(i * 100, 100, "T", 0, i, 0, 0, b"") for i in range(12)]
    gate.hold_replicated(0, 600, records[:6], dispatched=0)
    assert len(gate.release_replica(300)) == 3  # three held now
    gate.hold_replicated(600, 1200, records[6:12], dispatched=300)  # 3 + 6 <= 10: kept
    assert gate.replica_held == 9
    gate.hold_replicated(1200, 1300, [(1200, 100, "T", 0, 12, 0, 0, b"")], dispatched=300)
    assert gate.replica_held == 10  # exactly the bound
    gate.hold_replicated(1300, 1400, [(1300, 100, "T", 0, 13, 0, 0, b"")], dispatched=300)
    assert gate.replica_held == 0 and not gate.replica  # one more: all dropped
    assert gate.release_replica(10**9) == []
