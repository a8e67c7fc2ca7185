"""Per-topic and per-group statistics with minute / hour / day windows (upstream
BrokerStatsManager + StatsItem), a pure core: counts in, snapshots out, time injected.

Counting (the hot paths). One dict lookup and a few integer adds per request:

- `on_topic_put(topic, msgs, bytes, requests=1)`: stored send requests (TOPIC_PUT_NUMS adds
  ``msgs``, TOPIC_PUT_SIZE adds ``bytes``, each with ``requests`` "times", as upstream
  incTopicPutNums(topic, msgNum, 1) / incTopicPutSize once per request; the store turn counts
  a run of single sends to one topic in one call);
- `on_group_get(topic, group, msgs, bytes)`: one pull that found messages (GROUP_GET_NUMS /
  GROUP_GET_SIZE, key ``topic@group``);
- `on_send_back(topic, group)`: one CONSUMER_SEND_MSG_BACK stored (SNDBCK_PUT_NUMS, key
  ``topic@group``; upstream uses the original topic and the consumer group).

BROKER_PUT_NUMS / BROKER_GET_NUMS (key: the cluster name, as upstream, which adds only a value
and no "time", so their avgpt is 0) are not counted on the hot path: they are the sums of the
topic and group counters (plus what deleted topics and groups had counted), taken when sampled.

Sampling follows upstream StatsItem exactly. `tick(now_ms)` runs each sampling that is due, at
a fixed rate from the first tick: every 10 s into the minute list (7 snapshots kept: one
minute), every 10 min into the hour list (7: one hour), every hour into the day list (25: one
day). A counter's first snapshot in a list is preceded by a zero snapshot one period earlier,
so what was counted before the first sample lands in the first period. A window's figures are
computed from its first and last snapshot: ``sum = last.value - first.value``,
``tps = sum * 1000 / (last.ts - first.ts)``, ``avgpt = sum / (last.times - first.times)``
(0 when no time passed), as upstream's StatsItem.computeStatsData.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator

import attrs

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"

# (period ms, snapshots kept) of the minute, hour and day lists (upstream StatsItem)
WINDOWS: tuple[tuple[int, int], ...] = ((10_000, 7), (600_000, 7), (3_600_000, 25))
MINUTE, HOUR, DAY = 0, 1, 2

# counter slots: [messages, requests, bytes] for puts and gets, [count] for send-backs
_MSGS, _REQS, _BYTES = 0, 1, 2
_NO_TIMES = -1  # BROKER_* items add a value and never a "time"

# the tables a stats name reads: (table, value slot, times slot)
_TOPIC, _GROUP, _SNDBCK, _BROKER_PUT, _BROKER_GET = "topic", "group", "sndbck", "bput", "bget"
_NAMES: dict[str, tuple[str, int, int]] = {
    TOPIC_PUT_NUMS: (_TOPIC, _MSGS, _REQS),
    TOPIC_PUT_SIZE: (_TOPIC, _BYTES, _REQS),
    GROUP_GET_NUMS: (_GROUP, _MSGS, _REQS),
    GROUP_GET_SIZE: (_GROUP, _BYTES, _REQS),
    SNDBCK_PUT_NUMS: (_SNDBCK, 0, 0),
    BROKER_PUT_NUMS: (_BROKER_PUT, 0, _NO_TIMES),
    BROKER_GET_NUMS: (_BROKER_GET, 0, _NO_TIMES),
}
STATS_NAMES = tuple(_NAMES)

Snapshot = tuple[int, tuple[int, ...]]  # (timestamp ms, counter values then)


@attrs.frozen
class StatsSnapshot:
    """One window's figures (upstream StatsSnapshot): sum, per second, per "time"."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0
    times: int = 0


@attrs.frozen
class StatsItemView:
    """A stats item's three windows, as VIEW_BROKER_STATS_DATA answers them."""

    minute: StatsSnapshot
    hour: StatsSnapshot
    day: StatsSnapshot


