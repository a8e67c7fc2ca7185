"""The checkers (pure): what a chaos run's history proves. Each returns a `Check`; a `Check`
whose ``breach`` is set fails the run (exit status 1).

- **lost**: an acknowledged message (first ``trace_send_acked`` of its id; a rolled-back
  transaction's half message excepted, and one whose outcome the producer never learned on a
  topic that `TopicSpec.needs_intent`) that some group subscribed to its topic never consumed
  (the Spark job's rule, analysis/traces.py, per group). Must be 0.
- **duplicates**: a message id one group consumed more than once. Reported, not a breach:
  RocketMQ delivers at least once, and a failover re-delivers what was consumed after the last
  offset the new master has.
- **order**: for orderly groups, per queue: a first consumption of an offset below an offset
  the group already consumed from that queue; per message group (intent key): a first
  consumption of a sequence number below one already consumed. A re-delivery of what was
  consumed before is a duplicate, not a violation.
- **delayed early**: a delayed message consumed before its send call + its delay (the broker
  stores it after the call began, so even a retried send cannot be due earlier).
- **rolled back delivered**: a consumed message whose transaction the producer rolled back.
- **metadata**: a route poll showing a queue count or permission other than the operator's
  (except the write bit cleared while the set has no master: the NameServer then serves the
  prime slave's queues read-only, as upstream's RouteInfoManager does).
- **recovery** (per fault; not a breach unless nothing got through again before the end): the
  longest pause between consecutive acknowledgements (and consumptions) that ends after the
  fault began and begins before it was healed (plus `OUTAGE_START_GRACE_MS`) and before the
  next fault: last ack before, first ack after; for consumption also per group
  (``consume:<group>``), so one stalled group shows while the others read on.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Sequence

import attrs

from rocketrio.cli.chaos.history import Ack, Consume, FaultWindow, History, TopicSpec

PERM_WRITE = 2  # upstream PermName.PERM_WRITE
EXAMPLES = 10  # at most this many examples per check
DELAY_TOLERANCE_MS = 2  # ms rounding of two log timestamps
# an outage a fault caused begins before the fault is healed, or at most this long after (a
# kill is healed at once; the clients notice within their request timeouts)
OUTAGE_START_GRACE_MS = 1000


@attrs.frozen
class Check:
    name: str
    count: int
    breach: bool
    examples: tuple[str, ...] = ()


def _check(name: str, found: Sequence[str], *, breaches: bool = True) -> Check:
    return Check(name, len(found), breaches and bool(found), tuple(found[:EXAMPLES]))


def lost(h: History) -> Check:
    acks = h.first_acks()
    seen: dict[str, set[str]] = defaultdict(set)
    for c in h.consumes:
        seen[c.group].add(c.msg_id)
    found = []
    for spec in h.topics:
        for msg_id, a in sorted(acks.items(), key=lambda kv: kv[1].ts_ms):
            intent = h.intents.get(msg_id)
            if a.topic != spec.topic or (intent is not None and intent.rollback):
                continue
            if intent is None and spec.needs_intent:
                continue
            for g in spec.groups:
                if msg_id not in seen[g]:
                    found.append(
                        f"{msg_id} ({a.topic} {a.broker} q{a.queue_id} @{a.queue_offset}, "
                        f"acked at {a.ts_ms}) never consumed by {g}"
                    )
    return _check("lost", found)


def duplicates(h: History) -> Check:
    counts = Counter((c.group, c.msg_id) for c in h.consumes)
    found = [f"{m} consumed {n} times by {g}" for (g, m), n in sorted(counts.items()) if n > 1]
    return _check("duplicates", found, breaches=False)


def _orderly(h: History) -> dict[str, list[Consume]]:
    groups = {g for t in h.topics for g in t.orderly_groups}
    out: dict[str, list[Consume]] = defaultdict(list)
    for c in h.consumes:  # in log order: the order the group consumed them
        if c.group in groups:
            out[c.group].append(c)
    return out


def order(h: History) -> Check:
    found = []
    for group, consumes in sorted(_orderly(h).items()):
        done: set[str] = set()
        top_offset: dict[tuple[str | None, int], int] = {}
        top_seq: dict[str, int] = {}
        for c in consumes:
            if c.msg_id in done:
                continue  # a re-delivery: a duplicate, not an order violation
            done.add(c.msg_id)
            q = (c.broker, c.queue_id)
            if c.queue_offset < top_offset.get(q, -1):
                found.append(
                    f"{group}: {c.broker} q{c.queue_id} offset {c.queue_offset} consumed after "
                    f"offset {top_offset[q]}"
                )
            top_offset[q] = max(top_offset.get(q, -1), c.queue_offset)
            intent = h.intents.get(c.msg_id)
            if intent is None or intent.key is None or intent.seq is None:
                continue
            if intent.seq < top_seq.get(intent.key, -1):
                found.append(
                    f"{group}: message group {intent.key} seq {intent.seq} consumed after seq "
                    f"{top_seq[intent.key]}"
                )
            top_seq[intent.key] = max(top_seq.get(intent.key, -1), intent.seq)
    return _check("order", found)


def delayed_early(h: History) -> Check:
    acks = h.first_acks()
    found = []
    for c in h.consumes:
        intent = h.intents.get(c.msg_id)
        a = acks.get(c.msg_id)
        if intent is None or intent.delay_ms <= 0 or a is None:
            continue
        due = a.sent_ms + intent.delay_ms
        if c.ts_ms + DELAY_TOLERANCE_MS < due:
            found.append(f"{c.msg_id} consumed by {c.group} {due - c.ts_ms} ms before it was due")
    return _check("delayed_early", found)


def rolled_back_delivered(h: History) -> Check:
    found = [
        f"{c.msg_id} consumed by {c.group}, its transaction rolled back"
        for c in h.consumes
        if (i := h.intents.get(c.msg_id)) is not None and i.rollback
    ]
    return _check("rolled_back_delivered", found)


def metadata(h: History) -> Check:
    specs = {t.topic: t for t in h.topics}
    found = []
    seen: set[tuple[str, str, int, int, int]] = set()
    for p in h.polls:
        spec = specs.get(p.topic)
        if spec is None:
            continue
        got = (p.read_queues, p.write_queues, p.perm)
        if not p.has_master and p.perm == spec.perm & ~PERM_WRITE:
            got = (p.read_queues, p.write_queues, spec.perm)  # read-only while masterless
        if got != (spec.read_queues, spec.write_queues, spec.perm):
            key = (p.topic, p.broker, *got)
            if key not in seen:  # one line per distinct wrong shape
                seen.add(key)
                found.append(
                    f"{p.topic} on {p.broker} at {p.ts_ms}: read/write queues {p.read_queues}/"
                    f"{p.write_queues} perm {p.perm}, the operator asked for "
                    f"{spec.read_queues}/{spec.write_queues} perm {spec.perm}"
                )
    last = {(p.topic, p.broker): p for p in h.polls if p.topic in specs}
    for (topic, broker), p in sorted(last.items()):
        if not p.has_master:  # read-only while masterless is allowed, but not to the end
            found.append(f"{topic} on {broker} had no writable master at the run's end")
    return _check("metadata", found)


@attrs.frozen
class Recovery:
    fault: int
    name: str
    kind: str
    op: str  # "send" or "consume"
    last_before_ms: int | None
    first_after_ms: int | None  # None: nothing got through after the fault began
    recovery_ms: int | None  # first_after - the fault's start
    gap_ms: int | None  # first_after - last_before


def _recovery(f: FaultWindow, times: list[int], bound_ms: int, op: str) -> Recovery:
    best: tuple[int, int] | None = None
    last_before = None
    begins_by = min(bound_ms, max(f.healed_ms, f.started_ms) + OUTAGE_START_GRACE_MS)
    for a, b in itertools.pairwise(times):
        if a <= f.started_ms:
            last_before = a
        if b > f.started_ms and a < begins_by and (best is None or b - a > best[1] - best[0]):
            best = (a, b)
    if best is None:
        after = [t for t in times if t > f.started_ms]
        if not after:
            return Recovery(f.index, f.name, f.kind, op, last_before, None, None, None)
        best = (last_before if last_before is not None else f.started_ms, after[0])
    a, b = best
    return Recovery(f.index, f.name, f.kind, op, a, b, b - f.started_ms, b - a)


def recoveries(h: History) -> list[Recovery]:
    acks = sorted(a.ts_ms for a in h.first_acks().values())
    live = [c for c in h.consumes if c.group not in h.late_groups]
    cons = sorted(c.ts_ms for c in live)
    faults = sorted(h.faults, key=lambda f: f.started_ms)
    per_group: dict[str, list[int]] = defaultdict(list)
    for c in live:
        per_group[c.group].append(c.ts_ms)
    out = []
    for i, f in enumerate(faults):
        bound = faults[i + 1].started_ms if i + 1 < len(faults) else h.end_ms or 2**62
        out.append(_recovery(f, acks, bound, "send"))
        out.append(_recovery(f, cons, bound, "consume"))
        for g in sorted(per_group):  # one stalled group shows, though the others read on
            out.append(_recovery(f, sorted(per_group[g]), bound, f"consume:{g}"))
    return out


def unrecovered(recs: Sequence[Recovery]) -> Check:
    found = [
        f"fault {r.fault} ({r.name}): no {r.op} succeeded after it began"
        for r in recs
        if r.first_after_ms is None and r.op in ("send", "consume")
    ]
    return _check("unrecovered", found)


def run_all(h: History) -> tuple[list[Check], list[Recovery]]:
    recs = recoveries(h)
    checks = [
        lost(h),
        duplicates(h),
        order(h),
        delayed_early(h),
        rolled_back_delivered(h),
        metadata(h),
        unrecovered(recs),
    ]
    return checks, recs


def percentile(values: Sequence[int], p: float) -> int | None:
    """Nearest-rank percentile (p in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    s = sorted(values)
    rank = max(1, -(-len(s) * p // 100))
    return s[int(rank) - 1]


def by_kind(recs: Sequence[Recovery], op: str = "send") -> dict[str, dict[str, int | None]]:
    """Per fault name: how many, recovery p50 / p99 / max (ms) of ``op``."""
    per: dict[str, list[int]] = defaultdict(list)
    counts: Counter[str] = Counter()
    for r in recs:
        if r.op != op:
            continue
        counts[r.name] += 1
        if r.recovery_ms is not None:
            per[r.name].append(r.recovery_ms)
    return {
        name: {
            "faults": counts[name],
            "p50_ms": percentile(per[name], 50),
            "p99_ms": percentile(per[name], 99),
            "max_ms": max(per[name]) if per[name] else None,
        }
        for name in sorted(counts)
    }


def latency_by_kind(h: History) -> dict[str, dict[str, int | None]]:
    """Per fault name: the send latency (send call to acknowledgement, ms) of the sends begun
    while a fault of that name was injected (p50 / p99), and the p50 of those begun outside
    every fault. What a fault that slows rather than stops (slowdisk, delay) does: its
    recovery time says little, as acknowledgements never pause."""
    acks = h.first_acks().values()
    windows = [(f.started_ms, max(f.healed_ms, f.started_ms), f.name) for f in h.faults]
    during: dict[str, list[int]] = defaultdict(list)
    outside = []
    for a in acks:
        names = [n for start, end, n in windows if start <= a.sent_ms <= end]
        for n in names:
            during[n].append(a.latency_ms)
        if not names:
            outside.append(a.latency_ms)
    base = percentile(outside, 50)
    return {
        name: {
            "during_p50_ms": percentile(during[name], 50),
            "during_p99_ms": percentile(during[name], 99),
            "outside_p50_ms": base,
        }
        for name in sorted({f.name for f in h.faults})
    }


def acked_count(h: History) -> int:
    return len(h.first_acks())


__all__ = [
    "Ack", "Check", "Consume", "Recovery", "TopicSpec", "by_kind", "latency_by_kind", "run_all",
]  # fmt: skip
