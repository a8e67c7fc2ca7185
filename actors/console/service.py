"""`run_console`: the console as a service (what ``rocketrio console`` and ``rocketrio up`` run):
the admin clients, the poller, the action runner and the server, wired from `ConsoleOptions`."""

from __future__ import annotations

import contextlib

import attrs
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.controller_admin import ControllerAdmin, split_addrs
from rocketrio.actors.console.actions import ActionRunner
from rocketrio.actors.console.poller import ClusterPoller
from rocketrio.actors.console.server import ConsoleServer
from rocketrio.actors.kernel.transport import Transport


@attrs.frozen(kw_only=True)
class ConsoleOptions:
    namesrv: str  # "host:port;host:port"
    controller: str = ""  # "host:port;..." (empty: no controller section, no HA actions)
    listen: str = "127.0.0.1:8080"
    token: str | None = None  # None: read-only
    interval_s: float = 0.5
    max_viewers: int = 256
    allowed_origins: frozenset[str] = frozenset()


async def run_console(
    opts: ConsoleOptions,
    transport: Transport,
    *,
    task_status: trio.TaskStatus[ConsoleServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the console until cancelled; ``task_status.started`` gets the running server
    (its ``addr`` is where it listens)."""
    controllers = split_addrs(opts.controller)
    async with contextlib.AsyncExitStack() as stack:
        admin = await stack.enter_async_context(MQAdmin(opts.namesrv, transport, timeout=3.0))
        ctl = (
            await stack.enter_async_context(ControllerAdmin(controllers, opts.namesrv, transport))
            if controllers
            else None
        )
        server = ConsoleServer(
            poller=ClusterPoller(admin, controllers),
            actions=ActionRunner(admin, ctl, opts.token),
            transport=transport,
            interval_s=opts.interval_s,
            max_viewers=opts.max_viewers,
            allowed_origins=opts.allowed_origins,
        )
        async with trio.open_nursery() as n:
            await n.start(server.run, opts.listen)
            task_status.started(server)
