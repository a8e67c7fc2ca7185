"""Seeded, in-memory simulation of a cluster of RaftCores: no trio, no sockets, no files.

One `random.Random(seed)` draws the cluster size, the timings and every fault: message drop,
delay, reordering (in some seeds; otherwise each link is FIFO like a TCP connection),
partitions, crashes and restarts (a restart builds a new core from what the simulated disk
holds: hard state, log, snapshot), slow fsync, and a shell that keeps stepping the core while a
Ready is being persisted. The shell does what `actors/raft/node.py` does: a leader's Ready
without hard state or snapshot is sent before its entries are fsynced (followers write in
parallel with the leader), and entries that become committed while a Ready is being persisted
are applied at once; a crash before the fsync ends loses that Ready's writes, not what was
already sent. Clients propose entries and ask for linearizable reads at whichever node claims
to be leader.

Checked after every step:
- at most one leader per term;
- each node applies indexes contiguously, and every node applies the same (term, data) at an
  index (so committed entries never change and applied sequences agree as prefixes);
- a new leader's log holds every entry applied anywhere (leader completeness);
- a released read index covers every entry applied anywhere before the read was asked;
- the simulated disk log stays contiguous after its snapshot.
After the chaos phase the cluster is healed (all nodes up, no partition, no loss) and a fresh
entry must be applied by a majority within `liveness_bound_ms`.

Violations raise `SimFailure` whose message names the seed and the replay command.
"""

from __future__ import annotations

import heapq
import random
import struct
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs

from rocketrio.actors.raft.config import RaftConfig
from rocketrio.actors.raft.core import LeaderPendingFull, NotLeader, RaftCore, Ready, Role
from rocketrio.protocol.raft import (
    Entry,
    HardState,
    RaftMessage,
    Snapshot,
    decode_message,
    encode_message,
)

TICK_MS = 10
_SM = struct.Struct("!QI")


class SimFailure(AssertionError):
    pass


@attrs.define
class Disk:
    hard_state: HardState = attrs.field(factory=HardState)
    log: list[Entry] = attrs.field(factory=list)
    snapshot: Snapshot | None = None


@attrs.define
class SimNode:
    node_id: str
    disk: Disk = attrs.field(factory=Disk)
    core: RaftCore | None = None
    epoch: int = 0  # bumped on crash so events of the dead incarnation are ignored
    busy: bool = False  # a Ready is being persisted
    inbox: deque[RaftMessage] = attrs.field(factory=deque)
    sm_index: int = 0  # state machine: index applied so far and a CRC chain over the data
    sm_crc: int = 0
    was_leader_term: int = -1
    early_applied: int = 0  # applied while a Ready was persisting; its Ready hands them again


@attrs.define
class SimParams:
    nodes: int
    chaos_ms: int
    drop: float
    max_delay_ms: int
    max_disk_ms: int
    fault_every_ms: tuple[int, int]
    step_while_persisting: bool
    snapshot_threshold: int
    max_batch_num: int
    max_inflight: int
    reorder: bool  # False: each link is FIFO like a TCP connection


