"""Events of the Raft node shell (actors/raft/node.py) besides the core events the Spark job
reads: start, recovery, leader readiness, peer reachability and snapshots.
"""

from __future__ import annotations

import attrs

from rocketrio.actors.observe.events.catalogue import Json, LogEvent, event


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
