"""Raft node helpers: a disk whose fsync takes (mock) time."""

from __future__ import annotations

import random
from typing import Any

import trio

from rocketrio.actors.raft.node import (
    IoRunner,
)


def slow_disk(seed: int) -> IoRunner:
    """Storage that takes 0.5-4 ms of (virtual) time per call, seeded: the node keeps stepping
    messages and applying commits while its own fsync is in flight."""
    rng = random.Random(seed)

    async def run(fn: Any, *args: Any) -> Any:
        await trio.sleep(rng.uniform(0.0005, 0.004))
        return fn(*args)

    return run
