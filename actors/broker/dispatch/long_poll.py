"""The one long-polling loop, shared by held pulls and held pops (upstream's
PullRequestHoldService and PopLongPollingService run the same loop twice).

A request that found nothing is parked as a `Held` with a deadline and the keys whose arrivals
may wake it (a pull: its queue; a pop: its topic and the group's pop retry topics). The store
actor's arrival listener calls `notify` after every put with the queue's new max offset; that
only notes the key and wakes this loop's task, which re-runs each held request of that key
(`rerun(held, final=False)`: the outcome, or None to keep holding) whose `offset` the new max
passed. The reads never run inside the store actor's turn. The same task sleeps until the
earliest deadline and answers expired requests with a last attempt (`final=True`). No thread,
no busy loop: an idle request costs a heap entry. `release` answers a key's held requests at
once with that last attempt, for a key nothing will arrive at any more (a static topic's queue
whose logic queue moved to another broker).

The loop knows no wire format and no limits: a held request carries its `Waiter` (the handle on
the waiting connection, dispatch/held_reply.py) and its processor's `rerun` and `failed`
functions; the pull and pop hold services decide what may be parked and count what is released
(`on_released`).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Any, Protocol

import attrs
import structlog
import trio

from rocketrio.actors.observe import events

log = structlog.get_logger("long_poll")


class Waiter(Protocol):
    """Where a held request's outcome goes (the connection's waiting request)."""

    @property
    def gone(self) -> bool:
        """True when nobody waits any more (the connection closed): skip the read."""
        ...

    @property
    def owner(self) -> Hashable:
        """Whose request it is (the connection), for per-connection bounds."""
        ...

    def deliver(self, outcome: Any) -> None: ...


@attrs.define(slots=True, eq=False)
class Held:
    """One held request."""

    reply: Waiter
    request: Any  # the processor's own state of the request (its header, filter ...)
    topic: str  # named in the log when a re-run fails
    wake_keys: tuple[Hashable, ...]
    deadline: float
    # rerun(held, final) -> the outcome, or None to keep holding (only when not final)
    rerun: Callable[[Held, bool], Awaitable[Any]]
    failed: Callable[[Exception], Any]  # the outcome to answer when a re-run raised
    # re-run only when a wake key's new max offset passes this (-1: at any arrival); the
    # processor moves it past messages its filter rejected while held
    offset: int = -1
    done: bool = False


class LongPoll:
    """Held requests by wake key and by deadline; `run` answers them."""

    def __init__(self, on_released: Callable[[Held], None] | None = None) -> None:
        self.on_released = on_released
        self._by_key: dict[Hashable, list[Held]] = {}
        self._heap: list[tuple[float, int, Held]] = []
        self._grown: dict[Hashable, int] = {}  # keys with held requests that got messages
        self._released: set[Hashable] = set()  # keys whose held requests end now (`release`)
        self._seq = itertools.count()
        self._wakeup = trio.Event()
        self.holding = True  # False from shutdown on: requests are answered at once
        self.count = 0

    def park(self, held: Held) -> None:
        """Hold ``held`` (the caller checked its limits and that we are holding)."""
        for key in held.wake_keys:
            self._by_key.setdefault(key, []).append(held)
        heapq.heappush(self._heap, (held.deadline, next(self._seq), held))
        self.count += 1
        if self._heap[0][2] is held:
            self._wakeup.set()

    def notify(self, key: Hashable, max_offset: int) -> None:
        """A put reached ``key``: cheap, the re-runs happen in `run`."""
        self.notify_many(((key, max_offset),))

    def notify_many(self, arrived: Iterable[tuple[Hashable, int]]) -> None:
        """`notify` for each (key, max offset) of a store turn, in order; nothing to look at
        when no request is held (a broker only sending: the common turn)."""
        by_key = self._by_key
        if not by_key:
            return
        for key, max_offset in arrived:
            if key in by_key:
                self._grown[key] = max_offset
                self._wakeup.set()

    def release(self, keys: Iterable[Hashable]) -> None:
        """Answer the requests held on ``keys`` now, each with its last attempt (no arrival
        will wake them: what they wait for moved elsewhere). Cheap: the answers happen in
        `run`."""
        held = [key for key in keys if key in self._by_key]
        if held:
            self._released.update(held)
            self._wakeup.set()

    def stop_holding(self) -> None:
        """Shutdown begins: from now on a request that finds nothing is answered at once."""
        self.holding = False

    async def answer_all(self) -> None:
        """Shutdown: answer every held request now (each gets its final attempt)."""
        self.holding = False
        for _, _, held in list(self._heap):
            if not held.done:
                await self._answer(held, final=True)
        self._heap.clear()
        self._by_key.clear()
        self._grown.clear()
        self._released.clear()

    async def run(self) -> None:
        while True:
            if not self._grown and not self._released:
                self._wakeup = trio.Event()
                deadline = self._heap[0][0] if self._heap else math.inf
                with trio.move_on_at(deadline):
                    await self._wakeup.wait()
            await self._serve_released()
            await self._serve_grown()
            await self._expire(trio.current_time())

    async def _serve_released(self) -> None:
        released, self._released = self._released, set()
        for key in released:
            for held in list(self._by_key.get(key, ())):
                if not held.done:
                    await self._answer(held, final=True)
        self._forget_done(released)

    async def _serve_grown(self) -> None:
        grown, self._grown = self._grown, {}
        for key, max_offset in grown.items():
            # the list stays in place while reads are awaited: requests parked meanwhile join
            # it and arrivals meanwhile are noted in `_grown` for the next pass
            for held in list(self._by_key.get(key, ())):
                if not held.done and (held.offset < 0 or held.offset < max_offset):
                    await self._answer(held, final=False)
        self._forget_done(grown)

    async def _expire(self, now: float) -> None:
        heap = self._heap
        touched: set[Hashable] = set()
        while heap and heap[0][0] <= now:
            _, _, held = heapq.heappop(heap)
            if held.done:
                continue
            await self._answer(held, final=True)
            touched.update(held.wake_keys)
        self._forget_done(touched)

    def _forget_done(self, keys: Any) -> None:
        for key in keys:
            rest = [h for h in self._by_key.get(key, ()) if not h.done]
            if rest:
                self._by_key[key] = rest
            else:
                self._by_key.pop(key, None)

    async def _answer(self, held: Held, *, final: bool) -> None:
        outcome = None
        if not held.reply.gone:
            try:
                outcome = await held.rerun(held, final)
            except Exception as e:
                events.emit(log, events.HeldPullFailed(topic=held.topic), exc_info=e)
                outcome = held.failed(e)
            if held.done:
                return  # answered while the read ran (shutdown)
            if outcome is None and not final:
                return
        held.done = True
        self.count -= 1
        if self.on_released is not None:
            self.on_released(held)
        if outcome is not None:
            held.reply.deliver(outcome)
