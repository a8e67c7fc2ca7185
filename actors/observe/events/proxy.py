"""Events of the gRPC proxy (actors/proxy/), cluster and local mode: start, failed calls,
transaction checks pushed to producers, auto-renewal of invisible time, endpoint look-ups.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import LogEvent, event


@event("proxy_started")
@attrs.frozen(kw_only=True)
class ProxyStarted(LogEvent):
    """The gRPC proxy (either mode) serves MessagingService on ``grpc`` (the address its
    routes give clients) for the brokers of ``namesrv``."""

    grpc: str
    namesrv: str


@event("proxy_call_failed", "error")
@attrs.frozen(kw_only=True)
class ProxyCallFailed(LogEvent):
    """A gRPC call's handler failed unexpectedly (a bug): the call was answered
    INTERNAL_SERVER_ERROR and the proxy went on serving."""

    method: str
    error: str


@event("proxy_transaction_check")
@attrs.frozen(kw_only=True)
class ProxyTransactionCheck(LogEvent):
    """A broker's transaction check for a half message sent through the proxy: pushed to the
    Telemetry stream of producer ``client_id``, or not (``pushed`` false: no producer of the
    topic connected, or its stream full; the broker asks again later)."""

    topic: str
    msg_id: str
    client_id: str | None = None
    pushed: bool


@event("proxy_renewed", "debug")
@attrs.frozen(kw_only=True)
class ProxyRenewed(LogEvent):
    """The proxy changed the invisible time of a message received with auto_renew: ``kind``
    renew (extended), stop (renewMaxTimeMillis passed: back with the retry backoff) or clear
    (its client went away: visible again soon)."""

    kind: str
    group: str
    topic: str
    invisible_ms: int


@event("proxy_renew_failed", "warning")
@attrs.frozen(kw_only=True)
class ProxyRenewFailed(LogEvent):
    """A change of invisible time for an auto_renew message failed; retried next period unless
    ``gave_up`` (then the broker's revive delivers it again after its invisible time)."""

    kind: str
    group: str
    topic: str
    error: str
    gave_up: bool


@event("proxy_group_config_failed", "warning")
@attrs.frozen(kw_only=True)
class ProxyGroupConfigFailed(LogEvent):
    """The proxy could not read a consumer group's subscription group config from the
    brokers: the group is treated as not FIFO (consumeMessageOrderly false) until a later
    read succeeds."""

    group: str


@event("proxy_local_started")
@attrs.frozen(kw_only=True)
class ProxyLocalStarted(LogEvent):
    """The gRPC proxy of local mode (`rocketrio broker --enable-proxy`) serves MessagingService
    on ``grpc`` inside the broker whose remoting address is ``addr``; it reaches that broker
    in-process (no socket), other brokers and the NameServers over the network."""

    grpc: str
    addr: str


@event("proxy_endpoint_lookup_failed", "warning")
@attrs.frozen(kw_only=True)
class ProxyEndpointLookupFailed(LogEvent):
    """A local-mode proxy could not learn whether the master at ``addr`` runs a proxy of its
    own (GET_BROKER_CONFIG failed): clients are sent here for that broker set's queues, and this
    proxy forwards, until a later lookup succeeds."""

    addr: str
    error: str
