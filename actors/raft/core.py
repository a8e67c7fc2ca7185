"""RaftCore: the controller's Raft as a pure state machine (no I/O, no clock, no global random).

Inputs are `tick(now_ms)`, `step(msg, now_ms)`, `propose(data, now_ms)`, `read_index(ctx,
now_ms)`, `report_unreachable(to_id, msg, now_ms)` and `compact(index, term, data)`; outputs
come out as one `Ready` batch that the shell handles in the order documented on `Ready`, then
confirms with `advance(ready)`.

Election and leader liveness follow DLedger's `DLedgerLeaderElector` (seeds/dledger-leader-
election.zh.md): nodes start as CANDIDATE; a candidate's vote round asks every member (itself
locally) and tallies validNum / acceptedNum / alreadyHasLeader / knownMaxTermInGroup /
biggerLedgerNum / notReadyTermNum into one of the seven outcomes; the leader sends heartbeat
rounds (separate from log replication) and reacts to SUCCESS / EXPIRED_TERM /
INCONSISTENT_LEADER / TERM_NOT_READY with the maxHeartBeatLeak rule; a follower turns candidate
after maxHeartBeatLeak * heartBeatTimeIntervalMs without a leader heartbeat. As in DLedger,
turning candidate does not change the term; the term moves in `_next_term` (to the largest term
seen, else +1) before a round after WAIT_TO_VOTE_NEXT or when a larger term was seen.

Safety check of the seed's vote rule: a voter refuses a candidate whose (ledgerEndTerm,
ledgerEndIndex) is below its own, lexicographically - exactly Raft's "at least as up-to-date"
election restriction - and it votes at most once per term (voted_for is part of the hard state,
which the shell fsyncs before sending the answer). No extra check was needed.

Deviations from DLedger, each for a reason:
- the wait for vote answers is `voteRequestTimeoutMs` (DLedger: 2000 ms + random), so failover
  fits in 1.5 s; the shell reports undeliverable requests with `report_unreachable`, which
  counts them as UNKNOWN answers so a round ends without waiting (DLedger counts failed RPCs
  the same way);
- the tally also counts REJECT_EXPIRED_LEDGER_TERM as a bigger ledger and takes the term of
  REJECT_TERM_SMALL_THAN_LEDGER into knownMaxTermInGroup (DLedger's code; the seed omits them);
- a new leader starts its heartbeat-leak clock at election time (DLedger: -1, so a failed first
  heartbeat round deposes it at once); an accepted append also counts as a leader heartbeat;
- AppendEntries / InstallSnapshot accept a leader the way a heartbeat does (same term, no leader
  known yet), instead of answering NOT_FOLLOWER until the next heartbeat;
- a candidate never campaigns below the largest term it has seen: it moves to it before the
  next round even if the last outcome was not WAIT_TO_VOTE_NEXT. In DLedger a leader deposed by
  an EXPIRED_TERM answer keeps its last outcome (PASSED), campaigns again in its old term and is
  re-elected there by the members that voted for it, forever, while the member with the larger
  term but a shorter log can never win (the simulator found this livelock, seed 1725);
- a candidate that sees a larger term abandons its pending vote round (DLedger's thread stays
  blocked in it until the deadline, answering REJECT_TERM_NOT_READY to the very candidate
  whose REVOTE_IMMEDIATELY it should accept).

Replication is Raft's: consistency check on (prev_index, prev_term), a conflict hint for fast
back-off, per-follower probe / replicate (pipelined, bounded in-flight) / snapshot states,
commit only by a majority of durable matches on an entry of the current term (the leader
appends a no-op, data b"", on election; the shell skips empty entries when applying).
"""

from __future__ import annotations

import enum
import random
from collections import deque
from typing import Any

import attrs

