"""The store actor as a replicated master (actors/broker/store/actor.py): how a turn's puts
meet the replication gate, on the simulated disk under MockClock.

- A master whose SyncStateSet holds a slave writes about REPLICATED_TURN_BYTES per turn, so its
  HA connections ship one turn to the slave while it writes the next; every put still waits for
  the slave's ack and the answers keep write order.
- A master alone in its set (a broker with no slave) writes a whole queue in one turn and
  answers it at once, without a pending entry in the gate.
- Ship before dispatch: a replicated master's HA writer, woken by a turn's write, runs before
  that turn dispatches up to confirmOffset; a master alone in its set does not yield for it.
- With SYNC_FLUSH the HA writer ships a turn while the master fsyncs it, and the turn is
  answered only once both the fsync and the slave's ack are in.
- A classic (no controller) SYNC_FLUSH master neither ships nor dispatches a turn before its
  fsync: a power cut would take back what a slave or a reader already had, and nothing cuts
  them back to the restarted master's log (sim seeds 303252, 304415).
"""

from __future__ import annotations

import random
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.ha.group_transfer import GroupTransferService
from rocketrio.actors.broker.ha.sync_state import AckPolicy, SyncStateCore
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.broker.store.messages import StoreRole
from rocketrio.actors.broker.store.replication_state import REPLICATED_TURN_BYTES
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.storage.message_store import MessageStore, MessageToStore, PutResult, StoreConfig
from tests.harness.sim_disk import SimFileSystem

ROOT = "/sim/master/store"
BODY = bytes(40 * 1024)
PUTS = 16  # 640 KiB queued at once: more than two replicated turns


def _master(
    members: frozenset[int],
    *,
    sync_flush: bool = False,
    run_blocking: Any = None,
    classic: bool = False,
) -> tuple[StoreActor, GroupTransferService]:
    store = MessageStore(
        ROOT,
        StoreConfig(),
        fs=SimFileSystem(random.Random(3)),
        replicated=not classic,
        dispatch_after_flush=classic and sync_flush,  # as broker_store.message_store
        epoch_file_path=f"{ROOT}/epochFileCheckpoint",
    )
    store.open()
    actor = StoreActor(
        store,
        sync_flush=sync_flush,
        **({} if run_blocking is None else {"run_blocking": run_blocking}),
        flush_interval_ms=600_000,
        sync_flush_timeout_ms=60_000,
        now_ms=lambda: 1_700_000_000_000,
        role=StoreRole.STANDALONE if classic else StoreRole.FENCED,
    )
    core: SyncStateCore = SyncStateCore(
        1,
        AckPolicy(all_ack_in_sync_state_set=True),
        max_time_not_catchup_ms=15_000,
        sync_state_set=members,
        sync_state_set_epoch=1,
        epoch_start_offset=0,
        local_max=0,
        confirm_offset=0,
        now_ms=monotonic_ms(),
    )
    gate = GroupTransferService(
        core,
        sync_timeout_ms=60_000,
        check_period_ms=600_000,
        alter=None,
        on_confirm=actor.request_confirm,
    )
    return actor, gate


async def _queue_puts(actor: StoreActor) -> list[tuple[int, PutStatus]]:
    """PUTS puts queued while the actor is busy (one turn could take them all)."""
    answers: list[tuple[int, PutStatus]] = []
    for i in range(PUTS):

        def done(_r: list[PutResult], status: PutStatus, _remark: str | None, i: int = i) -> None:
            answers.append((i, status))

        actor.put_nowait([MessageToStore("T", 0, BODY)], done)
    return answers


async def test_a_master_with_a_slave_writes_bounded_turns_and_answers_in_order_once_acked(
    mock_clock: trio.testing.MockClock,
) -> None:
    actor, gate = _master(frozenset({1, 2}))
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await actor.become_master(1, gate)
        gate.on_connected(2, learner=False)
        turns = actor.put_turns
        answers = await _queue_puts(actor)
        await trio.sleep(1)
        assert answers == []  # the slave holds none of it
        turns = actor.put_turns - turns
        assert REPLICATED_TURN_BYTES < PUTS * len(BODY) // 2  # else this test proves nothing
        assert turns >= 2, turns  # one turn would have taken the whole queue
        gate.on_ack(2, actor.log_end_offset())
        assert answers == [(i, PutStatus.PUT_OK) for i in range(PUTS)]
        nursery.cancel_scope.cancel()


async def test_a_master_alone_in_its_set_writes_one_turn_and_answers_at_once(
    mock_clock: trio.testing.MockClock,
) -> None:
    actor, gate = _master(frozenset({1}))
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await actor.become_master(1, gate)
        turns = actor.put_turns
        answers = await _queue_puts(actor)
        await trio.sleep(1)
        assert actor.put_turns - turns == 1
        assert answers == [(i, PutStatus.PUT_OK) for i in range(PUTS)]
        assert gate.core.pending_count == 0 and gate.acked_total == 1
        nursery.cancel_scope.cancel()


