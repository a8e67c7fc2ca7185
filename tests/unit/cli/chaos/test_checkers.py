"""The chaos checkers on synthetic histories: each passes a clean history and fails the same
history with its defect put in."""

from __future__ import annotations

import json

import attrs

from rocketrio.cli.chaos import checkers
from rocketrio.cli.chaos.history import (
    Ack,
    Consume,
    FaultWindow,
    History,
    Intent,
    RoutePoll,
    TopicSpec,
    from_lines,
    ts_ms_of,
)

T, ORD, D, X = "Normal", "Order", "Delay", "Txn"


def _clean() -> History:
    h = History(start_ms=0, end_ms=100_000)
    h.topics = [
        TopicSpec(T, 4, 4, 6, ("push", "pop")),
        TopicSpec(ORD, 4, 4, 6, ("orderly",), ("orderly",)),
        TopicSpec(D, 4, 4, 6, ("delayed",)),
        TopicSpec(X, 4, 4, 6, ("txn",)),
    ]
    for i in range(20):  # one ack every 100 ms, consumed 50 ms later by both groups
        h.acks.append(Ack(f"n{i}", T, "broker-a", i % 4, i // 4, 1000 + i * 100, 5))
        for g in ("push", "pop"):
            h.consumes.append(Consume(f"n{i}", g, T, "broker-a", i % 4, i // 4, 1050 + i * 100))
    for seq in range(6):  # message group k0 on queue 1, in order
        h.acks.append(Ack(f"o{seq}", ORD, "broker-a", 1, seq, 3000 + seq * 10, 3))
        h.intents[f"o{seq}"] = Intent(f"o{seq}", key="k0", seq=seq)
        h.consumes.append(Consume(f"o{seq}", "orderly", ORD, "broker-a", 1, seq, 3100 + seq * 10))
    h.acks.append(Ack("d0", D, "broker-a", 0, 0, 5000, 10))  # send call at 4990, due at 5990
    h.intents["d0"] = Intent("d0", delay_ms=1000)
    h.consumes.append(Consume("d0", "delayed", D, "broker-a", 0, 0, 6000))
    h.acks += [Ack("x0", X, "broker-a", 0, 0, 7000, 4), Ack("x1", X, "broker-a", 1, 0, 7100, 4)]
    h.intents["x1"] = Intent("x1", rollback=True)
    h.consumes.append(Consume("x0", "txn", X, "broker-a", 0, 0, 7200))
    h.polls = [RoutePoll(ts, t.topic, "broker-a", 4, 4, 6) for ts in (0, 9000) for t in h.topics]
    return h


def _by_name(h: History) -> dict[str, checkers.Check]:
    return {c.name: c for c in checkers.run_all(h)[0]}


def test_a_clean_history_passes_every_checker() -> None:
    checks = _by_name(_clean())
    assert {n: c.count for n, c in checks.items()} == dict.fromkeys(checks, 0)
    assert not any(c.breach for c in checks.values())


def test_lost_an_acked_message_one_group_never_consumed() -> None:
    h = _clean()
    h.consumes = [c for c in h.consumes if not (c.msg_id == "n7" and c.group == "pop")]
    lost = _by_name(h)["lost"]
    assert (lost.count, lost.breach) == (1, True)
    assert "n7" in lost.examples[0] and "pop" in lost.examples[0]


def test_lost_counts_a_message_once_however_often_it_was_acknowledged() -> None:
    h = _clean()
    h.acks.append(attrs.evolve(h.acks[0], ts_ms=99_000))
    assert _by_name(h)["lost"].count == 0
    h.acks.append(Ack("ghost", T, "broker-a", 0, 99, 2000, 3))
    assert _by_name(h)["lost"].count == 2  # neither group read it


def test_duplicates_are_reported_but_are_no_breach() -> None:
    h = _clean()
    h.consumes.append(Consume("n3", "push", T, "broker-a", 3, 0, 9000))
    dup = _by_name(h)["duplicates"]
    assert (dup.count, dup.breach) == (1, False)


def test_order_violation_per_queue_and_per_message_group() -> None:
    h = _clean()
    o = [c for c in h.consumes if c.topic == ORD]
    rest = [c for c in h.consumes if c.topic != ORD]
    swapped = [*o[:2], o[3], o[2], *o[4:]]  # offset 3 (seq 3) before offset 2 (seq 2)
    h.consumes = rest + swapped
    order = _by_name(h)["order"]
    assert order.breach and order.count == 2  # the queue and the message group
    assert any("offset 2 consumed after offset 3" in e for e in order.examples)
    assert any("k0 seq 2 consumed after seq 3" in e for e in order.examples)


def test_a_redelivery_in_an_orderly_group_is_not_an_order_violation() -> None:
    h = _clean()
    h.consumes += [c for c in h.consumes if c.topic == ORD]  # all again (a failover)
    checks = _by_name(h)
    assert checks["order"].count == 0
    assert checks["duplicates"].count == 6


def test_order_is_checked_only_for_orderly_groups() -> None:
    h = _clean()
    h.consumes.reverse()  # concurrent consumers may consume in any order
    h.topics = [attrs.evolve(t, orderly_groups=()) for t in h.topics]
    assert _by_name(h)["order"].count == 0


def test_delayed_message_consumed_before_it_was_due() -> None:
    h = _clean()
    h.consumes = [attrs.evolve(c, ts_ms=5500) if c.msg_id == "d0" else c for c in h.consumes]
    early = _by_name(h)["delayed_early"]
    assert early.breach and "490 ms before" in early.examples[0]


def test_rolled_back_transaction_delivered() -> None:
    h = _clean()
    h.consumes.append(Consume("x1", "txn", X, "broker-a", 1, 0, 7300))
    checks = _by_name(h)
    assert checks["rolled_back_delivered"].breach
    assert checks["lost"].count == 0  # a rolled-back message is never owed to anyone


def test_queue_count_or_permission_change_nobody_asked_for() -> None:
    h = _clean()
    h.polls.append(RoutePoll(9500, T, "broker-a", 8, 8, 6))
    h.polls.append(RoutePoll(9600, T, "broker-a", 8, 8, 6))  # the same change: one finding
    h.polls.append(RoutePoll(9700, ORD, "broker-a", 4, 4, 4))  # write permission gone
    meta = _by_name(h)["metadata"]
    assert meta.breach and meta.count == 2


def test_queues_served_read_only_while_the_set_has_no_master_are_no_change() -> None:
    h = _clean()
    h.polls.append(RoutePoll(9500, T, "broker-a", 4, 4, 4, has_master=False))  # prime slave
    h.polls.append(RoutePoll(9550, T, "broker-a", 4, 4, 6))  # the master is back
    assert _by_name(h)["metadata"].count == 0
    h.polls.append(RoutePoll(9600, T, "broker-a", 8, 8, 4, has_master=False))
    h.polls.append(RoutePoll(9650, T, "broker-a", 4, 4, 6))
    assert _by_name(h)["metadata"].count == 1  # the queue count still must not change


def test_a_set_still_masterless_at_the_runs_end_is_a_finding() -> None:
    h = _clean()
    h.polls.append(RoutePoll(9500, T, "broker-a", 4, 4, 4, has_master=False))
    meta = _by_name(h)["metadata"]
    assert meta.count == 1 and "no writable master at the run's end" in meta.examples[0]


def test_recovery_is_the_pause_around_a_fault_last_ack_before_first_after() -> None:
    h = _clean()
    h.acks = [a for a in h.acks if not (1500 <= a.ts_ms <= 2200)]  # nothing from 1.4 to 2.3 s
    h.faults = [FaultWindow(0, "kill-master", "kill", ("broker-a-0",), 1450, 1450)]
    _checks, recs = checkers.run_all(h)
    send = next(r for r in recs if r.op == "send")
    assert (send.last_before_ms, send.first_after_ms) == (1400, 2300)
    assert (send.recovery_ms, send.gap_ms) == (850, 900)
    table = checkers.by_kind(recs)
    assert table["kill-master"] == {"faults": 1, "p50_ms": 850, "p99_ms": 850, "max_ms": 850}


def test_a_fault_after_which_nothing_gets_through_is_a_breach() -> None:
    h = _clean()
    h.faults = [FaultWindow(0, "kill-master", "kill", ("broker-a-0",), 50_000, 50_000)]
    unrec = _by_name(h)["unrecovered"]
    assert unrec.breach and unrec.count == 2  # neither a send nor a consumption


def test_percentile_nearest_rank() -> None:
    assert checkers.percentile([], 50) is None
    assert checkers.percentile([5], 99) == 5
    assert checkers.percentile(list(range(1, 101)), 50) == 50
    assert checkers.percentile(list(range(1, 101)), 99) == 99


def test_history_read_from_trace_log_lines() -> None:
    lines = [
        '{"ts":"2026-11-28T12:00:00.100Z","event":"trace_send_acked","msg_id":"m1","topic":"T",'
        '"broker":"b","queue_id":1,"queue_offset":7,"latency_ms":12}',
        '{"ts":"2026-11-28T12:00:00.300Z","event":"trace_consumed","msg_id":"m1","topic":"T",'
        '"broker":"b","queue_id":1,"queue_offset":7,"group":"g"}',
        '{"ts":"2026-11-28T12:00:00.300Z","event":"trace_consumed","msg_id":"m2","topic":"U",'
        '"broker":"b","queue_id":1,"queue_offset":7,"group":"g"}',
        '{"ts":"2026-11-28T12:00:00.4',
    ]
    h = History()
    assert from_lines(lines, ["T"], h) == 0  # the torn line is no trace line
    assert [a.msg_id for a in h.acks] == ["m1"] and h.acks[0].latency_ms == 12
    assert h.consumes[0].ts_ms - h.acks[0].ts_ms == 200


def test_consumption_recovery_is_also_per_group_so_one_stalled_group_shows() -> None:
    h = _clean()
    h.consumes = [c for c in h.consumes if not (c.group == "pop" and 1500 <= c.ts_ms <= 2500)]
    h.faults = [FaultWindow(0, "suspend-master", "suspend", ("broker-a-0",), 1450, 1460)]
    _checks, recs = checkers.run_all(h)
    by_op = {r.op: r for r in recs}
    assert by_op["consume"].gap_ms == 100  # push read on
    assert (by_op["consume:pop"].last_before_ms, by_op["consume:pop"].first_after_ms) == (
        1450,
        2550,
    )


def test_a_transaction_whose_outcome_the_producer_never_learned_is_owed_to_nobody() -> None:
    h = _clean()
    h.topics = [attrs.evolve(t, needs_intent=(t.topic == X)) for t in h.topics]
    assert _by_name(h)["lost"].count == 0  # x0: no intent, and read anyway
    h.acks.append(Ack("x2", X, "broker-a", 2, 0, 7400, 4))  # the call failed after the half
    assert _by_name(h)["lost"].count == 0
    h.intents["x2"] = Intent("x2")  # committed, and never read: lost
    assert _by_name(h)["lost"].count == 1


def test_the_final_read_is_no_part_of_any_recovery_time() -> None:
    h = _clean()
    h.faults = [FaultWindow(0, "kill-master", "kill", ("broker-a-0",), 50_000, 50_000)]
    h.consumes.append(Consume("n0", "final", T, "broker-a", 0, 0, 90_000))
    h.late_groups = ("final",)
    recs = checkers.recoveries(h)
    assert {r.op for r in recs} == {
        "send",
        "consume",
        "consume:push",
        "consume:pop",
        "consume:orderly",
        "consume:delayed",
        "consume:txn",
    }
    assert next(r for r in recs if r.op == "consume").first_after_ms is None


def test_a_late_stamped_ack_line_does_not_make_a_delivery_early() -> None:
    """The ack line's ``ts`` is stamped after the latency is read (a GC pause can fall between):
    the send's start is the line's ``sent_ms``, read with the latency. Seen in a chaos run: a
    1 s delayed message stored at 38.315, its ack line stamped at 38.326 with latency 3 ms,
    consumed at 39.318: 5 ms "early" by ``ts - latency_ms``, 1003 ms after its send by sent_ms."""
    line = {
        "ts": "2026-11-28T17:07:38.326Z", "event": "trace_send_acked", "msg_id": "d9",
        "topic": D, "broker": "broker-a", "queue_id": 2, "queue_offset": 44, "latency_ms": 3,
        "sent_ms": ts_ms_of("2026-11-28T17:07:38.315Z"),
    }  # fmt: skip
    old = {k: v for k, v in line.items() if k != "sent_ms"}
    for ack_line, early in ((line, 0), (old, 1)):
        h = History()
        from_lines([json.dumps(ack_line)], [D], h)
        h.intents["d9"] = Intent("d9", delay_ms=1000)
        h.consumes.append(Consume("d9", "delayed", D, "broker-a", 2, 11,
                                  ts_ms_of("2026-11-28T17:07:39.318Z")))  # fmt: skip
        assert checkers.delayed_early(h).count == early
