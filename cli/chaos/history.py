"""What a chaos run saw (pure): the client traces, the workload's intents, the route polls and
the faults, as typed records; `from_lines` reads them from the JSON log lines the clients wrote
(``trace_send_acked``, ``trace_consumed``: actors/client/trace.py) and chaos's own lines.

An acknowledgement is keyed by the message's client id (UNIQ_KEY), as the Spark job keys them
(analysis/traces.py): a message acknowledged twice (a retried send whose first try got
through) is one acknowledged message, first acknowledgement wins.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import attrs


@attrs.frozen
class Ack:
    msg_id: str
    topic: str
    broker: str | None
    queue_id: int
    queue_offset: int
    ts_ms: int
    latency_ms: int  # from the send call to the acknowledgement
    # when the send call began: the line's ``sent_ms``, else ``ts_ms - latency_ms``
    sent_ms: int = attrs.field(
        default=attrs.Factory(lambda a: a.ts_ms - a.latency_ms, takes_self=True)
    )


@attrs.frozen
class Consume:
    msg_id: str
    group: str
    topic: str
    broker: str | None
    queue_id: int
    queue_offset: int
    ts_ms: int


@attrs.frozen
class Intent:
    """What the workload meant by a message it sent (kept by chaos, not in the trace)."""

    msg_id: str
    key: str | None = None  # the message group of an ordered send
    seq: int | None = None  # its place in that group
    delay_ms: int = 0  # a delayed message may not be consumed before send call + delay_ms
    rollback: bool = False  # a transactional message whose transaction was rolled back


@attrs.frozen
class RoutePoll:
    ts_ms: int
    topic: str
    broker: str
    read_queues: int
    write_queues: int
    perm: int
    has_master: bool = True  # the route listed a master (brokerId 0) of this broker set


@attrs.frozen
class TopicSpec:
    """A topic the workload created, what an operator asked for, and who must read it all."""

    topic: str
    read_queues: int
    write_queues: int
    perm: int
    groups: tuple[str, ...]
    orderly_groups: tuple[str, ...] = ()
    # only messages with an intent are owed (a transaction whose outcome the producer never
    # learned, its call having failed after the half message was stored, is owed to nobody)
    needs_intent: bool = False


@attrs.frozen
class FaultWindow:
    index: int
    name: str  # e.g. suspend-slave+kill-master
    kind: str  # the first step's kind, for the per-kind table
    targets: tuple[str, ...]  # process names, one per step
    started_ms: int
    healed_ms: int


@attrs.define
class History:
    acks: list[Ack] = attrs.field(factory=list)
    consumes: list[Consume] = attrs.field(factory=list)
    intents: dict[str, Intent] = attrs.field(factory=dict)
    polls: list[RoutePoll] = attrs.field(factory=list)
    faults: list[FaultWindow] = attrs.field(factory=list)
    topics: list[TopicSpec] = attrs.field(factory=list)
    start_ms: int = 0
    end_ms: int = 0
    # groups that read after the run (the final read): no part of any recovery time
    late_groups: tuple[str, ...] = ()

    def first_acks(self) -> dict[str, Ack]:
        out: dict[str, Ack] = {}
        for a in sorted(self.acks, key=lambda a: a.ts_ms):
            out.setdefault(a.msg_id, a)
        return out


def ts_ms_of(ts: str) -> int:
    """A log line's ``ts`` (UTC ISO-8601 with ms) -> epoch milliseconds."""
    return round(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)


def _ack(d: dict[str, Any]) -> Ack:
    return Ack(
        d["msg_id"], d["topic"], d.get("broker"), int(d["queue_id"]), int(d["queue_offset"]),
        ts_ms_of(d["ts"]), int(d.get("latency_ms") or 0), _sent_ms(d),
    )  # fmt: skip


def _sent_ms(d: dict[str, Any]) -> int:
    """When the send began: the line's ``sent_ms`` (read beside the latency), else the older
    lines' ``ts - latency_ms`` (later than the truth by however long stamping the line took)."""
    sent = d.get("sent_ms")
    return int(sent) if sent is not None else ts_ms_of(d["ts"]) - int(d.get("latency_ms") or 0)


def _consume(d: dict[str, Any]) -> Consume:
    return Consume(
        d["msg_id"], d["group"], d["topic"], d.get("broker"), int(d["queue_id"]),
        int(d["queue_offset"]), ts_ms_of(d["ts"]),
    )  # fmt: skip


def from_lines(lines: Iterable[str], topics: Iterable[str], history: History) -> int:
    """Add the trace lines of ``topics`` among ``lines`` (JSON log lines) to ``history``;
    returns how many lines were not JSON (a torn last line after a crash, say)."""
    wanted = set(topics)
    bad = 0
    for line in lines:
        if '"trace_' not in line:
            continue
        try:
            d = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if d.get("topic") not in wanted:
            continue
        if d.get("event") == "trace_send_acked":
            history.acks.append(_ack(d))
        elif d.get("event") == "trace_consumed":
            history.consumes.append(_consume(d))
    return bad
