"""Long polling (upstream PullRequestHoldService): held pulls answered when messages arrive.

A pull that finds nothing and carries the SUSPEND flag is parked here, keyed by topic and
queue, with a deadline (suspendTimeoutMillis, or shortPollingTimeMills when long polling is
off). The store actor calls `notify_message_arriving` after every put with the queue's new max
offset; that only notes the queue and wakes this service's task, which re-runs each held pull
whose offset is below the new max (without suspending again). So the reads never run inside
the store actor's turn, and a big read may leave the loop (store_view.py) without holding up
the writer. The same task sleeps until the earliest deadline and answers expired pulls with a
last attempt, so an idle queue costs nothing but a heap entry.

A held pull carries its `PullReply` (the protocol adapter's handle on the waiting request) and
the `rerun` function of the processor that parked it; this service knows no wire format. The
waiting connection is never blocked: the processor returned None and the outcome goes to
``reply.deliver`` later.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import math
from collections.abc import Awaitable, Callable, Hashable

import attrs
import structlog
import trio

from rocketrio.actors.broker.dispatch.outcomes import PullOutcome, PullReply, Refusal
from rocketrio.actors.kernel.server_limits import LogRateLimiter
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import PullMessageRequestHeader

log = structlog.get_logger("pull_hold")

QueueKey = tuple[str, int]


@attrs.define(slots=True, eq=False)
class HeldPull:
    reply: PullReply
    header: PullMessageRequestHeader
    tag_codes: set[int] | None
    offset: int  # advanced past messages the filter rejected while held
    deadline: float
    # rerun(held, final) -> the outcome, or None to keep holding (only when not final)
    rerun: Callable[[HeldPull, bool], Awaitable[PullOutcome | None]]
    done: bool = False


@attrs.frozen
class HoldLimits:
    """How many pulls may be held: per connection (maxHeldPullsPerConnection) and in all
    (maxHeldPulls)."""

    per_owner: int = 4096
    total: int = 65536


class Suspended(enum.Enum):
    HELD = "held"
    NOT_HOLDING = "not_holding"  # shutting down: answer the pull at once


class PullRequestHoldService:
    def __init__(self, limits: HoldLimits | None = None) -> None:
        self.limits = limits or HoldLimits()
        self._per_owner: dict[Hashable, int] = {}
        self._log_limiter = LogRateLimiter(per_s=1.0, burst=1)
        self._held: dict[QueueKey, list[HeldPull]] = {}
        self._heap: list[tuple[float, int, HeldPull]] = []
        self._grown: dict[QueueKey, int] = {}  # queues with held pulls that got messages
        self._seq = itertools.count()
        self._wakeup = trio.Event()
        self.holding = True  # False from shutdown on: pulls are answered at once
        self.count = 0

    def suspend(self, held: HeldPull) -> Suspended | Refusal:
        """Park a pull; NOT_HOLDING when shutting down, a SYSTEM_BUSY refusal over a limit."""
        if not self.holding:
            return Suspended.NOT_HOLDING
        owner = held.reply.owner
        mine = self._per_owner.get(owner, 0)
        if mine >= self.limits.per_owner or self.count >= self.limits.total:
            return self._over_limit(held, mine)
        self._per_owner[owner] = mine + 1
        key = (held.header.topic, held.header.queueId)
        self._held.setdefault(key, []).append(held)
        heapq.heappush(self._heap, (held.deadline, next(self._seq), held))
        self.count += 1
        if self._heap[0][2] is held:
            self._wakeup.set()
        return Suspended.HELD

    def _over_limit(self, held: HeldPull, mine: int) -> Refusal:
        if mine >= self.limits.per_owner:
            why = (
                f"{mine} pulls of this connection are held already "
                f"(maxHeldPullsPerConnection={self.limits.per_owner})"
            )
        else:
            why = f"{self.count} pulls are held already (maxHeldPulls={self.limits.total})"
        suppressed = self._log_limiter.admit(trio.current_time())
        if suppressed is not None:
            events.emit(
                log,
                events.PullHoldRefused(
                    topic=held.header.topic,
                    queue_id=held.header.queueId,
                    group=held.header.consumerGroup,
                    why=why,
                    suppressed=suppressed,
                ),
            )
        return Refusal(
            ResponseCode.SYSTEM_BUSY, f"[OVERLOAD] long polling refused: {why}; retry later"
        )

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store actor's arrival listener: cheap, the re-runs happen in `run`."""
        key = (topic, queue_id)
        if key in self._held:
            self._grown[key] = max_offset
            self._wakeup.set()

    async def _serve_grown(self) -> None:
        grown, self._grown = self._grown, {}
        for key, max_offset in grown.items():
            # the list stays in place while reads are awaited: pulls parked meanwhile join it
            # and arrivals meanwhile are noted in `_grown` for the next pass
            for held in list(self._held.get(key, ())):
                if not held.done and held.offset < max_offset:
                    await self._answer(held, final=False)
            self._forget_done(key)

    def _forget_done(self, key: QueueKey) -> None:
        rest = [h for h in self._held.get(key, ()) if not h.done]
        if rest:
            self._held[key] = rest
        else:
            self._held.pop(key, None)

    async def _answer(self, held: HeldPull, *, final: bool) -> bool:
        """Run the held pull; True when it was answered (and is done)."""
        outcome: PullOutcome | None = None
        if not held.reply.gone:
            try:
                outcome = await held.rerun(held, final)
            except Exception as e:
                events.emit(log, events.HeldPullFailed(topic=held.header.topic), exc_info=e)
                outcome = Refusal(
                    ResponseCode.SYSTEM_ERROR, f"pull failed: {type(e).__name__}: {e}"
                )
            if held.done:
                return True  # answered while the read ran (shutdown)
            if outcome is None and not final:
                return False
        held.done = True
        self.count -= 1
        owner = held.reply.owner
        left = self._per_owner[owner] - 1
        if left:
            self._per_owner[owner] = left
        else:
            del self._per_owner[owner]
        if outcome is not None:
            held.reply.deliver(outcome)
        return True

    def stop_holding(self) -> None:
        """Shutdown begins: from now on a pull that finds nothing is answered at once."""
        self.holding = False

    async def answer_all(self) -> None:
        """Shutdown: stop holding and answer every held pull now (each gets its final
        attempt)."""
        self.holding = False
        for _, _, held in list(self._heap):
            if not held.done:
                await self._answer(held, final=True)
        self._heap.clear()
        self._held.clear()
        self._grown.clear()

    async def _expire(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, held = heapq.heappop(heap)
            if held.done:
                continue
            await self._answer(held, final=True)
            self._forget_done((held.header.topic, held.header.queueId))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            if not self._grown:
                self._wakeup = trio.Event()
                deadline = self._heap[0][0] if self._heap else math.inf
                with trio.move_on_at(deadline):
                    await self._wakeup.wait()
            await self._serve_grown()
            await self._expire(trio.current_time())
