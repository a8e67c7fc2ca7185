"""The log-event catalogue: the one declaration of every event a rocketrio process logs.

Each event is a frozen attrs record registered under its snake_case name with `@event`; its
typed fields are the fields of the JSON line (actors/observe/logs.py adds the common schema:
ts, level, node, role, actor, event). Cores build records, shells `emit` them. The Spark job
builds its read schema from this module (`field_types`), so the writer and the reader cannot
drift apart, and tests fail when code logs a name that is not here.

Field types are JSON types: ``str``, ``int``, ``float``, ``bool``, ``list[str]``,
``list[int]``, ``dict[str, int]``, `Json` (any JSON value, read back as its JSON text), each
optionally ``| None``. A field name means one thing (one type) across the catalogue.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, NewType

import attrs

#: any JSON value; the reader keeps it as JSON text
Json = NewType("Json", object)

#: the common schema of every line (written by actors/observe/logs.py, not by a record)
COMMON_FIELDS: dict[str, Any] = {
    "ts": str,
    "level": str,
    "node": str,
    "role": str,
    "actor": str,
    "event": str,
}
#: fields that bound loggers add to many lines (structlog ``bind``), and the exception text
CONTEXT_FIELDS: dict[str, Any] = {
    "broker": str | None,
    "client_id": str | None,
    "exception": str | None,
    "uncatalogued": bool | None,  # non-strict logging wrote a name the catalogue lacks
}

LEVELS = ("debug", "info", "warning", "error", "critical")


class LogEvent:
    """Base of every catalogued record: `NAME` is the ``event`` of its lines, `LEVEL` their
    level."""

    NAME: ClassVar[str]
    LEVEL: ClassVar[str]


CATALOGUE: dict[str, type[LogEvent]] = {}

_E = typing.TypeVar("_E", bound=type[LogEvent])


def event(name: str, level: str = "info") -> Callable[[_E], _E]:
    """Register an attrs record class as the catalogue's event ``name``."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r} for event {name!r}")

    def register(cls: _E) -> _E:
        if not attrs.has(cls):
            raise TypeError(f"{cls.__name__}: decorate with @attrs.frozen(kw_only=True) first")
        if name in CATALOGUE:
            raise ValueError(f"event {name!r} declared twice")
        cls.NAME, cls.LEVEL = name, level
        CATALOGUE[name] = cls
        return cls

    return register


def emit(log: Any, ev: LogEvent, *, level: str | None = None, **extra: Any) -> None:
    """Log one record through a structlog (bound) logger, at its `LEVEL` unless ``level``
    says otherwise (the same happening can be worse in one place). ``extra`` carries only
    `CONTEXT_FIELDS` and an exception's ``exc_info``."""
    fields = {f.name: getattr(ev, f.name) for f in attrs.fields(type(ev))}  # type: ignore[arg-type]
    getattr(log, level or ev.LEVEL)(ev.NAME, **fields, **extra)


def _resolve(cls: type[LogEvent]) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, globalns={**globals(), "Json": Json}, include_extras=False)
    return {f.name: hints[f.name] for f in attrs.fields(cls)}  # type: ignore[arg-type]


def record_fields(name: str) -> dict[str, Any]:
    """The declared fields (name -> type) of event ``name``."""
    return _resolve(CATALOGUE[name])


