"""Consumer offsets across the failovers of a seeded run (issue 26 item 2; metadata invariant 11
of metadata_checks.py, now on every seed, for the PushConsumer's group).

docs/metadata-failover.md states the bound: offsets reach a slave only through its
SlaveSynchronize round (every `SYNC_PERIOD_S`, each call bounded by `CALL_TIMEOUT_S`), so a
promoted slave's committed offset of a queue is at least what the old master held
`OFFSET_LAG_BOUND_S` before the two last could talk. `OffsetWatch.step` runs after every step
of the run and samples, per broker set:

- the set's master and its committed offsets of the group, per queue. The master is the
  running broker serving at the highest masterEpoch the watch has seen: a deposed master still
  serving in an older epoch (cut off from the controllers, so it never learnt of the later
  election) is not the set's master again once the newer one dies; its offsets are
  not what a later master was promised (seed 59369);
- for every other running replica of the set that follows that master: since when it has
  done so without a break (both processes up, this incarnation recovered, the replica a slave
  whose SlaveSynchronize copies from that master's address, their hosts not partitioned). A
  replica with no master to copy from (a restarted broker that has not reached the
  controllers yet has no role) is not in contact, however reachable the master is: its
  offsets are what its own disk held (seed 59369).

When the set's master changes, for each queue the committed offset the new master held at its
last sampled contact (as a slave: what SlaveSynchronize had copied) must be at least what the
old master held ``OFFSET_LAG_BOUND_S`` before, when the two had been in contact for at least the
bound (else there was no full round to copy the offsets in, and the switch is counted as
`offset_switch_unchecked`; `offset_switch_restarted` when the new master is the old one
restarted: it holds what its previous incarnation last wrote to consumerOffset.json, every
flushConsumerOffsetInterval, which actor/broker/test_admin.py::
test_consumer_offsets_rules_and_persistence checks, not this watch). What a consumer commits to
the new master after its promotion is not this bound's business: a consumer that pulled from a
deposed master still answering (cut off from the controllers only) beyond that master's shorter
queue is told OFFSET_MOVED to its start, as upstream's master tells it, and commits the rewound
offset; that is counted (`offset_lowered_by_a_consumer`) and documented in docs/testing.md (soak
seed 886). Sampling at the steps only moves the contact's end earlier than it really was, so the
check errs towards passing, never towards a false failure. How far the offsets went back
(against the old master's last sample) is measured: `offset_rewound_max` messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import trio

from tests.sim.cluster_checks import ClusterChecker
from tests.sim.cluster_clients import TOPIC
from tests.sim.metadata_checks import OFFSET_LAG_BOUND_S
from tests.sim.replication_draw import SETS

if TYPE_CHECKING:
    from tests.sim.cluster_nodes import BrokerProc
    from tests.sim.cluster_sim import World

QueryFn = Callable[[str, str, int], int]  # (group, topic, queue id) -> committed offset or -1


class OffsetWatch:
    def __init__(self, checker: ClusterChecker, group: str, queues: int) -> None:
        self.checker = checker
        self.group = group
        self.queues = queues
        self.master: dict[str, str] = {}  # set -> key of the master seen last
        self.epoch: dict[str, int] = {}  # set -> that master's masterEpoch
        # (master key, queue id) -> (time, committed offset) samples, in time order
        self.history: dict[tuple[str, int], list[tuple[float, int]]] = {}
        # (master key, replica key) -> (since, last) of unbroken contact, and the replica's
        # committed offsets per queue at ``last`` (what slave sync had given it by then)
        self.contact: dict[tuple[str, str], tuple[float, float, list[int]]] = {}

    def on_step(self, world: World) -> None:
        for s in SETS:
            self.step(s, world.master_of(s), world.brokers[s], world.net.blocked)

    def step(
        self,
        set_name: str,
        master: BrokerProc | None,
        replicas: Iterable[BrokerProc],
        blocked: Callable[[str, str], bool],
    ) -> None:
        b = None if master is None else master.live_broker
        if master is None or b is None or b.recovery is None:
            return
        now = trio.current_time()
        key = _key(master)
        epoch = b.roles.master_epoch
        if epoch < self.epoch.get(set_name, 0):
            self.checker.count("offset_watch_deposed_master")  # the newest master is gone
            return
        query = b.tables.offsets.query
        old = self.master.get(set_name)
        if old is not None and old != key:
            self._check_switch(set_name, old, key, query)
        self.master[set_name] = key
        self.epoch[set_name] = epoch
        for qid in range(self.queues):
            offset = query(self.group, TOPIC, qid)
            samples = self.history.setdefault((key, qid), [])
            if offset >= 0 and (not samples or samples[-1][1] != offset):
                samples.append((now, offset))
        for p in replicas:
            if p is master:
                continue
            pb = p.live_broker
            pair = (key, _key(p))
            in_contact = (
                pb is not None
                and pb.recovery is not None
                and pb.roles is not None
                and not pb.roles.serving_as_master()
                and pb.roles.master_to_sync() == master.addr
                and not blocked(master.host.ip, p.host.ip)
            )
            if not in_contact:
                self.contact.pop(pair, None)
                continue
            assert pb is not None
            held = [pb.tables.offsets.query(self.group, TOPIC, q) for q in range(self.queues)]
            since = self.contact.get(pair, (now, now, held))[0]
            self.contact[pair] = (since, now, held)

    def _check_switch(self, set_name: str, old: str, new: str, query: QueryFn) -> None:
        since, last, held_then = self.contact.get((old, new), (0.0, -1.0, []))
        if last - since < OFFSET_LAG_BOUND_S:
            self.checker.count("offset_switch_unchecked")
            if old.split("#")[0] == new.split("#")[0]:  # the old master, restarted
                self.checker.count("offset_switch_restarted")
            return
        self.checker.count("offset_switch_checked")
        for qid in range(self.queues):
            samples = self.history.get((old, qid), [])
            held = [o for t, o in samples if t <= last - OFFSET_LAG_BOUND_S]
            floor = held[-1] if held else -1  # what it held then (samples are in time order)
            have = held_then[qid]  # the promoted slave's own, at the last contact
            now = query(self.group, TOPIC, qid)
            if now < have:  # a consumer committed a lower offset to the new master since
                self.checker.count("offset_lowered_by_a_consumer")
            if have < floor:
                self.checker.fail(
                    f"consumer offset moved backwards beyond the bound: {set_name} queue {qid} "
                    f"of {self.group}: the new master {new} had {have}, the old master {old} "
                    f"held {floor} {OFFSET_LAG_BOUND_S}s before their last contact "
                    f"(docs/metadata-failover.md)"
                )
            if samples:
                back = samples[-1][1] - max(have, 0)
                rewound = self.checker.stats.get("offset_rewound_max", 0)
                if back > rewound:
                    self.checker.stats["offset_rewound_max"] = back


def _key(p: BrokerProc) -> str:
    return f"{p.name}#{p.incarnation}"
