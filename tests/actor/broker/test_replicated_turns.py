"""The store actor as a replicated master (actors/broker/store/actor.py): how a turn's puts
meet the replication gate, on the simulated disk under MockClock.

- A master whose SyncStateSet holds a slave writes about REPLICATED_TURN_BYTES per turn, so its
  HA connections ship one turn to the slave while it writes the next; every put still waits for
  the slave's ack and the answers keep write order.
- A master alone in its set (a broker with no slave) writes a whole queue in one turn and
  answers it at once, without a pending entry in the gate.
"""

from __future__ import annotations

import random

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


def _master(members: frozenset[int]) -> tuple[StoreActor, GroupTransferService]:
    store = MessageStore(
        ROOT,
        StoreConfig(),
        fs=SimFileSystem(random.Random(3)),
        replicated=True,
        epoch_file_path=f"{ROOT}/epochFileCheckpoint",
    )
    store.open()
    actor = StoreActor(
        store,
        sync_flush=False,
        flush_interval_ms=600_000,
        sync_flush_timeout_ms=60_000,
        now_ms=lambda: 1_700_000_000_000,
        role=StoreRole.FENCED,
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
