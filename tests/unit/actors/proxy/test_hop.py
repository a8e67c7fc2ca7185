"""The bridge's `Hop`: one wake-up of the other loop carries every item queued before it ran,
nothing queued is left behind, and a loop that has ended makes `put` raise (and a later put
try again)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rocketrio.actors.proxy.grpc_bridge import Hop


def test_items_queued_while_a_wakeup_is_pending_ride_on_it() -> None:
    wakeups: list[Callable[[], None]] = []
    ran: list[int] = []
    hop: Hop[int] = Hop(wakeups.append, ran.append)
    for i in range(5):
        hop.put(i)
    assert len(wakeups) == 1 and ran == []
    wakeups.pop()()
    assert ran == [0, 1, 2, 3, 4]
    hop.put(5)  # the drain ran: the next item schedules its own wake-up
    assert len(wakeups) == 1
    wakeups.pop()()
    assert ran == [0, 1, 2, 3, 4, 5]


def test_an_item_put_during_a_drain_is_run_by_it_or_by_the_next() -> None:
    wakeups: list[Callable[[], None]] = []
    ran: list[int] = []

    def run(i: int) -> None:
        ran.append(i)
        if i == 0:
            hop.put(1)  # as if from the other thread, while the drain runs

    hop: Hop[int] = Hop(wakeups.append, run)
    hop.put(0)
    wakeups.pop()()
    while wakeups:
        wakeups.pop()()
    assert ran == [0, 1]


def test_a_finished_loop_makes_put_raise_and_the_next_put_schedules_again() -> None:
    wakeups: list[Callable[[], None]] = []
    closed = [True]

    def schedule(fn: Callable[[], None]) -> None:
        if closed[0]:
            raise RuntimeError("loop closed")
        wakeups.append(fn)

    ran: list[int] = []
    hop: Hop[int] = Hop(schedule, ran.append)
    with pytest.raises(RuntimeError):
        hop.put(0)
    closed[0] = False
    hop.put(1)
    assert len(wakeups) == 1
    wakeups.pop()()
    assert ran == [0, 1]
