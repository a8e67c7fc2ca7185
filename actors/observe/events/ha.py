"""Events of HA replication (actors/broker/ha/): replication connections and handshakes, the
SyncStateSet a master proposes, confirmOffset, and the epochs a replica records.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import LogEvent, event


@event("confirm_offset_moved")
@attrs.frozen(kw_only=True)
class ConfirmOffsetMoved(LogEvent):
    """Confirm offset moved: offset, side."""

    offset: int
    side: str


@event("epoch_recorded")
@attrs.frozen(kw_only=True)
class EpochRecorded(LogEvent):
    """Epoch recorded: master/replicated."""

    epoch: int
    start_offset: int
    source: str


@event("ha_connected")
@attrs.frozen(kw_only=True)
class HaConnected(LogEvent):
    """Ha connected: master/slave), peer, slave_id."""

    side: str
    peer: str
    slave_id: int | None = None
    async_learner: bool | None = None
    sync_from_last_file: bool | None = None


@event("ha_handshake")
@attrs.frozen(kw_only=True)
class HaHandshake(LogEvent):
    """Ha handshake: master side) / plan (slave."""

    side: str
    slave_id: int
    slave_offset: int
    start_offset: int


@event("master_ha_addr_unknown")
@attrs.frozen(kw_only=True)
class MasterHaAddrUnknown(LogEvent):
    """Master ha addr unknown."""

    master: str
    error: str


@event("sync_state_set_accepted")
@attrs.frozen(kw_only=True)
class SyncStateSetAccepted(LogEvent):
    """Sync state set accepted."""

    sync_state_set: list[int]
    epoch: int


@event("sync_state_set_proposed")
@attrs.frozen(kw_only=True)
class SyncStateSetProposed(LogEvent):
    """Sync state set proposed."""

    change: str
    proposed: list[int]
    applied: list[int]
    possible: list[int]
    epoch: int


@event("sync_state_set_refused", "warning")
@attrs.frozen(kw_only=True)
class SyncStateSetRefused(LogEvent):
    """Sync state set refused."""

    proposed: list[int]
    remark: str