async def test_a_master_with_a_slave_wakes_its_ha_writer_before_it_dispatches(
    mock_clock: trio.testing.MockClock,
) -> None:
    actor, gate = _master(frozenset({1, 2}))
    store = actor.store
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await actor.become_master(1, gate)
        gate.on_connected(2, learner=False)
        answers = await _queue_puts(actor)
        await trio.sleep(1)
        first_end = store.get_commitlog_max_offset()
        seen: list[tuple[int, int]] = []

        async def ha_writer() -> None:  # what the HA master's writer waits on
            await actor.written.wait_above(first_end)
            seen.append((store.get_commitlog_max_offset(), store.confirm_offset))

        nursery.start_soon(ha_writer)
        await trio.testing.wait_all_tasks_blocked()
        # one turn: the ack's confirmOffset and a new put
        gate.on_ack(2, first_end)
        actor.put_nowait([MessageToStore("T", 0, BODY)], lambda *_: None)
        assert len(answers) == PUTS
        await trio.sleep(1)
        assert seen and seen[0][0] > first_end  # woken by the new turn's write ...
        assert seen[0][1] < first_end  # ... before that turn dispatched up to the ack
        assert store.confirm_offset == first_end
        nursery.cancel_scope.cancel()


async def test_a_master_alone_in_its_set_does_not_yield_before_it_dispatches(
    mock_clock: trio.testing.MockClock,
) -> None:
    actor, gate = _master(frozenset({1}))
    store = actor.store
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await actor.become_master(1, gate)
        seen: list[int] = []

        async def watcher() -> None:
            await actor.written.wait_above(store.get_commitlog_max_offset())
            seen.append(store.confirm_offset)

        nursery.start_soon(watcher)
        await trio.testing.wait_all_tasks_blocked()
        actor.put_nowait([MessageToStore("T", 0, BODY)], lambda *_: None)
        await trio.sleep(1)
        assert seen == [store.get_commitlog_max_offset()]  # dispatched in the same turn
        nursery.cancel_scope.cancel()


async def test_a_sync_flush_master_ships_a_turn_while_it_syncs_it(
    mock_clock: trio.testing.MockClock,
) -> None:
    fsync_may_end = trio.Event()
    syncs: list[str] = []

    async def slow_fsync(fn: Any) -> Any:
        syncs.append("started")
        await fsync_may_end.wait()
        return fn()

    actor, gate = _master(frozenset({1, 2}), sync_flush=True, run_blocking=slow_fsync)
    store = actor.store
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await actor.become_master(1, gate)
        gate.on_connected(2, learner=False)
        shipped: list[int] = []

        async def ha_writer() -> None:
            await actor.written.wait_above(store.get_commitlog_max_offset())
            shipped.append(store.get_commitlog_max_offset())

        nursery.start_soon(ha_writer)
        await trio.testing.wait_all_tasks_blocked()
        answers: list[PutStatus] = []
        actor.put_nowait([MessageToStore("T", 0, BODY)], lambda _r, st, _m: answers.append(st))
        await trio.sleep(1)
        end = store.get_commitlog_max_offset()
        assert syncs == ["started"] and shipped == [end]  # shipped while the fsync runs
        gate.on_ack(2, end)
        await trio.sleep(1)
        assert answers == []  # the slave has it, the master's disk not yet
        fsync_may_end.set()
        await trio.sleep(1)
        assert answers == [PutStatus.PUT_OK]
        nursery.cancel_scope.cancel()


async def test_a_classic_sync_flush_master_neither_ships_nor_dispatches_a_turn_before_its_fsync(
    mock_clock: trio.testing.MockClock,
) -> None:
    fsync_may_end = trio.Event()

    async def slow_fsync(fn: Any) -> Any:
        await fsync_may_end.wait()
        return fn()

    actor, gate = _master(frozenset({1, 2}), sync_flush=True, run_blocking=slow_fsync, classic=True)
    store = actor.store
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        await actor.become_master(1, gate)
        gate.on_connected(2, learner=False)
        start = store.get_commitlog_max_offset()
        shipped: list[int] = []

        async def ha_writer() -> None:
            await actor.written.wait_above(start)
            shipped.append(actor.log_end_offset())

        nursery.start_soon(ha_writer)
        await trio.testing.wait_all_tasks_blocked()
        answers: list[PutStatus] = []
        actor.put_nowait([MessageToStore("T", 0, BODY)], lambda _r, st, _m: answers.append(st))
        await trio.sleep(1)
        end = store.get_commitlog_max_offset()
        assert end > start  # written to the page cache ...
        assert shipped == [] and actor.log_end_offset() == start  # ... not offered to a slave
        assert store.get_max_offset("T", 0) == 0  # ... nor to a reader
        assert answers == []
        fsync_may_end.set()
        await trio.sleep(1)
        assert shipped == [end] and store.get_max_offset("T", 0) == 1
        assert answers == []  # the slave's ack is still to come
        gate.on_ack(2, end)
        await trio.sleep(1)
        assert answers == [PutStatus.PUT_OK]
        nursery.cancel_scope.cancel()
