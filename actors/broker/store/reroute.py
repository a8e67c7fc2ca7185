"""A hook the schedule and transaction services run before they put messages back to their real
topic: `Reroute` returns the messages to store here (the others went elsewhere), or why that
failed. Static topics supply one (static_topic/forward.py: a logic queue that moved to another
broker); without it every message is stored here (`store_here`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rocketrio.storage.store_types import MessageToStore

Reroute = Callable[[list[MessageToStore]], Awaitable[list[MessageToStore] | str]]


async def store_here(msgs: list[MessageToStore]) -> list[MessageToStore] | str:
    return msgs
