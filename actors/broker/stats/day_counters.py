"""The day counters of GET_BROKER_RUNTIME_INFO (upstream BrokerStats), kept right across
restarts. A pure core; the broker persists its `snapshot` in ``<storePathRootDir>/config/
brokerStats.json``.

Upstream keeps, for messages put and got outside system topics (BROKER_PUT_NUMS_WITHOUT_SYSTEM_
TOPIC / BROKER_GET_NUMS_WITHOUT_SYSTEM_TOPIC): the running total ("TodayNow"), the total at
the last local midnight ("TodayMorning") and at the midnight before ("YesterdayMorning");
mqadmin ``clusterList -m`` prints the differences (yesterday's and today's traffic). Upstream
loses them with every restart (the totals restart at 0); here they survive one:

- the running totals are this process's counts plus ``base``, the totals saved by the previous
  run (so they count since the store was first used, not since this boot);
- the file is written every `PERSIST_INTERVAL_S` when something changed, at every day change and
  at a clean shutdown (JsonConfigStore: atomic replace with a ``.bak``, torn-write safe). After a
  kill -9 the counts of the last interval at most are missing from the totals;
- the day boundary is local midnight in the broker process's time zone (upstream's
  ``Calendar.getInstance()`` is the JVM's default zone), checked at every stats sample (once a
  second) and on every runtime-info request; a restart on a later day shifts the saved
  mornings as the missed midnights would have (one day later: yesterday's morning becomes the
  saved today's morning and today's morning the saved total; two or more: both the saved
  total, since nothing was counted on the days in between).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import attrs

PERSIST_INTERVAL_S = 10.0
FILE_NAME = "brokerStats.json"

LocalDay = Callable[[int], dt.date]  # epoch ms -> the broker's local date


def local_day(epoch_ms: int) -> dt.date:
    """The date at ``epoch_ms`` in the process's local time zone."""
    return dt.datetime.fromtimestamp(epoch_ms / 1000).date()


@attrs.define(slots=True)
class DayCountersFile:
    """brokerStats.json: the totals when written and the mornings of ``day``."""

    day: str  # ISO date of the last local midnight the mornings were taken at
    msgPutTotal: int = 0
    msgGetTotal: int = 0
    msgPutTotalTodayMorning: int = 0
    msgPutTotalYesterdayMorning: int = 0
    msgGetTotalTodayMorning: int = 0
    msgGetTotalYesterdayMorning: int = 0


@attrs.define(slots=True)
class DayFigures:
    """The six runtime-info values."""

    msgPutTotalYesterdayMorning: int
    msgPutTotalTodayMorning: int
    msgPutTotalTodayNow: int
    msgGetTotalYesterdayMorning: int
    msgGetTotalTodayMorning: int
    msgGetTotalTodayNow: int


class DayCounters:
    """Mornings and totals; ``live_put`` / ``live_get`` are this process's counts."""

    def __init__(
        self,
        live_put: Callable[[], int],
        live_get: Callable[[], int],
        day_of: LocalDay = local_day,
    ) -> None:
        self.live_put = live_put
        self.live_get = live_get
        self.day_of = day_of
        self.base_put = 0
        self.base_get = 0
        self.day: dt.date | None = None
        self.put_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_today_morning = 0
        self.get_yesterday_morning = 0
        self._written: DayCountersFile | None = None

    def put_now(self) -> int:
        return self.base_put + self.live_put()

    def get_now(self) -> int:
        return self.base_get + self.live_get()

    def restore(self, saved: DayCountersFile | None, now_ms: int) -> None:
        """Adopt the previous run's file (None: first start), then catch up to today."""
        if saved is not None:
            self.base_put, self.base_get = saved.msgPutTotal, saved.msgGetTotal
            self.day = dt.date.fromisoformat(saved.day)
            self.put_today_morning = saved.msgPutTotalTodayMorning
            self.put_yesterday_morning = saved.msgPutTotalYesterdayMorning
            self.get_today_morning = saved.msgGetTotalTodayMorning
            self.get_yesterday_morning = saved.msgGetTotalYesterdayMorning
            self._written = saved
        self.roll(now_ms)

    def roll(self, now_ms: int) -> bool:
        """Take the mornings if local midnight passed since the last call; True if it did."""
        today = self.day_of(now_ms)
        if self.day is None:
            self.day = today
            return True
        if today <= self.day:  # same day, or the clock stepped back: keep the mornings
            return False
        put, get = self.put_now(), self.get_now()
        if (today - self.day).days == 1:
            self.put_yesterday_morning = self.put_today_morning
            self.get_yesterday_morning = self.get_today_morning
        else:  # whole days passed without this broker running: nothing counted on them
            self.put_yesterday_morning = put
            self.get_yesterday_morning = get
        self.put_today_morning, self.get_today_morning = put, get
        self.day = today
        return True

    def figures(self, now_ms: int) -> DayFigures:
        self.roll(now_ms)
        return DayFigures(
            self.put_yesterday_morning,
            self.put_today_morning,
            self.put_now(),
            self.get_yesterday_morning,
            self.get_today_morning,
            self.get_now(),
        )

    def snapshot(self) -> DayCountersFile | None:
        """What to write now, or None when the file already says it."""
        assert self.day is not None, "restore() first"
        snap = DayCountersFile(
            self.day.isoformat(),
            self.put_now(),
            self.get_now(),
            self.put_today_morning,
            self.put_yesterday_morning,
            self.get_today_morning,
            self.get_yesterday_morning,
        )
        if snap == self._written:
            return None
        self._written = snap
        return snap
