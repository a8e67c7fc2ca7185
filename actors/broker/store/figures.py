"""The store's runtime figures (upstream StoreStatsService), a pure core with time injected.

What it owns and how it is fed:

- put timing: `on_put_turn(elapsed_ms, msgs)` once per store-actor turn (not per message): the
  turn's messages all took the turn's time, from the moment the actor took them to the moment
  they were answered (append, plus the fsync with SYNC_FLUSH and the replicas' acks in
  controller mode), as upstream measures a putMessage from its start to its completion. It
  feeds the putMessageDistributeTime buckets, the percentile buckets (putLatency99/999) and
  putMessageEntireTimeMax; `on_put_failed(n)` counts puts the store refused or failed;
- get counters: `on_get(found, msgs, elapsed_ms)` once per store read of a pull (found or
  missed; msgs transferred) and getMessageEntireTimeMax;
- put totals (messages and bytes) come from the topic counters of `BrokerStatsManager`
  (stats_items.py), read through the two callables given, so a put is counted once.

`sample(now_ms)` runs every second (upstream FREQUENCY_OF_SAMPLING): it appends a snapshot of the
totals (601 kept: ten minutes), and once a minute (printTPSInterval) it turns the current
latency buckets into "the last minute's", which is what putMessageDistributeTime and the
percentiles report (``"null"`` for the distribution during the first minute, as upstream).

Formats are upstream's (`runtime_info`): the TPS triples ``"<10s> <60s> <600s>"`` with an empty
string for a window that has not enough samples yet (getTotalTps prints ``0.0`` instead), Java
double text, ``%.2f`` percentiles, ``[ d days, h hours, m minutes, s seconds ]``.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal

from rocketrio.protocol.fastjson import java_double

SAMPLE_INTERVAL_MS = 1000
MAX_RECORDS_OF_SAMPLING = 600
PRINT_TPS_INTERVAL_MS = 60_000
TPS_WINDOWS_S = (10, 60, 600)

DISTRIBUTE_DESC = (
    "[<=0ms]",
    "[0~10ms]",
    "[10~50ms]",
    "[50~100ms]",
    "[100~200ms]",
    "[200~500ms]",
    "[500ms~1s]",
    "[1~2s]",
    "[2~3s]",
    "[3~4s]",
    "[4~5s]",
    "[5~10s]",
    "[10s~]",
)
# upper bounds (exclusive) of the distribution buckets above, the first is "<= 0"
_DISTRIBUTE_BOUNDS = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)


def _percentile_ceilings() -> tuple[int, ...]:
    """upstream PUT_MESSAGE_ENTIRE_TIME_BUCKETS: 1 ms steps to 20, 2 to 50, 5 to 100, 10 to
    200, 50 to 500, 100 to 1000, 1000 to 10000, then one bucket for everything above."""
    out, at = [], 0
    for step, times in ((1, 20), (2, 15), (5, 10), (10, 10), (50, 6), (100, 5), (1000, 9)):
        for _ in range(times):
            at += step
            out.append(at)
    out.append(2**63 - 1)
    return tuple(out)


PERCENTILE_CEILINGS = _percentile_ceilings()


def java_fixed(x: float, digits: int) -> str:
    """Java ``String.format("%.Nf", x)``: the double's exact value rounded HALF_UP."""
    q = Decimal(1).scaleb(-digits)
    return str(Decimal(x).quantize(q, rounding=ROUND_HALF_UP))


def percentile(counts: list[int], px: float) -> float:
    """upstream findPutMessageEntireTimePX: linear interpolation inside the bucket that holds
    the ``px`` quantile of the last minute's put times, in ms."""
    total = sum(counts)
    index = int(total * px)
    passed = 0
    keys = PERCENTILE_CEILINGS
    for i, count in enumerate(counts):
        if index <= passed + count:
            rel = index - passed
            if i == 0:
                return 0.0 if count == 0 else keys[0] * rel / count
            low = keys[i - 1]
            return low + (0.0 if count == 0 else (keys[i] - low) * rel / count)
        passed += count
    return 0.0


def runtime_text(ms: int) -> str:
    """upstream getFormatRuntime (MessageFormat groups thousands: ``1,234 days``)."""
    s = max(0, ms) // 1000
    days, hours, minutes, seconds = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
    return f"[ {days:,} days, {hours:,} hours, {minutes:,} minutes, {seconds:,} seconds ]"


