"""Simulated wall-clock time for tests on Trio's MockClock.

Brokers, clients and the simulator stamp messages with wall-clock milliseconds from one
injectable function (ARCHITECTURE.md rule 3); under MockClock that function is a fixed epoch
(`EPOCH_MS`, in 2023) plus Trio's clock, so a test's timestamps are the same on every run.
"""

from __future__ import annotations

import trio

EPOCH_MS = 1_700_000_000_000


def now_ms() -> int:
    """Wall-clock milliseconds of the simulation: `EPOCH_MS` plus Trio's (mock) clock."""
    return EPOCH_MS + int(trio.current_time() * 1000)
