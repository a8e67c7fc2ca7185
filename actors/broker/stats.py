"""Broker counters for GET_BROKER_RUNTIME_INFO (upstream BrokerStatsManager, much reduced).

Counters are plain integer increments on the hot paths (one add per request, never per
message). `sample(now_s)` is called once a second by the broker and keeps a short history so
TPS over the last 10 s / 60 s can be reported like upstream's "putTps" triple. The day
boundary counters (msgPutTotalTodayMorning) are taken at the first sample of each UTC day.
"""

from __future__ import annotations

from collections import deque

import attrs

_HISTORY_S = 600


@attrs.define(slots=True)
class _Sample:
    at_s: float
    put: int
    get: int


class BrokerStats:
    def __init__(self) -> None:
        self.msg_put_total = 0
        self.msg_put_bytes = 0
        self.msg_get_total = 0
        self.msg_get_bytes = 0
        self.send_back_total = 0
        self.dlq_total = 0
        self.boot_ms = 0  # wall-clock ms when the broker finished booting
        self.put_today_morning = 0
        self.get_today_morning = 0
        self._day = -1
        self._samples: deque[_Sample] = deque(maxlen=_HISTORY_S + 1)

    def on_put(self, count: int, nbytes: int) -> None:
        self.msg_put_total += count
        self.msg_put_bytes += nbytes

    def on_get(self, count: int, nbytes: int) -> None:
        self.msg_get_total += count
        self.msg_get_bytes += nbytes

    def sample(self, now_s: float, wall_ms: int) -> None:
        day = wall_ms // 86_400_000
        if day != self._day:
            self._day = day
            self.put_today_morning = self.msg_put_total
            self.get_today_morning = self.msg_get_total
        self._samples.append(_Sample(now_s, self.msg_put_total, self.msg_get_total))

    def _tps(self, window_s: float, attr: str) -> float:
        if len(self._samples) < 2:
            return 0.0
        last = self._samples[-1]
        first = last
        for s in reversed(self._samples):
            first = s
            if last.at_s - s.at_s >= window_s:
                break
        span = last.at_s - first.at_s
        if span <= 0:
            return 0.0
        return (getattr(last, attr) - getattr(first, attr)) / span

    def tps_triple(self, attr: str) -> str:
        """ "10s 60s 600s" averages, upstream's format for putTps / getTotalTps."""
        return " ".join(f"{self._tps(w, attr):.2f}" for w in (10, 60, 600))

    @property
    def put_tps(self) -> float:
        return self._tps(10, "put")
