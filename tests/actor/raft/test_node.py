"""RaftNode on the simulated network: 3 nodes, real RaftLogs in tmp dirs, a counter machine.

Each node runs behind its own RemotingServer (RAFT_MESSAGE) on a `SimNetwork` host; the clock is
Trio's MockClock (autojump) and storage runs inline so virtual time does not race a worker
thread. Every test is seeded (SimNetwork jitter and each node's election randomness): a failure
replays with the same seed. Checked throughout: at most one leader per term.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import attrs
import pytest
import structlog.testing
import trio

from rocketrio.actors.kernel.remoting import RemotingServer
from rocketrio.actors.raft.config import RaftConfig
from rocketrio.actors.raft.node import (
    NotLeader,
    ProposalDropped,
    RaftNode,
    Role,
    run_inline,
)
from tests.harness.raft import slow_disk
from tests.harness.sim_network import SimNetwork

IDS = ("n0", "n1", "n2")
HOSTS = {nid: f"10.0.0.{k + 1}" for k, nid in enumerate(IDS)}
PEERS = ";".join(f"{nid}-{HOSTS[nid]}:9878" for nid in IDS)


class CounterMachine:
    """Adds the integer in each entry; `apply` answers the running total."""

    def __init__(self) -> None:
        self.total = 0
        self.count = 0
        self.restored_from: int | None = None

    def apply(self, data: bytes) -> int:
        self.total += int(data)
        self.count += 1
        return self.total

    def snapshot(self) -> bytes:
        return json.dumps({"total": self.total, "count": self.count}).encode()

    def restore(self, data: bytes) -> None:
        doc = json.loads(data)
        self.total, self.count = doc["total"], doc["count"]
        self.restored_from = self.count


@attrs.define
class Member:
    node_id: str
    node: RaftNode | None = None
    sm: CounterMachine | None = None
    scope: trio.CancelScope | None = None


@attrs.define
class RaftCluster:
    net: SimNetwork
    nursery: trio.Nursery
    tmp: Path
    seed: int
    overrides: dict[str, int]
    slow: bool = False
    members: dict[str, Member] = attrs.field(factory=dict)
    leaders_by_term: dict[int, str] = attrs.field(factory=dict)
    restarts: int = 0

    def config(self, nid: str) -> RaftConfig:
        return RaftConfig(group="g", selfId=nid, peers=PEERS, **self.overrides)

    async def start(self, nid: str) -> RaftNode:
        m = self.members.setdefault(nid, Member(nid))
        m.sm = CounterMachine()
        self.restarts += 1
        node = RaftNode(
            self.config(nid),
            str(self.tmp / nid),
            m.sm,
            self.net.transport(HOSTS[nid]),
            rng=random.Random(self.seed * 1000 + self.restarts),
            io_runner=slow_disk(self.seed * 1000 + self.restarts) if self.slow else run_inline,
        )
        node.on_role_change = lambda role, term, leader: self._check_role(nid, role, term)
        m.node = node
        m.scope = await self.nursery.start(self._run, node, HOSTS[nid])
        return node

    async def _run(
        self, node: RaftNode, host: str, *, task_status: trio.TaskStatus[trio.CancelScope]
    ) -> None:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as n:
                server = RemotingServer(self.net.transport(host), f"{host}:9878", node.processor)
                await n.start(server.run)
                await n.start(node.run)
                task_status.started(scope)

    def _check_role(self, nid: str, role: Role, term: int) -> None:
        if role is Role.LEADER:
            other = self.leaders_by_term.setdefault(term, nid)
            assert other == nid, f"two leaders in term {term}: {other} and {nid} (seed {self.seed})"

    def crash(self, nid: str) -> None:
        m = self.members[nid]
        self.net.crash(HOSTS[nid])
        assert m.scope is not None
        m.scope.cancel()

    def node(self, nid: str) -> RaftNode:
        node = self.members[nid].node
        assert node is not None
        return node

    def sm(self, nid: str) -> CounterMachine:
        sm = self.members[nid].sm
        assert sm is not None
        return sm

    async def leader(self, among: tuple[str, ...] = IDS, timeout_s: float = 5.0) -> RaftNode:
        """The ready leader among `among` (waits for one)."""
        with trio.fail_after(timeout_s):
            while True:
                for nid in among:
                    node = self.members[nid].node
                    if node is not None and node.started and node.is_ready_leader:
                        return node
                await trio.sleep(0.01)

    async def converged(self, nids: tuple[str, ...], timeout_s: float = 10.0) -> None:
        """Wait until the given nodes applied the same number of entries with the same total."""
        with trio.fail_after(timeout_s):
            while True:
                states = {(self.sm(n).count, self.sm(n).total) for n in nids}
                applied = {self.node(n).applied_index for n in nids}
                if len(states) == 1 and len(applied) == 1:
                    return
                await trio.sleep(0.05)


async def _cluster(
    nursery: trio.Nursery, tmp: Path, seed: int, slow: bool = False, **overrides: int
) -> RaftCluster:
    cluster = RaftCluster(SimNetwork(seed), nursery, tmp, seed, overrides, slow)
    for nid in IDS:
        await cluster.start(nid)
    return cluster


async def _propose_all(node: RaftNode, values: list[int]) -> list[Any]:
    """Propose concurrently (pipelined); returns the outcomes in proposal order."""
    out: list[Any] = [None] * len(values)

    async def one(i: int, v: int) -> None:
        out[i] = await node.propose(str(v).encode(), timeout_s=5)

    async with trio.open_nursery() as n:
        for i, v in enumerate(values):
            n.start_soon(one, i, v)
            await trio.sleep(0)
    return out


@pytest.mark.parametrize("slow", [False, True], ids=["disk", "slow_disk"])
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_election_and_pipelined_commits(
    tmp_path: Path, mock_clock: trio.testing.MockClock, seed: int, slow: bool
) -> None:
    async with trio.open_nursery() as nursery:
        c = await _cluster(nursery, tmp_path, seed, slow)
        leader = await c.leader()
        followers = tuple(n for n in IDS if n != leader.self_id)
        for nid in followers:
            with pytest.raises(NotLeader) as info:
                await c.node(nid).propose(b"1")
            assert info.value.leader_id in (leader.self_id, None)
        outcomes = await _propose_all(leader, list(range(1, 101)))
        # each proposer gets the total right after ITS entry: strictly increasing, ends at 5050
        assert sorted(outcomes) == outcomes and outcomes[-1] == 5050
        assert len(set(outcomes)) == 100
        await c.converged(IDS)
        assert c.sm(followers[0]).total == 5050
        nursery.cancel_scope.cancel()


async def test_read_barrier_only_on_the_leader(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        c = await _cluster(nursery, tmp_path, 7)
        leader = await c.leader()
        await leader.propose(b"5")
        await leader.read_barrier(timeout_s=2)
        assert leader.applied_index >= leader.commit_index
        follower = next(n for n in IDS if n != leader.self_id)
        with pytest.raises(NotLeader):
            await c.node(follower).read_barrier(timeout_s=2)
        # a leader cut off from both followers cannot confirm its leadership
        c.net.isolate(HOSTS[leader.self_id], [HOSTS[n] for n in IDS if n != leader.self_id])
        with pytest.raises((NotLeader, trio.TooSlowError)):
            await leader.read_barrier(timeout_s=3)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("slow", [False, True], ids=["disk", "slow_disk"])
@pytest.mark.parametrize("seed", [4, 5])
async def test_leader_crash_failover_and_restart_catch_up(
    tmp_path: Path, mock_clock: trio.testing.MockClock, seed: int, slow: bool
) -> None:
    async with trio.open_nursery() as nursery:
        c = await _cluster(nursery, tmp_path, seed, slow)
        old = await c.leader()
        await _propose_all(old, [1] * 20)
        old_id = old.self_id
        survivors = tuple(n for n in IDS if n != old_id)
        crashed_at = trio.current_time()
        c.crash(old_id)
        new = await c.leader(among=survivors)
        failover_s = trio.current_time() - crashed_at
        # leader lost after 3 x 200 ms, then a vote back-off of 150-400 ms, plus a vote round
        assert failover_s <= 1.5, f"failover took {failover_s:.3f}s (seed {seed})"
        assert new.term > old.term or new.self_id != old_id
        assert await new.propose(b"100") == 120  # the new leader holds every committed entry
        await c.converged(survivors)
        await c.start(old_id)  # restart from its own store
        await c.converged(IDS)
        assert c.sm(old_id).total == 120
        assert c.node(old_id).role is Role.FOLLOWER
        nursery.cancel_scope.cancel()


async def test_restarted_follower_catches_up_from_a_snapshot(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        c = await _cluster(nursery, tmp_path, 11, True, snapshotThreshold=20)
        leader = await c.leader()
        await _propose_all(leader, [1] * 5)
        follower = next(n for n in IDS if n != leader.self_id)
        await c.converged(IDS)
        c.crash(follower)
        await _propose_all(leader, [2] * 60)
        await trio.sleep(0.5)
        # the leader compacted past everything the follower holds: only a snapshot helps
        assert leader.core.snapshot_index > c.node(follower).applied_index
        assert (tmp_path / leader.self_id / "snapshot").exists()
        node = await c.start(follower)
        await c.converged(IDS)
        assert c.sm(follower).total == 125
        assert c.sm(follower).restored_from is not None  # restored from the leader's snapshot
        assert node.core.snapshot_index >= leader.core.snapshot_index - 20
        nursery.cancel_scope.cancel()


async def test_snapshot_survives_a_whole_cluster_restart(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        c = await _cluster(nursery, tmp_path, 13, snapshotThreshold=10)
        leader = await c.leader()
        await _propose_all(leader, list(range(1, 36)))
        await c.converged(IDS)
        for nid in IDS:
            c.crash(nid)
        await trio.sleep(1)
        for nid in IDS:
            await c.start(nid)
        leader = await c.leader()
        # state comes back from each node's snapshot + log; the new leader's no-op commits it
        await c.converged(IDS)
        assert c.sm(leader.self_id).total == sum(range(1, 36))
        assert all(c.sm(n).restored_from is not None for n in IDS)
        assert await leader.propose(b"1") == sum(range(1, 36)) + 1
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("slow", [False, True], ids=["disk", "slow_disk"])
@pytest.mark.parametrize("seed", [21, 22])
async def test_partition_minority_leader_loses_uncommitted_writes(
    tmp_path: Path, mock_clock: trio.testing.MockClock, seed: int, slow: bool
) -> None:
    async with trio.open_nursery() as nursery:
        c = await _cluster(nursery, tmp_path, seed, slow)
        old = await c.leader()
        await old.propose(b"10")
        majority = tuple(n for n in IDS if n != old.self_id)
        c.net.isolate(HOSTS[old.self_id], [HOSTS[n] for n in majority])

        stranded: list[BaseException] = []

        async def doomed() -> None:
            try:
                await old.propose(b"1000", timeout_s=30)
            except (ProposalDropped, NotLeader) as e:
                stranded.append(e)

        nursery.start_soon(doomed)
        new = await c.leader(among=majority)
        assert await new.propose(b"5") == 15  # the majority side keeps committing
        c.net.heal()
        await c.converged(IDS)
        await trio.sleep(1)
        # the minority's entry never committed: its proposer learns that, nobody applied it
        assert len(stranded) == 1
        assert all(c.sm(n).total == 15 for n in IDS)
        assert old.role is not Role.LEADER or old.term > new.term
        nursery.cancel_scope.cancel()


async def test_partitioned_follower_rejoins(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        c = await _cluster(nursery, tmp_path, 31)
        leader = await c.leader()
        follower = next(n for n in IDS if n != leader.self_id)
        c.net.isolate(HOSTS[follower], [HOSTS[n] for n in IDS if n != follower])
        # the majority (leader + one follower) still commits
        assert (await _propose_all(leader, [3] * 10))[-1] == 30
        await trio.sleep(2)  # the isolated follower campaigns in vain, its term grows
        c.net.heal()
        await c.converged(IDS, timeout_s=15)
        assert c.sm(follower).total == 30
        final = await c.leader()
        assert await final.propose(b"1") == 31
        nursery.cancel_scope.cancel()


async def test_unreachable_members_count_as_answered_in_vote_rounds(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        c = await _cluster(nursery, tmp_path, 41)
        leader = await c.leader()
        survivor = next(n for n in IDS if n != leader.self_id)
        for nid in IDS:
            if nid != survivor:
                c.crash(nid)
        with structlog.testing.capture_logs() as logs:
            await trio.sleep(3)
        rounds = [
            e for e in logs if e["event"] == "raft_vote_result" and e.get("raft_id") == survivor
        ]
        # refused connections are reported to the core: rounds end with all 3 members
        # answered (itself + two UNKNOWN), not at their deadline, and no leader comes out
        assert rounds and all(e["answered_num"] == 3 and e["valid_num"] == 1 for e in rounds)
        assert c.node(survivor).role is Role.CANDIDATE
        nursery.cancel_scope.cancel()
