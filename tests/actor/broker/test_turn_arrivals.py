"""A store turn's arrivals told at once (store/actor.py `_apply_confirm`, the broker's
`_on_arrivals`): the listener hears every queue that got entries in the turn, once per turn, in
the order the store reports them; the long-poll loop, the pop hold and the schedule service each
take the whole turn's arrivals as they took them one by one."""

from __future__ import annotations

import random
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.dispatch.long_poll import Held, LongPoll
from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.pop.hold import PopLongPollingService
from rocketrio.actors.broker.schedule.service import TIMER_TOPIC, ScheduleService
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.storage.message_store import MessageStore, MessageToStore, PutResult, StoreConfig
from rocketrio.storage.store_dispatch import SCHEDULE_TOPIC
from tests.harness.sim_disk import SimFileSystem
from tests.harness.store_actor import inline_store_actor


def _actor(store: MessageStore, heard: list[dict[tuple[str, int], int]]) -> StoreActor:
    return inline_store_actor(store, on_arrival=lambda arrived: heard.append(dict(arrived)))


async def test_one_call_per_turn_with_every_queue_of_the_turn(
    mock_clock: trio.testing.MockClock,
) -> None:
    store = MessageStore("/store", StoreConfig(), fs=SimFileSystem(random.Random(7)))
    store.open()
    heard: list[dict[tuple[str, int], int]] = []
    actor = _actor(store, heard)
    answered: list[PutStatus] = []

    def done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        answered.append(status)

    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        # queued before the actor runs again: one turn
        for topic, qid in (("A", 0), ("A", 0), ("A", 3), ("B", 1)):
            actor.put_nowait([MessageToStore(topic, qid, b"x")], done)
        await trio.testing.wait_all_tasks_blocked()
        assert answered == [PutStatus.PUT_OK] * 4
        assert heard == [{("A", 0): 2, ("A", 3): 1, ("B", 1): 1}]
        actor.put_nowait([MessageToStore("B", 1, b"y")], done)  # the next turn: its own call
        await trio.testing.wait_all_tasks_blocked()
        assert heard[1:] == [{("B", 1): 2}]
        nursery.cancel_scope.cancel()


class _Reply:
    owner = "conn"
    gone = False

    def __init__(self) -> None:
        self.delivered: list[Any] = []

    def deliver(self, outcome: Any) -> None:
        self.delivered.append(outcome)


def _held(keys: tuple[Any, ...], offset: int, runs: list[int]) -> Held:
    async def rerun(h: Held, final: bool) -> Any:
        runs.append(1)
        return "found"

    return Held(_Reply(), None, "T", keys, trio.current_time() + 30, rerun, str, offset=offset)


async def test_notify_many_wakes_a_held_key_past_its_offset_only(
    mock_clock: trio.testing.MockClock,
) -> None:
    poll, runs = LongPoll(), []
    poll.notify_many([(("T", 0), 9)])  # nothing held: nothing kept
    async with trio.open_nursery() as n:
        n.start_soon(poll.run)
        h = _held((("T", 0),), 5, runs)
        poll.park(h)
        poll.notify_many([(("T", 1), 100), (("U", 0), 100)])  # other queues
        await trio.testing.wait_all_tasks_blocked()
        assert runs == [] and poll.count == 1
        # the same key twice in one call: the last offset is the one kept (as one by one)
        poll.notify_many([(("T", 1), 1), (("T", 0), 9), (("T", 0), 4)])
        await trio.testing.wait_all_tasks_blocked()
        assert runs == [] and poll.count == 1
        poll.notify_many([(("T", 1), 2), (("T", 0), 6)])
        await trio.testing.wait_all_tasks_blocked()
        assert runs == [1] and poll.count == 0
        n.cancel_scope.cancel()


async def test_the_pop_hold_counts_each_queue_and_wakes_by_topic(
    mock_clock: trio.testing.MockClock,
) -> None:
    hold, runs = PopLongPollingService(), []
    async with trio.open_nursery() as n:
        await n.start(hold.run)
        assert hold.suspend(_held(("T",), -1, runs))
        hold.notify_arrivals({("U", 0): 1, ("U", 2): 4})  # another topic
        await trio.testing.wait_all_tasks_blocked()
        assert hold.arrivals == 2 and runs == []  # as two `notify_message_arriving` calls
        hold.notify_arrivals({("T", 3): 7})
        await trio.testing.wait_all_tasks_blocked()
        assert hold.arrivals == 3 and runs == [1] and hold.count == 0
        n.cancel_scope.cancel()


def test_the_schedule_service_wakes_for_its_own_topics_only() -> None:
    service = ScheduleService.__new__(ScheduleService)  # only the arrival fields matter here
    service._timer_queues, service._wake = set(), trio.Event()
    service.notify_arrivals({("T", 0): 1, ("U", 2): 4})
    assert not service._wake.is_set()
    service.notify_arrivals({("T", 0): 2, (SCHEDULE_TOPIC, 3): 1})
    assert service._wake.is_set() and service._timer_queues == set()
    service._wake = trio.Event()
    service.notify_arrivals({(TIMER_TOPIC, 5): 1, (TIMER_TOPIC, 6): 2})
    assert service._wake.is_set() and service._timer_queues == {5, 6}
