"""Orderly consumption decisions (actors/client/orderly.py): the orderly process queue hands
out batches in offset order and commits only what was consumed; lock state and expiry; what a
listener's answer means; the suspend / DLQ decision."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.client.orderly import (
    ORDERLY_MAX_RECONSUME_TIMES,
    REBALANCE_LOCK_MAX_LIVE_TIME_S,
    ConsumeOrderlyStatus,
    Gate,
    OrderlyProcessQueue,
    ReconsumeCheck,
    ResultAction,
    apply_lock_result,
    check_reconsume_times,
    consume_gate,
    effective_max_reconsume_times,
    group_by_broker,
    result_action,
    suspend_delay_s,
    to_dlq,
)
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt


def msgs(*offsets: int) -> list[MessageExt]:
    return [MessageExt(topic="T", body=b"x" * 10, queue_offset=o) for o in offsets]


def offsets(ms: list[MessageExt]) -> list[int]:
    return [m.queue_offset for m in ms]


def test_take_hands_out_oldest_first_and_commit_returns_the_offset_after_the_batch() -> None:
    pq = OrderlyProcessQueue()
    assert pq.put(msgs(10, 11, 12, 13, 14)) == 5
    first = pq.take_messages(2)
    assert offsets(first) == [10, 11]
    assert pq.msg_count == 5  # taken messages stay counted until committed
    assert pq.commit() == 12
    assert pq.msg_count == 3 and pq.msg_size == 30
    assert offsets(pq.take_messages(10)) == [12, 13, 14]
    assert not pq.has_temp_message()
    assert pq.commit() == 15
    assert pq.msg_count == 0 and pq.take_messages(1) == []
    assert pq.commit() == -1  # nothing taken


def test_make_again_puts_the_batch_back_in_front_of_newer_messages() -> None:
    pq = OrderlyProcessQueue()
    pq.put(msgs(1, 2, 3))
    batch = pq.take_messages(2)
    pq.put(msgs(4))
    pq.make_message_to_consume_again(batch)
    assert pq.consuming_count() == 0
    assert offsets(pq.take_messages(10)) == [1, 2, 3, 4]


def test_rollback_returns_everything_taken_since_the_last_commit() -> None:
    pq = OrderlyProcessQueue()
    pq.put(msgs(1, 2, 3, 4))
    pq.take_messages(1)
    pq.take_messages(2)  # manual commit mode: two batches taken, none committed
    pq.rollback()
    assert offsets(pq.take_messages(10)) == [1, 2, 3, 4]


def test_older_or_duplicate_pulls_are_ignored() -> None:
    pq = OrderlyProcessQueue()
    pq.put(msgs(5, 6))
    assert pq.put(msgs(6, 4, 7)) == 1
    assert offsets(pq.take_messages(10)) == [5, 6, 7]


@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=30),
    st.lists(st.sampled_from(["ok", "again"]), min_size=1, max_size=60),
)
def test_any_mix_of_success_and_suspend_consumes_in_order_and_never_commits_past_a_gap(
    pulls: list[int], answers: list[str]
) -> None:
    pq = OrderlyProcessQueue()
    next_off = 0
    for n in pulls:
        pq.put(msgs(*range(next_off, next_off + n)))
        next_off += n
    consumed: list[int] = []
    committed = 0
    for answer in answers:
        batch = pq.take_messages(3)
        if not batch:
            break
        # every batch starts right after what was consumed: no gap, no reordering
        assert offsets(batch) == list(range(len(consumed), len(consumed) + len(batch)))
        if answer == "ok":
            consumed.extend(offsets(batch))
            committed = pq.commit()
            assert committed == len(consumed)
        else:
            pq.make_message_to_consume_again(batch)
    assert committed <= len(consumed)


def test_lock_state_and_client_side_expiry() -> None:
    pq = OrderlyProcessQueue()
    assert consume_gate(pq, 0.0, clustering=True) is Gate.NOT_LOCKED
    assert consume_gate(pq, 0.0, clustering=False) is Gate.OK  # broadcasting takes no locks
    pq.on_lock_granted(100.0, 1_700_000_000_000)
    assert consume_gate(pq, 100.0 + REBALANCE_LOCK_MAX_LIVE_TIME_S, clustering=True) is Gate.OK
    late = 100.0 + REBALANCE_LOCK_MAX_LIVE_TIME_S + 0.001
    assert consume_gate(pq, late, clustering=True) is Gate.LOCK_EXPIRED
    pq.on_lock_granted(late, 1_700_000_000_000)  # renewed
    assert consume_gate(pq, late + 1, clustering=True) is Gate.OK
    pq.dropped = True
    assert consume_gate(pq, late + 1, clustering=True) is Gate.DROPPED


def test_lock_result_grants_and_takes_back() -> None:
    a, b = MessageQueue("T", "b1", 0), MessageQueue("T", "b1", 1)
    pa, pb = OrderlyProcessQueue(), OrderlyProcessQueue()
    pb.on_lock_granted(1.0, 1)
    lost = apply_lock_result({a: pa, b: pb}, [a], now_s=5.0, wall_ms=5000)
    assert lost == [b]
    assert pa.locked and pa.last_lock_at_s == 5.0 and pa.last_lock_timestamp == 5000
    assert not pb.locked
    # a queue never locked is not reported as lost
    assert apply_lock_result({b: pb}, [], now_s=6.0, wall_ms=6000) == []


def test_group_by_broker_sorts_each_brokers_queues() -> None:
    qs = [MessageQueue("T", "b2", 1), MessageQueue("T", "b1", 3), MessageQueue("T", "b1", 0)]
    assert group_by_broker(qs) == {
        "b1": [MessageQueue("T", "b1", 0), MessageQueue("T", "b1", 3)],
        "b2": [MessageQueue("T", "b2", 1)],
    }


def test_group_by_broker_puts_logic_queues_at_their_leaders() -> None:
    """A static topic's logic queues share one mock broker name; their locks go to each
    queue's leader."""
    lq = [MessageQueue("ST", "__syslo__global__", i) for i in range(4)]
    leader = {0: "a", 1: "b", 2: "a", 3: "c"}
    assert group_by_broker(lq, lambda mq: leader[mq.queueId]) == {
        "a": [lq[0], lq[2]],
        "b": [lq[1]],
        "c": [lq[3]],
    }


