"""The broker's statistics, in one object the hot paths and the admin calls share.

`BrokerStats` ties three pure cores together and is what the send, pull and store paths call:

- `items` (stats_items.py, upstream BrokerStatsManager): per-topic and per-group counters with
  minute / hour / day windows, read by VIEW_BROKER_STATS_DATA (315) and statsAll;
- `store` (store_stats.py, upstream StoreStatsService): put and get TPS triples, put latency
  distribution and percentiles, max put and get times;
- `days` (day_counters.py, upstream BrokerStats): the msgPut/msgGet day counters, kept right
  across restarts through ``brokerStats.json``.

Hot-path cost: a send is counted by the store actor with `on_topic_put` (one dict lookup and
three adds per request) and `on_put_turn` (per store turn, not per message); a pull with
`on_pull` (two lookups and a few adds). Broker totals and TPS are computed when sampled
(`sample`, once a second) or asked for, never per message.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketrio.actors.broker.stats.day_counters import DayCounters, LocalDay, local_day
from rocketrio.actors.broker.stats.items import BrokerStatsManager
from rocketrio.actors.broker.store.figures import StoreStatsService


class BrokerStats:
    def __init__(
        self,
        cluster_name: str = "DefaultCluster",
        is_system_topic: Callable[[str], bool] = lambda _topic: False,
        *,
        day_of: LocalDay = local_day,
    ) -> None:
        items = self.items = BrokerStatsManager(cluster_name, is_system_topic)
        self.store = StoreStatsService(0, items.put_total, items.put_bytes_total)
        self.days = DayCounters(
            lambda: items.put_total(without_system_topics=True),
            lambda: items.get_total(without_system_topics=True),
            day_of,
        )
        self.send_back_total = 0  # CONSUMER_SEND_MSG_BACK stored (rocketrio's sendBackTotal)
        self.dlq_total = 0  # of which went to a %DLQ% topic (dlqTotal)
        # the store actor's `PutStats`, bound once
        self.on_topic_put = items.on_topic_put
        self.on_put_turn = self.store.on_put_turn
        self.on_put_failed = self.store.on_put_failed

    @property
    def boot_ms(self) -> int:
        return self.store.boot_ms

    @boot_ms.setter
    def boot_ms(self, ms: int) -> None:
        self.store.boot_ms = ms

    def on_pull(self, topic: str, group: str, msgs: int, nbytes: int, elapsed_ms: int) -> None:
        """One store read of a pull: ``msgs`` found (0: a miss) in ``elapsed_ms``."""
        self.store.on_get(msgs > 0, msgs, elapsed_ms)
        if msgs:
            self.items.on_group_get(topic, group, msgs, nbytes)

    def on_send_back(self, topic: str, group: str, to_dlq: bool) -> None:
        self.items.on_send_back(topic, group)
        self.send_back_total += 1
        if to_dlq:
            self.dlq_total += 1

    def sample(self, mono_ms: int, wall_ms: int) -> bool:
        """The once-a-second sampling: TPS snapshots and item windows on the monotonic clock,
        the day boundary on the wall clock. True when a new day began (persist the day file)."""
        self.store.sample(mono_ms)
        self.items.tick(mono_ms)
        return self.days.roll(wall_ms)