class StoreStatsService:
    """Put and get figures of the store (see the module docstring)."""

    def __init__(
        self,
        boot_ms: int,
        put_total: Callable[[], int],
        put_bytes_total: Callable[[], int],
    ) -> None:
        self.boot_ms = boot_ms
        self.put_total = put_total
        self.put_bytes_total = put_bytes_total
        self.put_failed = 0
        self.put_time_max_ms = 0
        self.get_time_max_ms = 0
        self.get_found = 0
        self.get_miss = 0
        self.get_transferred = 0
        self._distribute = [0] * len(DISTRIBUTE_DESC)
        self._last_distribute: list[int] | None = None
        self._buckets = [0] * len(PERCENTILE_CEILINGS)
        self._last_buckets = [0] * len(PERCENTILE_CEILINGS)
        self._last_rotate_ms: int | None = None  # the first sample starts the minute
        # (ts ms, puts, found, missed, transferred)
        self._samples: deque[tuple[int, int, int, int, int]] = deque(
            maxlen=MAX_RECORDS_OF_SAMPLING + 1
        )

    # ------------------------------------------------------------------ feeding

    def on_put_turn(self, elapsed_ms: int, msgs: int) -> None:
        self._distribute[bisect.bisect_right(_DISTRIBUTE_BOUNDS, elapsed_ms)] += msgs
        self._buckets[bisect.bisect_left(PERCENTILE_CEILINGS, elapsed_ms)] += msgs
        if elapsed_ms > self.put_time_max_ms:
            self.put_time_max_ms = elapsed_ms

    def on_put_failed(self, n: int) -> None:
        self.put_failed += n

    def on_get(self, found: bool, msgs: int, elapsed_ms: int) -> None:
        if found:
            self.get_found += 1
            self.get_transferred += msgs
        else:
            self.get_miss += 1
        if elapsed_ms > self.get_time_max_ms:
            self.get_time_max_ms = elapsed_ms

    def sample(self, now_ms: int) -> None:
        self._samples.append(
            (now_ms, self.put_total(), self.get_found, self.get_miss, self.get_transferred)
        )
        if self._last_rotate_ms is None:
            self._last_rotate_ms = now_ms
        elif now_ms > self._last_rotate_ms + PRINT_TPS_INTERVAL_MS:
            self._last_rotate_ms = now_ms
            self._last_distribute, self._distribute = self._distribute, [0] * len(DISTRIBUTE_DESC)
            self._last_buckets, self._buckets = self._buckets, [0] * len(PERCENTILE_CEILINGS)

    # ------------------------------------------------------------------ figures

    def tps(self, window_s: int, slot: int) -> float | None:
        """Per second over the last ``window_s`` samples; None without enough samples."""
        samples = self._samples
        if len(samples) <= window_s:
            return None
        before, last = samples[-(window_s + 1)], samples[-1]
        if last[0] <= before[0]:  # a wall clock stepped back: no honest figure
            return None
        # upstream CallSnapshot.getTPS: (total / ms) * 1000
        return (last[slot] - before[slot]) / (last[0] - before[0]) * 1000

    def _triple(self, slot: int) -> str:
        parts = []
        for w in TPS_WINDOWS_S:
            tps = self.tps(w, slot)
            parts.append("" if tps is None else java_double(tps))
        return " ".join(parts)

    def _total_triple(self) -> str:
        return " ".join(
            java_double((self.tps(w, 2) or 0.0) + (self.tps(w, 3) or 0.0)) for w in TPS_WINDOWS_S
        )

    def distribution_text(self) -> str:
        last = self._last_distribute
        if last is None:
            return "null"
        return "".join(f"{d}:{n} " for d, n in zip(DISTRIBUTE_DESC, last, strict=True))

    def runtime_info(self, now_ms: int) -> dict[str, str]:
        """upstream StoreStatsService.getRuntimeInfo's keys and formats."""
        times = self.put_total() or 1  # upstream never reports fewer than 1
        size = self.put_bytes_total()
        return {
            "bootTimestamp": str(self.boot_ms),
            "runtime": runtime_text(now_ms - self.boot_ms),
            "putMessageEntireTimeMax": str(self.put_time_max_ms),
            "putMessageTimesTotal": str(times),
            "putMessageFailedTimes": str(self.put_failed),
            "putMessageSizeTotal": str(size),
            "putMessageDistributeTime": self.distribution_text(),
            "putMessageAverageSize": java_double(size / times),
            # dispatch runs inline with the append: no dispatch request buffer ever fills
            "dispatchMaxBuffer": "0",
            "getMessageEntireTimeMax": str(self.get_time_max_ms),
            "putTps": self._triple(1),
            "getFoundTps": self._triple(2),
            "getMissTps": self._triple(3),
            "getTotalTps": self._total_triple(),
            "getTransferredTps": self._triple(4),
            "putLatency99": java_fixed(percentile(self._last_buckets, 0.99), 2),
            "putLatency999": java_fixed(percentile(self._last_buckets, 0.999), 2),
        }
