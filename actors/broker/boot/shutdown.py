"""A broker's graceful stop, as named steps run in order, each bounded.

Cancellation of `Broker.run` stops taking requests (SYSTEM_BUSY but for a client's leaving and
its offsets), answers nothing more from the hold services, then runs the broker's steps:
unregister from the NameServers, stop the schedule service, let the store actor answer every
queued put, answer held pulls and pops, give the connections a moment to write those answers,
persist consumer offsets and configs. A step that fails or takes longer than
`SHUTDOWN_STEP_TIMEOUT_S` is logged and the next one runs. The services stop and the store is
flushed and closed after these steps (broker.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import trio

from rocketrio.actors.kernel.remoting import Connection
from rocketrio.actors.observe import events

SHUTDOWN_STEP_TIMEOUT_S = 5.0
DRAIN_ROUNDS = 100
DRAIN_PAUSE_S = 0.01

Step = tuple[str, Callable[[], Awaitable[None]]]


async def run_steps(steps: Sequence[Step], log: Any) -> None:
    """Run each step with its timeout; a failure or a timeout is logged, never raised."""
    for name, step in steps:
        with trio.move_on_after(SHUTDOWN_STEP_TIMEOUT_S) as scope:
            try:
                await step()
            except Exception as e:
                events.emit(log, events.ShutdownStepFailed(step=name), exc_info=e)
        if scope.cancelled_caught:
            events.emit(log, events.ShutdownStepTimeout(step=name))


async def drain_connections(connections: Callable[[], Iterable[Connection]]) -> None:
    """Wait (up to a second) until every connection has written what it was given."""
    for _ in range(DRAIN_ROUNDS):
        if all(not conn.pending_output_bytes for conn in connections()):
            return
        await trio.sleep(DRAIN_PAUSE_S)