from rocketrio.actors.raft.config import RaftConfig
from rocketrio.protocol.raft import (
    ENTRY_HEADER,
    AppendEntriesRequest,
    AppendEntriesResponse,
    Entry,
    HardState,
    HeartBeatRequest,
    HeartBeatResponse,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    RaftMessage,
    ResponseCode,
    Snapshot,
    SnapshotMeta,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

Event = tuple[str, dict[str, Any]]


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


class NotLeader(Exception):
    """Only the leader accepts proposals and reads; names the leader if one is known."""

    def __init__(self, leader_id: str | None, leader_addr: str | None) -> None:
        super().__init__(f"not leader, leader is {leader_id or 'unknown'} ({leader_addr or '-'})")
        self.leader_id = leader_id
        self.leader_addr = leader_addr


class LeaderPendingFull(Exception):
    """Too many proposals are waiting for commit (maxPendingRequestsNum)."""


@attrs.frozen(slots=True)
class ReadState:
    """A read asked with `read_index(ctx)` may be served once the applied index >= `index`."""

    ctx: int
    index: int


@attrs.frozen(slots=True)
class Ready:
    """One batch of work for the shell, to be handled IN THIS ORDER, then `advance(ready)`.

    1. `hard_state` (if not None): persist term + voted_for and fsync BEFORE sending anything.
    2. `snapshot` (if not None, a follower received InstallSnapshot): persist it, discard the
       whole log (it restarts after snapshot.meta.index), restore the state machine from it.
       (The brief listed this last; it must precede the messages, whose ack claims it durable,
       and the entries, which follow it in the log.)
    3. `entries`: append; when the first index <= the stored last index, storage first drops
       that conflicting suffix. fsync if `must_sync`.
    4. `messages`: send (to_id, msg); best effort, the core retries what matters.
    5. `committed_entries`: apply in order (skip data == b"", the leader's no-op).
    6. `read_states`: serve each read once applied index >= index; `dropped_reads`: fail
       those reads (leadership lost), the client retries against the new leader.
    7. `events`: log them (name, fields).
    Ready batches must be handled one at a time, in the order returned.
    """

    hard_state: HardState | None
    snapshot: Snapshot | None
    entries: list[Entry]
    must_sync: bool
    messages: list[tuple[str, RaftMessage]]
    committed_entries: list[Entry]
    read_states: list[ReadState]
    dropped_reads: list[int]
    events: list[Event]


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


class RaftCore:
    """One Raft member. `peers` maps id -> address and includes `self_id`."""

    def __init__(
        self,
        self_id: str,
        peers: dict[str, str],
        config: RaftConfig,
        rng: random.Random,
        hard_state: HardState,
        log: list[Entry],
        snapshot: Snapshot | None,
        now_ms: int,
    ) -> None:
        if self_id not in peers:
            raise ValueError(f"self id {self_id!r} is not among the peers {list(peers)}")
        self.self_id = self_id
        self.peers = dict(peers)
        self.config = config
        self._rng = rng
        self._others = [p for p in self.peers if p != self_id]
        self.term = hard_state.term
        self.voted_for = hard_state.voted_for
        self._handed_hs = hard_state
        self._snapshot = snapshot
        self._snap_index = snapshot.meta.index if snapshot else 0
        self._snap_term = snapshot.meta.term if snapshot else 0
        for pos, e in enumerate(log):
            if e.index != self._snap_index + 1 + pos:
                raise ValueError(f"log not contiguous after {self._snap_index}: entry {e.index}")
        self._log = list(log)
        self.commit_index = self._snap_index
        self.applied_index = self._snap_index
        self._apply_handed = self._snap_index
        self._stable_index = self.last_index
        self._unstable_from = self.last_index + 1
        self._pending_snapshot: Snapshot | None = None

        self.role = Role.CANDIDATE
        self.leader_id: str | None = None
        self._known_max_term_in_group = -1
        self._need_increase_term_immediately = False
        self._next_time_to_request_vote = -1
        self._last_parse_result = ParseResult.WAIT_TO_REVOTE
        self._vote_round: VoteRound | None = None
        self._round_seq = 0
        self._last_leader_heartbeat_ms = now_ms

        self._progress: dict[str, Progress] = {}
        self._hb_round: HeartBeatRound | None = None
        self._last_send_heartbeat_ms: int | None = None
        self._last_succ_heartbeat_ms = now_ms
        self._confirmed_sent_ms: int | None = None
        self._heartbeat_wanted = False
        self._noop_index = 0
        self._pending_reads: list[tuple[int, int, int]] = []  # (ctx, index, after round)

        self._msgs: list[tuple[str, RaftMessage]] = []
        self._events: list[Event] = []
        self._read_states: list[ReadState] = []
        self._dropped_reads: list[int] = []

    # ---------------------------------------------------------------- log view

    @property
    def last_index(self) -> int:
        return self._snap_index + len(self._log)

    @property
    def snapshot_index(self) -> int:
        return self._snap_index

    @property
    def snapshot(self) -> Snapshot | None:
        """The latest snapshot the core knows (sent to followers that fell behind it)."""
        return self._snapshot

    @property
    def first_index(self) -> int:
        return self._snap_index + 1

    def term_at(self, index: int) -> int | None:
        """Term of the entry at `index`; None if compacted away or beyond the log."""
        if index == self._snap_index:
            return self._snap_term
        if index < self._snap_index or index > self.last_index:
            return None
        return self._log[index - self._snap_index - 1].term

    def entries(self, lo: int, hi: int) -> list[Entry]:
        """Entries lo..hi inclusive (lo > snapshot index)."""
        return self._log[lo - self._snap_index - 1 : hi - self._snap_index]

    def _ledger_end(self) -> tuple[int, int]:
        last = self.last_index
        term = self.term_at(last)
        assert term is not None
        return term, last

    def _quorum(self, num: int) -> bool:
        return num >= len(self.peers) // 2 + 1

    @property
    def leader_addr(self) -> str | None:
        return self.peers.get(self.leader_id) if self.leader_id else None

    @property
    def snapshot_due(self) -> bool:
        """The shell should snapshot at applied_index (snapshotThreshold entries since last)."""
        return self.applied_index - self._snap_index >= self.config.snapshotThreshold

    def is_leader_confirmed(self, now_ms: int) -> bool:
        """Leader whose last majority-acknowledged heartbeat round was sent < 2 intervals ago.

        A lease hint for cheap, *possibly stale* reads: DLedger's vote rules let a member with
        a larger term depose a leader at any time, so a lease alone is not linearizable. Use
        `read_index` for linearizable reads.
        """
        if self.role is not Role.LEADER or self._confirmed_sent_ms is None:
            return False
        return now_ms - self._confirmed_sent_ms < 2 * self.config.heartBeatTimeIntervalMs

    # ---------------------------------------------------------------- inputs

    def tick(self, now_ms: int) -> None:
        """Time passed: DLedger's maintainState (called every few ms by the shell)."""
        if self.role is Role.LEADER:
            self._maintain_as_leader(now_ms)
        elif self.role is Role.FOLLOWER:
            self._maintain_as_follower(now_ms)
        else:
            self._maintain_as_candidate(now_ms)

    def step(self, msg: RaftMessage, now_ms: int) -> None:
        """A message from a peer. Messages from non-members or for another node are dropped."""
        if msg.to_id != self.self_id or msg.from_id not in self.peers:
            return
        match msg:
            case VoteRequest():
                self._send(msg.from_id, self._handle_vote(msg, self_vote=False))
            case VoteResponse():
                self._handle_vote_response(msg, now_ms)
            case HeartBeatRequest():
                self._send(msg.from_id, self._handle_heartbeat(msg, now_ms))
            case HeartBeatResponse():
                self._handle_heartbeat_response(msg, now_ms)
            case AppendEntriesRequest():
                self._send(msg.from_id, self._handle_append(msg, now_ms))
            case AppendEntriesResponse():
                self._handle_append_response(msg)
            case InstallSnapshotRequest():
                self._send(msg.from_id, self._handle_install_snapshot(msg, now_ms))
            case InstallSnapshotResponse():
                self._handle_snapshot_response(msg)

    def report_unreachable(self, to_id: str, msg: RaftMessage, now_ms: int) -> None:
        """The shell could not deliver `msg` (connection refused or reset).

        A vote or heartbeat request then counts as answered with UNKNOWN, as DLedger counts a
        failed RPC, so a round with a dead member ends at once instead of at its deadline.
        Replication needs nothing: probes and stalled pipelines are retried every heartbeat.
        """
        if to_id not in self.peers or to_id == self.self_id:
            return
        match msg:
            case VoteRequest():
                unknown = VoteResponse(
                    to_id, self.self_id, self.term, msg.round, VoteResult.UNKNOWN
                )
                self._handle_vote_response(unknown, now_ms)
            case HeartBeatRequest():
                code = ResponseCode.UNKNOWN
                beat = HeartBeatResponse(to_id, self.self_id, self.term, msg.round, code)
                self._handle_heartbeat_response(beat, now_ms)

    def propose(self, data: bytes | list[bytes], now_ms: int) -> int:
        """Append client data as new entries; returns the index of the last one."""
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id, self.leader_addr)
        items = [data] if isinstance(data, bytes) else data
        if not items or any(not d for d in items):
            raise ValueError("proposals must be non-empty bytes (b'' marks the leader's no-op)")
        if self.last_index - self.commit_index + len(items) > self.config.maxPendingRequestsNum:
            raise LeaderPendingFull(
                f"{self.last_index - self.commit_index} entries wait for commit "
                f"(maxPendingRequestsNum={self.config.maxPendingRequestsNum})"
            )
        index = self.last_index
        for d in items:
            index += 1
            self._log.append(Entry(index, self.term, d))
        return index

    def read_index(self, ctx: int, now_ms: int) -> None:
        """Ask for a linearizable read; a ReadState(ctx, index) comes out in a later Ready.

        The index covers everything committed before the call (at least the leader's no-op);
        it is released after a heartbeat round started after this call got a majority.
        """
        if self.role is not Role.LEADER:
            raise NotLeader(self.leader_id, self.leader_addr)
        index = max(self.commit_index, self._noop_index)
        self._pending_reads.append((ctx, index, self._round_seq))
        if self._hb_round is None:
            self._send_heartbeats(now_ms)
        else:
            self._heartbeat_wanted = True

    def compact(self, index: int, term: int, data: bytes) -> None:
        """The shell snapshotted the state machine at applied `index`: drop entries <= index."""
        if index <= self._snap_index:
            return
        if index > self.applied_index:
            raise ValueError(f"cannot compact at {index} beyond applied index {self.applied_index}")
        if self.term_at(index) != term:
            raise ValueError(f"entry {index} has term {self.term_at(index)}, not {term}")
        del self._log[: index - self._snap_index]
        self._snap_index, self._snap_term = index, term
        self._snapshot = Snapshot(SnapshotMeta(index, term), data)

    # ---------------------------------------------------------------- Ready

    def ready(self) -> Ready | None:
        """Collect pending work; None if there is nothing to do."""
        if self.role is Role.LEADER:
            self._flush_replication()
        hs = HardState(self.term, self.voted_for)
        hard_state = hs if hs != self._handed_hs else None
        entries = self._log[max(0, self._unstable_from - self._snap_index - 1) :]
        committed: list[Entry] = []
        if self.commit_index > self._apply_handed:
            committed = self.entries(self._apply_handed + 1, self.commit_index)
        snapshot = self._pending_snapshot
        if not (
            hard_state
            or snapshot
            or entries
            or committed
            or self._msgs
            or self._read_states
            or self._dropped_reads
            or self._events
        ):
            return None
        rd = Ready(
            hard_state=hard_state,
            snapshot=snapshot,
            entries=entries,
            must_sync=bool(hard_state or entries or snapshot),
            messages=self._msgs,
            committed_entries=committed,
            read_states=self._read_states,
            dropped_reads=self._dropped_reads,
            events=self._events,
        )
        self._handed_hs = hs
        self._unstable_from = self.last_index + 1
        self._apply_handed = max(self._apply_handed, self.commit_index)
        self._pending_snapshot = None
        self._msgs, self._events, self._read_states, self._dropped_reads = [], [], [], []
        return rd

    def advance(self, rd: Ready) -> None:
        """The shell persisted, sent and applied `rd`."""
        for e in reversed(rd.entries):
            # the log may have been truncated since; only a still-present entry counts
            if self.term_at(e.index) == e.term:
                self._stable_index = max(self._stable_index, e.index)
                break
        if rd.snapshot is not None:
            self.applied_index = max(self.applied_index, rd.snapshot.meta.index)
        if rd.committed_entries:
            self.applied_index = max(self.applied_index, rd.committed_entries[-1].index)
        if self.role is Role.LEADER:
            self._maybe_commit()

    def _send(self, to: str, msg: RaftMessage) -> None:
        self._msgs.append((to, msg))

    def _event(self, name: str, **fields: Any) -> None:
        fields.setdefault("term", self.term)
        self._events.append((name, fields))

    # ---------------------------------------------------------------- role changes

    def _change_to_candidate(self, term: int, reason: str) -> None:
        """DLedger changeRoleToCandidate: remember the term, do not adopt it yet."""
        if term < self.term:
            return
        self._known_max_term_in_group = max(self._known_max_term_in_group, term)
        if self._vote_round is not None and self._vote_round.term < term:
            self._vote_round = None  # ours, see the module docstring
        previous = self.role
        self.role = Role.CANDIDATE
        self.leader_id = None
        self._leave_leadership()
        if previous is not Role.CANDIDATE:
            self._event("raft_role_changed", role=str(self.role), reason=reason, seen_term=term)

    def _change_to_follower(self, term: int, leader_id: str, now_ms: int) -> None:
        if term != self.term:
            self.term, self.voted_for = term, None
        self._known_max_term_in_group = max(self._known_max_term_in_group, term)
        self.role = Role.FOLLOWER
        self.leader_id = leader_id
        self._last_leader_heartbeat_ms = now_ms
        self._last_parse_result = ParseResult.WAIT_TO_REVOTE
        self._vote_round = None
        self._leave_leadership()
        self._event("raft_role_changed", role=str(self.role), leader=leader_id, reason="heartbeat")

    def _change_to_leader(self, term: int, now_ms: int) -> None:
        if term != self.term:
            return
        self.role = Role.LEADER
        self.leader_id = self.self_id
        self._vote_round = None
        self._last_send_heartbeat_ms = None
        self._last_succ_heartbeat_ms = now_ms
        self._confirmed_sent_ms = None
        nxt = self.last_index + 1
        self._progress = {p: Progress(next_index=nxt) for p in self._others}
        self._log.append(Entry(nxt, term, b""))
        self._noop_index = nxt
        self._event("raft_role_changed", role=str(self.role), leader=self.self_id, reason="elected")
        self._event("raft_leader_elected", leader=self.self_id, last_index=self.last_index)
        self._maintain_as_leader(now_ms)

    def _leave_leadership(self) -> None:
        self._progress = {}
        self._hb_round = None
        self._heartbeat_wanted = False
        self._confirmed_sent_ms = None
        self._dropped_reads.extend(ctx for ctx, _, _ in self._pending_reads)
        self._pending_reads = []

    def _next_term(self) -> None:
        """DLedger MemberState.nextTerm: jump to the largest known term, else +1."""
        previous = self.term
        if self._known_max_term_in_group > self.term:
            self.term = self._known_max_term_in_group
        else:
            self.term += 1
        self.voted_for = None
        self._event("raft_term_increased", previous=previous)

    def _next_vote_time(self, now_ms: int) -> int:
        c = self.config
        return (
            now_ms
            + c.minVoteIntervalMs
            + self._rng.randrange(c.maxVoteIntervalMs - c.minVoteIntervalMs)
        )

    # ---------------------------------------------------------------- election: candidate side

    def _maintain_as_candidate(self, now_ms: int) -> None:
        rnd = self._vote_round
        if rnd is not None:
            if now_ms >= rnd.deadline_ms:
                self._decide_vote_round(now_ms)
            return
        if now_ms < self._next_time_to_request_vote and not self._need_increase_term_immediately:
            return
        if (
            self._last_parse_result is ParseResult.WAIT_TO_VOTE_NEXT
            or self._need_increase_term_immediately
            or self._known_max_term_in_group > self.term  # ours, see the module docstring
        ):
            self._next_term()
            self._last_parse_result = ParseResult.WAIT_TO_REVOTE
        if self._need_increase_term_immediately:
            # a larger term was seen: adopt it now, campaign after a random pause
            self._next_time_to_request_vote = self._next_vote_time(now_ms)
            self._need_increase_term_immediately = False
            return
        self._start_vote_round(now_ms)

    def _start_vote_round(self, now_ms: int) -> None:
        self._round_seq += 1
        ledger_end_term, ledger_end_index = self._ledger_end()
        rnd = VoteRound(
            round=self._round_seq,
            term=self.term,
            deadline_ms=now_ms + self.config.voteRequestTimeoutMs,
            known_max_term_in_group=self.term,
        )
        self._vote_round = rnd
        for peer in self.peers:
            req = VoteRequest(
                self.self_id,
                peer,
                self.self_id,
                self.term,
                ledger_end_term,
                ledger_end_index,
                rnd.round,
            )
            if peer == self.self_id:
                self._tally_vote(rnd, peer, self._handle_vote(req, self_vote=True))
            else:
                self._send(peer, req)
        if self._vote_round_decidable(rnd):
            self._decide_vote_round(now_ms)

    def _handle_vote_response(self, resp: VoteResponse, now_ms: int) -> None:
        rnd = self._vote_round
        if rnd is None or resp.round != rnd.round or resp.from_id in rnd.answered:
            return
        self._tally_vote(rnd, resp.from_id, resp)
        if self._vote_round_decidable(rnd):
            self._decide_vote_round(now_ms)

    @staticmethod
    def _tally_vote(rnd: VoteRound, voter: str, resp: VoteResponse) -> None:
        rnd.answered.add(voter)
        result = resp.result
        if result is not VoteResult.UNKNOWN:
            rnd.valid_num += 1
        if result is VoteResult.ACCEPT:
            rnd.accepted_num += 1
        elif result is VoteResult.REJECT_ALREADY_HAS_LEADER:
            rnd.already_has_leader = True
        elif result in (
            VoteResult.REJECT_EXPIRED_VOTE_TERM,
            VoteResult.REJECT_TERM_SMALL_THAN_LEDGER,
        ):
            rnd.known_max_term_in_group = max(rnd.known_max_term_in_group, resp.term)
        elif result in (
            VoteResult.REJECT_EXPIRED_LEDGER_TERM,
            VoteResult.REJECT_SMALL_LEDGER_END_INDEX,
        ):
            rnd.bigger_ledger_num += 1
        elif result is VoteResult.REJECT_TERM_NOT_READY:
            rnd.not_ready_term_num += 1

    def _vote_round_decidable(self, rnd: VoteRound) -> bool:
        return (
            rnd.already_has_leader
            or self._quorum(rnd.accepted_num)
            or self._quorum(rnd.accepted_num + rnd.not_ready_term_num)
            or len(rnd.answered) == len(self.peers)
        )

    def _parse_vote_round(self, rnd: VoteRound, now_ms: int) -> ParseResult:
        """The seven outcomes of the seed, in its order; sets the next vote time."""
        c = self.config
        if rnd.known_max_term_in_group > rnd.term:
            self._next_time_to_request_vote = self._next_vote_time(now_ms)
            self._change_to_candidate(rnd.known_max_term_in_group, "bigger_term_in_group")
            return ParseResult.WAIT_TO_VOTE_NEXT
        if rnd.already_has_leader:
            leak_ms = c.heartBeatTimeIntervalMs * c.maxHeartBeatLeak
            self._next_time_to_request_vote = self._next_vote_time(now_ms) + leak_ms
            return ParseResult.WAIT_TO_REVOTE
        if not self._quorum(rnd.valid_num):
            self._next_time_to_request_vote = self._next_vote_time(now_ms)
            return ParseResult.WAIT_TO_REVOTE
        if not self._quorum(rnd.valid_num - rnd.bigger_ledger_num):
            self._next_time_to_request_vote = self._next_vote_time(now_ms) + c.maxVoteIntervalMs
            return ParseResult.WAIT_TO_REVOTE
        if self._quorum(rnd.accepted_num):
            return ParseResult.PASSED
        if self._quorum(rnd.accepted_num + rnd.not_ready_term_num):
            return ParseResult.REVOTE_IMMEDIATELY
        self._next_time_to_request_vote = self._next_vote_time(now_ms)
        return ParseResult.WAIT_TO_VOTE_NEXT

    def _decide_vote_round(self, now_ms: int) -> None:
        rnd = self._vote_round
        assert rnd is not None
        self._vote_round = None
        result = self._parse_vote_round(rnd, now_ms)
        self._last_parse_result = result
        self._event(
            "raft_vote_result",
            term=rnd.term,
            result=str(result),
            member_num=len(self.peers),
            answered_num=len(rnd.answered),
            valid_num=rnd.valid_num,
            accepted_num=rnd.accepted_num,
            not_ready_term_num=rnd.not_ready_term_num,
            bigger_ledger_num=rnd.bigger_ledger_num,
            already_has_leader=rnd.already_has_leader,
            known_max_term_in_group=rnd.known_max_term_in_group,
        )
        if result is ParseResult.PASSED:
            self._change_to_leader(rnd.term, now_ms)

    # ---------------------------------------------------------------- election: voter side

    def _handle_vote(self, req: VoteRequest, self_vote: bool) -> VoteResponse:
        """DLedger handleVote: the checks in the seed's order."""

        def answer(result: VoteResult, term: int | None = None) -> VoteResponse:
            t = self.term if term is None else term
            return VoteResponse(self.self_id, req.from_id, t, req.round, result)

        if req.leader_id not in self.peers:
            return answer(VoteResult.REJECT_UNKNOWN_LEADER)
        if not self_vote and req.leader_id == self.self_id:
            return answer(VoteResult.REJECT_UNEXPECTED_LEADER)
        ledger_end_term, ledger_end_index = self._ledger_end()
        if req.ledger_end_term < ledger_end_term:
            return answer(VoteResult.REJECT_EXPIRED_LEDGER_TERM)
        if req.ledger_end_term == ledger_end_term and req.ledger_end_index < ledger_end_index:
            return answer(VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
        if req.term < self.term:
            return answer(VoteResult.REJECT_EXPIRED_VOTE_TERM)
        if req.term > self.term:
            self._change_to_candidate(req.term, "vote_request_with_bigger_term")
            self._need_increase_term_immediately = True
            return answer(VoteResult.REJECT_TERM_NOT_READY)
        if self.voted_for is not None and self.voted_for != req.leader_id:
            if self.leader_id is not None:
                return answer(VoteResult.REJECT_ALREADY_HAS_LEADER)
            return answer(VoteResult.REJECT_ALREADY_VOTED)
        if req.term < ledger_end_term:
            return answer(VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, ledger_end_term)
        self.voted_for = req.leader_id  # durable before the answer leaves (Ready order)
        return answer(VoteResult.ACCEPT)

    # ---------------------------------------------------------------- heartbeats

    def _maintain_as_follower(self, now_ms: int) -> None:
        silent_ms = now_ms - self._last_leader_heartbeat_ms
        if silent_ms > self.config.leader_lost_after_ms:
            self._event("raft_heartbeat_timeout", leader=self.leader_id, silent_ms=silent_ms)
            self._change_to_candidate(self.term, "heartbeat_timeout")

    def _maintain_as_leader(self, now_ms: int) -> None:
        rnd = self._hb_round
        if rnd is not None:
            if now_ms < rnd.deadline_ms:
                return
            self._decide_heartbeat_round(now_ms)
        if self.role is not Role.LEADER or self._hb_round is not None:
            return
        last = self._last_send_heartbeat_ms
        if last is None or now_ms - last >= self.config.heartBeatTimeIntervalMs:
            self._send_heartbeats(now_ms)

    def _send_heartbeats(self, now_ms: int) -> None:
        self._round_seq += 1
        rnd = HeartBeatRound(
            round=self._round_seq,
            term=self.term,
            sent_ms=now_ms,
            deadline_ms=now_ms + self.config.heartBeatTimeIntervalMs,
        )
        self._hb_round = rnd
        self._last_send_heartbeat_ms = now_ms
        self._heartbeat_wanted = False
        for peer in self._others:
            # like etcd, tell each member the commit only up to what it is known to hold
            commit = min(self._progress[peer].match_index, self.commit_index)
            hb = HeartBeatRequest(self.self_id, peer, self.self_id, self.term, rnd.round, commit)
            self._send(peer, hb)
        self._check_replication_stalls()
        if not self._others:
            self._decide_heartbeat_round(now_ms)

    def _accept_leader(self, term: int, leader_id: str, now_ms: int) -> ResponseCode:
        """DLedger handleHeartBeat's checks, shared by heartbeats, appends and snapshots."""
        if leader_id not in self.peers:
            return ResponseCode.UNKNOWN_MEMBER
        if leader_id == self.self_id:
            return ResponseCode.UNEXPECTED_MEMBER
        if term < self.term:
            return ResponseCode.EXPIRED_TERM
        if term > self.term:
            self._change_to_candidate(term, "leader_with_bigger_term")
            self._need_increase_term_immediately = True
            return ResponseCode.TERM_NOT_READY
        if self.leader_id is None:
            self._change_to_follower(term, leader_id, now_ms)
        elif self.leader_id != leader_id:
            return ResponseCode.INCONSISTENT_LEADER
        else:
            self._last_leader_heartbeat_ms = now_ms
        return ResponseCode.SUCCESS

    def _handle_heartbeat(self, req: HeartBeatRequest, now_ms: int) -> HeartBeatResponse:
        code = self._accept_leader(req.term, req.leader_id, now_ms)
        if code is ResponseCode.SUCCESS and req.commit_index > self.commit_index:
            self.commit_index = min(req.commit_index, self.last_index)
        return HeartBeatResponse(self.self_id, req.from_id, self.term, req.round, code)

    def _handle_heartbeat_response(self, resp: HeartBeatResponse, now_ms: int) -> None:
        if self.role is not Role.LEADER:
            return
        pr = self._progress.get(resp.from_id)
        if pr is not None and resp.code is ResponseCode.SUCCESS and resp.term == self.term:
            # the follower accepts us again: a paused probe may retry now
            if pr.state is ProgressState.PROBE:
                pr.paused = False
        rnd = self._hb_round
        if rnd is None or resp.round != rnd.round or resp.from_id in rnd.answered:
            return
        rnd.answered.add(resp.from_id)
        if resp.code is ResponseCode.SUCCESS:
            rnd.succ_num += 1
        elif resp.code is ResponseCode.EXPIRED_TERM:
            rnd.max_term = max(rnd.max_term, resp.term)
        elif resp.code is ResponseCode.INCONSISTENT_LEADER:
            rnd.inconsist_leader = True
        elif resp.code is ResponseCode.TERM_NOT_READY:
            rnd.not_ready_num += 1
        if (
            self._quorum(rnd.succ_num)
            or self._quorum(rnd.succ_num + rnd.not_ready_num)
            or len(rnd.answered) == len(self._others)
        ):
            self._decide_heartbeat_round(now_ms)

    def _decide_heartbeat_round(self, now_ms: int) -> None:
        """DLedger sendHeartbeats' verdict, incl. the maxHeartBeatLeak rule."""
        rnd = self._hb_round
        assert rnd is not None
        self._hb_round = None
        if self.role is not Role.LEADER or rnd.term != self.term:
            return
        if rnd.max_term > rnd.term:
            self._change_to_candidate(rnd.max_term, "heartbeat_expired_term")
            return
        if self._quorum(rnd.succ_num):
            self._last_succ_heartbeat_ms = now_ms
            self._confirmed_sent_ms = rnd.sent_ms
            self._release_reads(rnd.round)
        elif self._quorum(rnd.succ_num + rnd.not_ready_num):
            self._last_send_heartbeat_ms = None  # some members are catching up on the term
        elif rnd.inconsist_leader:
            self._change_to_candidate(rnd.term, "heartbeat_inconsistent_leader")
            return
        else:
            leak_ms = self.config.leader_lost_after_ms
            if now_ms - self._last_succ_heartbeat_ms > leak_ms:
                self._change_to_candidate(rnd.term, "heartbeat_quorum_lost")
                return
        if self._heartbeat_wanted:
            self._send_heartbeats(now_ms)

    def _release_reads(self, confirmed_round: int) -> None:
        keep = []
        for ctx, index, after_round in self._pending_reads:
            if confirmed_round > after_round:
                self._read_states.append(ReadState(ctx, index))
            else:
                keep.append((ctx, index, after_round))
        self._pending_reads = keep
        if keep:
            self._heartbeat_wanted = True

    # ---------------------------------------------------------------- replication: follower

    def _handle_append(self, req: AppendEntriesRequest, now_ms: int) -> AppendEntriesResponse:
        code = self._accept_leader(req.term, req.leader_id, now_ms)
        if code is not ResponseCode.SUCCESS:
            return AppendEntriesResponse(self.self_id, req.from_id, self.term, code, 0)
        prev_index, prev_term, entries = req.prev_index, req.prev_term, req.entries
        if prev_index < self.commit_index:
            # the committed prefix matches the leader's; skip what this message repeats
            skip = min(self.commit_index - prev_index, len(entries))
            entries = entries[skip:]
            prev_index += skip
            if prev_index < self.commit_index:
                return self._append_ok(req, self.commit_index)
            prev_term = self.term_at(prev_index)  # the commit index itself: ours is right
        if prev_index > self.last_index:
            return self._append_reject(req, prev_index, self.last_index + 1)
        here = self.term_at(prev_index)
        if here != prev_term:
            return self._append_reject(req, prev_index, self._conflict_hint(prev_index))
        self._append_entries(entries)
        last_new = prev_index + len(entries)
        if req.leader_commit > self.commit_index:
            self.commit_index = max(self.commit_index, min(req.leader_commit, last_new))
        return self._append_ok(req, last_new)

    def _append_ok(self, req: AppendEntriesRequest, index: int) -> AppendEntriesResponse:
        return AppendEntriesResponse(
            self.self_id, req.from_id, self.term, ResponseCode.SUCCESS, index
        )

    def _append_reject(
        self, req: AppendEntriesRequest, prev_index: int, hint: int
    ) -> AppendEntriesResponse:
        code = ResponseCode.INCONSISTENT_STATE
        return AppendEntriesResponse(self.self_id, req.from_id, self.term, code, prev_index, hint)

    def _conflict_hint(self, index: int) -> int:
        """First index of the term at `index` (not below commit + 1): retry from there."""
        term = self.term_at(index)
        while index - 1 > self.commit_index and self.term_at(index - 1) == term:
            index -= 1
        return index

    def _append_entries(self, entries: tuple[Entry, ...]) -> None:
        last = self.last_index
        for pos, e in enumerate(entries):
            if e.index <= last:
                if self.term_at(e.index) == e.term:
                    continue
                self._truncate_from(e.index)
            self._log.extend(entries[pos:])
            self._unstable_from = min(self._unstable_from, entries[pos].index)
            return

    def _truncate_from(self, index: int) -> None:
        if index <= self.commit_index:
            raise RuntimeError(
                f"refusing to truncate committed entry {index} <= {self.commit_index}"
            )
        dropped = self.last_index - index + 1
        del self._log[index - self._snap_index - 1 :]
        self._stable_index = min(self._stable_index, index - 1)
        self._unstable_from = min(self._unstable_from, index)
        self._event("raft_log_truncated", from_index=index, dropped=dropped)

    def _handle_install_snapshot(
        self, req: InstallSnapshotRequest, now_ms: int
    ) -> InstallSnapshotResponse:
        code = self._accept_leader(req.term, req.leader_id, now_ms)
        if code is not ResponseCode.SUCCESS:
            return InstallSnapshotResponse(self.self_id, req.from_id, self.term, code, 0)
        index, term = req.snapshot_index, req.snapshot_term
        ok = ResponseCode.SUCCESS
        if index <= self.commit_index:
            return InstallSnapshotResponse(
                self.self_id, req.from_id, self.term, ok, self.commit_index
            )
        if self.term_at(index) == term:
            # we already hold that entry, so the log up to it matches: no need to install
            self.commit_index = index
            return InstallSnapshotResponse(self.self_id, req.from_id, self.term, ok, index)
        snap = Snapshot(SnapshotMeta(index, term), req.data)
        self._log = []
        self._snapshot, self._snap_index, self._snap_term = snap, index, term
        self.commit_index = self._apply_handed = index
        self._stable_index = index
        self._unstable_from = index + 1
        self._pending_snapshot = snap
        self._event(
            "raft_snapshot_installed", index=index, snapshot_term=term, leader=req.leader_id
        )
        return InstallSnapshotResponse(self.self_id, req.from_id, self.term, ok, index)

    # ---------------------------------------------------------------- replication: leader

    def _flush_replication(self) -> None:
        for peer, pr in self._progress.items():
            if pr.state is ProgressState.PROBE:
                if not pr.paused and (
                    pr.next_index <= self.last_index or pr.sent_commit < self.commit_index
                ):
                    self._send_append(peer, pr)
            elif pr.state is ProgressState.REPLICATE:
                sent = False
                while (
                    pr.state is ProgressState.REPLICATE
                    and pr.next_index <= self.last_index
                    and not self._inflight_full(pr)
                ):
                    self._send_append(peer, pr)
                    sent = True
                if not sent and pr.sent_commit < self.commit_index:
                    self._send_append(peer, pr)

    def _inflight_full(self, pr: Progress) -> bool:
        return (
            len(pr.inflight) >= self.config.maxInflightPushNum
            or pr.inflight_bytes >= self.config.maxBatchPushSize * self.config.maxInflightPushNum
        )

    def _batch_from(self, lo: int) -> list[Entry]:
        start = lo - self._snap_index - 1
        out: list[Entry] = []
        size = 0
        cap_bytes = self.config.maxBatchPushSize
        for e in self._log[start : start + self.config.maxBatchPushNum]:
            size += ENTRY_HEADER.size + len(e.data)
            if out and size > cap_bytes:
                break
            out.append(e)
        return out

    def _send_append(self, peer: str, pr: Progress) -> None:
        if pr.next_index <= self._snap_index:
            self._send_snapshot(peer, pr)
            return
        prev = pr.next_index - 1
        prev_term = self.term_at(prev)
        assert prev_term is not None
        batch = self._batch_from(pr.next_index)
        commit = self.commit_index
        msg = AppendEntriesRequest(
            self.self_id, peer, self.self_id, self.term, prev, prev_term, commit, tuple(batch)
        )
        self._send(peer, msg)
        pr.sent_commit = commit
        if pr.state is ProgressState.PROBE:
            pr.paused = True
        elif batch:
            nbytes = sum(len(e.data) for e in batch)
            pr.inflight.append((batch[-1].index, nbytes))
            pr.inflight_bytes += nbytes
            pr.next_index = batch[-1].index + 1

    def _send_snapshot(self, peer: str, pr: Progress) -> None:
        snap = self._snapshot
        assert snap is not None
        meta = snap.meta
        self._send(
            peer,
            InstallSnapshotRequest(
                self.self_id, peer, self.self_id, self.term, meta.index, meta.term, snap.data
            ),
        )
        pr.state = ProgressState.SNAPSHOT
        pr.inflight.clear()
        pr.inflight_bytes = 0
        pr.snapshot_checks = 0

    def _check_replication_stalls(self) -> None:
        """Once per heartbeat: resume paused probes, restart pipelines that went silent."""
        for pr in self._progress.values():
            if pr.state is ProgressState.PROBE:
                pr.paused = False
            elif pr.state is ProgressState.REPLICATE:
                if pr.inflight and not pr.acked:
                    pr.become_probe(pr.match_index + 1)
            else:
                pr.snapshot_checks += 1
                if not pr.acked and pr.snapshot_checks >= self.config.maxHeartBeatLeak:
                    pr.become_probe(pr.match_index + 1)  # assume it was lost: send again
            pr.acked = False

    def _handle_append_response(self, resp: AppendEntriesResponse) -> None:
        if self.role is not Role.LEADER:
            return
        pr = self._progress.get(resp.from_id)
        if pr is None:
            return
        if resp.code is ResponseCode.EXPIRED_TERM and resp.term > self.term:
            self._change_to_candidate(resp.term, "append_expired_term")
            return
        if resp.term != self.term:
            return
        if resp.code is ResponseCode.SUCCESS:
            pr.acked = True
            self._on_match(pr, resp.index)
        elif resp.code is ResponseCode.INCONSISTENT_STATE:
            pr.acked = True
            rejected, hint = resp.index, resp.hint_index
            # stale if the follower has since acknowledged past what it then held
            fresh = rejected > pr.match_index and hint > pr.match_index
            if pr.state is ProgressState.REPLICATE and fresh:
                pr.become_probe(min(hint, rejected))
            elif pr.state is ProgressState.PROBE and rejected == pr.next_index - 1:
                pr.become_probe(min(hint, rejected))
        elif pr.state is not ProgressState.SNAPSHOT:
            # the member does not follow us (yet); retry after the next heartbeat
            pr.become_probe(pr.match_index + 1)
            pr.paused = True

    def _on_match(self, pr: Progress, index: int) -> None:
        advanced = index > pr.match_index
        if advanced:
            pr.match_index = index
        if pr.next_index <= pr.match_index:
            pr.next_index = pr.match_index + 1
        while pr.inflight and pr.inflight[0][0] <= index:
            pr.inflight_bytes -= pr.inflight.popleft()[1]
        # a late answer to an old message must not restart the pipeline (that re-sends the
        # window, whose answers restart it again: a message storm under loss and reordering)
        if pr.state is ProgressState.PROBE and (advanced or index >= self.last_index):
            pr.state = ProgressState.REPLICATE
            pr.paused = False
        if advanced:
            self._maybe_commit()

    def _handle_snapshot_response(self, resp: InstallSnapshotResponse) -> None:
        if self.role is not Role.LEADER:
            return
        pr = self._progress.get(resp.from_id)
        if pr is None:
            return
        if resp.code is ResponseCode.EXPIRED_TERM and resp.term > self.term:
            self._change_to_candidate(resp.term, "snapshot_expired_term")
            return
        if resp.term != self.term or pr.state is not ProgressState.SNAPSHOT:
            return
        pr.acked = True
        if resp.code is ResponseCode.SUCCESS:
            pr.match_index = max(pr.match_index, resp.index)
            pr.become_probe(pr.match_index + 1)
            self._maybe_commit()
        else:
            pr.become_probe(pr.match_index + 1)
            pr.paused = True

    def _maybe_commit(self) -> None:
        """Commit the highest index durable on a majority, if it is of the current term."""
        matches = [pr.match_index for pr in self._progress.values()]
        matches.append(self._stable_index)  # the leader counts only what it has fsynced
        matches.sort(reverse=True)
        candidate = matches[len(self.peers) // 2]
        if candidate > self.commit_index and self.term_at(candidate) == self.term:
            self.commit_index = candidate