def compute(snapshots: deque[Snapshot], value_slot: int, times_slot: int) -> StatsSnapshot:
    """upstream StatsItem.computeStatsData over one list."""
    if not snapshots:
        return StatsSnapshot()
    (t0, first), (t1, last) = snapshots[0], snapshots[-1]
    total = last[value_slot] - first[value_slot]
    span = t1 - t0
    tps = total * 1000.0 / span if span > 0 else 0.0
    times = last[times_slot] - first[times_slot] if times_slot != _NO_TIMES else 0
    return StatsSnapshot(total, tps, total / times if times > 0 else 0.0, times)


def _zero(n: int) -> tuple[int, ...]:
    return (0,) * n


class BrokerStatsManager:
    """The counters and their sampled windows (see the module docstring)."""

    def __init__(self, cluster_name: str, is_system_topic: Callable[[str], bool]) -> None:
        self.cluster_name = cluster_name
        self.is_system_topic = is_system_topic
        self.topic_put: dict[str, list[int]] = {}  # topic -> [msgs, requests, bytes]
        self.group_get: dict[tuple[str, str], list[int]] = {}  # (topic, group) -> same
        self.send_back: dict[tuple[str, str], list[int]] = {}  # (topic, group) -> [count]
        # what deleted topics / groups had counted: [put all, put non-system, get all,
        # get non-system] (broker totals never go backwards)
        self._retired = [0, 0, 0, 0]
        self._windows: dict[tuple[str, object], list[deque[Snapshot]]] = {}
        self._next_due: list[int] | None = None

    # ------------------------------------------------------------------ hot paths

    def on_topic_put(self, topic: str, msgs: int, nbytes: int, requests: int = 1) -> None:
        c = self.topic_put.get(topic)
        if c is None:
            c = self.topic_put[topic] = [0, 0, 0]
        c[0] += msgs
        c[1] += requests
        c[2] += nbytes

    def on_group_get(self, topic: str, group: str, msgs: int, nbytes: int) -> None:
        key = (topic, group)
        c = self.group_get.get(key)
        if c is None:
            c = self.group_get[key] = [0, 0, 0]
        c[0] += msgs
        c[1] += 1
        c[2] += nbytes

    def on_send_back(self, topic: str, group: str) -> None:
        key = (topic, group)
        c = self.send_back.get(key)
        if c is None:
            c = self.send_back[key] = [0]
        c[0] += 1

    # ------------------------------------------------------------------ broker totals

    def put_total(self, *, without_system_topics: bool = False) -> int:
        """Messages stored since the start (BROKER_PUT_NUMS[_WITHOUT_SYSTEM_TOPIC])."""
        if without_system_topics:
            sys_topic = self.is_system_topic
            live = sum(c[0] for t, c in self.topic_put.items() if not sys_topic(t))
            return live + self._retired[1]
        return sum(c[0] for c in self.topic_put.values()) + self._retired[0]

    def get_total(self, *, without_system_topics: bool = False) -> int:
        """Messages pulled since the start (BROKER_GET_NUMS[_WITHOUT_SYSTEM_TOPIC])."""
        if without_system_topics:
            sys_topic = self.is_system_topic
            live = sum(c[0] for (t, _g), c in self.group_get.items() if not sys_topic(t))
            return live + self._retired[3]
        return sum(c[0] for c in self.group_get.values()) + self._retired[2]

    def put_bytes_total(self) -> int:
        return sum(c[2] for c in self.topic_put.values())

    # ------------------------------------------------------------------ deletion

    def on_topic_deleted(self, topic: str) -> None:
        """Forget the topic's items (upstream onTopicDeleted); broker totals keep its counts."""
        c = self.topic_put.pop(topic, None)
        system = self.is_system_topic(topic)
        if c is not None:
            self._retire(0, c[0], system)
            self._windows.pop((_TOPIC, topic), None)
        for key in [k for k in self.group_get if k[0] == topic]:
            self._retire(2, self.group_get.pop(key)[0], system)
            self._windows.pop((_GROUP, key), None)
        for key in [k for k in self.send_back if k[0] == topic]:
            del self.send_back[key]
            self._windows.pop((_SNDBCK, key), None)

    def on_group_deleted(self, group: str) -> None:
        """Forget the group's items (upstream onGroupDeleted)."""
        for key in [k for k in self.group_get if k[1] == group]:
            self._retire(2, self.group_get.pop(key)[0], self.is_system_topic(key[0]))
            self._windows.pop((_GROUP, key), None)
        for key in [k for k in self.send_back if k[1] == group]:
            del self.send_back[key]
            self._windows.pop((_SNDBCK, key), None)

    def _retire(self, slot: int, msgs: int, system: bool) -> None:
        self._retired[slot] += msgs
        if not system:
            self._retired[slot + 1] += msgs

    # ------------------------------------------------------------------ sampling

    def tick(self, now_ms: int) -> None:
        """Run every sampling that is due (fixed rate from the first tick, like upstream's
        scheduleAtFixedRate with no initial delay); a clock jump restarts the schedule."""
        if self._next_due is None:
            self._next_due = [now_ms] * len(WINDOWS)
        for level, (period, _keep) in enumerate(WINDOWS):
            due = self._next_due[level]
            if now_ms < due:
                continue
            self._sample(level, now_ms)
            due += period
            self._next_due[level] = due if due > now_ms else now_ms + period

    def _counters(self) -> Iterator[tuple[tuple[str, object], tuple[int, ...]]]:
        for t, c in self.topic_put.items():
            yield (_TOPIC, t), tuple(c)
        for k, c in self.group_get.items():
            yield (_GROUP, k), tuple(c)
        for k, c in self.send_back.items():
            yield (_SNDBCK, k), tuple(c)
        put, get = self.put_total(), self.get_total()
        if put:  # upstream creates the item with the broker's first put
            yield (_BROKER_PUT, self.cluster_name), (put,)
        if get:
            yield (_BROKER_GET, self.cluster_name), (get,)

    def _sample(self, level: int, now_ms: int) -> None:
        period = WINDOWS[level][0]
        windows = self._windows
        for ident, values in self._counters():
            lists = windows.get(ident)
            if lists is None:
                lists = windows[ident] = [deque(maxlen=k) for _p, k in WINDOWS]
            snaps = lists[level]
            if not snaps:
                snaps.append((now_ms - period, _zero(len(values))))
            snaps.append((now_ms, values))  # maxlen drops the oldest (upstream removeFirst)

    # ------------------------------------------------------------------ reading

    def _ident(self, table: str, key: str) -> tuple[str, object] | None:
        """The counter a stats key names, or None when no such item exists."""
        if table == _TOPIC:
            return (table, key) if key in self.topic_put else None
        if table in (_GROUP, _SNDBCK):
            topic, sep, group = key.partition("@")
            pair = (topic, group)
            counters = self.group_get if table == _GROUP else self.send_back
            return (table, pair) if sep and pair in counters else None
        total = self.put_total() if table == _BROKER_PUT else self.get_total()
        return (table, key) if key == self.cluster_name and total else None

    def stats_item(self, name: str, key: str) -> StatsItemView | None:
        """The minute / hour / day figures of one item; None when the name is unknown or no
        such item exists (upstream: "The stats <name> <key> not exist")."""
        spec = _NAMES.get(name)
        if spec is None:
            return None
        table, value_slot, times_slot = spec
        ident = self._ident(table, key)
        if ident is None:
            return None
        lists = self._windows.get(ident)
        if lists is None:  # created since the last sampling: nothing sampled yet
            empty = StatsSnapshot()
            return StatsItemView(empty, empty, empty)
        m, h, d = (compute(snaps, value_slot, times_slot) for snaps in lists)
        return StatsItemView(m, h, d)
