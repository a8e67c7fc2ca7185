"""The container's own configuration (upstream BrokerContainerConfig keys) and the
``brokerConfigPaths`` list it starts its brokers from.

A container listens on its own port (upstream's default 10811) for ADD_BROKER, REMOVE_BROKER and
GET_BROKER_CONFIG; each broker it holds keeps the ports, store and config of its own file.
``namesrvAddr`` here is the default of every broker file that names none.
"""

from __future__ import annotations

import attrs

from rocketrio.protocol.config import ConfigError, positive

DEFAULT_CONTAINER_PORT = 10811  # upstream BrokerContainerStartup's listenPort


@attrs.define
class BrokerContainerConfig:
    brokerContainerIP: str = "127.0.0.1"
    listenPort: int = attrs.field(default=DEFAULT_CONTAINER_PORT, validator=positive)
    namesrvAddr: str = ""
    # ':'-separated broker config files started with the container (upstream's separator)
    brokerConfigPaths: str = ""
    rocketmqHome: str = "."
    logDir: str = "logs"
    configBlackList: str = "configBlackList;brokerConfigPaths"
    # rocketrio's own: how often in a row a crashed broker is restarted (each run shorter than
    # containerRestartStableMillis) before the container gives it up and removes it
    containerMaxRestarts: int = attrs.field(default=5, validator=positive)
    containerRestartStableMillis: int = attrs.field(default=60_000, validator=positive)

    @property
    def addr(self) -> str:
        return f"{self.brokerContainerIP}:{self.listenPort}"


def parse_config_paths(text: str, source: str = "brokerConfigPaths") -> list[str]:
    """The broker config files of ``a.conf:b.conf`` in order; empty text is no broker.
    An empty entry or a file named twice is a ConfigError naming the entry."""
    if not text.strip():
        return []
    paths: list[str] = []
    for i, raw in enumerate(text.split(":"), start=1):
        path = raw.strip()
        if not path:
            raise ConfigError(f"{source}: entry {i} of {text!r} is empty")
        if path in paths:
            raise ConfigError(f"{source}: {path} is named twice in {text!r}")
        paths.append(path)
    return paths


def join_config_paths(paths: list[str]) -> str:
    return ":".join(paths)
