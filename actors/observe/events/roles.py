"""Events of the broker's role service (actors/broker/roles/): the BrokerId flow, the link to the
controller leader, master election requests and step-downs, the SyncStateSet a broker adopts,
the classic (non-controller) master and a slave's sync of its master's tables.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


@event("broker_id_applied")
@attrs.frozen(kw_only=True)
class BrokerIdApplied(LogEvent):
    """Broker id applied."""

    broker_id: int
    addr: str | None


@event("broker_id_loaded")
@attrs.frozen(kw_only=True)
class BrokerIdLoaded(LogEvent):
    """Broker id loaded."""

    broker_id: int
    path: str


@event("broker_id_reapplied", "warning")
@attrs.frozen(kw_only=True)
class BrokerIdReapplied(LogEvent):
    """Broker id reapplied."""

    broker_id: int
    remark: str


@event("broker_id_refused", "warning")
@attrs.frozen(kw_only=True)
class BrokerIdRefused(LogEvent):
    """Broker id refused."""

    broker_id: int
    remark: str


@event("broker_id_resume_from_temp")
@attrs.frozen(kw_only=True)
class BrokerIdResumeFromTemp(LogEvent):
    """Broker id resume from temp."""

    broker_id: int


@event("broker_id_temp_written")
@attrs.frozen(kw_only=True)
class BrokerIdTempWritten(LogEvent):
    """Broker id temp written."""

    broker_id: int


@event("broker_role_change_notified")
@attrs.frozen(kw_only=True)
class BrokerRoleChangeNotified(LogEvent):
    """Broker role change notified."""

    master_id: int
    master_addr: str
    epoch: int


@event("classic_master_found")
@attrs.frozen(kw_only=True)
class ClassicMasterFound(LogEvent):
    """Classic master found (None: the master went offline)."""

    master_addr: str | None
    previous: str | None = None


@event("classic_master_started")
@attrs.frozen(kw_only=True)
class ClassicMasterStarted(LogEvent):
    """Classic master started."""

    broker_role: str
    epoch: int
    start_offset: int


@event("controller_call_failed", "warning")
@attrs.frozen(kw_only=True)
class ControllerCallFailed(LogEvent):
    """Controller call failed."""

    call: str
    error: str


@event("controller_call_recovered")
@attrs.frozen(kw_only=True)
class ControllerCallRecovered(LogEvent):
    """Controller call recovered."""

    call: str


@event("controller_leader_changed")
@attrs.frozen(kw_only=True)
class ControllerLeaderChanged(LogEvent):
    """Controller leader changed."""

    leader: str
    previous: Json


@event("controller_leader_found")
@attrs.frozen(kw_only=True)
class ControllerLeaderFound(LogEvent):
    """Controller leader found."""

    leader: str


@event("controller_step_retry", "warning")
@attrs.frozen(kw_only=True)
class ControllerStepRetry(LogEvent):
    """Controller step retry."""

    step: str
    attempt: int
    error: str


@event("master_address_changed")
@attrs.frozen(kw_only=True)
class MasterAddressChanged(LogEvent):
    """Master address changed."""

    master_addr: str


@event("master_election_requested")
@attrs.frozen(kw_only=True)
class MasterElectionRequested(LogEvent):
    """Master election requested."""

    broker_id: int
    reason: str


@event("master_stepped_down", "warning")
@attrs.frozen(kw_only=True)
class MasterSteppedDown(LogEvent):
    """Master stepped down."""

    epoch: int
    reason: str


@event("slave_sync_failed", "warning")
@attrs.frozen(kw_only=True)
class SlaveSyncFailed(LogEvent):
    """Slave sync failed."""

    master: str
    error: str


@event("slave_synced")
@attrs.frozen(kw_only=True)
class SlaveSynced(LogEvent):
    """Slave synced."""

    master: str


@event("sync_state_set_adopted")
@attrs.frozen(kw_only=True)
class SyncStateSetAdopted(LogEvent):
    """Sync state set adopted."""

    sync_state_set: list[int]
    sync_state_set_epoch: Json


@event("catch_up_fence_holds", "warning")
@attrs.frozen(kw_only=True)
class CatchUpFenceHolds(LogEvent):
    """A broker that cut its CommitLog after a lost page takes no role (neither master nor slave,
    no election asked) and says why."""

    reason: str
    master_id: int | None
    epoch: int


@event("catch_up_fence_lifted")
@attrs.frozen(kw_only=True)
class CatchUpFenceLifted(LogEvent):
    """A broker that cut its CommitLog after a lost page caught up: the controller lists it in the
    SyncStateSet of a master elected after the cut; it is electable again."""

    master_id: int
    epoch: int
    lost_offset: int
    old_end: int
