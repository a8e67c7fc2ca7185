"""Held pulls (upstream PullRequestHoldService) on the shared long-polling loop
(dispatch/long_poll.py).

A pull that finds nothing and carries the SUSPEND flag is parked here, keyed by its queue, with
a deadline (suspendTimeoutMillis, or shortPollingTimeMills when long polling is off); an
arrival re-runs it once the queue's new max offset passes the offset it waits at. This service
adds what only pulls have: the bounds on held pulls per connection (maxHeldPullsPerConnection)
and in all (maxHeldPulls), refused with SYSTEM_BUSY and a rate-limited log line.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterable, Mapping

import attrs
import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.long_poll import Held, LongPoll
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.kernel.server_limits import LogRateLimiter
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import PullMessageRequestHeader

log = structlog.get_logger("pull_hold")

# the live keys (UPDATE_BROKER_CONFIG) this service reads
HOLD_KEYS = frozenset({"maxHeldPullsPerConnection", "maxHeldPulls"})


@attrs.frozen
class HoldLimits:
    """How many pulls may be held: per connection (maxHeldPullsPerConnection) and in all
    (maxHeldPulls)."""

    per_owner: int = 4096
    total: int = 65536

    @classmethod
    def of(cls, c: BrokerConfig) -> HoldLimits:
        return cls(c.maxHeldPullsPerConnection, c.maxHeldPulls)


class Suspended(enum.Enum):
    HELD = "held"
    NOT_HOLDING = "not_holding"  # shutting down: answer the pull at once


class PullRequestHoldService:
    def __init__(self, limits: HoldLimits | None = None) -> None:
        self.limits = limits or HoldLimits()
        self._per_owner: dict[Hashable, int] = {}
        self._log_limiter = LogRateLimiter(per_s=1.0, burst=1)
        self._poll = LongPoll(on_released=self._released)

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        """UPDATE_BROKER_CONFIG: the bounds of the next held pull."""
        if changed & HOLD_KEYS:
            self.limits = HoldLimits.of(config)

    @property
    def count(self) -> int:
        return self._poll.count

    def suspend(self, held: Held) -> Suspended | Refusal:
        """Park a pull; NOT_HOLDING when shutting down, a SYSTEM_BUSY refusal over a limit."""
        if not self._poll.holding:
            return Suspended.NOT_HOLDING
        owner = held.reply.owner
        mine = self._per_owner.get(owner, 0)
        if mine >= self.limits.per_owner or self.count >= self.limits.total:
            header = held.request[0]  # the pull processor's (header, message selector)
            return self._over_limit(header, mine)
        self._per_owner[owner] = mine + 1
        self._poll.park(held)
        return Suspended.HELD

    def _over_limit(self, h: PullMessageRequestHeader, mine: int) -> Refusal:
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
                    topic=h.topic,
                    queue_id=h.queueId,
                    group=h.consumerGroup,
                    why=why,
                    suppressed=suppressed,
                ),
            )
        return Refusal(
            ResponseCode.SYSTEM_BUSY, f"[OVERLOAD] long polling refused: {why}; retry later"
        )

    def _released(self, held: Held) -> None:
        owner = held.reply.owner
        left = self._per_owner[owner] - 1
        if left:
            self._per_owner[owner] = left
        else:
            del self._per_owner[owner]

    def notify_arrivals(self, arrived: Mapping[tuple[str, int], int]) -> None:
        """The store actor's arrival listener, once a turn: (topic, queue id) -> new max
        offset. Cheap: the re-runs happen in `run`."""
        self._poll.notify_many(arrived.items())

    def release_queues(self, topic: str, queue_ids: Iterable[int]) -> None:
        """Answer the pulls held on these queues now (a static topic's logic queues this broker
        stopped leading: nothing arrives there any more, and the answer sends the consumer on
        to the new leader instead of leaving it held until its suspend timeout)."""
        self._poll.release((topic, q) for q in queue_ids)

    def stop_holding(self) -> None:
        """Shutdown begins: from now on a pull that finds nothing is answered at once."""
        self._poll.stop_holding()

    async def answer_all(self) -> None:
        """Shutdown: answer every held pull now (each gets its final attempt)."""
        await self._poll.answer_all()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await self._poll.run()
