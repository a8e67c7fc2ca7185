"""Trio's clock in milliseconds, for every component's timers, leases and liveness.

`monotonic_ms` is Trio's clock (monotonic, mocked in tests) in whole milliseconds, ROUNDED:
timers sleep until ``ms / 1000`` and compare the time they wake at with ``ms``; truncating
would read 1001 ms back as 1000 (the float 1.001 * 1000 is 1000.9999...), the deadline would
look unreached and a timer loop would spin. Only ever compare it with itself. (The wall clock,
for message store times and log ``ts``, is observe/logs.py's replaceable `wallclock_ms`.)
"""

from __future__ import annotations

import trio


def monotonic_ms() -> int:
    return round(trio.current_time() * 1000)