class RaftSim:
    """Run with `RaftSim(seed).run()`; raises SimFailure on any violated invariant."""

    def __init__(
        self, seed: int, liveness_bound_ms: int = 6000, params: SimParams | None = None
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        drawn = self._draw_params()
        self.params = params or drawn
        self.liveness_bound_ms = liveness_bound_ms
        ids = [f"n{i}" for i in range(self.params.nodes)]
        self.peers = {i: f"10.0.0.{k}:9877" for k, i in enumerate(ids)}
        self.nodes = {i: SimNode(i) for i in ids}
        self.now = 0
        self._heap: list[tuple[int, int, str, Any]] = []
        self._seq = 0
        self.partition: dict[str, int] = {}
        self._link_last: dict[tuple[str, str], int] = {}
        self.drop = self.params.drop
        # scripted scenarios only: a filter returns the message to deliver (maybe edited) or
        # None to drop it; fixed fsync times per node
        self.filter: Callable[[str, str, RaftMessage], RaftMessage | None] | None = None
        self.disk_ms: dict[str, int] = {}
        self.leaders: dict[int, str] = {}
        self.applied: dict[int, tuple[int, bytes]] = {}  # index -> (term, data)
        self.max_applied = 0
        self.reads: dict[int, int] = {}  # ctx -> max_applied when asked
        self._next_ctx = 0
        self._payload = 0
        self._restarts = 0
        self.trace: deque[str] = deque(maxlen=40)
        self.stats = {"elections": 0, "proposed": 0, "reads_ok": 0, "crashes": 0}

    def _draw_params(self) -> SimParams:
        r = self.rng
        batch = r.choice((1, 3, 64, 1024))
        return SimParams(
            nodes=r.choice((1, 3, 3, 3, 5)),
            chaos_ms=r.randrange(2000, 5000),
            drop=r.choice((0.0, 0.01, 0.05, 0.2)),
            max_delay_ms=r.choice((1, 5, 20, 60)),
            max_disk_ms=r.choice((0, 2, 10, 40)),
            fault_every_ms=r.choice(((100, 400), (300, 1200), (1000, 3000))),
            step_while_persisting=r.random() < 0.5,
            snapshot_threshold=r.choice((8, 30, 1000)),
            max_batch_num=batch,
            # one entry per message with one in flight is too slow to catch up in the bound
            max_inflight=r.choice((4, 64) if batch == 1 else (1, 4, 64)),
            reorder=r.random() < 0.25,
        )

    # ------------------------------------------------------------------ harness

    def fail(self, what: str) -> SimFailure:
        tail = "\n  ".join(self.trace)
        return SimFailure(
            f"seed={self.seed} t={self.now}ms params={self.params}: {what}\n"
            f"replay: RAFT_SIM_SEED={self.seed} .venv/bin/pytest -q tests/sim/test_raft_sim.py\n"
            f"last events:\n  {tail}"
        )

    def _schedule(self, at: int, kind: str, data: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, data))

    def _config(self, node_id: str) -> RaftConfig:
        peers = ";".join(f"{k}-{v}" for k, v in self.peers.items())
        return RaftConfig(
            group="sim",
            selfId=node_id,
            peers=peers,
            snapshotThreshold=self.params.snapshot_threshold,
            maxBatchPushNum=self.params.max_batch_num,
            maxInflightPushNum=self.params.max_inflight,
        )

    def _start(self, node: SimNode) -> None:
        self._restarts += 1
        rng = random.Random(self.seed * 7919 + self._restarts)
        d = node.disk
        node.core = RaftCore(
            node.node_id, self.peers, self._config(node.node_id), rng,
            d.hard_state, list(d.log), d.snapshot, self.now,
        )  # fmt: skip
        node.epoch += 1
        node.busy = False
        node.inbox.clear()
        node.was_leader_term = -1
        node.early_applied = 0
        if d.snapshot is not None:
            node.sm_index, node.sm_crc = _SM.unpack(d.snapshot.data)
        else:
            node.sm_index, node.sm_crc = 0, 0
        self._schedule(self.now + self.rng.randrange(TICK_MS), "tick", (node.node_id, node.epoch))

    def _crash(self, node: SimNode) -> None:
        node.core = None
        node.epoch += 1
        node.busy = False
        node.inbox.clear()
        self.stats["crashes"] += 1
        self.trace.append(f"{self.now} crash {node.node_id}")

    # ------------------------------------------------------------------ shell

    def _pump(self, node: SimNode) -> None:
        """Drain Ready batches like the actor shell would."""
        while node.core is not None and not node.busy:
            rd = node.core.ready()
            if rd is None:
                return
            if rd.must_sync and self.params.max_disk_ms:
                # as the node does: a leader sends before its own fsync (Raft thesis 10.2.1)
                early = (
                    rd.hard_state is None and rd.snapshot is None and node.core.role is Role.LEADER
                )
                if early:
                    for to, msg in rd.messages:
                        self._send(node.node_id, to, msg)
                node.busy = True
                delay = self.disk_ms.get(node.node_id)
                if delay is None:
                    delay = self.rng.randrange(self.params.max_disk_ms + 1)
                self._schedule(self.now + delay, "persisted", (node.node_id, node.epoch, rd, early))
                return
            self._handle_ready(node, rd)

    def _apply_while_persisting(self, node: SimNode) -> None:
        """The node's `_apply_committed`: a leader applies what became committed at once."""
        core = node.core
        assert core is not None
        if (
            core.role is not Role.LEADER
            or core.commit_index <= node.sm_index
            or node.sm_index < core.snapshot_index
        ):
            return
        for e in core.entries(node.sm_index + 1, core.commit_index):
            self._apply(node, e)
        node.early_applied = node.sm_index

    def _handle_ready(self, node: SimNode, rd: Ready, sent: bool = False) -> None:
        core = node.core
        assert core is not None
        d = node.disk
        if rd.hard_state is not None:
            d.hard_state = rd.hard_state
        if rd.snapshot is not None:
            d.snapshot, d.log = rd.snapshot, []
            node.sm_index, node.sm_crc = _SM.unpack(rd.snapshot.data)
        if rd.entries:
            first = rd.entries[0].index
            d.log = [e for e in d.log if e.index < first]
            d.log.extend(rd.entries)
            base = d.snapshot.meta.index if d.snapshot else 0
            if d.log[0].index != base + 1 or d.log[-1].index != base + len(d.log):
                raise self.fail(f"{node.node_id} disk log not contiguous after {base}")
        if not sent:
            for to, msg in rd.messages:
                self._send(node.node_id, to, msg)
        for e in rd.committed_entries:
            if e.index <= node.early_applied and e.index <= node.sm_index:
                continue  # applied while the previous Ready was persisting
            self._apply(node, e)
        for rs in rd.read_states:
            asked = self.reads.pop(rs.ctx)
            if rs.index < asked:
                raise self.fail(f"read {rs.ctx} at {node.node_id} index {rs.index} < {asked}")
            self.stats["reads_ok"] += 1
        for ctx in rd.dropped_reads:
            self.reads.pop(ctx)
        for record in rd.log_records:
            self.trace.append(f"{self.now} {node.node_id} {record}")
        core.advance(rd)
        self._check(node)
        if (
            core.snapshot_due
            and core.applied_index == node.sm_index  # as the node: nothing applied early
            and core.applied_index > core.snapshot_index
        ):
            self._take_snapshot(node)

    def _apply(self, node: SimNode, e: Entry) -> None:
        if e.index != node.sm_index + 1:
            raise self.fail(f"{node.node_id} applied {e.index} after {node.sm_index}")
        seen = self.applied.setdefault(e.index, (e.term, e.data))
        if seen != (e.term, e.data):
            raise self.fail(f"{node.node_id} applied {e} but index {e.index} was {seen}")
        node.sm_index = e.index
        node.sm_crc = zlib.crc32(e.data, node.sm_crc)
        self.max_applied = max(self.max_applied, e.index)

    def _take_snapshot(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        index = core.applied_index
        term = core.term_at(index)
        assert term is not None and index == node.sm_index
        data = _SM.pack(node.sm_index, node.sm_crc)
        core.compact(index, term, data)
        d = node.disk
        d.snapshot = core.snapshot
        d.log = [e for e in d.log if e.index > index]

    def _check(self, node: SimNode) -> None:
        core = node.core
        assert core is not None
        if core.role is not Role.LEADER:
            return
        holder = self.leaders.setdefault(core.term, node.node_id)
        if holder != node.node_id:
            raise self.fail(f"two leaders in term {core.term}: {holder} and {node.node_id}")
        if node.was_leader_term != core.term:
            node.was_leader_term = core.term
            self.stats["elections"] += 1
            for index, (term, _) in self.applied.items():
                if index > core.snapshot_index and core.term_at(index) != term:
                    raise self.fail(
                        f"leader {node.node_id} term {core.term} lacks applied entry {index}"
                    )

    def _send(self, frm: str, to: str, msg: RaftMessage) -> None:
        if self.partition.get(frm, 0) != self.partition.get(to, 0):
            return
        if self.filter is not None:
            kept = self.filter(frm, to, msg)
            if kept is None:
                return
            msg = kept
        if self.nodes[to].core is None:
            # a dead process: the connection is refused, the sender's shell learns it
            at = self.now + 1 + self.rng.randrange(self.params.max_delay_ms)
            self._schedule(at, "unreachable", (frm, self.nodes[frm].epoch, to, msg))
            return
        if self.drop and self.rng.random() < self.drop:
            return
        wire = encode_message(msg)
        at = self.now + 1 + self.rng.randrange(self.params.max_delay_ms)
        if not self.params.reorder:
            at = max(at, self._link_last.get((frm, to), 0))
            self._link_last[frm, to] = at
        self._schedule(at, "deliver", (to, wire))

    def _deliver(self, node: SimNode, msg: RaftMessage) -> None:
        assert node.core is not None
        if node.busy and not self.params.step_while_persisting:
            node.inbox.append(msg)
            return
        node.core.step(msg, self.now)
        self._check(node)
        if node.busy:
            self._apply_while_persisting(node)
        self._pump(node)

    # ------------------------------------------------------------------ events

    def _on_event(self, kind: str, data: Any) -> None:
        if kind == "tick":
            node_id, epoch = data
            node = self.nodes[node_id]
            if node.core is None or node.epoch != epoch:
                return
            self._schedule(self.now + TICK_MS, "tick", data)
            if not node.busy:
                node.core.tick(self.now)
                self._check(node)
                self._pump(node)
        elif kind == "deliver":
            to, wire = data
            node = self.nodes[to]
            if node.core is not None:
                self._deliver(node, decode_message(wire))
        elif kind == "unreachable":
            frm, epoch, to, msg = data
            node = self.nodes[frm]
            if node.core is not None and node.epoch == epoch:
                node.core.report_unreachable(to, msg, self.now)
                self._check(node)
                self._pump(node)
        elif kind == "persisted":
            node_id, epoch, rd, sent = data
            node = self.nodes[node_id]
            if node.core is None or node.epoch != epoch:
                return  # crashed before the fsync finished: the batch is lost
            node.busy = False
            self._handle_ready(node, rd, sent)
            while node.inbox and not node.busy and node.core is not None:
                node.core.step(node.inbox.popleft(), self.now)
                self._check(node)
                self._pump(node)
            self._pump(node)

    def _run_until(self, end_ms: int) -> None:
        while self._heap and self._heap[0][0] <= end_ms:
            at, _, kind, data = heapq.heappop(self._heap)
            self.now = at
            self._on_event(kind, data)
        self.now = end_ms

    # ------------------------------------------------------------------ clients and faults

    # scenario API for targeted tests
    def start_all(self) -> None:
        for node in self.nodes.values():
            self._start(node)

    def run_for(self, ms: int) -> None:
        """Advance simulated time, checking invariants at every step (no faults, no clients)."""
        self._run_until(self.now + ms)

    def crash(self, node_id: str) -> None:
        """Power cut: what the node had not fsynced is lost (what it sent is not)."""
        self._crash(self.nodes[node_id])

    def restart(self, node_id: str) -> None:
        self.trace.append(f"{self.now} restart {node_id}")
        self._start(self.nodes[node_id])

    def isolate(self, *groups: set[str]) -> None:
        """Partition: each group is connected within itself; nodes in no group form one more."""
        self.partition = {i: k + 1 for k, g in enumerate(groups) for i in g}
        self.trace.append(f"{self.now} partition {self.partition}")

    def propose(self, node_id: str, data: bytes) -> int:
        """Propose at a leader, as a client would; returns the entry's index."""
        node = self.nodes[node_id]
        assert node.core is not None
        index = node.core.propose(data, self.now)
        self._pump(node)
        return index

    def run_until(self, pred: Callable[[], bool], bound_ms: int, what: str) -> None:
        end = self.now + bound_ms
        while not pred():
            if self.now >= end:
                raise self.fail(f"scenario: {what} did not happen within {bound_ms} ms")
            self._run_until(self.now + 1)
        self.trace.append(f"{self.now} {what}")

    def heal(self) -> None:
        """All nodes up, no partition, no loss, no filter; then the liveness check."""
        self.filter = None
        self.disk_ms.clear()
        self._heal()
        self._check_liveness()

    def leader(self) -> str | None:
        """The leader a majority follows (its term's heartbeats accepted), if any."""
        for node in self._leaders():
            core = node.core
            assert core is not None
            followers = sum(
                1
                for n in self.nodes.values()
                if n.core is not None
                and n.core.leader_id == node.node_id
                and n.core.term == core.term
            )
            if followers > len(self.nodes) // 2:
                return node.node_id
        return None

    def _leaders(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.core is not None and n.core.role is Role.LEADER]

    def _client(self) -> None:
        for node in self._leaders():
            core = node.core
            assert core is not None
            if core.last_index - core.commit_index >= 64:
                continue  # clients wait for answers: a bounded number of requests in flight
            batch = []
            for _ in range(self.rng.randrange(1, 6)):
                self._payload += 1
                batch.append(b"p%d" % self._payload)
            try:
                core.propose(batch, self.now)
                self.stats["proposed"] += len(batch)
            except (NotLeader, LeaderPendingFull):
                pass
            if self.rng.random() < 0.2:
                self._next_ctx += 1
                self.reads[self._next_ctx] = self.max_applied
                core.read_index(self._next_ctx, self.now)
            self._pump(node)

    def _fault(self) -> None:
        r = self.rng
        alive = [n for n in self.nodes.values() if n.core is not None]
        dead = [n for n in self.nodes.values() if n.core is None]
        leaders = self._leaders()
        choice = r.random()
        if choice < 0.15 and leaders:
            self._crash(r.choice(leaders))  # leaders die young: old-term entries pile up
        elif choice < 0.25 and leaders:
            # cut the leader off with at most a minority of the others
            cut = {leaders[0].node_id} | set(r.sample(list(self.nodes), len(self.nodes) // 2))
            self.partition = {i: int(i in cut) for i in self.nodes}
            self.trace.append(f"{self.now} isolate {sorted(cut)}")
        elif choice < 0.4 and alive:
            self._crash(r.choice(alive))
        elif choice < 0.65 and dead:
            node = r.choice(dead)
            self.trace.append(f"{self.now} restart {node.node_id}")
            self._start(node)
        elif choice < 0.8:
            self.partition = {i: r.randrange(2) for i in self.nodes}
            self.trace.append(f"{self.now} partition {self.partition}")
        elif choice < 0.9:
            self.partition = {}
            self.trace.append(f"{self.now} heal partition")
        else:
            self.drop = r.choice((0.0, 0.05, 0.3))

    def _heal(self) -> None:
        self.partition = {}
        self.drop = 0.0
        for node in self.nodes.values():
            if node.core is None:
                self._start(node)
        self.trace.append(f"{self.now} heal all")

    # ------------------------------------------------------------------ run

    def run(self) -> dict[str, int]:
        self.start_all()
        end = self.params.chaos_ms
        next_fault = self.rng.randrange(*self.params.fault_every_ms)
        while self.now < end:
            step_to = min(end, self.now + self.rng.randrange(5, 40))
            self._run_until(step_to)
            self._client()
            if self.now >= next_fault:
                self._fault()
                next_fault = self.now + self.rng.randrange(*self.params.fault_every_ms)
        self._heal()
        self._check_liveness()
        return self.stats

    def _check_liveness(self) -> None:
        """After healing, a freshly proposed entry must be applied on a majority in time."""
        start = self.now
        deadline = start + self.liveness_bound_ms
        markers: dict[int, bytes] = {}
        last_try = -(10**9)
        while self.now < deadline:
            self._run_until(self.now + 20)
            for index, data in markers.items():
                holders = sum(n.sm_index >= index for n in self.nodes.values())
                if self.applied.get(index, (0, b""))[1] == data and holders > len(self.nodes) // 2:
                    self.stats["heal_ms"] = self.now - start
                    return
            if self.now - last_try < 1000:
                continue  # give the last marker time before proposing another
            for node in self._leaders():
                assert node.core is not None
                self._payload += 1
                data = b"heal%d" % self._payload
                try:
                    markers[node.core.propose(data, self.now)] = data
                except (NotLeader, LeaderPendingFull):
                    continue
                last_try = self.now
                self._pump(node)
                break
        raise self.fail(
            f"no progress {self.liveness_bound_ms}ms after healing: leaders="
            f"{[(n.node_id, n.core.term) for n in self._leaders() if n.core]} markers={markers} "
            f"applied={[(n.node_id, n.sm_index) for n in self.nodes.values()]}"
        )
