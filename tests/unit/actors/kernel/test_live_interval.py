"""`LiveInterval` (actors/kernel/live_interval.py) under the mock clock: a sleep lasts its
period from its start; a change while asleep re-aims it at the start plus the new period (a
shorter one that is already past ends it at once, a longer one extends it); a change of
another key leaves it alone."""

from __future__ import annotations

import trio
import trio.testing

from rocketrio.actors.kernel.live_interval import LiveInterval


async def test_a_sleep_follows_a_period_changed_while_asleep(
    mock_clock: trio.testing.MockClock,
) -> None:
    period = [30.0]
    timer = LiveInterval(lambda: period[0], key="transactionCheckInterval")
    woke: list[float] = []

    async def sleeper(start: float) -> None:
        await timer.sleep_from(start)
        woke.append(trio.current_time())

    t0 = trio.current_time()
    async with trio.open_nursery() as n:
        n.start_soon(sleeper, t0)
        await trio.sleep(5)
        timer.reconfigure(None, frozenset({"transactionTimeOut"}))  # another key
        period[0] = 10.0
        await trio.sleep(1)
        assert woke == []
        timer.reconfigure(None, frozenset({"transactionCheckInterval"}))
        await trio.sleep(3)
        assert woke == []  # t0 + 10: not yet
        await trio.sleep(2)
        assert woke == [t0 + 10]
        # shorter than the time already slept: the sleep ends at once
        woke.clear()
        t1 = trio.current_time()
        n.start_soon(sleeper, t1)
        await trio.sleep(4)
        period[0] = 2.0
        timer.changed()
        await trio.testing.wait_all_tasks_blocked()
        assert woke == [t1 + 4]
        # longer: it sleeps on to the start plus the new period
        woke.clear()
        t2 = trio.current_time()
        n.start_soon(sleeper, t2)
        await trio.sleep(1)
        period[0] = 20.0
        timer.changed()
        await trio.sleep(18)
        assert woke == []
        await trio.sleep(2)
        assert woke == [t2 + 20]
