"""UPDATE_BROKER_CONFIG (25) on the container's own port (upstream BrokerContainerProcessor
.updateBrokerConfig): the container's own keys, not its members' (each member's port answers
that for its broker).

Upstream parses the body as properties, refuses any key of its black list with NO_PERMISSION
"Can not update config in black list." (brokerConfigPaths, rocketmqHome, configBlackList and
whatever ``configBlackList`` names), merges the rest into the container's config, bumps its
DataVersion and persists. rocketrio runs the same request through the kernel's `ConfigUpdater`
(actors/kernel/live_update.py), so it also refuses, in one INVALID_PARAMETER remark and with
nothing applied, an unknown key (upstream ignores it silently), a bad value, and a key the
running container reads only at start:

- live: ``namesrvAddr`` (the NameServers of the brokers added from then on whose files name
  none: running members keep theirs, as each was started with its own), ``containerMaxRestarts``
  and ``containerRestartStableMillis`` (every member's next failure is judged by the new values);
- restart: ``brokerContainerIP``, ``listenPort`` (the container's listening socket) and
  ``logDir`` (the process's log file, opened at start).

A change is written into the container's config file (``rocketrio container -c``) first, then
applied; a container started without a file applies it live only and says so in the remark.
Every applied change bumps the container's DataVersion (GET_BROKER_CONFIG's ``version``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from rocketrio.actors.broker.container.config import BrokerContainerConfig
from rocketrio.actors.kernel.live_update import ConfigChange, UpdatePolicy
from rocketrio.actors.kernel.live_update_service import ConfigUpdater
from rocketrio.actors.kernel.runtime import IoRunner

CONTAINER_POLICY: Final = UpdatePolicy(
    role="broker container",
    live_keys=frozenset({"namesrvAddr", "containerMaxRestarts", "containerRestartStableMillis"}),
    # upstream BrokerContainerProcessor.initConfigBlackList adds these to configBlackList
    always_black=frozenset({"brokerConfigPaths", "rocketmqHome", "configBlackList"}),
    restart_hint="change it in the container's config file and restart the container",
)


def container_updater(
    config: BrokerContainerConfig,
    *,
    config_path: str | None,
    apply: Callable[[tuple[ConfigChange, ...]], None],
    log: Any,
    run_blocking: IoRunner | None = None,
) -> ConfigUpdater[BrokerContainerConfig]:
    """The container's UPDATE_BROKER_CONFIG (module docstring); ``run_blocking`` writes the
    config file (a worker thread by default)."""
    return ConfigUpdater(
        config,
        CONTAINER_POLICY,
        config_path=lambda: config_path,
        apply=apply,
        io_runner=run_blocking,
        log=log.bind(actor="config"),
    )
