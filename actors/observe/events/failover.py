"""Events of slave acting master (RIP-32, actors/broker/failover/): the group's smallest live
id moving, a slave starting or stopping to act as master, escape of secondary messages to
another group's master and the strict (quorum) queue locks.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import LogEvent, event


@event("group_min_broker_id_moved")
@attrs.frozen(kw_only=True)
class GroupMinBrokerIdMoved(LogEvent):
    """The smallest live brokerId of this broker's group moved (source: member_group poll or
    a NameServer's notify)."""

    min_broker_id: int
    min_broker_addr: str | None
    offline_broker_addr: str | None
    acting: bool
    source: str


@event("acting_master_changed")
@attrs.frozen(kw_only=True)
class ActingMasterChanged(LogEvent):
    """This slave started (acting=true) or stopped acting as its group's master."""

    acting: bool
    min_broker_id: int


@event("pre_online_synced")
@attrs.frozen(kw_only=True)
class PreOnlineSynced(LogEvent):
    """A returning master took a slave's per-queue maxima of consumer and delay offsets."""

    slave: str
    offsets_raised: int
    delay_offsets_raised: int
    slave_offset_version: int


@event("pre_online_done")
@attrs.frozen(kw_only=True)
class PreOnlineDone(LogEvent):
    """A returning master finished pre-online and goes online (registers, special services)."""

    slaves: list[int]
    raised: int


@event("slave_pre_online_done")
@attrs.frozen(kw_only=True)
class SlavePreOnlineDone(LogEvent):
    """A returning slave finished pre-online and goes online (registers; acts if it is then the
    smallest live id): after its master's HA handshake, after merging the acting slave's
    offsets, or at once when no other member was alive."""

    reason: str
    master_addr: str | None
    pulled_from: list[str]


@event("escape_put_failed")
@attrs.frozen(kw_only=True)
class EscapePutFailed(LogEvent):
    """A secondary message could not be written to another group's master yet; it stays where it
    is and is tried again (never skipped)."""

    topic: str
    count: int
    error: str


@event("strict_lock_partial")
@attrs.frozen(kw_only=True)
class StrictLockPartial(LogEvent):
    """lockInStrictMode: queues locked on fewer than a quorum of the group; released again."""

    group: str
    quorum: int
    released: int


@event("pop_record_escape_failed")
@attrs.frozen(kw_only=True)
class PopRecordEscapeFailed(LogEvent):
    """A POP record (CK / ACK) of an acting slave could not be written to its pinned master of
    another group yet; kept and tried again (never skipped). ``attempts`` so far (logged at the
    first and at every power of two)."""

    master: str | None
    records: int
    attempts: int
    error: str
