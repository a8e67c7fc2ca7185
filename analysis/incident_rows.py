"""The small incident tables (SPEC T4) computed from the collected incident events, in plain
Python: failovers (all but the write gap, which reads every acknowledgement), Raft leaders and
churn, SyncStateSet changes and truncations.

The incident events are the good lines of `ingest.INTERESTING` events other than the client
traces: thousands of rows at ten million lines (elections, role changes, loss signals,
truncations), so they are collected once and these tables are built here rather than as dozens
of small Spark shuffles. No pyspark in this module; each function is a pure function of the
events (dicts of `ingest.EV_COLUMNS`) and gives the rows Spark SQL gave for the same query,
with its rules kept: a null never equals anything, a group key may be null, ``min_by`` /
``max_by`` keep the first row with the extreme ordering and skip rows whose ordering is null.

Definitions (failovers.py's docstring says the same for the table):

- A **failover** of a broker set is an ``elect_master`` whose master differs from the previous
  master of that set (lines of several controller replicas are one election), elections of a
  set ordered by (epoch, term, time). Its parts are joined to it by epoch, not time, through its
  id ``fid`` (broker set # epoch).
- *Master lost* is the first loss signal about the old master after the previous election, at
  most `LOOKBACK_MS` before the election and at most `SKEW_MS` after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Row = dict[str, Any]

LOOKBACK_MS = 30_000  # how long before an election a loss signal still belongs to it
SKEW_MS = 1_000  # how far host clocks may disagree
LOSS_EVENTS = ("broker_heartbeat_timeout", "broker_expired")


def _nulls_first(v: Any) -> tuple[bool, Any]:
    return (v is not None, v if v is not None else 0)


def _by(rows: Iterable[Row], value: Callable[[Row], Any], order: Callable[[Row], Any], *,
        most: bool) -> Any:  # fmt: skip
    """Spark's ``max_by``/``min_by``: the value of the first row with the extreme ordering;
    rows whose ordering is null are skipped."""
    best: Any = None
    got: Any = None
    for r in rows:
        o = order(r)
        if o is None:
            continue
        if best is None or (o > best if most else o < best):
            best, got = o, value(r)
    return got


def _min(values: Iterable[Any]) -> Any:
    vs = [v for v in values if v is not None]
    return min(vs) if vs else None


def _max(values: Iterable[Any]) -> Any:
    vs = [v for v in values if v is not None]
    return max(vs) if vs else None


def _group(rows: Iterable[Row], key: Callable[[Row], Any]) -> dict[Any, list[Row]]:
    out: dict[Any, list[Row]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return out


def _eq(a: Any, b: Any) -> bool:
    """SQL ``=`` in a filter: null equals nothing."""
    return a is not None and b is not None and a == b


def node_brokers(ev: list[Row]) -> dict[str, tuple[Any, Any]]:
    """node -> (broker set, broker id): from the role changes each broker process logs."""
    roles = [r for r in ev if r["event"] == "broker_role_changed" and r["broker"] is not None]
    out = {}
    for node, rows in _group(roles, lambda r: r["node"]).items():
        if node is None:  # a null node joins nothing
            continue
        ts = lambda r: r["ts_ms"]  # noqa: E731
        out[node] = (
            _by(rows, lambda r: r["broker"], ts, most=True),
            _by(rows, lambda r: r["broker_id"], ts, most=True),
        )
    return out


def with_sets(ev: list[Row], nodes: dict[str, tuple[Any, Any]]) -> list[Row]:
    """Each event with its broker set (``set``: its own, else its node's) and
    ``node_broker_id``."""
    out = []
    for r in ev:
        nb, nid = nodes.get(r["node"], (None, None)) if r["node"] is not None else (None, None)
        out.append({**r, "set": r["broker"] if r["broker"] is not None else nb,
                    "node_broker": nb, "node_broker_id": nid})  # fmt: skip
    return out


def elections(ev: list[Row]) -> list[Row]:
    """One row per election of a broker set (replicated lines merged), with the previous
    master and when that one was elected."""
    el = []
    groups = _group(
        (r for r in ev if r["event"] == "elect_master"),
        lambda r: (r["broker"], r["epoch"], r["master_id"]),
    )
    for (broker, epoch, master), rows in groups.items():
        reason = lambda r: None if r["reason"] is None else r["reason"] != "unknown"  # noqa: E731
        el.append({
            "broker": broker, "epoch": epoch, "master_id": master,
            "elected_ms": _min(r["ts_ms"] for r in rows),
            "term": _max(r["term"] for r in rows),
            # the leader knows why and from whom it elected; followers log reason "unknown"
            "reason": _by(rows, lambda r: r["reason"], reason, most=True),
            "candidates": _by(rows, lambda r: r["candidates"],
                              lambda r: r["candidates"] is not None, most=True),
        })  # fmt: skip
    for rows in _group(el, lambda r: r["broker"]).values():
        rows.sort(key=lambda r: (_nulls_first(r["epoch"]), _nulls_first(r["term"]),
                                 r["elected_ms"]))  # fmt: skip
        prev: Row | None = None
        for r in rows:
            r["old_master_id"] = prev["master_id"] if prev else None
            r["prev_elected_ms"] = prev["elected_ms"] if prev else None
            prev = r
    return el


def fid(broker: Any, epoch: Any) -> str:
    """A failover's id: ``concat_ws("#", broker, epoch)`` (nulls left out)."""
    return "#".join(str(p) for p in (broker, epoch) if p is not None)


def failovers(ev: list[Row], evn: list[Row]) -> list[Row]:
    """The failovers with every part but the write gap and the acknowledged-but-lost count:
    ``fid``, the `failovers.COLUMNS` found here, ``prev_elected_ms`` (``evn``: `with_sets`)."""
    fo = []
    for e in elections(ev):
        old, new = e["old_master_id"], e["master_id"]
        if old is not None and (new is None or new != old):
            f = {k: v for k, v in e.items() if k != "master_id"}
            fo.append({**f, "new_master_id": new, "fid": fid(e["broker"], e["epoch"])})
    # the events by (event, broker set) and the truncations by node: each failover looks at
    # its own set's only
    by_set = _group(evn, lambda r: (r["event"], r["set"]))
    cut_rows = (r for r in evn if r["event"] in ("ha_truncated", "ha_log_reset"))
    cuts_by_node = _group(cut_rows, lambda r: r["node"])
    parts: dict[str, Row] = {}
    for key, fs in _group(fo, lambda f: f["fid"]).items():
        p = parts[key] = {}
        lost = [s for f in fs for s in _signals(f, by_set)]
        p["lost_ms"] = _min(s["ts_ms"] for s in lost)
        p["lost_signal"] = _by(lost, lambda s: s["event"], lambda s: s["ts_ms"], most=False)
        roles = [(r, f) for f in fs for r in _of(by_set, "broker_role_changed", f["broker"])]
        p["writable_ms"] = _min(
            r["ts_ms"] for r, f in roles
            if _eq(r["broker_id"], f["new_master_id"]) and r["broker_role"] == "SYNC_MASTER"
            and _eq(r["epoch"], f["epoch"])
        )  # fmt: skip
        back = [
            r for r, f in roles
            if _eq(r["broker_id"], f["old_master_id"]) and r["broker_role"] == "SLAVE"
            and r["epoch"] is not None and f["epoch"] is not None and r["epoch"] >= f["epoch"]
        ]  # fmt: skip
        p["old_back_ms"] = _min(r["ts_ms"] for r in back)
        p["old_node"] = _by(back, lambda r: r["node"], lambda r: r["ts_ms"], most=False)
        p["first_write_ms"] = _min(
            r["ts_ms"] for f in fs for r in _of(by_set, "master_first_write", f["broker"])
            if _eq(r["epoch"], f["epoch"])
        )  # fmt: skip
        back_ms = p["old_back_ms"]
        cuts = [
            r for _ in fs for r in cuts_by_node.get(p["old_node"], [])
            if p["old_node"] is not None and back_ms is not None and r["ts_ms"] >= back_ms
        ]  # fmt: skip
        p["old_truncated_bytes"] = _by(cuts, _cut_bytes, lambda r: r["ts_ms"], most=False)
    return [{**f, **parts[f["fid"]]} for f in fo]


def _of(by_set: dict[Any, list[Row]], event: str, broker: Any) -> list[Row]:
    """The ``event`` rows of broker set ``broker`` (none for a null set)."""
    return by_set.get((event, broker), []) if broker is not None else []


def _cut_bytes(r: Row) -> Any:
    a, b = r["from_offset"], r["to_offset"]
    return None if a is None or b is None else a - b


def _signals(f: Row, by_set: dict[Any, list[Row]]) -> list[Row]:
    """The loss signals about failover ``f``'s old master: the old master's id at the
    controller / NameServer, or a slave of the set seeing its replication connection close."""
    prev = f["prev_elected_ms"] if f["prev_elected_ms"] is not None else 0
    lower = max(prev, f["elected_ms"] - LOOKBACK_MS)
    old = f["old_master_id"]
    out = []
    for ev in (*LOSS_EVENTS, "ha_connection_closed"):
        for s in _of(by_set, ev, f["broker"]):
            if ev in LOSS_EVENTS:
                if not _eq(s["broker_id"], old):
                    continue
            elif s["side"] != "slave" or s["node_broker_id"] == old:
                continue
            if lower < s["ts_ms"] <= f["elected_ms"] + SKEW_MS:
                out.append(s)
    return out


def acked_lost(fo: list[Row], lost: list[Row]) -> dict[str, int]:
    """fid -> acknowledged-but-lost messages of the set (``lost``: rows of the lost table),
    acknowledged between the previous election and the new master's first write."""
    out: dict[str, int] = {}
    by_set = _group(lost, lambda m: m["broker"])
    for f in fo:
        lo = f["prev_elected_ms"] if f["prev_elected_ms"] is not None else 0
        hi = next(f[k] for k in ("first_write_ms", "writable_ms", "elected_ms") if f[k] is not None)
        n = sum(
            1
            for m in by_set.get(f["broker"], []) if f["broker"] is not None
            if m["acked_ms"] is not None and lo <= m["acked_ms"] <= hi
        )  # fmt: skip
        if n:
            out[f["fid"]] = out.get(f["fid"], 0) + n
    return out


def raft_leaders(ev: list[Row]) -> list[Row]:
    rows = (r for r in ev if r["event"] == "raft_leader_elected")
    return [
        {"term": term,
         "leader": _by(g, lambda r: r["leader"], lambda r: r["ts_ms"], most=False),
         "at_ms": _min(r["ts_ms"] for r in g)}
        for term, g in _group(rows, lambda r: r["term"]).items()
    ]  # fmt: skip


def _sorted_members(s: list[Any] | None) -> tuple[Any, ...] | None:
    if s is None:
        return None
    return tuple(sorted(m for m in s if m is not None)) + tuple(m for m in s if m is None)


def sync_state_set_changes(ev: list[Row]) -> list[Row]:
    """Per broker set, each (epoch, members) with when it was first logged, and whether it
    shrank, grew or stayed the same against the one before (by epoch, then time)."""
    groups = _group(
        (r for r in ev if r["event"] == "sync_state_set_changed"),
        lambda r: (r["broker"], r["epoch"], _sorted_members(r["sync_state_set"])),
    )
    ch = [
        {"broker": b, "epoch": e, "members": None if m is None else list(m),
         "at_ms": _min(r["ts_ms"] for r in g)}
        for (b, e, m), g in groups.items()
    ]  # fmt: skip
    for rows in _group(ch, lambda r: r["broker"]).values():
        rows.sort(key=lambda r: (_nulls_first(r["epoch"]), r["at_ms"]))
        prev: int | None = None
        for i, r in enumerate(rows):
            size = len(r["members"]) if r["members"] is not None else None  # size(null): null
            r["change"] = (
                "initial" if i == 0 or prev is None
                else "same" if size is None
                else "shrink" if size < prev
                else "expand" if size > prev
                else "same"
            )  # fmt: skip
            prev = size
    return ch


def truncations(ev: list[Row], nodes: dict[str, tuple[Any, Any]]) -> list[Row]:
    out = []
    for r in ev:
        kind = r["event"]
        if kind == "ha_truncated":
            a, b = r["from_offset"], r["to_offset"]
            if a is None or b is None or not a > b:
                continue
        elif kind not in ("ha_log_reset", "commitlog_truncated"):
            continue
        nb, nid = nodes.get(r["node"], (None, None)) if r["node"] is not None else (None, None)
        clt = kind == "commitlog_truncated"
        to = r["offset"] if clt and r["offset"] is not None else r["to_offset"]
        out.append({
            "node": r["node"],
            "broker": r["broker"] if r["broker"] is not None else nb,
            "broker_id": nid,
            "epoch": r["matched_epoch"] if kind == "ha_truncated" else None,
            "from_offset": None if clt else r["from_offset"],
            "to_offset": to,
            "bytes": r["dropped_bytes"] if clt else _cut_bytes(r),
            "kind": kind,
            "at_ms": r["ts_ms"],
        })  # fmt: skip
    return out


def raft_churn(ev: list[Row]) -> tuple[int, int]:
    """(distinct terms, distinct role changes) of the controllers' ``raft_role_changed``."""
    rows = [r for r in ev if r["event"] == "raft_role_changed"]
    terms = {r["term"] for r in rows}
    changes = {(r["node"], r["term"], r["role"], r["ts_ms"]) for r in rows}
    return len(terms), len(changes)