def strip_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` -> (X, True); anything else -> (tp, False)."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
        raise TypeError(f"unions other than X | None are not log field types: {tp}")
    return tp, False


def field_types() -> dict[str, Any]:
    """Every field any line can carry -> its type (without ``| None``): the common schema, the
    context fields, and the union of the records' fields. A name with two types is an error."""
    out: dict[str, Any] = {}
    where: dict[str, str] = {}
    sources: list[tuple[str, dict[str, Any]]] = [
        ("common schema", COMMON_FIELDS),
        ("context fields", CONTEXT_FIELDS),
        *((n, _resolve(c)) for n, c in sorted(CATALOGUE.items())),
    ]
    for source, fields in sources:
        for fname, tp in fields.items():
            base, _ = strip_optional(tp)
            if fname in out and {out[fname], base} == {str, Json}:
                out[fname] = Json  # both are text to the reader; Json keeps nested values
                continue
            if fname in out and out[fname] != base:
                raise TypeError(
                    f"log field {fname!r} is {out[fname]} in {where[fname]} but {base} in {source}"
                )
            out.setdefault(fname, base)
            where.setdefault(fname, source)
    return out


# ---------------------------------------------------------------- records the Spark job reads
# (actors/… emit them; analysis/incidents.py reads them by these names and fields)


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


# ---------------------------------------------------------------- every other event


@event("actor_crashed", "error")
@attrs.frozen(kw_only=True)
class ActorCrashed(LogEvent):
    """Actor crashed."""

    restarting: bool
    backoff_s: float | None = None
    restart: int | None = None
    error: str | None = None


@event("auth_acl_deleted")
@attrs.frozen(kw_only=True)
class AuthAclDeleted(LogEvent):
    """Auth acl deleted: deleteAcl removed a subject's policy for a resource."""

    subject: str | None = None
    resource: str | None = None
    by: str | None = None


@event("auth_acl_updated")
@attrs.frozen(kw_only=True)
class AuthAclUpdated(LogEvent):
    """Auth acl updated: createAcl / updateAcl."""

    subject: str | None = None
    by: str | None = None


@event("auth_no_users", "warning")
@attrs.frozen(kw_only=True)
class AuthNoUsers(LogEvent):
    """Auth no users."""

    hint: Json


@event("auth_refused")
@attrs.frozen(kw_only=True)
class AuthRefused(LogEvent):
    """Auth refused: NO_PERMISSION answered."""

    code: str
    remark: str
    user: str | None = None
    source_ip: str | None = None


@event("auth_synced")
@attrs.frozen(kw_only=True)
class AuthSynced(LogEvent):
    """Auth synced: a slave adopted its master's tables."""

    master: str
    users: int
    acls: int


@event("auth_user_created")
@attrs.frozen(kw_only=True)
class AuthUserCreated(LogEvent):
    """Auth user created."""

    user: str | None = None
    by: str | None = None


@event("auth_user_deleted")
@attrs.frozen(kw_only=True)
class AuthUserDeleted(LogEvent):
    """Auth user deleted."""

    user: str | None = None
    by: str | None = None


@event("auth_user_initialized")
@attrs.frozen(kw_only=True)
class AuthUserInitialized(LogEvent):
    """Auth user initialized: initAuthenticationUser / inner creds."""

    user: str


@event("auth_user_updated")
@attrs.frozen(kw_only=True)
class AuthUserUpdated(LogEvent):
    """Auth user updated: updateUser changed a user."""

    user: str | None = None
    by: str | None = None


@event("bad_frame", "warning")
@attrs.frozen(kw_only=True)
class BadFrame(LogEvent):
    """Bad frame: the connection is closed."""

    suppressed: int | None = None
    remote: str | None = None
    reason: str | None = None
    error: str | None = None


@event("broadcast_consume_dropped", "warning")
@attrs.frozen(kw_only=True)
class BroadcastConsumeDropped(LogEvent):
    """Broadcast consume dropped."""

    group: str
    count: int


@event("broker_connection_closed")
@attrs.frozen(kw_only=True)
class BrokerConnectionClosed(LogEvent):
    """Broker connection closed."""

    topics: list[str]


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


@event("broker_role_change_notified")
@attrs.frozen(kw_only=True)
class BrokerRoleChangeNotified(LogEvent):
    """Broker role change notified."""

    master_id: int
    master_addr: str
    epoch: int


@event("broker_unregistered")
@attrs.frozen(kw_only=True)
class BrokerUnregistered(LogEvent):
    """Broker unregistered."""

    broker_id: int | None
    addr: str | None
    reason: str
    detail: str | None = None


@event("checkpoint_corrupt", "warning")
@attrs.frozen(kw_only=True)
class CheckpointCorrupt(LogEvent):
    """Checkpoint corrupt: a checkpoint failed its CRC; full scan done."""

    path: str
    remark: str


@event("child_exited")
@attrs.frozen(kw_only=True)
class ChildExited(LogEvent):
    """A child of `rocketrio up` exited (``exit_code`` None: killed by ``signal``); ``restart``
    is the restart this exit leads to, ``gave_up`` when `up` stopped restarting it."""

    stopping: bool
    gave_up: bool
    restart: int | None = None
    next_delay_s: float | None = None
    restarts: int | None = None
    child: str | None = None
    pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    ran_s: float | None = None


@event("child_started")
@attrs.frozen(kw_only=True)
class ChildStarted(LogEvent):
    """`rocketrio up` started a child (``restart`` 0: its first start)."""

    child: str
    pid: int
    restart: int


@event("child_stop_escalated", "warning")
@attrs.frozen(kw_only=True)
class ChildStopEscalated(LogEvent):
    """Child stop escalated: SIGKILL after the grace."""

    child: str
    pid: int
    grace_s: Json
    unkillable_after_s: Json | None = None


@event("classic_master_found")
@attrs.frozen(kw_only=True)
class ClassicMasterFound(LogEvent):
    """Classic master found."""

    master_addr: str
    previous: str | None = None


@event("classic_master_started")
@attrs.frozen(kw_only=True)
class ClassicMasterStarted(LogEvent):
    """Classic master started."""

    broker_role: str
    epoch: int
    start_offset: int


@event("commitlog_record_corrupt", "error")
@attrs.frozen(kw_only=True)
class CommitlogRecordCorrupt(LogEvent):
    """A record failed its check on the read path and was not served."""

    segment: str
    offset: int
    reason: str
    topic: str
    queue_id: int
    queue_offset: int
    group: str


@event("commitlog_recovered")
@attrs.frozen(kw_only=True)
class CommitlogRecovered(LogEvent):
    """Commitlog recovered."""

    max_offset: int
    dropped_bytes: int
    redispatched: int
    cq_entries_dropped: int
    took_ms: int
    confirm_offset: int
    epochs: list[str]
    unclean_shutdown: bool
    scanned_from: int
    bytes_scanned: int
    checkpoint: str
    truncated_at: int | None = None
    segment: str | None = None
    reason: str | None = None


@event("config_loaded_from_backup", "warning")
@attrs.frozen(kw_only=True)
class ConfigLoadedFromBackup(LogEvent):
    """Config loaded from backup."""

    file: Json


@event("config_update_refused", "warning")
@attrs.frozen(kw_only=True)
class ConfigUpdateRefused(LogEvent):
    """Config update refused."""

    config_role: str
    keys: list[str]
    code: str
    remark: str
    by: str


@event("config_updated")
@attrs.frozen(kw_only=True)
class ConfigUpdated(LogEvent):
    """Config updated: started without a config file), by: one per key."""

    config_role: str
    key: Json
    old: str
    new: str
    persisted_to: Json
    by: str


@event("confirm_offset_moved")
@attrs.frozen(kw_only=True)
class ConfirmOffsetMoved(LogEvent):
    """Confirm offset moved: offset, side."""

    offset: int
    side: str


@event("connection_idle_closed")
@attrs.frozen(kw_only=True)
class ConnectionIdleClosed(LogEvent):
    """Connection idle closed: info."""

    remote: str
    idle_s: float


@event("connection_read_timeout")
@attrs.frozen(kw_only=True)
class ConnectionReadTimeout(LogEvent):
    """Connection read timeout."""

    suppressed: int | None = None
    remote: str | None = None
    buffered: int | None = None
    missing: int | None = None
    timeout_s: float | None = None


@event("connection_refused")
@attrs.frozen(kw_only=True)
class ConnectionRefused(LogEvent):
    """Connection refused: over a connection cap (``reason``, ``why``)."""

    remote: str
    reason: str
    why: str
    suppressed: int | None = None


@event("metrics_request_failed", "warning")
@attrs.frozen(kw_only=True)
class MetricsRequestFailed(LogEvent):
    """A scrape of /metrics was not a well-formed HTTP request, or its connection broke."""

    error: str


@event("metrics_collect_failed", "error")
@attrs.frozen(kw_only=True)
class MetricsCollectFailed(LogEvent):
    """A collector raised while /metrics was rendered: that scrape is answered 500 and the
    server goes on (a metrics bug must not stop the broker, controller or NameServer)."""

    error: str


@event("metrics_listening")
@attrs.frozen(kw_only=True)
class MetricsListening(LogEvent):
    """The Prometheus endpoint is up (``addr``: where /metrics is served)."""

    addr: str


@event("disk_full", "error")
@attrs.frozen(kw_only=True)
class DiskFull(LogEvent):
    """The CommitLog's disk is used above diskSpaceWarningLevelRatio, or (``reason`` set) a
    store write or fsync failed on a full disk (ENOSPC): sends are refused until it is not
    (``disk_usage``: upstream's "CL: .. CQ: .. INDEX: .." ratios)."""

    disk_usage: str
    warning_ratio: float
    reason: str | None = None


@event("store_fenced_until_restart", "critical")
@attrs.frozen(kw_only=True)
class StoreFencedUntilRestart(LogEvent):
    """A master's CommitLog holds a record from ``offset`` that a failed fsync on a full disk
    lost with its page (its check failed when it was read back): its slaves may hold those
    bytes, so the master takes no writes until it restarts (store_actor.py)."""

    offset: int
    reason: str


@event("store_recovery_progress")
@attrs.frozen(kw_only=True)
class StoreRecoveryProgress(LogEvent):
    """Recovery is still running (logged every 64 MiB of CommitLog it re-dispatches into the
    ConsumeQueues and the index, e.g. when the index is rebuilt): ``done_bytes`` of
    ``total_bytes``, ``phase`` names the step."""

    phase: str
    done_bytes: int
    total_bytes: int
    percent: int


@event("commitlog_deleted")
@attrs.frozen(kw_only=True)
class CommitLogDeleted(LogEvent):
    """Retention deleted CommitLog segments (and the ConsumeQueue files and index records that
    only pointed into them); ``min_offset`` is the new oldest CommitLog offset. ``trigger``:
    time (deleteWhen), space (diskMaxUsedSpaceRatio), forced (diskSpaceCleanForciblyRatio) or
    manual."""

    segments: str
    min_offset: int
    trigger: str
    forced: bool


@event("delete_files_manually", "warning")
@attrs.frozen(kw_only=True)
class DeleteFilesManually(LogEvent):
    """An operator asked for retention now (`admin deleteExpiredCommitLog`): the next
    ``rounds`` clean-up rounds delete expired segments whatever deleteWhen says."""

    rounds: int


@event("retention_held", "warning")
@attrs.frozen(kw_only=True)
class RetentionHeld(LogEvent):
    """An expired segment is kept because a reader still needs it: the store has not made its
    ConsumeQueue entries durable yet, or a replica fetching from this master has not
    acknowledged it (``safe_end``: the offset deletion may not pass). Logged once per hold."""

    segment_base: int
    safe_end: int
    dispatch_flushed: int


@event("disk_space_recovered")
@attrs.frozen(kw_only=True)
class DiskSpaceRecovered(LogEvent):
    """The CommitLog's disk is back at or below diskSpaceWarningLevelRatio: sends go in again."""

    disk_usage: str
    warning_ratio: float


@event("console_listening")
@attrs.frozen(kw_only=True)
class ConsoleListening(LogEvent):
    """The web console serves its page and websocket at ``url``; ``actions``: a token file
    was given, so actions with that token are carried out."""

    url: str
    actions: bool


@event("console_action")
@attrs.frozen(kw_only=True)
class ConsoleAction(LogEvent):
    """Audit: an admin action asked through the console, carried out (``ok``) or refused
    (``error``), with who asked (``peer``) and the arguments as sent."""

    action: str
    peer: str
    ok: bool
    error: str | None = None
    arguments: Json


@event("console_viewer_refused", "warning")
@attrs.frozen(kw_only=True)
class ConsoleViewerRefused(LogEvent):
    """A websocket or HTTP request the console turned away (bad Origin, too many viewers, a
    viewer too slow to read, a bad request)."""

    peer: str
    reason: str


@event("console_failed", "error")
@attrs.frozen(kw_only=True)
class ConsoleFailed(LogEvent):
    """The console inside `rocketrio up` stopped on an error; the cluster runs on without it."""

    error: str
    traceback: str


@event("console_poll_failed", "warning")
@attrs.frozen(kw_only=True)
class ConsolePollFailed(LogEvent):
    """A part of the cluster the console could not read this round (it keeps polling)."""

    addr: str
    error: str


@event("consume_bad_status", "warning")
@attrs.frozen(kw_only=True)
class ConsumeBadStatus(LogEvent):
    """Consume bad status."""

    group: str
    status: Json


@event("consume_failed", "warning")
@attrs.frozen(kw_only=True)
class ConsumeFailed(LogEvent):
    """Consume failed."""

    group: str
    error: str


@event("consume_queue_rebuilt")
@attrs.frozen(kw_only=True)
class ConsumeQueueRebuilt(LogEvent):
    """Consume queue rebuilt."""


@event("consumer_group_changed")
@attrs.frozen(kw_only=True)
class ConsumerGroupChanged(LogEvent):
    """Consumer group changed."""

    group: str
    members: list[str]


@event("consumer_ids_changed")
@attrs.frozen(kw_only=True)
class ConsumerIdsChanged(LogEvent):
    """Consumer ids changed."""

    group: str


@event("controller_boot")
@attrs.frozen(kw_only=True)
class ControllerBoot(LogEvent):
    """Controller boot."""

    addr: str | None
    peers: str
    self_id: str
    group: str


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


@event("elect_master_failed", "warning")
@attrs.frozen(kw_only=True)
class ElectMasterFailed(LogEvent):
    """Elect master failed."""

    code: str | None = None
    remark: str | None = None
    error: str | None = None


@event("epoch_file_loaded_from_backup", "warning")
@attrs.frozen(kw_only=True)
class EpochFileLoadedFromBackup(LogEvent):
    """Epoch file loaded from backup."""

    path: str


@event("epoch_recorded")
@attrs.frozen(kw_only=True)
class EpochRecorded(LogEvent):
    """Epoch recorded: master/replicated."""

    epoch: int
    start_offset: int
    source: str


@event("flush_slow", "warning")
@attrs.frozen(kw_only=True)
class FlushSlow(LogEvent):
    """Flush slow."""

    duration_ms: int


@event("get_consumer_ids_failed", "warning")
@attrs.frozen(kw_only=True)
class GetConsumerIdsFailed(LogEvent):
    """Get consumer ids failed."""

    group: str
    error: str


@event("group_offset_cloned")
@attrs.frozen(kw_only=True)
class GroupOffsetCloned(LogEvent):
    """Group offset cloned."""

    src_group: Json
    dest_group: Json
    topics: list[str]


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


@event("register_broker_failed", "warning")
@attrs.frozen(kw_only=True)
class RegisterBrokerFailed(LogEvent):
    """A broker could not register with a NameServer (logged once until it succeeds again)."""

    namesrv: str
    error: str


@event("broker_heartbeat_failed", "warning")
@attrs.frozen(kw_only=True)
class BrokerHeartbeatFailed(LogEvent):
    """A broker's heartbeat to a NameServer failed (logged once until it succeeds again)."""

    namesrv: str
    error: str


@event("heartbeat_failed", "warning")
@attrs.frozen(kw_only=True)
class HeartbeatFailed(LogEvent):
    """Heartbeat failed."""

    error: str


@event("held_pull_failed", "error")
@attrs.frozen(kw_only=True)
class HeldPullFailed(LogEvent):
    """Held pull failed."""

    topic: str


@event("config_persist_failed", "error")
@attrs.frozen(kw_only=True)
class ConfigPersistFailed(LogEvent):
    """A broker config file (topics, groups, consumer offsets, day counters ...) could not be
    written because the disk is full; the previous file is intact and the write is retried."""

    path: str
    error: str


@event("kv_config_persist_failed", "error")
@attrs.frozen(kw_only=True)
class KvConfigPersistFailed(LogEvent):
    """Kv config persist failed."""

    path: str
    error: str


@event("master_address_changed")
@attrs.frozen(kw_only=True)
class MasterAddressChanged(LogEvent):
    """Master address changed."""

    master_addr: str


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


@event("master_election_requested")
@attrs.frozen(kw_only=True)
class MasterElectionRequested(LogEvent):
    """Master election requested."""

    broker_id: int
    reason: str


@event("master_ha_addr_unknown")
@attrs.frozen(kw_only=True)
class MasterHaAddrUnknown(LogEvent):
    """Master ha addr unknown."""

    master: str
    error: str


@event("master_stepped_down", "warning")
@attrs.frozen(kw_only=True)
class MasterSteppedDown(LogEvent):
    """Master stepped down."""

    epoch: int
    reason: str


@event("message_to_dlq")
@attrs.frozen(kw_only=True)
class MessageToDlq(LogEvent):
    """Message to dlq."""

    group: str
    msg_id: str
    reconsume_times: int
    topic: str | None = None
    dlq_msg_id: str | None = None


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


@event("notify_broker_role_changed_failed", "warning")
@attrs.frozen(kw_only=True)
class NotifyBrokerRoleChangedFailed(LogEvent):
    """Notify broker role changed failed."""

    addr: str | None
    error: str


@event("notify_min_broker_id_change_failed", "warning")
@attrs.frozen(kw_only=True)
class NotifyMinBrokerIdChangeFailed(LogEvent):
    """Notify min broker id change failed."""

    addr: str | None
    error: str


@event("offset_reset")
@attrs.frozen(kw_only=True)
class OffsetReset(LogEvent):
    """A group's offsets were reset (``offsets``: "broker:queue" -> offset) and its members told."""

    group: str
    topic: str
    timestamp: int
    force: bool
    offsets: dict[str, int]
    member_count: int


@event("offset_reset_applied")
@attrs.frozen(kw_only=True)
class OffsetResetApplied(LogEvent):
    """A consumer restarted its queues at reset offsets (``offsets``: "broker:queue" -> offset)."""

    group: str
    offsets: dict[str, int]


@event("orderly_lock_failed", "warning")
@attrs.frozen(kw_only=True)
class OrderlyLockFailed(LogEvent):
    """An orderly consumer could not ask a broker for its queue locks (LOCK_BATCH_MQ or
    UNLOCK_BATCH_MQ); the locks it holds expire unless a later call renews them."""

    group: str
    queues: list[str]
    error: str


@event("orderly_lock_lost", "warning")
@attrs.frozen(kw_only=True)
class OrderlyLockLost(LogEvent):
    """The broker no longer grants an orderly consumer these queues (another client holds
    them): their consumption stops until the lock is granted again."""

    group: str
    queues: list[str]


@event("orderly_queue_unlocked")
@attrs.frozen(kw_only=True)
class OrderlyQueueUnlocked(LogEvent):
    """An orderly consumer gave a queue up after a rebalance: its last batch finished, its
    offset was committed, then UNLOCK_BATCH_MQ."""

    group: str
    mq: str
    offset: int


@event("persist_offset_failed", "warning")
@attrs.frozen(kw_only=True)
class PersistOffsetFailed(LogEvent):
    """Persist offset failed."""

    group: str
    mq: str
    error: str


@event("process_failed", "error")
@attrs.frozen(kw_only=True)
class ProcessFailed(LogEvent):
    """Process failed: failed after it started; exits 1."""

    error: str | None = None
    traceback: str | None = None


@event("process_shutdown")
@attrs.frozen(kw_only=True)
class ProcessShutdown(LogEvent):
    """Process shutdown."""

    reason: str


@event("pull_failed", "warning")
@attrs.frozen(kw_only=True)
class PullFailed(LogEvent):
    """Pull failed."""

    group: str
    mq: str
    error: str


@event("pull_hold_refused", "warning")
@attrs.frozen(kw_only=True)
class PullHoldRefused(LogEvent):
    """Pull hold refused: over a held-pull bound."""

    topic: str
    queue_id: int
    group: str
    why: Json
    suppressed: int


@event("pull_moved")
@attrs.frozen(kw_only=True)
class PullMoved(LogEvent):
    """Pull moved."""

    group: str
    mq: str
    old: str
    new: str


@event("pull_offset_illegal", "warning")
@attrs.frozen(kw_only=True)
class PullOffsetIllegal(LogEvent):
    """Pull offset illegal."""

    group: str
    mq: str
    offset: int
    next_offset: Json


@event("put_failed", "error")
@attrs.frozen(kw_only=True)
class PutFailed(LogEvent):
    """Put failed."""

    topic: str


@event("query_consumer_offset_failed", "warning")
@attrs.frozen(kw_only=True)
class QueryConsumerOffsetFailed(LogEvent):
    """Query consumer offset failed."""

    group: str
    mq: str
    error: str


@event("raft_leader_ready")
@attrs.frozen(kw_only=True)
class RaftLeaderReady(LogEvent):
    """Raft leader ready: the leader applied its own no-op."""

    term: int
    index: int
    raft_id: str | None = None


@event("raft_log_recovered", "warning")
@attrs.frozen(kw_only=True)
class RaftLogRecovered(LogEvent):
    """Raft log recovered."""

    torn_tail: Json
    removed_files: Json
    log_discarded_for_snapshot: Json


@event("raft_message_malformed", "warning")
@attrs.frozen(kw_only=True)
class RaftMessageMalformed(LogEvent):
    """Raft message malformed."""

    error: str


@event("raft_node_started")
@attrs.frozen(kw_only=True)
class RaftNodeStarted(LogEvent):
    """Raft node started."""

    term: int
    snapshot_index: int
    last_index: int
    voted_for: str | None = None
    raft_id: str | None = None


@event("raft_peer_reachable")
@attrs.frozen(kw_only=True)
class RaftPeerReachable(LogEvent):
    """Raft peer reachable."""

    peer: str
    addr: str | None
    raft_id: str | None = None


@event("raft_peer_unreachable", "warning")
@attrs.frozen(kw_only=True)
class RaftPeerUnreachable(LogEvent):
    """Raft peer unreachable."""

    peer: str
    addr: str | None
    error: str
    raft_id: str | None = None


@event("raft_snapshot_taken")
@attrs.frozen(kw_only=True)
class RaftSnapshotTaken(LogEvent):
    """Raft snapshot taken."""

    index: int
    term: int
    size: int
    raft_id: str | None = None


@event("rebalance")
@attrs.frozen(kw_only=True)
class Rebalance(LogEvent):
    """Rebalance."""

    group: str
    topic: str
    queues: list[str]


@event("rebalance_failed", "warning")
@attrs.frozen(kw_only=True)
class RebalanceFailed(LogEvent):
    """Rebalance failed."""

    group: str
    topic: str
    error: str


@event("rebalance_no_route", "warning")
@attrs.frozen(kw_only=True)
class RebalanceNoRoute(LogEvent):
    """Rebalance no route."""

    group: str
    topic: str


@event("registered_to_namesrv")
@attrs.frozen(kw_only=True)
class RegisteredToNamesrv(LogEvent):
    """Registered to namesrv."""

    namesrv: str


@event("request_failed", "error")
@attrs.frozen(kw_only=True)
class RequestFailed(LogEvent):
    """Request failed."""

    code: str
    remote: str


@event("request_refused_busy", "warning")
@attrs.frozen(kw_only=True)
class RequestRefusedBusy(LogEvent):
    """Request refused busy."""

    code: str
    remote: str
    in_flight: Json
    limit: Json
    suppressed: int


@event("reset_offset_bad_request", "warning")
@attrs.frozen(kw_only=True)
class ResetOffsetBadRequest(LogEvent):
    """Reset offset bad request."""

    error: str


@event("reset_offset_no_consumer")
@attrs.frozen(kw_only=True)
class ResetOffsetNoConsumer(LogEvent):
    """Reset offset no consumer."""

    group: str
    topic: str


@event("route_update_failed", "warning")
@attrs.frozen(kw_only=True)
class RouteUpdateFailed(LogEvent):
    """Route update failed."""

    topic: str
    error: str


@event("send_acked")
@attrs.frozen(kw_only=True)
class SendAcked(LogEvent):
    """Send acked: topic, queue_id, offset, count."""

    topic: str
    queue_id: int
    offset: int
    commitlog_offset: int
    count: int


@event("send_back_failed", "warning")
@attrs.frozen(kw_only=True)
class SendBackFailed(LogEvent):
    """Send back failed."""

    group: str
    error: str


@event("send_callback_failed", "error")
@attrs.frozen(kw_only=True)
class SendCallbackFailed(LogEvent):
    """Send callback failed."""


@event("send_failed", "warning")
@attrs.frozen(kw_only=True)
class SendFailed(LogEvent):
    """Send failed."""

    topic: str
    addr: str | None
    attempt: int
    error: str


@event("send_not_acked", "warning")
@attrs.frozen(kw_only=True)
class SendNotAcked(LogEvent):
    """Send not acked: reason, count."""

    reason: str
    count: int
    epoch: int


@event("shutdown_step_failed", "error")
@attrs.frozen(kw_only=True)
class ShutdownStepFailed(LogEvent):
    """Shutdown step failed."""

    step: str


@event("shutdown_step_timeout", "warning")
@attrs.frozen(kw_only=True)
class ShutdownStepTimeout(LogEvent):
    """Shutdown step timeout."""

    step: str


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


@event("start_offset_failed", "warning")
@attrs.frozen(kw_only=True)
class StartOffsetFailed(LogEvent):
    """Start offset failed."""

    group: str
    mq: str
    error: str


@event("startup_failed", "error")
@attrs.frozen(kw_only=True)
class StartupFailed(LogEvent):
    """Startup failed: the process exits non-zero."""

    error: str | None = None
    traceback: str | None = None


@event("store_corrupt", "error")
@attrs.frozen(kw_only=True)
class StoreCorrupt(LogEvent):
    """Store corrupt: recovery found damage it must not cut; start refused."""

    store: Json
    error: str
    remark: str


@event("sync_state_set_accepted")
@attrs.frozen(kw_only=True)
class SyncStateSetAccepted(LogEvent):
    """Sync state set accepted."""

    sync_state_set: list[int]
    epoch: int


@event("sync_state_set_adopted")
@attrs.frozen(kw_only=True)
class SyncStateSetAdopted(LogEvent):
    """Sync state set adopted."""

    sync_state_set: list[int]
    sync_state_set_epoch: Json


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


@event("topic_adopted_from_queues", "warning")
@attrs.frozen(kw_only=True)
class TopicAdoptedFromQueues(LogEvent):
    """Topic adopted from queues."""

    topic: str
    queue_count: int


@event("topic_deleted")
@attrs.frozen(kw_only=True)
class TopicDeleted(LogEvent):
    """Topic deleted."""

    topic: str
    cluster: str | None = None


@event("topic_updated")
@attrs.frozen(kw_only=True)
class TopicUpdated(LogEvent):
    """Topic updated."""

    topic: str
    read_queues: int
    write_queues: int
    perm: int


@event("truncating_below_confirm_offset", "error")
@attrs.frozen(kw_only=True)
class TruncatingBelowConfirmOffset(LogEvent):
    """Truncating below confirm offset."""

    offset: int
    confirm_offset: int
    reason: str


@event("unregister_broker_failed", "warning")
@attrs.frozen(kw_only=True)
class UnregisterBrokerFailed(LogEvent):
    """Unregister broker failed."""

    namesrv: str
    error: str


@event("unregister_client_failed", "warning")
@attrs.frozen(kw_only=True)
class UnregisterClientFailed(LogEvent):
    """Unregister client failed."""

    error: str


@event("up_started")
@attrs.frozen(kw_only=True)
class UpStarted(LogEvent):
    """Up started."""

    mode: str
    dir: str
    pid: int
    ports: Json


@event("up_stopped")
@attrs.frozen(kw_only=True)
class UpStopped(LogEvent):
    """Up stopped."""

    reason: str
    exit_code: int


@event("up_stopping")
@attrs.frozen(kw_only=True)
class UpStopping(LogEvent):
    """Up stopping."""

    reason: str


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


@event("pop_revived")
@attrs.frozen(kw_only=True)
class PopRevived(LogEvent):
    """A POP checkpoint's invisible time ended with messages unacknowledged: they were put to
    the pop retry topic (or the DLQ) for the group to receive again."""

    topic: str
    group: str
    queue_id: int
    revived_count: int
    to_topic: str


@event("pop_revive_record_skipped", "warning")
@attrs.frozen(kw_only=True)
class PopReviveRecordSkipped(LogEvent):
    """A message of the revive topic that is not a readable CK or ACK was skipped."""

    topic: str
    queue_id: int
    queue_offset: int
    why: str


@event("transaction_check_discarded", "warning")
@attrs.frozen(kw_only=True)
class TransactionCheckDiscarded(LogEvent):
    """A half message was checked transactionCheckMax times (or is older than the CommitLog's
    fileReservedTime) without an answer: it is moved to TRANS_CHECK_MAX_TIME_TOPIC and never
    delivered. ``msg_id`` is its UNIQ_KEY."""

    topic: str
    group: str
    msg_id: str
    queue_offset: int
    check_times: int
    reason: str


@event("transaction_check_no_producer", "warning")
@attrs.frozen(kw_only=True)
class TransactionCheckNoProducer(LogEvent):
    """A half message was due for a check but no producer of its group is connected (upstream:
    "Check transaction failed, channel is null"); it is checked again next round."""

    group: str
    msg_id: str


@event("transaction_end_refused", "warning")
@attrs.frozen(kw_only=True)
class TransactionEndRefused(LogEvent):
    """An END_TRANSACTION was not applied (wrong group or offsets, unknown half, or a half that
    was already ended or discarded); ``remark`` says which."""

    group: str
    msg_id: str
    remark: str


@event("transaction_check_dropped", "warning")
@attrs.frozen(kw_only=True)
class TransactionCheckDropped(LogEvent):
    """A transaction producer's check queue was full: a broker's CHECK_TRANSACTION_STATE was
    not answered (the broker asks again next round)."""

    group: str
    msg_id: str


@event("transaction_listener_failed", "warning")
@attrs.frozen(kw_only=True)
class TransactionListenerFailed(LogEvent):
    """execute_local_transaction or check_local_transaction raised; the state is UNKNOW (the
    broker checks again later), as upstream."""

    group: str
    msg_id: str
    phase: str
    error: str


@event("transaction_end_failed", "warning")
@attrs.frozen(kw_only=True)
class TransactionEndFailed(LogEvent):
    """A producer could not send END_TRANSACTION to the broker; the broker's check will ask
    for the state instead."""

    group: str
    msg_id: str
    error: str


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


@event("schedule_service_started")
@attrs.frozen(kw_only=True)
class ScheduleServiceStarted(LogEvent):
    """This broker became master: it re-puts due delay-level and timer messages from the
    offsets of delayOffset.json (level -> next ConsumeQueue index)."""

    offsets: dict[str, int]


@event("schedule_service_stopped")
@attrs.frozen(kw_only=True)
class ScheduleServiceStopped(LogEvent):
    """The broker is no longer master (or stops): no more re-puts from here."""

    offsets: dict[str, int]
    reason: str


@event("schedule_deliver_failed", "warning")
@attrs.frozen(kw_only=True)
class ScheduleDeliverFailed(LogEvent):
    """Due messages could not be re-put (the store refused); retried, offsets unchanged."""

    topic: str
    queue_id: int
    offset: int
    count: int
    error: str


@event("schedule_entry_missing", "warning")
@attrs.frozen(kw_only=True)
class ScheduleEntryMissing(LogEvent):
    """A scheduled ConsumeQueue entry whose record cannot be read (removed by retention or not
    a scheduled message): skipped."""

    topic: str
    queue_id: int
    offset: int
    commitlog_offset: int


@event("static_topic_mapping_updated")
@attrs.frozen(kw_only=True)
class StaticTopicMappingUpdated(LogEvent):
    """UPDATE_AND_CREATE_STATIC_TOPIC accepted: topicQueueMapping.json and topics.json are
    written; ``led_queues`` are the logic queues whose leader is this broker."""

    topic: str
    epoch: int
    total_queues: int
    led_queues: list[int]


@event("static_topic_mapping_refused", "error")
@attrs.frozen(kw_only=True)
class StaticTopicMappingRefused(LogEvent):
    """A static-topic mapping was refused: it names another broker (copied from there), is
    older than the one held, or would change an existing generation. Nothing was changed."""

    topic: str
    mapping_bname: str
    reason: str


@event("static_topic_config_repaired", "warning")
@attrs.frozen(kw_only=True)
class StaticTopicConfigRepaired(LogEvent):
    """At start, a static topic's config was missing or short of the queues its mapping names
    (a crash between the mapping write and the topic write): restored from the mapping."""

    topic: str
    read_queues: int
    write_queues: int


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


@event("pop_order_ack_illegal", "warning")
@attrs.frozen(kw_only=True)
class PopOrderAckIllegal(LogEvent):
    """An ACK of an ordered POP receipt named an offset that is not in the queue's batch in
    flight: refused with MESSAGE_ILLEGAL, the group's offset unchanged."""

    topic: str
    group: str
    queue_id: int
    offset: int


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


@event("static_topic_remote_read_failed", "warning")
@attrs.frozen(kw_only=True)
class StaticTopicRemoteReadFailed(LogEvent):
    """A static topic's leader could not read an older generation on ``item_broker`` (no
    address, no answer): the request was answered SYSTEM_ERROR and the client retries."""

    topic: str
    queue_id: int
    item_broker: str
    call: str
    error: str


@event("static_topic_leadership_released")
@attrs.frozen(kw_only=True)
class StaticTopicLeadershipReleased(LogEvent):
    """A mapping update took the leadership of ``released_queues`` (logic ids) from this
    broker: their sends are refused from now on, and every send accepted before is stored
    (the CommitLog ended at ``commitlog_offset``) before the admin is answered."""

    topic: str
    released_queues: list[int]
    commitlog_offset: int


@event("static_topic_mapping_synced")
@attrs.frozen(kw_only=True)
class StaticTopicMappingSynced(LogEvent):
    """A slave adopted its master's static-topic mappings (their DataVersion changed) and
    wrote them to its topicQueueMapping.json; ``refused`` of them named another broker set."""

    master: str
    topics: list[str]
    refused: int


@event("static_topic_mapping_cleaned")
@attrs.frozen(kw_only=True)
class StaticTopicMappingCleaned(LogEvent):
    """The clean-up (static_topic_clean.py) dropped a logic queue's old generations from this
    broker's topicQueueMapping.json: it keeps them from ``kept_from_gen`` on (None: the whole
    list went, this broker being more than one generation behind)."""

    topic: str
    queue_id: int
    kept_from_gen: int | None
    reason: str


#: every catalogued event name
ALL = frozenset(CATALOGUE)
