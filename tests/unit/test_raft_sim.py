"""Seeded whole-cluster simulations of RaftCore (tests/sim/raft_sim.py).

`pytest --seeds N` (or RAFT_SIM_SEEDS=N) runs seeds 0..N-1 (default 200); `pytest --seed K` (or
RAFT_SIM_SEED=K) replays one seed, which is what a failure message tells you to run.
"""

from __future__ import annotations

import os

import pytest

from rocketrio.actors.raft.core import RaftCore
from rocketrio.protocol.raft import VoteRequest, VoteResponse
from tests.sim.raft_sim import RaftSim, SimFailure, SimParams


def _seeds() -> list[int]:
    one = os.environ.get("RAFT_SIM_SEED")
    if one is not None:
        return [int(one)]
    return list(range(int(os.environ.get("RAFT_SIM_SEEDS", "200"))))


@pytest.mark.parametrize("seed", _seeds())
def test_cluster_stays_safe_and_recovers(seed: int) -> None:
    stats = RaftSim(seed).run()
    assert stats["heal_ms"] <= 6000


def test_a_seed_replays_identically() -> None:
    first, second = RaftSim(41), RaftSim(41)
    assert first.run() == second.run()
    assert list(first.trace) == list(second.trace)
    assert first.applied == second.applied


def test_the_checker_catches_a_core_that_forgets_its_votes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = RaftCore._handle_vote

    def forgetful(self: RaftCore, req: VoteRequest, self_vote: bool) -> VoteResponse:
        self.voted_for = None
        return original(self, req, self_vote)

    monkeypatch.setattr(RaftCore, "_handle_vote", forgetful)
    with pytest.raises(SimFailure, match=r"(?s)two leaders in term .*replay: RAFT_SIM_SEED=\d+"):
        for seed in range(50):
            RaftSim(seed).run()


QUIET = {
    "chaos_ms": 0,
    "drop": 0.0,
    "max_delay_ms": 2,
    "max_disk_ms": 2,
    "fault_every_ms": (1, 2),
    "step_while_persisting": False,
    "snapshot_threshold": 1000,
    "max_batch_num": 64,
    "max_inflight": 8,
    "reorder": False,
}


@pytest.mark.parametrize("seed", range(40))
def test_leader_failover_within_1500_ms(seed: int) -> None:
    """Kill -9 of the leader on a LAN: a new leader followed by a majority within 1.5 s."""
    sim = RaftSim(seed, params=SimParams(nodes=3 + 2 * (seed % 2), **QUIET))
    sim.start_all()
    sim.run_for(2000 + seed * 7)  # crash at a different point of the heartbeat cycle
    old = sim.leader()
    assert old is not None
    sim.crash(old)
    crashed_at = sim.now
    while sim.leader() is None:
        assert sim.now - crashed_at <= 1500, f"seed={seed}: no new leader within 1500 ms"
        sim.run_for(1)
