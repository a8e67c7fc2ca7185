"""The records the Spark job reads (analysis/incidents.py reads them by these names and fields).

ARCHITECTURE rule 9: the events the incident analysis joins on (broker and controller boots,
heartbeat timeouts, elections, SyncStateSet and role changes, truncations, Raft roles and
terms, message traces) are listed in this one module, whichever role emits them, so the log
writer and the job cannot drift apart.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import LogEvent, event


@event("broker_boot")
@attrs.frozen(kw_only=True)
class BrokerBoot(LogEvent):
    """A broker process started serving."""

    addr: str | None
    cluster: str
    broker_id: int | None
    namesrv: str | None = None


@event("broker_expired", "warning")
@attrs.frozen(kw_only=True)
class BrokerExpired(LogEvent):
    """The NameServer dropped a broker whose heartbeats stopped."""

    cluster: str
    broker: str | None
    broker_id: int | None
    addr: str | None
    silent_ms: int
    timeout_ms: int


@event("broker_heartbeat_timeout", "warning")
@attrs.frozen(kw_only=True)
class BrokerHeartbeatTimeout(LogEvent):
    """The controller leader saw a broker's heartbeats stop (or its channel close)."""

    cluster: str
    broker: str | None
    broker_id: int
    addr: str | None
    silent_ms: int
    reason: str


@event("elect_master")
@attrs.frozen(kw_only=True)
class ElectMaster(LogEvent):
    """The controller applied an election: ``master_id`` (None: no master) at ``epoch``.
    ``term`` is the Raft term of the controller that proposed it, ``candidates`` the replicas it
    could choose from."""

    broker: str | None
    master_id: int | None
    master_addr: str | None
    epoch: int | None
    sync_state_set: list[int]
    reason: str
    term: int | None = None
    candidates: list[int] | None = None


@event("sync_state_set_changed")
@attrs.frozen(kw_only=True)
class SyncStateSetChanged(LogEvent):
    """The controller applied a new SyncStateSet for a broker set."""

    broker: str | None
    sync_state_set: list[int]
    epoch: int | None


@event("broker_role_changed")
@attrs.frozen(kw_only=True)
class BrokerRoleChanged(LogEvent):
    """A broker took a role (``SYNC_MASTER`` / ``SLAVE``) at a master epoch."""

    broker_id: int
    broker_role: str
    epoch: int | None
    master_id: int | None
    master_addr: str | None
    sync_state_set: list[int]
    reason: str | None = None
    start_offset: int | None = None
    reelected: bool | None = None
    was_master: bool | None = None


@event("master_first_write")
@attrs.frozen(kw_only=True)
class MasterFirstWrite(LogEvent):
    """The first message a new master acknowledged in its epoch (its CommitLog end offset)."""

    epoch: int
    offset: int


@event("ha_connection_closed")
@attrs.frozen(kw_only=True)
class HaConnectionClosed(LogEvent):
    """A replication connection ended (``side`` master or slave)."""

    side: str
    peer: str | None
    reason: str
    slave_id: int | None = None
    attempts: int | None = None


@event("ha_truncated")
@attrs.frozen(kw_only=True)
class HaTruncated(LogEvent):
    """A slave cut its CommitLog back to where it agrees with its master's epochs."""

    from_offset: int
    to_offset: int
    matched_epoch: int | None
    master_max: int
    master_epochs: list[str]
    epochs_now: list[str]


@event("ha_log_reset", "warning")
@attrs.frozen(kw_only=True)
class HaLogReset(LogEvent):
    """A slave discarded its whole local CommitLog (nothing matched its master)."""

    reason: str
    from_offset: int | None = None
    to_offset: int | None = None
    to_min: int | None = None
    master_max: int | None = None
    master_epochs: list[str] | None = None
    epochs_now: list[str] | None = None
    from_min: int | None = None
    from_max: int | None = None


@event("commitlog_truncated", "warning")
@attrs.frozen(kw_only=True)
class CommitlogTruncated(LogEvent):
    """Recovery or a command cut the CommitLog at ``offset``."""

    offset: int
    dropped_bytes: int
    reason: str
    segment: str | None = None
    deleted_segments: list[str] | None = None


@event("raft_role_changed")
@attrs.frozen(kw_only=True)
class RaftRoleChanged(LogEvent):
    """A controller replica's Raft role changed (core event)."""

    term: int
    raft_role: str
    leader: str | None = None
    reason: str | None = None
    seen_term: int | None = None


@event("raft_leader_elected")
@attrs.frozen(kw_only=True)
class RaftLeaderElected(LogEvent):
    """This controller replica won the election of ``term`` (core event)."""

    term: int
    leader: str
    last_index: int


@event("raft_term_increased")
@attrs.frozen(kw_only=True)
class RaftTermIncreased(LogEvent):
    """A candidate moved to a new term to ask for votes (core event)."""

    term: int
    previous_term: int


@event("raft_vote_result")
@attrs.frozen(kw_only=True)
class RaftVoteResult(LogEvent):
    """A vote round ended (core event); ``outcome`` is DLedger's parse result."""

    term: int
    outcome: str
    member_num: int
    answered_num: int
    valid_num: int
    accepted_num: int
    not_ready_term_num: int
    bigger_ledger_num: int
    already_has_leader: bool
    known_max_term_in_group: int


@event("raft_heartbeat_timeout", "warning")
@attrs.frozen(kw_only=True)
class RaftHeartbeatTimeout(LogEvent):
    """A follower heard nothing from its leader for too long (core event)."""

    term: int
    leader: str | None
    silent_ms: int


@event("raft_log_truncated")
@attrs.frozen(kw_only=True)
class RaftLogTruncated(LogEvent):
    """A follower cut uncommitted entries from ``index`` on (core event)."""

    term: int
    index: int
    dropped: int


@event("raft_snapshot_installed")
@attrs.frozen(kw_only=True)
class RaftSnapshotInstalled(LogEvent):
    """A follower installed its leader's snapshot (core event)."""

    term: int
    index: int
    snapshot_term: int
    leader: str


# client message tracing (ClientConfig.trace / `--trace`): one line per acked send and per
# delivered message, what the job joins to find acknowledged-but-lost messages and duplicates


@event("trace_send_acked")
@attrs.frozen(kw_only=True)
class TraceSendAcked(LogEvent):
    """A producer got SEND_OK for a message."""

    msg_id: str
    topic: str
    broker: str | None
    queue_id: int
    queue_offset: int
    producer_group: str
    client_id: str
    latency_ms: int  # from the send call to this acknowledgement, retries included
    # wall-clock ms when the send call began (read with the latency: the line's ts is stamped
    # later, by as much as a GC pause, so ``ts - latency_ms`` may be late; absent in old logs)
    sent_ms: int | None = None


@event("trace_send_failed", "warning")
@attrs.frozen(kw_only=True)
class TraceSendFailed(LogEvent):
    """A producer's send of one message failed for good (after its retries)."""

    topic: str
    broker: str | None
    producer_group: str
    client_id: str
    error: str


@event("trace_consumed")
@attrs.frozen(kw_only=True)
class TraceConsumed(LogEvent):
    """A consumer handed a message to the application."""

    msg_id: str
    topic: str
    broker: str | None
    queue_id: int
    queue_offset: int
    group: str
    client_id: str
    reconsume_times: int
