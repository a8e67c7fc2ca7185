"""Seeded random-fault runs of real RaftNodes on the simulated network (MockClock).

The actor-level twin of tests/sim/raft_sim.py: 3 or 5 `RaftNode`s with real `RaftLog`s in tmp
dirs, each behind a `RemotingServer` on a `SimNetwork` host, under Trio's autojump MockClock.
One `random.Random(seed)` draws the cluster (size, disk speed, snapshot threshold) and every
step: crash a node (cancel its scope, reset its connections) and later restart it from its
store dir; partition a minority from the majority or block one link; add link delay; cut a
link (every stream resets, what was in flight is lost); heal; or start a batch of client
proposals (each command a unique id, sent to the believed leader, following NotLeader hints).
Every step then lets some virtual time pass. SimNetwork models loss the way TCP shows it:
as a delay (partition, bytes held) or a reset (cut, crash).

The state machine records the ordered list of applied command ids. Checked after every step:
1. at most one leader per term over the whole run (role hooks plus polling);
2. every replica's applied sequence is a prefix of the longest one seen so far, no id is
   applied twice, and a replica's sequence never shrinks while it runs (committed entries
   never change, replicas agree);
Then every node is restarted and
3. with a random minority partitioned away, the majority must get a fresh command acknowledged
   within `LIVENESS_BOUND_S` of virtual time; healed completely, again; and all replicas must
   then converge on the same sequence;
4. every acknowledged command appears exactly once in that final sequence, at the position
   its proposer was told.

Seeds: `RAFT_NODE_SEEDS=N` runs seeds 0..N-1; without it `--seeds N` (which sets
RAFT_SIM_SEEDS) runs N here too; the default is `DEFAULT_SEEDS`. `RAFT_NODE_SEED=K` (or
`--seed K`, i.e. RAFT_SIM_SEED) replays one seed, as a failure message says. A replay is the
same run: the fault schedule, the network jitter and Trio's own task order all come from the
seed (`seed_trio_scheduler`), and time is MockClock's (test_a_seed_replays_the_same_run).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import attrs
import pytest
import trio
import trio.testing

from rocketrio.actors.kernel.remoting import RemotingServer
from rocketrio.actors.raft.config import RaftConfig
from rocketrio.actors.raft.node import (
    LeaderPendingFull,
    NotLeader,
    ProposalDropped,
    RaftNode,
    Role,
    run_inline,
)
from tests.harness.raft import slow_disk
from tests.harness.sim_network import SimNetwork
from tests.harness.trio_seed import seed_trio_scheduler

DEFAULT_SEEDS = 30
LIVENESS_BOUND_S = 10.0
CONVERGE_BOUND_S = 10.0
PROPOSE_TIMEOUT_S = 2.0
CLIENT_ATTEMPTS = 8
PORT = 9878


def _seeds() -> list[int]:
    one = os.environ.get("RAFT_NODE_SEED") or os.environ.get("RAFT_SIM_SEED")
    if one:
        return [int(one)]
    count = os.environ.get("RAFT_NODE_SEEDS") or os.environ.get("RAFT_SIM_SEEDS")
    return list(range(int(count) if count else DEFAULT_SEEDS))


class FaultFailure(AssertionError):
    """A safety or liveness violation; the message names the seed and how to replay it."""


# ---------------------------------------------------------------------------- state machines


class LogMachine:
    """Records the ordered command ids it applied; `apply` answers the 1-based position."""

    def __init__(self) -> None:
        self.applied: list[bytes] = []

    def apply(self, data: bytes) -> int:
        self.applied.append(data)
        return len(self.applied)

    def snapshot(self) -> bytes:
        return b"\n".join(self.applied)  # ids never hold a newline

    def restore(self, data: bytes) -> None:
        self.applied = data.split(b"\n") if data else []


class DroppingMachine(LogMachine):
    """A broken replica (to prove the checker has teeth): silently skips its 5th command."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = 0

    def apply(self, data: bytes) -> int:
        self.seen += 1
        if self.seen == 5:
            return len(self.applied)
        return super().apply(data)


