"""The sleep of a periodic round whose period is a live config key.

A round that sleeps ``trio.sleep(config.interval)`` takes a new interval only after the sleep
it is in: set from 30 s to 2 s, the next round still comes up to 30 s later. `LiveInterval`
re-aims a sleep in progress instead: `sleep_from(start)` returns at ``start`` plus the period
as it is when the sleep ends, so a change (`changed`, or `reconfigure` with its key) wakes the
sleeper, which goes on sleeping to ``start`` plus the new period, or returns at once when that
is already past. Pure timing on Trio's clock; the period is read through a callable, so the
config object stays the one source of its value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio


class LiveInterval:
    """A period (seconds, read live through ``period_s``) and the sleep that follows it."""

    def __init__(self, period_s: Callable[[], float], key: str = "") -> None:
        self.period_s = period_s
        self.key = key  # the config key that holds it (`reconfigure`)
        self._changed = trio.Event()

    @classmethod
    def of_ms(cls, config: Any, key: str) -> LiveInterval:
        """The period in ``config``'s field ``key``, in milliseconds (a broker config key)."""
        return cls(lambda: getattr(config, key) / 1000, key)

    def changed(self) -> None:
        """The period changed: a sleep in progress re-aims at its start plus the new one."""
        self._changed.set()

    def reconfigure(self, config: Any, changed: frozenset[str]) -> None:
        """A live config change (boot/live_config.py `Reconfigurable`)."""
        if self.key in changed:
            self.changed()

    async def sleep_from(self, start: float) -> None:
        """Until ``start`` + the period (Trio's clock), following changes while asleep."""
        while True:
            self._changed = trio.Event()
            with trio.move_on_at(start + self.period_s()):
                await self._changed.wait()
                continue  # re-aimed: the period changed
            return
