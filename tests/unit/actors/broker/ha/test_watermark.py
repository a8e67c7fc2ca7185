"""`Watermark` (actors/broker/ha/ports.py): who an `advance` wakes.

A `wait_past` waiter reads how far it has sent at every advance: one whose bytes a listener
shipped inline during the advance is not woken, one still behind is; `woke` says whether the
last advance woke anyone (the store actor yields for a woken HA writer only). `kick` and `reset`
wake every waiter; a cancelled waiter leaves nothing behind.
"""

from __future__ import annotations

import trio
import trio.testing

from rocketrio.actors.broker.ha.ports import Watermark


async def test_a_waiter_whose_bytes_were_shipped_inline_is_not_woken() -> None:
    mark = Watermark(100)
    sent = [100]
    woken: list[int] = []

    async def writer() -> None:
        await mark.wait_past(lambda: sent[0])
        woken.append(mark.value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(writer)
        await trio.testing.wait_all_tasks_blocked()
        stop = mark.listen(lambda value: sent.__setitem__(0, value))  # the inline ship
        mark.advance(200)
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [] and mark.woke is False  # caught up: nothing for it to send
        stop()
        mark.advance(300)  # nobody shipped this one
        assert mark.woke is True
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [300]


async def test_kick_reset_and_wait_kick_wake_every_waiter_and_say_so() -> None:
    mark = Watermark(10)
    woken: list[str] = []

    async def past() -> None:
        await mark.wait_past(lambda: 10)
        woken.append("past")

    async def kicked() -> None:
        await mark.wait_kick()
        woken.append("kick")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(past)
        nursery.start_soon(kicked)
        await trio.testing.wait_all_tasks_blocked()
        mark.kick()
        assert mark.woke is True
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(woken) == ["kick", "past"]
        nursery.start_soon(past)
        await trio.testing.wait_all_tasks_blocked()
        mark.reset(5)  # lower, after a truncation: every waiter re-checks
        await trio.testing.wait_all_tasks_blocked()
        assert woken.count("past") == 2
        mark.advance(5)  # no move: wakes nobody
        assert mark.woke is False


async def test_an_advance_wakes_a_wait_kick_waiter_and_a_cancelled_waiter_leaves_nothing() -> None:
    mark = Watermark(0)
    woken: list[int] = []

    async def kicked() -> None:
        await mark.wait_kick()
        woken.append(mark.value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(kicked)
        with trio.move_on_after(0):  # cancelled at its first checkpoint
            await mark.wait_past(lambda: 0)
        await trio.testing.wait_all_tasks_blocked()
        mark.advance(1)
        assert mark.woke is True  # the wait_kick waiter
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [1] and mark._past == []
        await mark.wait_past(lambda: 0)  # already past: returns at once


async def test_wait_above_returns_only_once_the_value_is_past_its_offset() -> None:
    mark = Watermark(0)
    woken: list[int] = []

    async def above() -> None:
        await mark.wait_above(5)
        woken.append(mark.value)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(above)
        await trio.testing.wait_all_tasks_blocked()
        mark.kick()
        mark.advance(5)
        await trio.testing.wait_all_tasks_blocked()
        assert woken == []  # kicked and advanced, never past 5
        mark.advance(6)
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [6]
