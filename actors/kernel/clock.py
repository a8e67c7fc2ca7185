"""The process's two clocks, in whole milliseconds.

- `monotonic_ms`: Trio's clock (`trio.current_time()`), for timeouts, periods, liveness and
  every deadline compared with itself; a test's `MockClock` drives it. ROUNDED to the
  millisecond, not truncated: a timer that sleeps until ``ms / 1000`` and then compares the
  time it wakes at with ``ms`` must read ``ms`` back. Truncating would read 1001 ms as 1000
  (the float 1.001 * 1000 is 1000.9999...), the deadline would look unreached and the timer
  loop would spin without letting the clock move (for ever under a MockClock; found by the
  cluster simulation, seed 1).
- `wallclock_ms`: milliseconds since the Unix epoch, for what leaves the process or outlives
  it (message store and born times, log ``ts``, DataVersion stamps). One injectable function
  (`set_wallclock`): simulations give every node the same fake epoch on the mock clock.

Cores take ``now_ms`` as an argument and never call these; shells read them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import trio


def monotonic_ms() -> int:
    """Trio's clock in whole milliseconds, rounded (see the module docstring for why)."""
    return round(trio.current_time() * 1000)


_wallclock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000  # noqa: E731


def set_wallclock(fn: Callable[[], int]) -> None:
    """Replace the wall clock (ms since the epoch) used for log ts and message store times."""
    global _wallclock_ms
    _wallclock_ms = fn


def wallclock_source() -> Callable[[], int]:
    """The current wall clock function (to restore after `set_wallclock`)."""
    return _wallclock_ms


def wallclock_ms() -> int:
    """Milliseconds since the Unix epoch, from the injectable wall clock."""
    return _wallclock_ms()
