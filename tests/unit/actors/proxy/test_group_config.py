"""The proxy's subscription-group cache (actors/proxy/group_config.py): FIFO from
consumeMessageOrderly, one fetch per group per TTL, a change seen after the TTL, failures and
unknown groups are not FIFO, the number of groups kept is bounded."""

from __future__ import annotations

import trio
import trio.testing

from rocketrio.actors.proxy.group_config import GroupConfigCache
from rocketrio.protocol.bodies import SubscriptionGroupConfig


class Brokers:
    def __init__(self) -> None:
        self.orderly: dict[str, bool] = {}
        self.asked: list[str] = []

    async def fetch(self, group: str) -> SubscriptionGroupConfig | None:
        self.asked.append(group)
        await trio.sleep(0.01)
        if group not in self.orderly:
            return None
        return SubscriptionGroupConfig(group, consumeMessageOrderly=self.orderly[group])


async def test_fifo_follows_consume_message_orderly_within_the_ttl(
    mock_clock: trio.testing.MockClock,
) -> None:
    b = Brokers()
    b.orderly = {"F": True, "N": False}
    cache = GroupConfigCache(b.fetch, ttl_s=5.0)
    assert await cache.is_fifo("F") and not await cache.is_fifo("N")
    assert not await cache.is_fifo("unknown") and not await cache.is_fifo("")
    for _ in range(10):
        assert await cache.is_fifo("F")
    assert b.asked == ["F", "N", "unknown"]  # cached
    b.orderly["N"] = True  # updateSubGroup -o true
    await trio.sleep(4.0)
    assert not await cache.is_fifo("N")
    await trio.sleep(1.1)
    assert await cache.is_fifo("N")


async def test_the_cache_is_bounded(mock_clock: trio.testing.MockClock) -> None:
    b = Brokers()
    cache = GroupConfigCache(b.fetch, ttl_s=60.0, max_groups=3)
    for g in "abcde":
        await cache.get(g)
    await cache.get("e")
    await cache.get("a")  # dropped as the oldest: asked again
    assert b.asked == ["a", "b", "c", "d", "e", "a"]
