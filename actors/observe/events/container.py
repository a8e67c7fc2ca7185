"""Events of the broker container (actors/broker/container/): its members joining, leaving,
failing and being restarted or given up. ``member`` is the broker's canonical name
(cluster_brokerName_brokerId, upstream's BrokerIdentity)."""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import LogEvent, event


@event("container_started")
@attrs.frozen(kw_only=True)
class ContainerStarted(LogEvent):
    """The container listens on ``addr`` and holds ``members`` (canonical names)."""

    addr: str
    members: list[str]


@event("container_broker_added")
@attrs.frozen(kw_only=True)
class ContainerBrokerAdded(LogEvent):
    """A broker joined the container and serves on ``addr`` (at start-up or by ADD_BROKER)."""

    member: str
    addr: str
    config_path: str
    is_master: bool


@event("container_broker_removed")
@attrs.frozen(kw_only=True)
class ContainerBrokerRemoved(LogEvent):
    """A broker left the container after a graceful stop (REMOVE_BROKER)."""

    member: str
    addr: str


@event("container_request_refused", "warning")
@attrs.frozen(kw_only=True)
class ContainerRequestRefused(LogEvent):
    """ADD_BROKER or REMOVE_BROKER refused; ``error`` is the remark the caller got."""

    request: str
    error: str


@event("container_broker_failed", "error")
@attrs.frozen(kw_only=True)
class ContainerBrokerFailed(LogEvent):
    """A member crashed or stopped on its own; the others keep running. ``restarting``: it is
    started again after ``backoff_s`` (``restart`` in a row), else it is given up and removed."""

    member: str
    error: str
    restarting: bool
    restart: int
    backoff_s: float | None = None
