"""`BrokerIO`: what a broker gets from outside, handed to every part that needs some of it.

The config object (live keys change it in place), the transport, the wall clock (message
store times), the random source, how blocking file work runs (a worker thread in production,
inline in simulations), the file system (the simulated disk in simulations), how a path's disk
space is read, and the broker's logger. Tests and the whole-cluster simulation build brokers
with their own `BrokerIO`, so one broker is the same code on a real or a simulated machine.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import attrs

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.store.disk_usage import DiskSpace, disk_space
from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.kernel.transport import Transport
from rocketrio.storage.fs import FileSystem


@attrs.frozen
class BrokerIO:
    config: BrokerConfig
    transport: Transport
    now_ms: Callable[[], int]  # the wall clock, ms since the epoch
    rng: random.Random
    run_blocking: RunBlocking
    fs: FileSystem
    log: Any
    disk: Callable[[str], DiskSpace | None] = disk_space
