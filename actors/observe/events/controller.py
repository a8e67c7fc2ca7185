"""Events of the controller (actors/controller/) besides the elections the Spark job reads:
start, failed elections, master-death confirmation among the replicas, role-change notices.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("controller_boot")
@attrs.frozen(kw_only=True)
class ControllerBoot(LogEvent):
    """Controller boot."""

    addr: str | None
    peers: str
    self_id: str
    group: str


@event("elect_master_failed", "warning")
@attrs.frozen(kw_only=True)
class ElectMasterFailed(LogEvent):
    """Elect master failed."""

    code: str | None = None
    remark: str | None = None
    error: str | None = None


@event("master_death_confirmed")
@attrs.frozen(kw_only=True)
class MasterDeathConfirmed(LogEvent):
    """Master death confirmed: the leader asked the other controller replicas before deposing a
    master (upstream #4800) and a quorum agreed; the election goes ahead."""

    cluster: str | None = None
    broker_id: int | None = None
    reason: str | None = None
    elapsed_ms: float | None = None
    dead: list[str] | None = None
    alive: list[str] | None = None
    unknown: list[str] | None = None
    no_answer: list[str] | None = None
    quorum: int | None = None
    group_size: int | None = None
    errors: Json | None = None


@event("master_death_not_confirmed", "warning")
@attrs.frozen(kw_only=True)
class MasterDeathNotConfirmed(LogEvent):
    """Master death not confirmed: the other controller replicas still see the master (or too
    few answered); it stays master. Same fields as ``master_death_confirmed``."""

    cluster: str | None = None
    broker_id: int | None = None
    reason: str | None = None
    elapsed_ms: float | None = None
    dead: list[str] | None = None
    alive: list[str] | None = None
    unknown: list[str] | None = None
    no_answer: list[str] | None = None
    quorum: int | None = None
    group_size: int | None = None
    errors: Json | None = None


@event("notify_broker_role_changed_failed", "warning")
@attrs.frozen(kw_only=True)
class NotifyBrokerRoleChangedFailed(LogEvent):
    """Notify broker role changed failed."""

    addr: str | None
    error: str
