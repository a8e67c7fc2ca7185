"""Role and RaftCore's per-role records: vote and heartbeat rounds, follower Progress, ReadState.

Plain data shared by core.py, election.py and replication.py (kept apart so those modules do
not import each other).
"""

from __future__ import annotations

import enum
from collections import deque

import attrs


class Role(enum.StrEnum):
    CANDIDATE = "CANDIDATE"
    FOLLOWER = "FOLLOWER"
    LEADER = "LEADER"


class ParseResult(enum.StrEnum):
    """DLedger `VoteResponse.ParseResult`: what a finished vote round decided."""

    WAIT_TO_REVOTE = "WAIT_TO_REVOTE"
    REVOTE_IMMEDIATELY = "REVOTE_IMMEDIATELY"
    PASSED = "PASSED"
    WAIT_TO_VOTE_NEXT = "WAIT_TO_VOTE_NEXT"


@attrs.frozen(slots=True)
class ReadState:
    """A read asked with `read_index(ctx)` may be served once the applied index >= `index`."""

    ctx: int
    index: int


class ProgressState(enum.Enum):
    PROBE = "PROBE"  # one append in flight at a time, finding the match point
    REPLICATE = "REPLICATE"  # pipelined appends, bounded by maxInflightPushNum / bytes
    SNAPSHOT = "SNAPSHOT"  # InstallSnapshot in flight


@attrs.define(slots=True)
class Progress:
    """The leader's view of one follower."""

    next_index: int
    match_index: int = 0
    state: ProgressState = ProgressState.PROBE
    paused: bool = False
    inflight: deque[tuple[int, int]] = attrs.field(factory=deque)  # (last index, bytes)
    inflight_bytes: int = 0
    acked: bool = False  # any answer since the last heartbeat-time stall check
    sent_commit: int = 0
    snapshot_checks: int = 0  # stall checks since the snapshot was sent

    def become_probe(self, next_index: int) -> None:
        self.state = ProgressState.PROBE
        self.next_index = max(next_index, self.match_index + 1)
        self.paused = False
        self.inflight.clear()
        self.inflight_bytes = 0


@attrs.define(slots=True)
class VoteRound:
    round: int
    term: int
    deadline_ms: int
    known_max_term_in_group: int
    answered: set[str] = attrs.field(factory=set)
    valid_num: int = 0
    accepted_num: int = 0
    not_ready_term_num: int = 0
    bigger_ledger_num: int = 0
    already_has_leader: bool = False


@attrs.define(slots=True)
class HeartBeatRound:
    round: int
    term: int
    sent_ms: int
    deadline_ms: int
    answered: set[str] = attrs.field(factory=set)
    succ_num: int = 1  # the leader itself, as in DLedger
    not_ready_num: int = 0
    max_term: int = -1
    inconsist_leader: bool = False
