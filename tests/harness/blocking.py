"""A `run_blocking` for actors under MockClock: blocking store and file work runs inline.

Brokers and NameServers run fsyncs and big reads through `trio.to_thread.run_sync` in
production. Under `MockClock(autojump_threshold=0)` a worker thread the clock cannot see lets it
jump past a request's timeout while a real fsync is in progress; running the work inline (after
one checkpoint) keeps mock time still during it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio


async def inline_blocking(fn: Callable[[], Any]) -> Any:
    """Run store/file work inline so the MockClock never jumps during a real fsync."""
    await trio.lowlevel.checkpoint()
    return fn()
