"""The console's picture of the cluster, built from successive polls (pure: no I/O, no clock).

`ConsoleView.update(poll)` returns a `Changes`: the sections whose content changed (as JSON-able
data), the feed items (cluster happenings) the difference with the previous poll reveals, and
one chart point.

- **TPS** per replica: the growth of its day counters (msgPutTotalTodayNow / msgGetTotalTodayNow)
  since the previous poll, over the time between them; never negative (the counters restart at
  midnight and with the broker).
- **Replication lag** of a replica: bytes behind its set's master's CommitLog end, and time: how
  long ago the master first held a byte the replica still lacks, from the master offsets of the
  recent polls (so its resolution is the poll interval).
- **Feed items**: a new masterEpoch is an election (with the new master), a changed SyncStateSet or
  its epoch a SyncStateSet change, a replica whose CommitLog end went down a truncation, a new
  controller leader a controllerLeader item, a replica that stops (starts) answering brokerDown
  (brokerUp).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs

from rocketrio.actors.console.model import BrokerSetStatus, Poll, ReplicaStatus
from rocketrio.actors.console.protocol import SECTIONS, FeedItem, Sample

MASTER_HISTORY = 600  # master CommitLog ends kept per set (5 minutes at 0.5 s)


@attrs.frozen
class Changes:
    sections: dict[str, Any]
    feed_items: list[FeedItem]
    sample: Sample


def _rate(now: int, before: int, dt_ms: int) -> float:
    if dt_ms <= 0 or now < before:
        return 0.0
    return round((now - before) * 1000.0 / dt_ms, 1)


def lag_ms(history: deque[tuple[int, int]], replica_offset: int, now: int) -> int:
    """Time since the master first held a byte beyond ``replica_offset``: ``history`` is the
    master's (t, CommitLog end) per poll, oldest first. 0 when the replica has everything."""
    if not history or replica_offset >= history[-1][1]:
        return 0
    first = history[-1][0]
    for t, end in reversed(history):
        if end <= replica_offset:
            break
        first = t
    return max(0, now - first)


class ConsoleView:
    """The last poll's sections, each replica's previous counters and each set's recent
    master offsets; `update` turns the next poll into `Changes`."""

    def __init__(self) -> None:
        self.sections: dict[str, Any] = {}
        self._prev_poll: Poll | None = None
        self._counters: dict[str, tuple[int, int, int]] = {}  # addr -> (t, put, get)
        self._masters: dict[str, deque[tuple[int, int]]] = {}  # brokerName -> (t, end)
        self._consumer_lag = 0

    def update(self, poll: Poll) -> Changes:
        sets = [self._with_rates(s, poll.t) for s in poll.brokerSets]
        feed_items = self._feed_items(poll, sets)
        data: dict[str, Any] = {
            "namesrvs": [attrs.asdict(n) for n in poll.namesrvs],
            "controllers": [attrs.asdict(c) for c in poll.controllers],
            "brokerSets": [attrs.asdict(s) for s in sets],
        }
        if poll.topics is not None:
            data["topics"] = [attrs.asdict(t) for t in poll.topics]
        if poll.groups is not None:
            data["groups"] = [attrs.asdict(g) for g in poll.groups]
            self._consumer_lag = sum(g.totalLag for g in poll.groups)
        changed = {k: v for k, v in data.items() if self.sections.get(k) != v}
        self.sections.update(changed)
        self._prev_poll = attrs.evolve(poll, brokerSets=sets)
        return Changes(changed, feed_items, self._sample(poll.t, sets))

    def snapshot(self) -> dict[str, Any]:
        """Every section known so far, in `SECTIONS` order (what a new viewer gets first)."""
        return {k: self.sections[k] for k in SECTIONS if k in self.sections}

    # -- figures ------------------------------------------------------------------------------

    def _with_rates(self, s: BrokerSetStatus, now: int) -> BrokerSetStatus:
        master = next((r for r in s.replicas if r.ok and r.brokerId == s.masterId), None)
        if master is None:  # no controller: the NameServer's brokerId 0
            master = next((r for r in s.replicas if r.ok and r.brokerId == 0), None)
        hist = self._masters.setdefault(s.brokerName, deque(maxlen=MASTER_HISTORY))
        if master is not None:
            hist.append((now, master.maxOffset))
        end = master.maxOffset if master is not None else None
        return attrs.evolve(s, replicas=[self._replica(r, now, end, hist) for r in s.replicas])

    def _replica(
        self, r: ReplicaStatus, now: int, end: int | None, hist: deque[tuple[int, int]]
    ) -> ReplicaStatus:
        if not r.ok:
            self._counters.pop(r.addr, None)
            return r
        put_tps = get_tps = 0.0
        prev = self._counters.get(r.addr)
        if prev is not None:
            put_tps = _rate(r.putTotal, prev[1], now - prev[0])
            get_tps = _rate(r.getTotal, prev[2], now - prev[0])
        self._counters[r.addr] = (now, r.putTotal, r.getTotal)
        lag_b = 0 if end is None else max(0, end - r.maxOffset)
        lag_t = 0 if end is None else lag_ms(hist, r.maxOffset, now)
        return attrs.evolve(r, putTps=put_tps, getTps=get_tps, lagBytes=lag_b, lagMs=lag_t)

    def _sample(self, now: int, sets: list[BrokerSetStatus]) -> Sample:
        replicas = [r for s in sets for r in s.replicas if r.ok]
        return Sample(
            t=now,
            putTps=round(sum(r.putTps for r in replicas), 1),
            getTps=round(sum(r.getTps for r in replicas), 1),
            consumerLag=self._consumer_lag,
            replicationLagBytes=max((r.lagBytes for r in replicas), default=0),
        )

    # -- feed items ---------------------------------------------------------------------------

    def _feed_items(self, poll: Poll, sets: list[BrokerSetStatus]) -> list[FeedItem]:
        prev = self._prev_poll
        if prev is None:
            return []
        out: list[FeedItem] = []
        t = poll.t
        old_leaders = {c.leaderAddr for c in prev.controllers if c.ok and c.role == "leader"}
        for c in poll.controllers:
            if c.ok and c.role == "leader" and c.addr not in old_leaders:
                out.append(
                    FeedItem(
                        t=t,
                        kind="controllerLeader",
                        text=f"controller {c.selfId or c.addr} leads in term {c.term}",
                    )
                )
        before = {s.brokerName: s for s in prev.brokerSets}
        for s in sets:
            old = before.get(s.brokerName)
            if old is None:
                continue
            out.extend(_set_feed_items(t, old, s))
        return out


