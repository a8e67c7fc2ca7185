"""Held pops (upstream PopLongPollingService) on the shared long-polling loop
(dispatch/long_poll.py).

A POP that found nothing and carries a pollTime is parked with a deadline (pollTime, capped by
the broker) and the topics that may wake it (the topic and the group's pop retry topics); any
arrival on one of them re-runs it. At most ``max_held`` pops are held (maxPopPollingSize); one
more is answered POLLING_FULL by the processor. A pop parked with a polling key (its topic,
group and queueId, upstream's pollingMap key) is counted under it until released: POLLING_INFO
reads `polling_num`. Upstream's NotificationProcessor holds NOTIFICATION requests in a second
instance of this service (probe.py), bounded the same way and not counted by POLLING_INFO.

The service also runs pops that are not held yet (`try_start`, at most ``max_running`` at a
time): a pop waits for its CK writes, and running it here keeps the connection reading the next
request meanwhile (one broker connection may carry many consumers' pops, e.g. a proxy's).
`arrivals` counts every put, so a pop that read off the loop can tell that something arrived
while it read.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

import trio

from rocketrio.actors.broker.dispatch.long_poll import Held, LongPoll


class PopLongPollingService:
    def __init__(self, max_held: int = 100_000, max_running: int = 1024) -> None:
        self.max_held = max_held
        self.max_running = max_running
        self.running = 0
        self._nursery: trio.Nursery | None = None
        self._poll = LongPoll(on_released=self._released)
        self.arrivals = 0
        self._polling: dict[Hashable, int] = {}  # polling key -> held requests
        self._keys: dict[Held, Hashable] = {}  # a counted held request -> its polling key

    @property
    def holding(self) -> bool:
        return self._poll.holding

    @property
    def count(self) -> int:
        return self._poll.count

    def suspend(self, held: Held, key: Hashable | None = None) -> bool:
        """Park a pop (counted under ``key`` while held, when given); False when not holding
        (shutdown) or full (answer it now)."""
        if not self._poll.holding or self._poll.count >= self.max_held:
            return False
        self._poll.park(held)
        if key is not None:
            self._keys[held] = key
            self._polling[key] = self._polling.get(key, 0) + 1
        return True

    def polling_num(self, key: Hashable) -> int:
        """How many requests parked under ``key`` are held now."""
        return self._polling.get(key, 0)

    def _released(self, held: Held) -> None:
        key = self._keys.pop(held, None)
        if key is None:
            return
        n = self._polling[key] - 1
        if n:
            self._polling[key] = n
        else:
            del self._polling[key]

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store actor's arrival listener: cheap, the re-runs happen in `run`."""
        self.arrivals += 1
        self._poll.notify(topic, max_offset)

    def notify_arrivals(self, arrived: Mapping[tuple[str, int], int]) -> None:
        """A store turn's arrivals at once (each queue counts one, as one by one)."""
        self.arrivals += len(arrived)
        self._poll.notify_many((topic, offset) for (topic, _), offset in arrived.items())

    def stop_holding(self) -> None:
        self._poll.stop_holding()

    async def answer_all(self) -> None:
        """Shutdown: answer every held pop now (each gets its final attempt)."""
        await self._poll.answer_all()

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
                await self._poll.run()
            finally:
                self._nursery = None