# ---------------------------------------------------------------------------- the checker


@attrs.define
class SafetyChecker:
    """Pure bookkeeping of what the run observed; raises `FaultFailure` on a violation."""

    seed: int
    context: str = "start"
    leaders_by_term: dict[int, str] = attrs.field(factory=dict)
    history: list[bytes] = attrs.field(factory=list)  # longest applied sequence seen
    in_history: set[bytes] = attrs.field(factory=set)
    lengths: dict[str, int] = attrs.field(factory=dict)  # replica incarnation -> applied count
    problems: list[str] = attrs.field(factory=list)

    def fail(self, what: str) -> NoReturn:
        raise FaultFailure(
            f"{what} [seed {self.seed}, {self.context}]\n"
            f"replay: RAFT_NODE_SEED={self.seed} pytest tests/actor/raft/test_node_faults.py"
        )

    def saw_role(self, nid: str, role: Role, term: int) -> None:
        """Safe to call from a node task: a conflict is kept until the next `check_*`."""
        if role is not Role.LEADER:
            return
        other = self.leaders_by_term.setdefault(term, nid)
        if other != nid:
            self.problems.append(f"two leaders in term {term}: {other} and {nid}")

    def check_applied(self, seqs: dict[str, list[bytes]]) -> None:
        """`seqs`: replica incarnation key -> its state machine's applied ids, right now."""
        if self.problems:
            self.fail(self.problems[0])
        for key, seq in seqs.items():
            if len(seq) < self.lengths.get(key, 0):
                self.fail(f"{key} applied {len(seq)} ids after {self.lengths[key]}")
            self.lengths[key] = len(seq)
            common = min(len(seq), len(self.history))
            if seq[:common] != self.history[:common]:
                at = next(i for i in range(common) if seq[i] != self.history[i])
                self.fail(
                    f"{key} applied {seq[at]!r} at position {at + 1} where another replica "
                    f"applied {self.history[at]!r}"
                )
            for i in range(common, len(seq)):
                if seq[i] in self.in_history:
                    self.fail(f"{key} applied {seq[i]!r} twice (again at position {i + 1})")
                self.in_history.add(seq[i])
                self.history.append(seq[i])

    def check_final(self, seqs: dict[str, list[bytes]], acked: dict[bytes, int]) -> None:
        """After healing: all replicas agree, every acknowledged id is in, where it was told."""
        self.check_applied(seqs)
        for key, seq in seqs.items():
            if seq != self.history:
                self.fail(f"{key} holds {len(seq)} ids, the longest replica {len(self.history)}")
        for cmd, position in acked.items():
            if cmd not in self.in_history:
                self.fail(f"acknowledged {cmd!r} is missing from the final applied sequence")
            if self.history[position - 1] != cmd:
                self.fail(f"{cmd!r} was acknowledged at position {position}, applied elsewhere")


# ---------------------------------------------------------------------------- the cluster


@attrs.define
class Replica:
    nid: str
    host: str
    node: RaftNode | None = None
    sm: LogMachine | None = None
    scope: trio.CancelScope | None = None
    stopped: trio.Event | None = None
    incarnation: int = 0
    up: bool = False

    @property
    def key(self) -> str:
        return f"{self.nid}#{self.incarnation}"


def _pick(rng: random.Random, items: list[str]) -> str:
    """One draw whatever the list, so a schedule's later draws do not depend on its size."""
    return items[min(int(rng.random() * len(items)), len(items) - 1)]


