"""A broker's life, as the broker declares it: open, start the services in order, serve, stop
gracefully (boot/shutdown.py), close; or crash like kill -9.

`Lifecycle` knows nothing of the broker's parts: the broker hands it what to do at each stage
(`Stages`). The services run in one nursery under a shielded scope, so a graceful stop runs its
steps while they still work and cancels them after; `crash` cancels everything at once with no
flush, no close and no unregister, so tests can check recovery.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.boot.shutdown import Step, run_steps
from rocketrio.actors.observe import events

# a service: started with ``await nursery.start(fn)`` (it calls task_status.started) or, when
# ``waits`` is False, with ``nursery.start_soon(fn)``
Starter = Callable[..., Awaitable[Any]]


@attrs.frozen
class Service:
    name: str
    run: Starter
    waits: bool = True  # started with nursery.start (it reports when it is ready)
    on_started: Callable[[Any], None] | None = None  # gets what it reported (a bound address)


@attrs.frozen
class Stages:
    """What the broker does at each stage of its life."""

    open: Callable[[], Awaitable[None]]
    # the client the services call other processes with (closed after them), and the services
    # in start order, given that client
    client: Callable[[], AbstractAsyncContextManager[Any]]
    services: Callable[[Any], Sequence[Service]]
    serving: Callable[[], None]  # every service started: announce the boot
    stop_first: Callable[[], None]  # stop taking requests (before the steps)
    stop_steps: Sequence[Step]
    close: Callable[[], Awaitable[None]]  # after a graceful stop: flush and close the store
    release: Callable[[], None]  # always: release the store lock


class Lifecycle:
    def __init__(self, stages: Stages, log: Any) -> None:
        self.stages = stages
        self.log = log
        self._services_scope = trio.CancelScope(shield=True)
        self._run_scope: trio.CancelScope | None = None
        self.crashed = False

    async def run(self, started: Callable[[], None]) -> None:
        """Open, serve until cancelled (or `crash`), then shut down gracefully; ``started`` is
        called once every service runs and the boot is announced."""
        st = self.stages
        await st.open()
        try:
            with trio.CancelScope() as self._run_scope:
                async with trio.open_nursery() as nursery:
                    await nursery.start(self._services)
                    st.serving()
                    started()
                    try:
                        await trio.sleep_forever()
                    finally:
                        if not self.crashed:
                            with trio.CancelScope(shield=True):
                                st.stop_first()
                                await run_steps(st.stop_steps, self.log)
                        self._services_scope.cancel()
        finally:
            try:
                if not self.crashed:
                    with trio.CancelScope(shield=True):
                        await st.close()
                    events.emit(self.log, events.ProcessShutdown(reason="cancelled"))
            finally:
                # a crash (like kill -9) loses the lock too: the kernel closes a dead
                # process's fds
                st.release()

    async def _services(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        with self._services_scope:
            async with self.stages.client() as client, trio.open_nursery() as n:
                for service in self.stages.services(client):
                    if not service.waits:
                        n.start_soon(service.run)
                        continue
                    started = await n.start(service.run)
                    if service.on_started is not None:
                        service.on_started(started)
                task_status.started()

    def crash(self) -> None:
        """Fault injection: stop at once, no flush, no close, no unregister (like kill -9)."""
        self.crashed = True
        self._services_scope.cancel()
        if self._run_scope is not None:
            self._run_scope.cancel()


def announce_boot(config: BrokerConfig, addr: str, broker_id: int | None, log: Any) -> None:
    """Upstream's boot line on stdout, and events.BrokerBoot.NAME in the log."""
    line = f"The broker[{config.brokerName}, {addr}] boot success. serializeType=JSON"
    if config.namesrvAddr:
        line += f" and name server is {config.namesrvAddr}"
    print(line, flush=True)
    boot = events.BrokerBoot(
        addr=addr,
        cluster=config.brokerClusterName,
        broker_id=broker_id,
        namesrv=config.namesrvAddr,
    )
    events.emit(log, boot)