@pytest.mark.parametrize(
    ("status", "auto", "action"),
    [
        (ConsumeOrderlyStatus.SUCCESS, True, ResultAction.COMMIT),
        (ConsumeOrderlyStatus.COMMIT, True, ResultAction.COMMIT),
        (ConsumeOrderlyStatus.ROLLBACK, True, ResultAction.COMMIT),  # upstream: taken as OK
        (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, True, ResultAction.SUSPEND),
        (ConsumeOrderlyStatus.SUCCESS, False, ResultAction.KEEP),
        (ConsumeOrderlyStatus.COMMIT, False, ResultAction.COMMIT),
        (ConsumeOrderlyStatus.ROLLBACK, False, ResultAction.ROLLBACK),
        (ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT, False, ResultAction.SUSPEND),
    ],
)
def test_result_action(status: ConsumeOrderlyStatus, auto: bool, action: ResultAction) -> None:
    assert result_action(status, auto_commit=auto) is action


def test_max_reconsume_times_minus_one_is_unbounded() -> None:
    assert effective_max_reconsume_times(-1) == ORDERLY_MAX_RECONSUME_TIMES == 2**31 - 1
    assert effective_max_reconsume_times(3) == 3
    assert effective_max_reconsume_times(0) == 0


def test_suspend_then_dlq_decision() -> None:
    # reconsumed 0, 2 and 3 times, max 3: only the last goes to the DLQ
    dlq = to_dlq([0, 2, 3], 3)
    assert dlq == [False, False, True]
    assert check_reconsume_times(dlq, [False, False, True]) == ReconsumeCheck(
        suspend=True, bump=(True, True, False)
    )
    # all due and all sent: nothing stays, the batch is committed
    assert check_reconsume_times([True, True], [True, True]) == ReconsumeCheck(
        suspend=False, bump=(False, False)
    )
    # the DLQ send failed: the message stays and is retried (counted once more)
    assert check_reconsume_times([True], [False]) == ReconsumeCheck(suspend=True, bump=(True,))


@pytest.mark.parametrize(
    ("ctx_ms", "default_ms", "seconds"),
    [(-1, 1000, 1.0), (-1, 5, 0.01), (250, 1000, 0.25), (60_000, 1000, 30.0), (0, 1000, 0.01)],
)
def test_suspend_delay_is_clamped(ctx_ms: int, default_ms: int, seconds: float) -> None:
    assert suspend_delay_s(ctx_ms, default_ms) == seconds
