"""POP long polling (upstream PopLongPollingService): held pops answered when messages arrive.

A POP that found nothing and carries a pollTime is parked here with a deadline (pollTime,
capped by the broker) and the topics that may wake it (the topic and the group's pop retry
topics). The store actor's arrival listener calls `notify_message_arriving` after each put; that
only notes the topic and wakes this service's task, which re-runs each held pop of that topic
(`rerun(held, final=False)`: the outcome, or None to keep holding). The same task sleeps until
the earliest deadline and answers expired pops with a last attempt (`final=True`), which
answers POLLING_TIMEOUT when still nothing is there. No thread, no busy loop: an idle pop costs
a heap entry. At most ``max_held`` pops are held (maxPopPollingSize); one more is answered
POLLING_FULL by the processor.

The service also runs pops that are not held yet (`try_start`, at most ``max_running`` at a
time): a pop waits for its CK writes, and running it here keeps the connection reading the next
request meanwhile (one broker connection may carry many consumers' pops, e.g. a proxy's).

The service knows no wire format: a held pop carries its `PopReply` (the adapter's handle).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Protocol

import attrs
import structlog
import trio

from rocketrio.actors.observe import events

log = structlog.get_logger("pop_hold")


class PopReply(Protocol):
    """Where a held pop's outcome goes (the protocol adapter's handle on the request)."""

    @property
    def gone(self) -> bool: ...

    @property
    def owner(self) -> Hashable: ...

    def deliver(self, outcome: Any) -> None: ...


@attrs.define(slots=True, eq=False)
class HeldPop:
    reply: PopReply
    request: Any  # the processor's request (PopMessageRequestHeader)
    wake_topics: tuple[str, ...]
    deadline: float
    # rerun(held, final) -> the outcome, or None to keep holding (only when not final)
    rerun: Callable[[HeldPop, bool], Awaitable[Any]]
    failed: Callable[[Exception], Any]  # the outcome to answer when a re-run raised
    done: bool = False


class PopLongPollingService:
    def __init__(self, max_held: int = 100_000, max_running: int = 1024) -> None:
        self.max_held = max_held
        self.max_running = max_running
        self.running = 0
        self._nursery: trio.Nursery | None = None
        self._by_topic: dict[str, list[HeldPop]] = {}
        self._heap: list[tuple[float, int, HeldPop]] = []
        self._grown: set[str] = set()
        self._seq = itertools.count()
        self._wakeup = trio.Event()
        self.holding = True
        self.count = 0
        self.arrivals = 0  # every put counted: a pop that read off the loop re-checks

    def suspend(self, held: HeldPop) -> bool:
        """Park a pop; False when not holding (shutdown) or full (answer it now)."""
        if not self.holding or self.count >= self.max_held:
            return False
        for topic in held.wake_topics:
            self._by_topic.setdefault(topic, []).append(held)
        heapq.heappush(self._heap, (held.deadline, next(self._seq), held))
        self.count += 1
        if self._heap[0][2] is held:
            self._wakeup.set()
        return True

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store actor's arrival listener: cheap, the re-runs happen in `run`."""
        self.arrivals += 1
        if topic in self._by_topic:
            self._grown.add(topic)
            self._wakeup.set()

    async def _answer(self, held: HeldPop, *, final: bool) -> None:
        outcome = None
        if not held.reply.gone:
            try:
                outcome = await held.rerun(held, final)
            except Exception as e:
                events.emit(log, events.HeldPullFailed(topic=held.wake_topics[0]), exc_info=e)
                outcome = held.failed(e)
            if held.done:
                return
            if outcome is None and not final:
                return
        held.done = True
        self.count -= 1
        if outcome is not None:
            held.reply.deliver(outcome)

    def _forget_done(self, topics: set[str]) -> None:
        for topic in topics:
            rest = [h for h in self._by_topic.get(topic, ()) if not h.done]
            if rest:
                self._by_topic[topic] = rest
            else:
                self._by_topic.pop(topic, None)

    async def _serve_grown(self) -> None:
        grown, self._grown = self._grown, set()
        for topic in grown:
            for held in list(self._by_topic.get(topic, ())):
                if not held.done:
                    await self._answer(held, final=False)
        self._forget_done(grown)

    async def _expire(self, now: float) -> None:
        heap = self._heap
        touched: set[str] = set()
        while heap and heap[0][0] <= now:
            _, _, held = heapq.heappop(heap)
            if held.done:
                continue
            await self._answer(held, final=True)
            touched.update(held.wake_topics)
        self._forget_done(touched)

    def stop_holding(self) -> None:
        self.holding = False

    async def answer_all(self) -> None:
        """Shutdown: answer every held pop now (each gets its final attempt)."""
        self.holding = False
        for _, _, held in list(self._heap):
            if not held.done:
                await self._answer(held, final=True)
        self._heap.clear()
        self._by_topic.clear()
        self._grown.clear()

    def try_start(self, fn: Callable[..., Awaitable[None]], *args: Any) -> bool:
        """Run ``fn(*args)`` as a task of this service (a pop served off its connection's
        reader); False when not running, shutting down or ``max_running`` pops already run
        (the caller then serves it inline: backpressure reaches the connection)."""
        if self._nursery is None or not self.holding or self.running >= self.max_running:
            return False
        self.running += 1
        self._nursery.start_soon(self._run_one, fn, args)
        return True

    async def _run_one(self, fn: Callable[..., Awaitable[None]], args: tuple[Any, ...]) -> None:
        try:
            await fn(*args)
        finally:
            self.running -= 1

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                task_status.started()
                await self._serve_forever()
            finally:
                self._nursery = None

    async def _serve_forever(self) -> None:
        while True:
            if not self._grown:
                self._wakeup = trio.Event()
                deadline = self._heap[0][0] if self._heap else math.inf
                with trio.move_on_at(deadline):
                    await self._wakeup.wait()
            await self._serve_grown()
            await self._expire(trio.current_time())
