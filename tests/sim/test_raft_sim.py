"""Seeded whole-cluster simulations of RaftCore (tests/sim/raft_sim.py).

`pytest --seeds N` (or RAFT_SIM_SEEDS=N) runs seeds 0..N-1 (default 200); `pytest --seed K` (or
RAFT_SIM_SEED=K) replays one seed, which is what a failure message tells you to run.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import attrs
import pytest

from rocketrio.actors.raft.core import RaftCore
from rocketrio.actors.raft.state import Role
from rocketrio.protocol.raft import AppendEntriesRequest, RaftMessage, VoteRequest, VoteResponse
from tests.sim.mutants import applied
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


# ------------------------------------------------------------------ scripted scenarios
# Each one also runs against the mutant it was written for (tests/sim/mutants.py) and must
# fail there: the checker catches the broken rule as lost or changed applied entries.

SCRIPTED = {**QUIET, "step_while_persisting": True, "max_batch_num": 1, "max_inflight": 4}


def _leader_among(sim: RaftSim, ids: set[str]) -> str | None:
    for node_id in ids:
        core = sim.nodes[node_id].core
        if core is not None and core.role is Role.LEADER:
            return node_id
    return None


def _unsynced_leader_entry_is_lost_with_the_leader(seed: int) -> None:
    """3 nodes; F2 cut off; the leader's fsync is slow; F1 stores and acks entry x at once.
    x is on one disk: it must not be committed (nor applied). Power cut of the leader, F1
    down, the leader and F2 elect a leader without x: had x been applied, it is lost."""
    sim = RaftSim(seed, params=SimParams(nodes=3, **SCRIPTED))
    sim.start_all()
    sim.run_until(lambda: sim.leader() is not None, 3000, "a leader")
    leader = sim.leader()
    assert leader is not None
    f1, f2 = sorted(set(sim.nodes) - {leader})
    sim.run_for(200)  # the no-op is committed everywhere
    sim.isolate({f2})
    sim.disk_ms[leader] = 400
    index = sim.propose(leader, b"x")
    f1_node = sim.nodes[f1]
    sim.run_until(lambda: any(e.index == index for e in f1_node.disk.log), 100, f"{f1} stored x")
    sim.run_for(20)  # F1's ack reaches the leader, whose fsync is still running
    assert all(e.index < index for e in sim.nodes[leader].disk.log)
    sim.crash(leader)
    sim.crash(f1)
    sim.isolate()
    sim.disk_ms.clear()
    sim.restart(leader)
    sim.run_until(lambda: _leader_among(sim, {leader, f2}) is not None, 3000, "a new leader")
    sim.run_for(500)
    sim.restart(f1)
    sim.heal()


def _figure_8(seed: int) -> None:
    """Raft paper figure 8 with 5 nodes: an entry of an old term, stored on a majority by a
    later leader, must not be committed by counting copies, because a node holding a newer
    term's entry at that index can still be elected and overwrite it."""
    sim = RaftSim(seed, params=SimParams(nodes=5, **SCRIPTED))
    sim.start_all()
    sim.run_until(lambda: sim.leader() is not None, 3000, "a leader")
    s1 = sim.leader()
    assert s1 is not None
    sim.run_for(300)
    others = sorted(set(sim.nodes) - {s1})
    s2 = others[0]
    rest = set(others[1:])
    # (a) S1 stores x at index i on itself and S2 only
    sim.isolate({s1, s2})
    i = sim.propose(s1, b"x")
    sim.run_until(lambda: any(e.index == i for e in sim.nodes[s2].disk.log), 200, "x on S2")
    sim.run_for(50)
    sim.crash(s1)

    # (b) a leader S5 among the other three, whose entries (its no-op at i) reach nobody
    def no_appends_from(frm: str, to: str, msg: RaftMessage) -> RaftMessage | None:
        return None if frm in rest and isinstance(msg, AppendEntriesRequest) else msg

    sim.filter = no_appends_from
    sim.run_until(lambda: _leader_among(sim, rest) is not None, 5000, "a leader S5 of the rest")
    s5 = _leader_among(sim, rest)
    assert s5 is not None
    sim.run_until(lambda: any(e.index == i for e in sim.nodes[s5].disk.log), 200, "S5's i")
    sim.crash(s5)
    # (c) S1 back; S1 or S2 leads a later term and sends i (term of x) to one more node, but
    # nothing past i: x is on a majority, the new leader's own no-op only on itself
    s3 = sorted(rest - {s5})[0]
    sim.isolate({s1, s2, s3, *rest - {s5}})
    sim.restart(s1)

    def only_up_to_i(frm: str, to: str, msg: RaftMessage) -> RaftMessage:
        if isinstance(msg, AppendEntriesRequest):
            return attrs.evolve(msg, entries=tuple(e for e in msg.entries if e.index <= i))
        return msg

    sim.filter = only_up_to_i
    sim.run_until(lambda: _leader_among(sim, {s1, s2}) is not None, 5000, "S1 or S2 leads")
    s_lead = _leader_among(sim, {s1, s2})
    assert s_lead is not None
    sim.run_until(
        lambda: any(e.index == i and e.data == b"x" for e in sim.nodes[s3].disk.log),
        500, "x on S3",
    )  # fmt: skip
    sim.run_for(50)  # S3's ack reaches the leader
    # (d) S1 and S2 die; S5 (newer term at i) is elected by S3 and S4 and overwrites x
    s_other = ({s1, s2} - {s_lead}).pop()
    sim.crash(s_lead)
    sim.crash(s_other)
    sim.filter = None
    sim.isolate()
    sim.restart(s5)
    sim.run_until(lambda: sim.leader() == s5, 8000, "S5 elected")
    sim.run_for(300)
    sim.restart(s_lead)
    sim.restart(s_other)
    sim.heal()


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(
    ("scenario", "mutant"),
    [
        (_unsynced_leader_entry_is_lost_with_the_leader, "raft_leader_counts_unsynced"),
        (_figure_8, "raft_commit_earlier_term"),
    ],
)
def test_scripted_scenario_and_its_mutant(
    scenario: Callable[[int], None], mutant: str, seed: int
) -> None:
    scenario(seed)
    with applied(mutant), pytest.raises(SimFailure, match=r"applied"):
        scenario(seed)
