"""Events of the NameServer (actors/namesrv/): broker registration and expiry bookkeeping, the
minimum broker id notifications, write permissions and its KV config file.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("broker_registered")
@attrs.frozen(kw_only=True)
class BrokerRegistered(LogEvent):
    """Broker registered."""

    cluster: str
    broker_id: int
    addr: str | None


@event("broker_registration_ignored", "warning")
@attrs.frozen(kw_only=True)
class BrokerRegistrationIgnored(LogEvent):
    """Broker registration ignored."""

    broker_id: int
    addr: str | None
    reason: str


@event("broker_unregistered")
@attrs.frozen(kw_only=True)
class BrokerUnregistered(LogEvent):
    """Broker unregistered."""

    broker_id: int | None
    addr: str | None
    reason: str
    detail: str | None = None


@event("kv_config_persist_failed", "error")
@attrs.frozen(kw_only=True)
class KvConfigPersistFailed(LogEvent):
    """Kv config persist failed."""

    path: str
    error: str


@event("min_broker_id_changed")
@attrs.frozen(kw_only=True)
class MinBrokerIdChanged(LogEvent):
    """Min broker id changed."""

    min_broker_id: int
    min_broker_addr: str
    notify: list[str]
    offline_addr: Json | None = None


@event("namesrv_boot")
@attrs.frozen(kw_only=True)
class NamesrvBoot(LogEvent):
    """Namesrv boot."""

    addr: str | None


@event("notify_min_broker_id_change_failed", "warning")
@attrs.frozen(kw_only=True)
class NotifyMinBrokerIdChangeFailed(LogEvent):
    """Notify min broker id change failed."""

    addr: str | None
    error: str


@event("write_perm_added")
@attrs.frozen(kw_only=True)
class WritePermAdded(LogEvent):
    """Write perm added."""

    topic_count: int
    by: str


@event("write_perm_wiped")
@attrs.frozen(kw_only=True)
class WritePermWiped(LogEvent):
    """Write perm wiped."""

    topic_count: int
    by: str
