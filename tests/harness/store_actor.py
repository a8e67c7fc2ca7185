"""A `StoreActor` for actor tests: its blocking calls run inline on the Trio thread (after a
checkpoint, so a caller still yields as with a worker thread), a fixed wall clock, a periodic
flush far away and ASYNC_FLUSH unless asked; any other constructor argument passes through."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.storage.message_store import MessageStore

NOW_MS = 1_700_000_000_000


async def run_inline(fn: Callable[[], Any]) -> Any:
    """A `run_blocking` that runs ``fn`` on the Trio thread, after a checkpoint."""
    await trio.lowlevel.checkpoint()
    return fn()


def inline_store_actor(store: MessageStore, **over: Any) -> StoreActor:
    """A store actor over ``store`` (module doc); ``over`` replaces or adds arguments."""
    args: dict[str, Any] = {
        "sync_flush": False,
        "flush_interval_ms": 600_000,
        "sync_flush_timeout_ms": 60_000,
        "now_ms": lambda: NOW_MS,
        "run_blocking": run_inline,
    }
    return StoreActor(store, **{**args, **over})
