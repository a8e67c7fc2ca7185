"""The proxy's cache of consumer groups' subscription group configs (upstream's proxy reads them
through its own cache too): above all whether a group consumes in order
(``consumeMessageOrderly``), which makes its clients FIFO consumers (Telemetry settings
``subscription.fifo``, one assignment per queue) and its receives ordered POPs.

A config is fetched from the brokers (`fetch`, GET_SUBSCRIPTIONGROUP_CONFIG to the masters) at
most once per ``ttl_s`` per group, so an `updateSubGroup -o true` is seen within ``ttl_s``. A
fetch that failed is remembered for the same time as "not found" (a broker that is down is not
asked on every receive). At most ``max_groups`` groups are kept: the oldest entry goes first.
Time is Trio's clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from rocketrio.protocol.bodies import SubscriptionGroupConfig

TTL_S = 5.0
MAX_GROUPS = 10_000

Fetch = Callable[[str], Awaitable[SubscriptionGroupConfig | None]]


class GroupConfigCache:
    def __init__(self, fetch: Fetch, ttl_s: float = TTL_S, max_groups: int = MAX_GROUPS) -> None:
        self.fetch = fetch
        self.ttl_s = ttl_s
        self.max_groups = max_groups
        self._entries: dict[str, tuple[float, SubscriptionGroupConfig | None]] = {}

    async def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config (None: no broker has it, or it could not be read)."""
        now = trio.current_time()
        hit = self._entries.get(group)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        config = await self.fetch(group)
        self._entries.pop(group, None)
        while len(self._entries) >= self.max_groups:
            del self._entries[next(iter(self._entries))]  # insertion order: the oldest
        self._entries[group] = (trio.current_time(), config)
        return config

    async def is_fifo(self, group: str) -> bool:
        """Whether the group consumes in order (consumeMessageOrderly)."""
        if not group:
            return False
        config = await self.get(group)
        return config is not None and config.consumeMessageOrderly