def _set_feed_items(t: int, old: BrokerSetStatus, new: BrokerSetStatus) -> list[FeedItem]:
    name = new.brokerName
    out: list[FeedItem] = []

    def item(kind: str, text: str, epoch: int = 0) -> None:
        out.append(FeedItem(t=t, kind=kind, text=f"{name}: {text}", brokerName=name, epoch=epoch))

    if new.masterEpoch > old.masterEpoch:
        who = (
            f"brokerId {new.masterId} at {new.masterAddr}"
            if new.masterId is not None
            else "no master (no replica could be elected)"
        )
        item("election", f"masterEpoch {new.masterEpoch}: {who}", new.masterEpoch)
    elif new.masterId != old.masterId or new.masterAddr != old.masterAddr:
        who = f"brokerId {new.masterId}" if new.masterId is not None else "none"
        item("roleChange", f"master is now {who} {new.masterAddr}".rstrip(), new.masterEpoch)
    if (new.syncStateSet, new.syncStateSetEpoch) != (old.syncStateSet, old.syncStateSetEpoch):
        members = ",".join(str(i) for i in new.syncStateSet) or "empty"
        item(
            "syncStateSetChange",
            f"SyncStateSet {{{members}}} at syncStateSetEpoch {new.syncStateSetEpoch}",
            new.masterEpoch,
        )
    was = {r.addr: r for r in old.replicas}
    for r in new.replicas:
        o = was.get(r.addr)
        if o is None:
            continue
        if o.ok and not r.ok:
            item("brokerDown", f"brokerId {r.brokerId} at {r.addr} stopped answering ({r.error})")
        elif r.ok and not o.ok:
            item("brokerUp", f"brokerId {r.brokerId} at {r.addr} answers again")
        elif r.ok and o.ok and r.maxOffset < o.maxOffset:
            item(
                "truncation",
                f"brokerId {r.brokerId} cut its CommitLog from {o.maxOffset} to {r.maxOffset}",
                r.masterEpoch,
            )
        if r.ok and o.ok and r.role != o.role and r.role:
            item("roleChange", f"brokerId {r.brokerId} is now {r.role}", r.masterEpoch)
    return out
