"""The replication gate's timer task (actors/broker/ha/group_transfer.py), under MockClock.

A pending write times out at its own syncFlushTimeout deadline (FLUSH_SLAVE_TIMEOUT, never
ACKED), also when the timer task was asleep until a later checkSyncStateSetPeriod check; and a
`submit` wakes that task only when the write's deadline comes before the task's wake-up: with
the defaults (both 5 s) a replicated turn costs no timer wake-up at all.
"""

from __future__ import annotations

import trio
import trio.testing

from rocketrio.actors.broker.ha.group_transfer import AckOutcome, GroupTransferService
from rocketrio.actors.broker.ha.sync_state import AckPolicy, SyncStateCore
from rocketrio.actors.kernel.clock import monotonic_ms


def _gate(sync_timeout_ms: int, check_period_ms: int) -> GroupTransferService:
    """The gate of a master (1) whose SyncStateSet holds a connected slave (2)."""
    core: SyncStateCore = SyncStateCore(
        1, AckPolicy(all_ack_in_sync_state_set=True), max_time_not_catchup_ms=600_000,
        sync_state_set={1, 2}, sync_state_set_epoch=1, epoch_start_offset=0, local_max=0,
        confirm_offset=0, now_ms=monotonic_ms(),
    )  # fmt: skip
    gate = GroupTransferService(
        core,
        sync_timeout_ms=sync_timeout_ms,
        check_period_ms=check_period_ms,
        alter=None,
        on_confirm=lambda _c: None,
    )
    gate.on_connected(2, learner=False)
    return gate


async def test_a_write_due_before_the_next_check_times_out_at_its_own_deadline(
    mock_clock: trio.testing.MockClock,
) -> None:
    """The timer task sleeps until the next check (10 s away); a write due in 3 s wakes it,
    and times out at 3 s; a second write, due later than the first, times out at its own
    deadline (4 s) without a wake-up of its own."""
    gate = _gate(sync_timeout_ms=3_000, check_period_ms=10_000)
    outcomes: list[tuple[int, AckOutcome, float]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(gate.run)
        await trio.sleep(0.5)  # the timer task is asleep until the check at 10 s
        t0 = trio.current_time()
        gate.on_local_max(100)
        gate.submit(100, lambda o: outcomes.append((100, o, trio.current_time() - t0)))
        await trio.sleep(1)
        gate.on_local_max(200)
        gate.submit(200, lambda o: outcomes.append((200, o, trio.current_time() - t0)))
        await trio.sleep(2.5)
        assert [(end, o) for end, o, _t in outcomes] == [(100, AckOutcome.FLUSH_SLAVE_TIMEOUT)]
        assert 3.0 <= outcomes[0][2] < 3.01
        await trio.sleep(1)
        assert [(end, o) for end, o, _t in outcomes][1] == (200, AckOutcome.FLUSH_SLAVE_TIMEOUT)
        assert 4.0 <= outcomes[1][2] < 4.01
        gate.on_ack(2, 200)  # a late ack releases nothing a second time
        assert len(outcomes) == 2 and gate.acked_total == 0
        nursery.cancel_scope.cancel()


async def test_writes_due_after_the_timer_tasks_wake_up_do_not_wake_it(
    mock_clock: trio.testing.MockClock,
) -> None:
    """With the defaults (syncFlushTimeout = checkSyncStateSetPeriod = 5 s) a write's
    deadline never comes before the next check: 200 replicated turns, each acked before the
    next, wake the timer task only for its checks, and every one is ACKED."""
    gate = _gate(sync_timeout_ms=5_000, check_period_ms=5_000)
    outcomes: list[AckOutcome] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(gate.run)
        await trio.sleep(0.1)
        wakes = gate.timer_wakes
        for i in range(1, 201):  # 200 turns in 2 s: no check falls due
            gate.on_local_max(i * 100)
            gate.submit(i * 100, outcomes.append)
            await trio.sleep(0.005)
            gate.on_ack(2, i * 100)
            await trio.sleep(0.005)
        assert outcomes == [AckOutcome.ACKED] * 200
        assert gate.timer_wakes == wakes
        await trio.sleep(5)
        assert gate.timer_wakes == wakes + 1  # the check at 5 s
        nursery.cancel_scope.cancel()
