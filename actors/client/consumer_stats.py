"""A consumer's pull and consume figures per topic (upstream ConsumerStatsManager), a pure core:
counts in, `ConsumeStatus` out, time injected.

Counting costs a dict lookup and a few integer adds per pull or per consumed chunk:

- `on_pull(topic, msgs, rt_ms)`: one pull that found messages (PULL_TPS adds ``msgs``,
  PULL_RT adds ``rt_ms``, each with one "time");
- `on_consumed(topic, ok, failed, rt_ms, requests)`: ``requests`` listener calls that took
  ``rt_ms`` in all (CONSUME_RT), ``ok`` messages consumed (CONSUME_OK_TPS) and ``failed``
  given back (CONSUME_FAILED_TPS).

`tick(now_ms)` samples as upstream's StatsItem does: every 10 s into the minute list (7
snapshots kept), every 10 min into the hour list (7 kept); a window's figures come from its
first and last snapshot (``tps = sum * 1000 / span``, ``avgpt = sum / times``). So pullTPS,
consumeOKTPS and consumeFailedTPS are per second over the last minute, pullRT and consumeRT the
mean per pull / per listener call over the last minute (ms), consumeFailedMsgs the failed
messages of the last hour.
"""

from __future__ import annotations

from collections import deque

from rocketrio.protocol.running_info import ConsumeStatus

# (period ms, snapshots kept): the minute and the hour lists of upstream StatsItem
WINDOWS: tuple[tuple[int, int], ...] = ((10_000, 7), (600_000, 7))
MINUTE, HOUR = 0, 1

# counter slots
PULL_MSGS, PULLS, PULL_RT, CONSUME_OK, CONSUME_FAILED, CONSUME_RT, CONSUMES = range(7)
_SLOTS = 7

Snapshot = tuple[int, tuple[int, ...]]  # (timestamp ms, counters then)


def _window(snaps: deque[Snapshot], value: int, times: int | None) -> tuple[float, float, int]:
    """(tps, avgpt, sum) of one list, as upstream StatsItem.computeStatsData."""
    if not snaps:
        return 0.0, 0.0, 0
    (t0, first), (t1, last) = snaps[0], snaps[-1]
    total = last[value] - first[value]
    span = t1 - t0
    tps = total * 1000.0 / span if span > 0 else 0.0
    n = last[times] - first[times] if times is not None else 0
    return tps, total / n if n > 0 else 0.0, total


class ConsumerStatsManager:
    def __init__(self) -> None:
        self._counters: dict[str, list[int]] = {}
        self._lists: dict[str, list[deque[Snapshot]]] = {}
        self._next_due: list[int] | None = None

    def _of(self, topic: str) -> list[int]:
        c = self._counters.get(topic)
        if c is None:
            c = self._counters[topic] = [0] * _SLOTS
        return c

    def on_pull(self, topic: str, msgs: int, rt_ms: int) -> None:
        c = self._of(topic)
        c[PULL_MSGS] += msgs
        c[PULLS] += 1
        c[PULL_RT] += rt_ms

    def on_consumed(self, topic: str, ok: int, failed: int, rt_ms: int, requests: int) -> None:
        c = self._of(topic)
        c[CONSUME_OK] += ok
        c[CONSUME_FAILED] += failed
        c[CONSUME_RT] += rt_ms
        c[CONSUMES] += requests

    def tick(self, now_ms: int) -> None:
        """Take every sample that is due (fixed rate from the first tick)."""
        if self._next_due is None:
            self._next_due = [now_ms] * len(WINDOWS)
        for level, (period, _keep) in enumerate(WINDOWS):
            due = self._next_due[level]
            if now_ms < due:
                continue
            for topic, c in self._counters.items():
                lists = self._lists.get(topic)
                if lists is None:
                    lists = self._lists[topic] = [deque(maxlen=k) for _p, k in WINDOWS]
                snaps = lists[level]
                if not snaps:  # what was counted before the first sample is in its period
                    snaps.append((now_ms - period, (0,) * _SLOTS))
                snaps.append((now_ms, tuple(c)))
            due += period
            self._next_due[level] = due if due > now_ms else now_ms + period

    def consume_status(self, topic: str) -> ConsumeStatus:
        lists = self._lists.get(topic)
        if lists is None:
            return ConsumeStatus()
        minute, hour = lists[MINUTE], lists[HOUR]
        pull_tps, _, _ = _window(minute, PULL_MSGS, PULLS)
        _, pull_rt, _ = _window(minute, PULL_RT, PULLS)
        _, consume_rt, _ = _window(minute, CONSUME_RT, CONSUMES)
        ok_tps, _, _ = _window(minute, CONSUME_OK, None)
        failed_tps, _, _ = _window(minute, CONSUME_FAILED, None)
        _, _, failed_hour = _window(hour, CONSUME_FAILED, None)
        return ConsumeStatus(
            pullRT=pull_rt,
            pullTPS=pull_tps,
            consumeRT=consume_rt,
            consumeOKTPS=ok_tps,
            consumeFailedTPS=failed_tps,
            consumeFailedMsgs=failed_hour,
        )
