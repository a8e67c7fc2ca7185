"""The log-event catalogue: the one declaration of every event a rocketrio process logs.

Each event is a frozen attrs record registered under its snake_case name with `@event`; its
typed fields are the fields of the JSON line (actors/logs.py adds the common schema: ts, level,
node, role, actor, event). Cores build records, shells `emit` them. The Spark job builds its
read schema from this module (`field_types`), so the writer and the reader cannot drift apart,
and tests fail when code logs a name that is not here.

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

#: the common schema of every line (written by actors/logs.py, not by a record)
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
    "exception": str | None,
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


def emit(log: Any, ev: LogEvent, **extra: Any) -> None:
    """Log one record at its level through a structlog (bound) logger. ``extra`` carries only
    `CONTEXT_FIELDS` (an exception's ``exc_info``)."""
    fields = {f.name: getattr(ev, f.name) for f in attrs.fields(type(ev))}  # type: ignore[arg-type]
    getattr(log, ev.LEVEL)(ev.NAME, **fields, **extra)


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

    addr: str
    cluster: str
    broker_id: int | None
    namesrv: str | None = None


@event("broker_expired", "warning")
@attrs.frozen(kw_only=True)
class BrokerExpired(LogEvent):
    """The NameServer dropped a broker whose heartbeats stopped."""

    cluster: str
    broker: str | None
    broker_id: int
    addr: str
    silent_ms: int
    timeout_ms: int


@event("broker_heartbeat_timeout", "warning")
@attrs.frozen(kw_only=True)
class BrokerHeartbeatTimeout(LogEvent):
    """The controller leader saw a broker's heartbeats stop (or its channel close)."""

    cluster: str
    broker: str | None
    broker_id: int
    addr: str
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
    deleted_segments: int | None = None


@event("raft_role_changed")
@attrs.frozen(kw_only=True)
class RaftRoleChanged(LogEvent):
    """A controller replica's Raft role changed (core event)."""

    term: int
    role: str
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
    latency_ms: float


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


# process lifecycle
NAMESRV_BOOT = "namesrv_boot"  # addr
BROKER_BOOT = BrokerBoot.NAME  # interim alias
CONTROLLER_BOOT = "controller_boot"  # addr, peers
PROCESS_SHUTDOWN = "process_shutdown"  # reason
ACTOR_CRASHED = "actor_crashed"  # actor, restarting

# `rocketrio up`, the local supervisor (node "up", <dir>/logs/up.jsonl)
UP_STARTED = "up_started"  # mode, dir, pid, ports
CHILD_STARTED = "child_started"  # child, pid, restart (0: first start)
# child, pid, exit_code (None when killed by a signal), signal, ran_s, stopping (asked to stop),
# restart (the restart this exit leads to), next_delay_s, gave_up
CHILD_EXITED = "child_exited"
CHILD_STOP_ESCALATED = "child_stop_escalated"  # child, pid, grace_s (SIGKILL after the grace)
UP_STOPPING = "up_stopping"  # reason
UP_STOPPED = "up_stopped"  # reason, exit_code

# storage
COMMITLOG_RECOVERED = "commitlog_recovered"  # max_offset, truncated_at, dropped_bytes
COMMITLOG_TRUNCATED = CommitlogTruncated.NAME  # interim alias
# segment, offset, reason (+ topic, queue_id, queue_offset, group): a record failed its check
# on the read path and was not served
COMMITLOG_RECORD_CORRUPT = "commitlog_record_corrupt"
# store, error, remark (+ file, offset): recovery found damage it must not cut; start refused
STORE_CORRUPT = "store_corrupt"
CHECKPOINT_CORRUPT = "checkpoint_corrupt"  # path: a checkpoint failed its CRC; full scan done
STARTUP_FAILED = "startup_failed"  # role, error, traceback: the process exits non-zero
PROCESS_FAILED = "process_failed"  # role, error, traceback: failed after it started; exits 1
CONSUME_QUEUE_REBUILT = "consume_queue_rebuilt"  # topic, queue_id, entries
FLUSH_SLOW = "flush_slow"  # duration_ms

# namesrv
BROKER_REGISTERED = "broker_registered"  # cluster, broker, broker_id, addr
BROKER_UNREGISTERED = "broker_unregistered"  # broker, broker_id, addr, reason
BROKER_EXPIRED = BrokerExpired.NAME  # interim alias
MIN_BROKER_ID_CHANGED = "min_broker_id_changed"  # broker, min_broker_id, min_broker_addr, notify

# messaging
TOPIC_UPDATED = "topic_updated"  # topic, read_queues, write_queues, perm
TOPIC_DELETED = "topic_deleted"  # topic
SEND_ACKED = "send_acked"  # sampled: topic, queue_id, offset, count
CONSUMER_GROUP_CHANGED = "consumer_group_changed"  # group, members
REBALANCE = "rebalance"  # group, client_id, queues
MESSAGE_TO_DLQ = "message_to_dlq"  # group, topic, msg_id, reconsume_times
# group, topic, timestamp, force, offsets ({"broker:queue": offset}), members (pushed 220 to)
OFFSET_RESET = "offset_reset"
# group, topic, client_id, queues ({"broker:queue": offset}): a member restarted its queues there
OFFSET_RESET_APPLIED = "offset_reset_applied"
GROUP_OFFSET_CLONED = "group_offset_cloned"  # src_group, dest_group, topics

# raft / controller
RAFT_ROLE_CHANGED = RaftRoleChanged.NAME  # interim alias
RAFT_LEADER_ELECTED = RaftLeaderElected.NAME  # interim alias
RAFT_VOTE_RESULT = "raft_vote_result"  # term, outcome
RAFT_LOG_TRUNCATED = "raft_log_truncated"  # index
RAFT_SNAPSHOT_TAKEN = "raft_snapshot_taken"  # index, term
RAFT_LEADER_READY = "raft_leader_ready"  # term (the leader applied its own no-op)
RAFT_NODE_STARTED = "raft_node_started"  # term, last_index
RAFT_PEER_UNREACHABLE = "raft_peer_unreachable"  # peer
RAFT_PEER_REACHABLE = "raft_peer_reachable"  # peer
BROKER_HEARTBEAT_TIMEOUT = BrokerHeartbeatTimeout.NAME  # interim alias
ELECT_MASTER = ElectMaster.NAME  # interim alias
ELECT_MASTER_FAILED = "elect_master_failed"  # broker, reason
# the leader asked the other controller replicas before deposing a master (upstream #4800)
# cluster, broker, broker_id, reason, dead, alive, unknown, no_answer, quorum, group_size,
# elapsed_ms: confirmed -> the election goes ahead; not confirmed -> the master stays
MASTER_DEATH_CONFIRMED = "master_death_confirmed"
MASTER_DEATH_NOT_CONFIRMED = "master_death_not_confirmed"
NOTIFY_BROKER_ROLE_CHANGED_FAILED = "notify_broker_role_changed_failed"  # broker, addr
SYNC_STATE_SET_CHANGED = SyncStateSetChanged.NAME  # interim alias
BROKER_ID_APPLIED = "broker_id_applied"  # broker, broker_id
BROKER_ROLE_CHANGED = BrokerRoleChanged.NAME  # interim alias

# replication (AutoSwitch HA) and broker roles
HA_CONNECTED = "ha_connected"  # side (master/slave), peer, slave_id
HA_HANDSHAKE = "ha_handshake"  # slave_id, master_max, epoch, epochs (master side) / plan (slave)
HA_CONNECTION_CLOSED = HaConnectionClosed.NAME  # interim alias
HA_TRUNCATED = HaTruncated.NAME  # interim alias
HA_LOG_RESET = HaLogReset.NAME  # interim alias
EPOCH_RECORDED = "epoch_recorded"  # epoch, start_offset, source (master/replicated)
SYNC_STATE_SET_PROPOSED = "sync_state_set_proposed"  # broker, change, proposed, applied, epoch
SYNC_STATE_SET_ACCEPTED = "sync_state_set_accepted"  # broker, sync_state_set, epoch
SYNC_STATE_SET_REFUSED = "sync_state_set_refused"  # broker, proposed, code, remark
CONFIRM_OFFSET_MOVED = "confirm_offset_moved"  # sampled: offset, side
SEND_NOT_ACKED = "send_not_acked"  # sampled: reason, count
MASTER_FIRST_WRITE = MasterFirstWrite.NAME  # interim alias
MASTER_ELECTION_REQUESTED = "master_election_requested"  # broker, broker_id, reason
MASTER_STEPPED_DOWN = "master_stepped_down"  # broker, epoch, reason


# ACL 2.0 (actors/auth, actors/broker/auth_*)
AUTH_REFUSED = "auth_refused"  # code, user, source_ip, remark (NO_PERMISSION answered)
AUTH_USER_INITIALIZED = "auth_user_initialized"  # user (initAuthenticationUser / inner creds)
AUTH_USER_CREATED = "auth_user_created"  # user, by
AUTH_USER_UPDATED = "auth_user_updated"  # user, by
AUTH_USER_DELETED = "auth_user_deleted"  # user, by
AUTH_ACL_UPDATED = "auth_acl_updated"  # subject, by (createAcl / updateAcl)
AUTH_ACL_DELETED = "auth_acl_deleted"  # subject, resource, by
AUTH_SYNCED = "auth_synced"  # master, users, acls (a slave adopted its master's tables)
# remoting server limits (issue 7); the WARN ones are rate-limited per server and carry
# ``suppressed`` (lines not written since the last one)
BAD_FRAME = "bad_frame"  # remote, reason, error (the connection is closed)
CONNECTION_REFUSED = "connection_refused"  # remote, reason, why (over a connection cap)
CONNECTION_READ_TIMEOUT = "connection_read_timeout"  # remote, buffered, missing, timeout_s
CONNECTION_IDLE_CLOSED = "connection_idle_closed"  # remote, idle_s (info)
REQUEST_REFUSED_BUSY = "request_refused_busy"  # code, remote, in_flight, limit
PULL_HOLD_REFUSED = "pull_hold_refused"  # topic, queue_id, group, why (over a held-pull bound)
# live config (UPDATE_BROKER_CONFIG / UPDATE_NAMESRV_CONFIG / UPDATE_CONTROLLER_CONFIG)
# role, key, old, new, persisted_to (None: started without a config file), by: one per key
CONFIG_UPDATED = "config_updated"
CONFIG_UPDATE_REFUSED = "config_update_refused"  # role, keys, code, remark, by

ALL = frozenset(v for k, v in dict(globals()).items() if k.isupper() and isinstance(v, str))