@attrs.define
class FaultRun:
    seed: int
    tmp: Path
    nursery: trio.Nursery
    machine: Callable[[str], LogMachine]
    rng: random.Random
    net: SimNetwork
    checker: SafetyChecker
    replicas: dict[str, Replica]
    peers: str
    slow: bool
    overrides: dict[str, int]
    acked: dict[bytes, int] = attrs.field(factory=dict)
    next_cmd: int = 0
    leader_hint: str | None = None
    clients: trio.Nursery | None = None
    stats: dict[str, int] = attrs.field(factory=dict)

    @classmethod
    def create(
        cls,
        seed: int,
        tmp: Path,
        nursery: trio.Nursery,
        machine: Callable[[str], LogMachine],
        checker: SafetyChecker,
    ) -> FaultRun:
        rng = random.Random(seed)
        size = 3 if rng.random() < 0.6 else 5
        ids = [f"n{k}" for k in range(size)]
        replicas = {nid: Replica(nid, f"10.0.1.{k + 1}") for k, nid in enumerate(ids)}
        peers = ";".join(f"{r.nid}-{r.host}:{PORT}" for r in replicas.values())
        return cls(
            seed=seed,
            tmp=tmp,
            nursery=nursery,
            machine=machine,
            rng=rng,
            net=SimNetwork(rng.getrandbits(32)),
            checker=checker,
            replicas=replicas,
            peers=peers,
            slow=rng.random() < 0.5,
            overrides={"snapshotThreshold": rng.choice([10, 25, 1000])},
        )

    def _count(self, what: str) -> None:
        self.stats[what] = self.stats.get(what, 0) + 1

    # -- lifecycle of one replica

    async def start(self, nid: str) -> None:
        r = self.replicas[nid]
        if r.stopped is not None:
            await r.stopped.wait()  # the old incarnation closed its RaftLog
        r.incarnation += 1
        r.sm = self.machine(nid)
        node_seed = self.rng.getrandbits(32)
        node = RaftNode(
            RaftConfig(group="g", selfId=nid, peers=self.peers, **self.overrides),
            str(self.tmp / nid),
            r.sm,
            self.net.transport(r.host),
            rng=random.Random(node_seed),
            io_runner=slow_disk(node_seed) if self.slow else run_inline,
        )
        node.on_role_change = lambda role, term, _leader: self.checker.saw_role(nid, role, term)
        r.node, r.stopped, r.up = node, trio.Event(), True
        r.scope = await self.nursery.start(self._serve, node, r.host, r.stopped)

    async def _serve(
        self,
        node: RaftNode,
        host: str,
        stopped: trio.Event,
        *,
        task_status: trio.TaskStatus[trio.CancelScope],
    ) -> None:
        try:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as n:
                    transport = self.net.transport(host)
                    server = RemotingServer(transport, f"{host}:{PORT}", node.processor)
                    await n.start(server.run)
                    await n.start(node.run)
                    task_status.started(scope)
        finally:
            stopped.set()

    def crash(self, nid: str) -> None:
        r = self.replicas[nid]
        self.net.crash(r.host)
        assert r.scope is not None
        r.scope.cancel()
        r.up = False

    def up_ids(self) -> list[str]:
        return [nid for nid, r in self.replicas.items() if r.up]

    def leader(self, among: list[str] | None = None) -> str | None:
        """A running node (of `among`) that believes it leads in the highest term, or None."""
        best: tuple[int, str] | None = None
        for nid, r in self.replicas.items():
            if among is not None and nid not in among:
                continue
            if r.up and r.node is not None and r.node.started and r.node.is_leader:
                if best is None or r.node.term > best[0]:
                    best = (r.node.term, nid)
        return best[1] if best else None

    # -- checks

    def check(self) -> None:
        for nid, r in self.replicas.items():
            if r.up and r.node is not None and r.node.started:
                self.checker.saw_role(nid, r.node.role, r.node.term)
        self.checker.check_applied(self.sequences())

    def sequences(self) -> dict[str, list[bytes]]:
        """Running replicas only: a crashed one's machine is gone with its process."""
        return {r.key: r.sm.applied for r in self.replicas.values() if r.up and r.sm is not None}

    # -- clients

    def _new_cmd(self) -> bytes:
        self.next_cmd += 1
        return b"c%d" % self.next_cmd

    async def propose_one(self, rng: random.Random) -> None:
        """One client command, up to `CLIENT_ATTEMPTS`; each attempt carries a fresh id, so an
        attempt whose fate is unknown (timeout, dropped) is never applied twice."""
        target = self.leader_hint or _pick(rng, list(self.replicas))
        for _ in range(CLIENT_ATTEMPTS):
            r = self.replicas.get(target)
            if r is None or not r.up or r.node is None or not r.node.started:
                target = _pick(rng, self.up_ids() or list(self.replicas))
                await trio.sleep(0.05)
                continue
            cmd = self._new_cmd()
            try:
                outcome = await r.node.propose(cmd, timeout_s=PROPOSE_TIMEOUT_S)
            except NotLeader as e:
                target = e.leader_id or _pick(rng, list(self.replicas))
                await trio.sleep(rng.uniform(0.02, 0.3))  # no leader yet: back off
                continue
            except LeaderPendingFull:
                await trio.sleep(0.1)
                continue
            except (ProposalDropped, trio.TooSlowError):
                self._count("unknown")
                return
            self.acked[cmd] = outcome
            self.leader_hint = r.nid
            return
        self._count("gave_up")

    async def client_batch(self, rng: random.Random, count: int) -> None:
        """`count` commands pipelined, so the leader batches them."""
        async with trio.open_nursery() as n:
            for _ in range(count):
                n.start_soon(self.propose_one, random.Random(rng.getrandbits(32)))
                await trio.sleep(0)

    # -- one step of chaos

    async def step(self) -> str:
        """Draw and apply one action; returns its description for failure messages."""
        rng = self.rng
        roll, a, b = rng.random(), rng.random(), rng.random()
        ids, up = list(self.replicas), self.up_ids()
        down = [nid for nid in ids if nid not in up]
        if roll < 0.12 and up:
            leader = self.leader()
            nid = leader if leader is not None and a < 0.5 else _pick(random.Random(b), up)
            self.crash(nid)
            return f"crash {nid}"
        if roll < 0.26 and down:
            nid = _pick(random.Random(a), down)
            await self.start(nid)
            return f"restart {nid}"
        if roll < 0.36:
            return self._partition(a, b)
        if roll < 0.44:
            self.net.heal()
            return "heal"
        if roll < 0.52:
            x, y = random.Random(a).sample(ids, 2)
            extra = (0.002, 0.02, 0.15, 0.6)[int(b * 4)]
            self.net.set_delay(self.replicas[x].host, self.replicas[y].host, extra)
            return f"delay {x}-{y} +{extra}s"
        if roll < 0.60:
            x, y = random.Random(a).sample(ids, 2)
            self.net.cut(self.replicas[x].host, self.replicas[y].host)
            return f"cut {x}-{y}"
        assert self.clients is not None
        count = 1 + int(a * 12)
        self.clients.start_soon(self.client_batch, random.Random(rng.getrandbits(32)), count)
        return f"propose x{count}"

    def _partition(self, a: float, b: float) -> str:
        ids = list(self.replicas)
        shuffled = random.Random(b).sample(ids, len(ids))
        if a < 0.3:  # one link only: a non-transitive partition
            x, y = shuffled[:2]
            self.net.partition([self.replicas[x].host], [self.replicas[y].host])
            return f"block {x}-{y}"
        minority = shuffled[: 1 + int(a * 10) % (len(ids) // 2)]
        rest = [nid for nid in ids if nid not in minority]
        self.net.partition(
            [self.replicas[n].host for n in minority], [self.replicas[n].host for n in rest]
        )
        return f"split {minority}|{rest}"

    async def chaos(self, steps: int) -> None:
        for i in range(steps):
            action = await self.step()
            self._count(action.split()[0])
            await trio.sleep(self.rng.uniform(0.05, 1.2))
            self.checker.context = f"step {i}: {action}, t={trio.current_time():.3f}"
            self.check()

    async def drive(self, stats: dict[str, float]) -> None:
        """Start every node, run the chaos with clients, then the liveness phases."""
        for nid in self.replicas:
            await self.start(nid)
        failure: FaultFailure | None = None
        async with trio.open_nursery() as clients:
            self.clients = clients
            try:
                await self.chaos(20 + int(self.rng.random() * 20))
            except FaultFailure as e:  # raised here, not wrapped in the clients' group
                failure = e
            clients.cancel_scope.cancel()
        if failure is not None:
            raise failure
        stats["majority_commit_s"], stats["healed_commit_s"] = await self.liveness()
        await self.converge()

    # -- healing and liveness

    async def liveness(self) -> tuple[float, float]:
        """Restart everything; a random minority partitioned away, the majority must commit a
        command within `LIVENESS_BOUND_S`; then all healed, again. Returns both delays."""
        self.net.heal()
        for nid in list(self.replicas):
            if not self.replicas[nid].up:
                await self.start(nid)
        ids = list(self.replicas)
        shuffled = self.rng.sample(ids, len(ids))
        minority = shuffled[: 1 + int(self.rng.random() * ((len(ids) - 1) // 2))]
        majority = [nid for nid in ids if nid not in minority]
        self.net.partition(
            [self.replicas[n].host for n in minority], [self.replicas[n].host for n in majority]
        )
        split_s = await self.commit_within(majority, f"majority {majority} split from {minority}")
        self.net.heal()
        return split_s, await self.commit_within(ids, "everything healed")

    async def commit_within(self, among: list[str], situation: str) -> float:
        """Propose fresh commands to the ready leader among `among` until one is
        acknowledged; fails the run if that takes longer than `LIVENESS_BOUND_S`."""
        began = trio.current_time()
        self.checker.context = f"liveness: {situation} at t={began:.3f}"
        deadline = began + LIVENESS_BOUND_S
        while trio.current_time() < deadline:
            self.check()
            leader = self.leader(among)
            node = self.replicas[leader].node if leader else None
            if node is None or not node.is_ready_leader:
                await trio.sleep(0.05)
                continue
            cmd = self._new_cmd()
            with trio.move_on_at(deadline):
                try:
                    self.acked[cmd] = await node.propose(cmd, timeout_s=1.0)
                    return trio.current_time() - began
                except (NotLeader, LeaderPendingFull, ProposalDropped, trio.TooSlowError):
                    await trio.sleep(0.05)
        self.checker.fail(f"no command committed within {LIVENESS_BOUND_S}s")

    async def converge(self) -> None:
        """Wait (bounded) until every replica applied the same sequence, then check it all."""
        deadline = trio.current_time() + CONVERGE_BOUND_S
        while True:
            self.check()
            seqs = self.sequences()
            if all(seq == self.checker.history for seq in seqs.values()):
                break
            if trio.current_time() >= deadline:
                break  # check_final names the replica that lags
            await trio.sleep(0.05)
        self.checker.context = f"final state at t={trio.current_time():.3f}"
        self.checker.check_final(self.sequences(), self.acked)


async def run_seed(
    seed: int, tmp: Path, machine: Callable[[str], LogMachine] = lambda _nid: LogMachine()
) -> dict[str, float]:
    """One whole run: start, chaos, liveness, final checks. Returns run statistics."""
    seed_trio_scheduler(seed)  # with MockClock and the seeded network: the same schedule again
    checker = SafetyChecker(seed)
    failure: FaultFailure | None = None
    stats: dict[str, float] = {}
    try:
        async with trio.open_nursery() as nursery:
            run = FaultRun.create(seed, tmp, nursery, machine, checker)
            try:
                await run.drive(stats)
            except FaultFailure as e:
                failure = e
            stats.update(run.stats, nodes=len(run.replicas), acked=len(run.acked))
            stats["applied"] = len(checker.history)
            nursery.cancel_scope.cancel()
    except Exception as e:  # a node task crashed: the failure still says how to replay
        checker.fail(f"a task raised {_leaves(e)}")
    if failure is not None:
        raise failure
    return stats


def _leaves(exc: BaseException) -> list[BaseException]:
    """The real errors inside (nested) nursery exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


# ---------------------------------------------------------------------------- tests


@pytest.mark.parametrize("seed", _seeds())
async def test_random_faults_keep_raft_nodes_safe_and_live(
    tmp_path: Path, mock_clock: trio.testing.MockClock, seed: int
) -> None:
    stats = await run_seed(seed, tmp_path)
    assert max(stats["majority_commit_s"], stats["healed_commit_s"]) <= LIVENESS_BOUND_S
    assert stats["applied"] >= stats["acked"] >= 2


async def test_a_seed_replays_the_same_run(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    first = await run_seed(3, tmp_path / "a")
    again = await run_seed(3, tmp_path / "b")
    # the second run starts later on the mock clock: durations differ only in float rounding
    assert {k: round(v, 6) for k, v in first.items()} == {k: round(v, 6) for k, v in again.items()}


async def test_a_replica_that_drops_an_entry_is_caught(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    def machine(nid: str) -> LogMachine:
        return DroppingMachine() if nid == "n1" else LogMachine()

    replay = r"replay: RAFT_NODE_SEED=\d pytest tests/actor/raft/test_node_faults.py"
    with pytest.raises(FaultFailure, match=rf"(?s)position \d+.*seed \d.*{replay}"):
        for seed in (1, 2, 3):
            await run_seed(seed, tmp_path / str(seed), machine)


A, B, C = b"c1", b"c2", b"c3"


@pytest.mark.parametrize(
    ("steps", "acked", "error"),
    [
        ([{"n0#1": [A, B], "n1#1": [A]}, {"n1#1": [A, B, C]}], {A: 1, C: 3}, None),
        ([{"n0#1": [A, B]}, {"n1#1": [A, C]}], {}, r"n1#1 applied b'c3' at position 2"),
        ([{"n0#1": [A, B, A]}], {}, r"applied b'c1' twice"),
        ([{"n0#1": [A, B]}, {"n0#1": [A]}], {}, r"n0#1 applied 1 ids after 2"),
        ([{"n0#1": [A, B]}, {"n0#2": [A]}], {}, r"n0#2 holds 1 ids, the longest replica 2"),
        ([{"n0#1": [A]}], {B: 2}, r"acknowledged b'c2' is missing"),
        ([{"n0#1": [A, B]}], {B: 1}, r"b'c2' was acknowledged at position 1"),
    ],
    ids=["agree", "diverge", "twice", "shrink", "lagging", "lost_ack", "moved_ack"],
)
def test_the_checker_flags_each_violation(
    steps: list[dict[str, list[bytes]]], acked: dict[bytes, int], error: str | None
) -> None:
    checker = SafetyChecker(7, context="table")
    if error is None:
        for seqs in steps:
            checker.check_applied(seqs)
        checker.check_final({"n0#1": [A, B, C], "n1#1": [A, B, C]}, acked)
        return
    with pytest.raises(FaultFailure, match=rf"(?s){error}.*seed 7.*RAFT_NODE_SEED=7 pytest"):
        for seqs in steps[:-1]:
            checker.check_applied(seqs)
        checker.check_final(steps[-1], acked)


def test_the_checker_flags_two_leaders_in_one_term() -> None:
    checker = SafetyChecker(3)
    checker.saw_role("n0", Role.LEADER, 4)
    checker.saw_role("n0", Role.LEADER, 4)  # the same leader seen twice is fine
    checker.saw_role("n1", Role.FOLLOWER, 4)
    checker.saw_role("n1", Role.LEADER, 5)
    checker.check_applied({})
    checker.saw_role("n2", Role.LEADER, 4)  # from a node task: kept, raised by the next check
    with pytest.raises(FaultFailure, match=r"two leaders in term 4: n0 and n2 .*seed 3"):
        checker.check_applied({})
