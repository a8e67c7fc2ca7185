"""The invariants of the whole-cluster simulation, as bookkeeping that raises `ClusterFailure`.

`ClusterChecker` is fed facts by the simulation (cluster_sim.py) and checks them:

1. **One acknowledging master per (broker set, masterEpoch)** (`on_master_ack`, from the ack tap
   on every master's store actor): two brokers acknowledging writes in the same epoch fail.
2. **No acknowledged message is lost** (`on_send_ok`, `check_dispatched`, `check_final_queue`):
   a SendResult with SEND_OK names (set, topic, queue, queue offset) for its unique body; two
   different bodies acknowledged at one position fail at once (a reused queue offset, #7689);
   during the run, each set's current master must serve the acknowledged body at every such
   position it has dispatched; at the end every acknowledged body must be read back at its
   position from the set's master.
3. **Confirmed bytes never change** (`check_replica`): every replica's CommitLog bytes below its
   own confirmOffset must equal what any replica ever had below ITS confirmOffset at the same
   offsets (one "golden" confirmed prefix per set, grown and compared incrementally), and at the
   end (`check_final_replica`) every replica's bytes below its confirmOffset equal the master's.
4. **Nothing consumed is ever truncated** (`on_received`, `check_final_queue`): a consumer never
   gets two different bodies at one position, and everything it got is at that position at the
   end (and is the acknowledged body if that position was acknowledged).
   In a set whose drawn ack mode is weaker (`weak_sets`: allAckInSyncStateSet off with
   inSyncReplicas below the voting replicas, replication_draw.py), an acknowledged message may be
   lost, and its queue offset reused, only across a later failover (a higher masterEpoch than
   the one it was acknowledged in); such losses are counted (`lost_by_ack_mode`), never excused
   for a consumed message.
5. **Epoch files agree** (`check_epochs`): any two replicas (over the whole run) that hold epoch
   E of a set record the same start offset for it.
6. **Liveness** is timed by the simulation; it calls `fail` with the bound that was missed.
7. **One controller Raft leader per term** (`check_raft_leaders`), over the whole run.

Product processes that die of anything but an injected fsync failure are failures too
(`check_processes`). Every failure message carries the seed, how to replay it, and the trace of
the last steps.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import NoReturn

import attrs

from rocketrio.storage.epoch_file import EpochRecord

TRACE_STEPS = 12
Position = tuple[str, str, int, int]  # (broker set, topic, queue id, queue offset)
ReadFn = Callable[[int, int], bytes]  # (CommitLog offset, size) -> bytes of one replica
# (topic, queue id, queue offset) -> the body a replica's ConsumeQueue has there (None: not yet)
QueueReadFn = Callable[[str, int, int], "bytes | None"]


class ClusterFailure(AssertionError):
    """An invariant was violated; the message names the seed and how to replay it."""


@attrs.define
class ReplicaState:
    """What the checker reads from one live replica (a broker incarnation's store)."""

    key: str  # "broker-a-1#3": process name and incarnation
    set_name: str
    min_offset: int
    max_offset: int
    confirm_offset: int
    epochs: Sequence[EpochRecord]


@attrs.define
class ClusterChecker:
    seed: int
    replay: str = "pytest tests/sim/test_cluster_sim.py --seed {seed}"
    context: str = "start"
    trace: deque[str] = attrs.field(factory=lambda: deque(maxlen=TRACE_STEPS))
    problems: list[str] = attrs.field(factory=list)  # found inside product tasks, raised later
    epoch_owner: dict[tuple[str, int], str] = attrs.field(factory=dict)
    epoch_start: dict[tuple[str, int], tuple[int, str]] = attrs.field(factory=dict)
    acked: dict[Position, bytes] = attrs.field(factory=dict)
    acked_by: dict[Position, str] = attrs.field(factory=dict)
    received: dict[Position, bytes] = attrs.field(factory=dict)
    golden: dict[str, bytearray] = attrs.field(factory=dict)  # set -> confirmed bytes from 0
    verified: dict[str, int] = attrs.field(factory=dict)  # replica key -> checked below
    dispatched_ok: dict[str, set[Position]] = attrs.field(factory=dict)
    raft_leaders: dict[int, str] = attrs.field(factory=dict)
    stats: dict[str, int] = attrs.field(factory=dict)
    # sets whose ack mode lets an acknowledged message be lost across a later failover (set ->
    # the rule's reason; replication_draw.py), the masterEpoch of each acknowledged position and
    # the positions lost under that rule
    weak_sets: dict[str, str] = attrs.field(factory=dict)
    acked_epoch: dict[Position, int] = attrs.field(factory=dict)
    excused: dict[Position, bytes] = attrs.field(factory=dict)

    # ------------------------------------------------------------------ reporting

    def note(self, line: str) -> None:
        self.trace.append(line)
        self.context = line

    def count(self, what: str, n: int = 1) -> None:
        self.stats[what] = self.stats.get(what, 0) + n

    def fail(self, what: str) -> NoReturn:
        trace = "\n  ".join(self.trace) or "(no step yet)"
        raise ClusterFailure(
            f"{what}\n[seed {self.seed}] at {self.context}\nlast steps:\n  {trace}\n"
            f"reproduce with --seed {self.seed}: {self.replay.format(seed=self.seed)}"
        )

    def raise_problems(self) -> None:
        if self.problems:
            self.fail(self.problems[0])

    # ------------------------------------------------------------------ 1. acks per epoch

    def on_master_ack(self, set_name: str, epoch: int, broker: str) -> None:
        """A master's store actor acknowledged writes of ``epoch`` (called in product tasks:
        never raises, the next check does)."""
        owner = self.epoch_owner.setdefault((set_name, epoch), broker)
        if owner != broker:
            self.problems.append(
                f"two masters acknowledged writes in {set_name} masterEpoch {epoch}: "
                f"{owner} and {broker}"
            )

    # ------------------------------------------------------------------ 2 + 4. messages

    def set_epoch(self, set_name: str) -> int:
        """The highest masterEpoch of the set any replica recorded or any master acked in."""
        keys = [*self.epoch_start, *self.epoch_owner]
        return max((e for s, e in keys if s == set_name), default=0)

    def lost_by_rule(self, pos: Position, later_epoch: int | None = None) -> bool:
        """The position's acknowledged message may be gone: its set's ack mode allows a loss
        across a failover (weak_sets) and a later masterEpoch exists (``later_epoch``, else the
        set's highest). Counted and remembered; the message is then no longer expected."""
        if pos[0] not in self.weak_sets:
            return False
        acked_in = self.acked_epoch.get(pos)
        now = self.set_epoch(pos[0]) if later_epoch is None else later_epoch
        if acked_in is None or now <= acked_in:
            return False
        self.excused[pos] = self.acked.pop(pos)
        self.acked_epoch.pop(pos)
        self.count("lost_by_ack_mode")
        return True

    def on_send_ok(self, pos: Position, body: bytes, how: str, epoch: int | None = None) -> None:
        old = self.acked.get(pos)
        if old is not None and old != body and epoch is not None and self.lost_by_rule(pos, epoch):
            old = None
        if old is not None and old != body:
            self.problems.append(
                f"queue offset reused: {_pos(pos)} acknowledged with {_short(old)} "
                f"({self.acked_by[pos]}) and again with {_short(body)} ({how})"
            )
            return
        self.acked[pos] = body
        self.acked_by[pos] = how
        if epoch is not None:
            self.acked_epoch[pos] = epoch
        got = self.received.get(pos)
        if got is not None and got != body:
            self.problems.append(
                f"{_pos(pos)}: consumed {_short(got)}, acknowledged {_short(body)} ({how})"
            )

    def on_received(self, pos: Position, body: bytes, source: str) -> None:
        old = self.received.get(pos)
        if old is not None and old != body:
            self.problems.append(
                f"a consumer got {_short(old)} and later {_short(body)} (from {source}) at "
                f"{_pos(pos)}: a consumed message was truncated or replicas diverged"
            )
            return
        self.received[pos] = body
        acked = self.acked.get(pos)
        if acked is not None and acked != body and not self.lost_by_rule(pos):
            self.problems.append(
                f"{_pos(pos)}: {source} served {_short(body)}, acknowledged {_short(acked)}"
            )

    def check_final_queue(
        self, set_name: str, topic: str, queue_id: int, bodies: dict[int, bytes]
    ) -> None:
        """``bodies``: queue offset -> body, read from the set's master after healing."""
        for pos, body in list(self.acked.items()):
            if pos[:3] != (set_name, topic, queue_id):
                continue
            got = bodies.get(pos[3])
            if got != body and not self.lost_by_rule(pos):
                what = "missing" if got is None else f"holds {_short(got)}"
                self.fail(
                    f"acknowledged message lost: {_pos(pos)} was acknowledged with "
                    f"{_short(body)} ({self.acked_by[pos]}), the master's queue {what}"
                )
        for pos, body in self.received.items():
            if pos[:3] != (set_name, topic, queue_id):
                continue
            got = bodies.get(pos[3])
            if got != body:
                what = "missing" if got is None else f"holds {_short(got)}"
                self.fail(
                    f"consumed message truncated: a consumer got {_short(body)} at {_pos(pos)}, "
                    f"the master's queue {what}"
                )

    def check_dispatched(self, key: str, set_name: str, read: QueueReadFn) -> None:
        """During the run: every acknowledged position a replica has already dispatched (made
        visible) must hold the acknowledged body there. Each (replica, position) is read
        once."""
        seen = self.dispatched_ok.setdefault(key, set())
        for pos, body in list(self.acked.items()):
            if pos[0] != set_name or pos in seen:
                continue
            got = read(pos[1], pos[2], pos[3])
            if got is None:
                continue  # not dispatched there yet
            if got != body and self.lost_by_rule(pos):
                continue
            if got != body:
                self.fail(
                    f"{key} serves {_short(got)} at {_pos(pos)}, which was acknowledged with "
                    f"{_short(body)} ({self.acked_by[pos]})"
                )
            seen.add(pos)

    # ------------------------------------------------------------------ 3. confirmed bytes

    def check_replica(self, r: ReplicaState, read: ReadFn) -> None:
        """Bytes below ``r.confirm_offset`` must equal the set's golden confirmed prefix."""
        golden = self.golden.setdefault(r.set_name, bytearray())
        confirm = min(r.confirm_offset, r.max_offset)
        lo = max(self.verified.get(r.key, 0), r.min_offset)
        if confirm < self.verified.get(r.key, 0):
            lo = max(confirm, r.min_offset)  # truncated below what we checked: re-check later
        self.verified[r.key] = max(lo, confirm)
        if confirm <= lo:
            return
        if lo > len(golden):
            return  # the log starts above what any confirmed prefix covers: nothing to compare
        data = read(lo, confirm - lo)
        if len(data) != confirm - lo:
            self.fail(
                f"{r.key}: confirmOffset {confirm} but only {lo + len(data)} bytes readable "
                f"from {lo} (log [{r.min_offset}, {r.max_offset}))"
            )
        overlap = min(len(golden), confirm) - lo
        if overlap > 0 and data[:overlap] != golden[lo : lo + overlap]:
            at = lo + next(i for i in range(overlap) if data[i] != golden[lo + i])
            self.fail(
                f"{r.key}: confirmed byte at CommitLog offset {at} differs from what another "
                f"replica confirmed there (confirmed bytes changed)"
            )
        if confirm > len(golden):
            golden += data[len(golden) - lo :]
        self.count("bytes_verified", confirm - lo)

    def check_final_replica(
        self, r: ReplicaState, read: ReadFn, master: ReplicaState, read_master: ReadFn
    ) -> None:
        """After healing: the replica's bytes below its confirmOffset equal the master's, and
        the master holds the whole golden confirmed prefix."""
        confirm = min(r.confirm_offset, r.max_offset)
        lo = max(r.min_offset, master.min_offset)
        if confirm > master.max_offset:
            self.fail(
                f"{r.key} confirmed up to {confirm}, beyond the master {master.key}'s log end "
                f"{master.max_offset}"
            )
        if confirm > lo and read(lo, confirm - lo) != read_master(lo, confirm - lo):
            self.fail(f"{r.key}'s bytes below its confirmOffset {confirm} differ from {master.key}")

    def check_master_holds_golden(self, master: ReplicaState, read: ReadFn) -> None:
        golden = self.golden.get(master.set_name, bytearray())
        lo = master.min_offset
        if len(golden) > master.max_offset:
            self.fail(
                f"the master {master.key} ends at {master.max_offset}, below bytes a replica "
                f"confirmed (up to {len(golden)}): confirmed data lost"
            )
        if len(golden) > lo and read(lo, len(golden) - lo) != bytes(golden[lo:]):
            self.fail(
                f"the master {master.key} differs from the confirmed bytes below {len(golden)}"
            )

    # ------------------------------------------------------------------ 5. epochs

    def check_epochs(self, replicas: Iterable[ReplicaState]) -> None:
        for r in replicas:
            for rec in r.epochs:
                key = (r.set_name, rec.epoch)
                start, who = self.epoch_start.setdefault(key, (rec.start_offset, r.key))
                if start != rec.start_offset:
                    self.fail(
                        f"epoch files disagree: {r.set_name} epoch {rec.epoch} starts at "
                        f"{rec.start_offset} on {r.key}, at {start} on {who}"
                    )

    # ------------------------------------------------------------------ 7. Raft leaders

    def check_raft_leaders(self, leaders: Iterable[tuple[int, str]]) -> None:
        """``leaders``: (term, replica id) of every controller replica that leads now."""
        for term, nid in leaders:
            other = self.raft_leaders.setdefault(term, nid)
            if other != nid:
                self.fail(f"two controller Raft leaders in term {term}: {other} and {nid}")

    # ------------------------------------------------------------------ processes

    def check_processes(self, errors: Iterable[str]) -> None:
        for e in errors:
            self.fail(f"a product process failed: {e}")


def _pos(pos: Position) -> str:
    return f"{pos[0]} {pos[1]}:{pos[2]}@{pos[3]}"


def _short(body: bytes) -> str:
    return repr(body[:16])
