"""The acting-master invariants of the whole-cluster simulation (RIP-32; acting_world.py).

Each class is a checker the scenarios (test_acting_scenarios.py) add to
`ActingWorld.step_checks`, so it runs after every step with the shared invariants
(cluster_checks.py); a violation is a `ClusterFailure` naming the seed and the last steps.
They read the product's state in-process (roles, tables, stores, the NameServer's route
function), never through a mock:

- `ActingBound`: after a group's master dies, one of its slaves acts as master within
  `ACTING_BOUND_S` (and, for a silent master, not before brokerNotActiveTimeoutMillis), and the
  NameServer routes the group with that slave as id 0 without the write bit;
- `TopicScan`: every body stored in the topic's queues on any live broker of either set, with
  its store time, read incrementally; `DueMessages` and `Transactions` judge it: a delayed or
  timer message never stored before it is due and stored at least once by the end (copies
  counted, not failed: at-least-once), a rolled-back transaction never stored, a committed one
  stored by the end; `Revives`: a POP message acked never revived, an unacked one once at most,
  not before its invisible time;
- `OffsetsNeverBack`: no consumer offset (and no delay-level offset) of a watched group moves
  backwards on a live broker incarnation, nor when the NameServer routes the group's id 0 to
  its returned master again (pre-online: the offset a consumer reads after the switch back).
  When a slave takes over, what the dead master took after the slave's last sync is missing
  there: counted (``offset_rewinds_at_takeover``, re-reads within at-least-once), not failed;
- `OneLockHolder`: a queue of a group is locked by at most one client across the live members
  of its broker set (the order guarantee of an orderly consumer);
- `OrderedLog`: what orderly consumers processed of a queue, in processing order: each
  consumer's batches in ascending offsets, and no consumer processes the queue again once
  another took it over (A, B, A: two consumers processed it turn by turn, out of order).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
import trio

from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.namesrv.route_query import topic_route
from rocketrio.protocol.bodies import PERM_WRITE
from tests.sim.acting_world import ACTING_BOUND_S, NOT_ACTIVE_TIMEOUT_MS, ActingWorld
from tests.sim.cluster_clients import TOPIC
from tests.sim.cluster_nodes import BrokerProc
from tests.sim.cluster_sim import SETS

# ---------------------------------------------------------------------------- the bound


@attrs.define
class ActingBound:
    """See module docstring. ``died_at``: mock-clock seconds of the death; ``incarnation``:
    the master's when it died (a silent master still runs: its return is a new incarnation,
    which goes through pre-online: the slave stops acting then, before it is online)."""

    w: ActingWorld
    set_name: str
    died_at: float
    silent: bool
    incarnation: int
    acted_after_s: float | None = None

    def __call__(self) -> None:
        w, t = self.w, trio.current_time() - self.died_at
        if w.brokers[self.set_name][0].incarnation > self.incarnation:
            return  # the master is back: nothing to act for
        acting = w.acting_of(self.set_name)
        if acting and self.silent and t * 1000 < NOT_ACTIVE_TIMEOUT_MS:
            w.checker.fail(
                f"{acting[0].name} acts {t:.2f}s after its master went silent, before "
                f"brokerNotActiveTimeoutMillis ({NOT_ACTIVE_TIMEOUT_MS} ms): a slow master is "
                "not a dead one"
            )
        if not acting:
            if t > ACTING_BOUND_S:
                w.checker.fail(
                    f"{self.set_name} has no master and no acting slave {t:.2f}s after the "
                    f"master died (bound {ACTING_BOUND_S}s)"
                )
            return
        if self.acted_after_s is None:
            self.acted_after_s = t
            w.checker.note(f"{acting[0].name} acts as master {t:.2f}s after the death")
        if t > ACTING_BOUND_S:
            self._route_shape(acting[0])

    def _route_shape(self, slave: BrokerProc) -> None:
        ns = self.w.controls[0].namesrv
        if ns is None or not self.w.controls[0].up:
            return
        route = topic_route(ns.routes, TOPIC)
        bds = [bd for bd in (route.brokerDatas if route else []) if bd.brokerName == self.set_name]
        qds = [qd for qd in (route.queueDatas if route else []) if qd.brokerName == self.set_name]
        if [bd.brokerAddrs for bd in bds] != [{0: slave.addr}] or any(
            qd.perm & PERM_WRITE for qd in qds
        ):
            self.w.checker.fail(
                f"{self.set_name}'s route is {[bd.brokerAddrs for bd in bds]} perms "
                f"{[qd.perm for qd in qds]}, not the acting shape {{0: {slave.addr}}} read-only"
            )


# ---------------------------------------------------------------------------- stored bodies


@attrs.frozen
class Seen:
    set_name: str
    commitlog_offset: int
    store_ms: int


@attrs.define
class TopicScan:
    """Every body stored in ``topic`` on any live broker (see module docstring)."""

    w: ActingWorld
    topic: str = TOPIC
    queues: Iterable[int] = range(8)
    seen: dict[bytes, dict[tuple[str, int], Seen]] = attrs.field(factory=dict)
    _next: dict[tuple[str, int], int] = attrs.field(factory=dict)  # (incarnation, qid) -> offset

    def scan(self) -> None:
        for p in self.w.all_brokers():
            b = p.live_broker
            if b is None or b.recovery is None:
                continue
            for qid in self.queues:
                self._scan_queue(f"{p.name}#{p.incarnation}", p.set_name, b, qid)

    def _scan_queue(self, key: str, set_name: str, b: Broker, qid: int) -> None:
        view = b.store.view
        offset = self._next.get((key, qid), 0)
        while True:
            first, entries = view.read_queue_entries(self.topic, qid, offset, 64)
            if not entries:
                break
            for phy, _size, _tag in entries:
                msg = view.look_message_by_offset(phy)
                if msg is not None:
                    seen = Seen(set_name, phy, msg.store_timestamp)
                    self.seen.setdefault(msg.body, {}).setdefault((set_name, phy), seen)
            offset = first + len(entries)
        self._next[(key, qid)] = offset

    def copies(self, body: bytes) -> int:
        return len(self.seen.get(body, {}))


@attrs.define
class DueMessages:
    """Delayed and timer messages: body -> due (epoch ms). Never stored early; at the end
    (``check_all_delivered``) each stored at least once, extra copies counted."""

    scan: TopicScan
    due: dict[bytes, int] = attrs.field(factory=dict)

    def __call__(self) -> None:
        self.scan.scan()
        for body, due in self.due.items():
            for s in self.scan.seen.get(body, {}).values():
                if s.store_ms < due:
                    self.scan.w.checker.fail(
                        f"{body!r} stored in {s.set_name} at {s.store_ms}, {due - s.store_ms} ms "
                        "before it was due"
                    )

    def undelivered(self) -> list[bytes]:
        self.scan.scan()
        return [b for b in self.due if not self.scan.copies(b)]

    def count_duplicates(self) -> None:
        for body in self.due:
            self.scan.w.checker.count("due_duplicates", max(0, self.scan.copies(body) - 1))


@attrs.define
class Transactions:
    """Rolled-back bodies never stored in the topic; committed ones stored by the end."""

    scan: TopicScan
    commits: set[bytes] = attrs.field(factory=set)
    rollbacks: set[bytes] = attrs.field(factory=set)

    def __call__(self) -> None:
        self.scan.scan()
        for body in self.rollbacks:
            if self.scan.copies(body):
                self.scan.w.checker.fail(f"a rolled-back transaction was delivered: {body!r}")

    def uncommitted(self) -> list[bytes]:
        self.scan.scan()
        return [b for b in self.commits if not self.scan.copies(b)]


@attrs.define
class Revives:
    """POP revives in the retry topic ``scan`` reads: an acked body never, an unacked one at
    most once and not before its invisible time (``unacked``: body -> when it was popped)."""

    scan: TopicScan
    invisible_s: float
    acked: set[bytes] = attrs.field(factory=set)
    unacked: dict[bytes, float] = attrs.field(factory=dict)

    def __call__(self) -> None:
        self.scan.scan()
        fail = self.scan.w.checker.fail
        for body in self.acked:
            if self.scan.copies(body):
                fail(f"the acked POP message {body[:12]!r} was revived")
        for body, popped in self.unacked.items():
            n = self.scan.copies(body)
            if n and trio.current_time() - popped < self.invisible_s:
                fail(f"{body[:12]!r} revived before its invisible time")
            if n > 1:
                fail(f"{body[:12]!r} revived {n} times")

    def all_revived(self) -> bool:
        self.scan.scan()
        return all(self.scan.copies(b) for b in self.unacked)


# ---------------------------------------------------------------------------- offsets


@attrs.define
class OffsetsNeverBack:
    """See module docstring. ``groups``: the consumer groups watched on ``topic`` queues;
    ``delay_levels``: the schedule offsets watched too."""

    w: ActingWorld
    groups: tuple[str, ...]
    queues: int
    delay_levels: tuple[int, ...] = ()
    last: dict[tuple[str, str, int], int] = attrs.field(factory=dict)
    routed_last: dict[tuple[str, str, int], tuple[int, str]] = attrs.field(factory=dict)

    def _offsets(self, b: Broker) -> dict[tuple[str, int], int]:
        out = {
            (g, q): b.tables.offsets.query(g, TOPIC, q)
            for g in self.groups
            for q in range(self.queues)
        }
        for level in self.delay_levels:
            out[(f"delay level {level}", 0)] = b.tables.delay_offsets.table.level_offset(level)
        return out

    def __call__(self) -> None:
        for p in self.w.all_brokers():
            b = p.live_broker
            if b is None or b.recovery is None:
                continue
            key = f"{p.name}#{p.incarnation}"
            for (g, q), now in self._offsets(b).items():
                before = self.last.get((key, g, q), -1)
                if now < before:
                    self.w.checker.fail(f"{key}: {g} queue {q} offset moved back {before} -> {now}")
                self.last[(key, g, q)] = max(before, now)
        for s in SETS:
            self._routed(s)

    def _routed(self, set_name: str) -> None:
        """The offsets on the broker clients are routed to as id 0 (master or acting slave)."""
        ns = self.w.controls[0].namesrv
        if ns is None or not self.w.controls[0].up:
            return
        route = topic_route(ns.routes, TOPIC)
        addrs = [bd.brokerAddrs.get(0) for bd in (route.brokerDatas if route else [])
                 if bd.brokerName == set_name]  # fmt: skip
        proc = next((p for p in self.w.brokers[set_name] if [p.addr] == addrs), None)
        b = None if proc is None else proc.live_broker
        if proc is None or b is None or b.recovery is None:
            return
        who = f"{proc.name}#{proc.incarnation}"
        master = proc is self.w.brokers[set_name][0]
        for (g, q), now in self._offsets(b).items():
            before, where = self.routed_last.get((set_name, g, q), (-1, ""))
            if now < before and not master:
                # a slave taking over lacks what the dead master got after the last slave sync
                # (syncBrokerMemberGroupPeriod-old at most): re-reads, at-least-once; counted
                self.w.checker.count("offset_rewinds_at_takeover")
            elif now < before:
                self.w.checker.fail(
                    f"{set_name}'s routed id 0 {who}: {g} queue {q} offset {now}, below the "
                    f"{before} its routed broker {where} had: a consumer re-reads"
                )
            if now >= before:
                self.routed_last[(set_name, g, q)] = (now, who)


# ---------------------------------------------------------------------------- locks


@attrs.define
class OneLockHolder:
    """At most one client holds a live lock on a queue of ``group`` across the live members
    of each set."""

    w: ActingWorld
    group: str
    holders_seen: int = 0

    def __call__(self) -> None:
        now = trio.current_time()
        for s in SETS:
            holders: dict[object, set[str]] = {}
            for p in self.w.brokers[s]:
                b = p.live_broker
                if b is None:
                    continue
                locks = b.clients.locks
                for mq, entry in locks.table.get(self.group, {}).items():
                    if now - entry.last_update_s <= locks.max_live_s:
                        holders.setdefault(mq, set()).add(entry.client_id)
            for mq, clients in holders.items():
                self.holders_seen = max(self.holders_seen, len(clients))
                if len(clients) > 1:
                    self.w.checker.fail(
                        f"{self.group} queue {mq} is locked by {sorted(clients)} at once on "
                        f"{s}'s members: two orderly consumers consume it (order broken)"
                    )


@attrs.define
class OrderedLog:
    """See module docstring; fed by the scenario's orderly consumers (``processed``), checked
    through the checker's problems (raised at the next step)."""

    w: ActingWorld
    runs: dict[int, list[str]] = attrs.field(factory=dict)  # queue id -> processors in turn
    last: dict[tuple[str, int], int] = attrs.field(factory=dict)  # (consumer, qid) -> offset

    def processed(self, consumer: str, queue_id: int, offsets: list[int]) -> None:
        problems = self.w.checker.problems
        if offsets != sorted(offsets) or offsets[0] <= self.last.get((consumer, queue_id), -1):
            problems.append(f"{consumer} processed queue {queue_id} out of order: {offsets}")
        self.last[(consumer, queue_id)] = offsets[-1]
        runs = self.runs.setdefault(queue_id, [])
        if runs and runs[-1] == consumer:
            return
        if consumer in runs:
            problems.append(
                f"{consumer} processes queue {queue_id} again after {runs[-1]} took it over "
                f"(turns: {[*runs, consumer]}): two orderly consumers at once"
            )
        runs.append(consumer)
        self.w.checker.count("ordered_handovers")
