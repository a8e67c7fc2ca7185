"""RaftCore: the controller's Raft as a pure state machine (no I/O, no clock, no global random).

Inputs are `tick(now_ms)`, `step(msg, now_ms)`, `propose(data, now_ms)`, `read_index(ctx,
now_ms)`, `report_unreachable(to_id, msg, now_ms)` and `compact(index, term, data)`; outputs
come out as one `Ready` batch that the shell handles in the order documented on `Ready`, then
confirms with `advance(ready)`.

Election and heartbeats live in `election.py` (ElectionMixin, with the DLedger deviations),
replication and commit in `replication.py` (ReplicationMixin); this module owns the state,
the inputs, the Ready batch and the role changes.
"""

from __future__ import annotations

import random

import attrs

from rocketrio.actors.observe.events import (
    LogEvent,
    RaftLeaderElected,
    RaftRoleChanged,
    RaftTermIncreased,
)
from rocketrio.actors.raft.config import RaftConfig
from rocketrio.actors.raft.election import ElectionMixin
from rocketrio.actors.raft.replication import ReplicationMixin
from rocketrio.actors.raft.state import (
    HeartBeatRound,
    ParseResult,
    Progress,
    ReadState,
    Role,
    VoteRound,
)
from rocketrio.protocol.raft import (
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


class NotLeader(Exception):
    """Only the leader accepts proposals and reads; names the leader if one is known."""

    def __init__(self, leader_id: str | None, leader_addr: str | None) -> None:
        super().__init__(f"not leader, leader is {leader_id or 'unknown'} ({leader_addr or '-'})")
        self.leader_id = leader_id
        self.leader_addr = leader_addr


class LeaderPendingFull(Exception):
    """Too many proposals are waiting for commit (maxPendingRequestsNum)."""


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
    7. `log_records`: log them (catalogue records, `rocketrio.actors.observe.events.emit`).
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
    log_records: list[LogEvent]


class RaftCore(ElectionMixin, ReplicationMixin):
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
        # A member restarting with its own vote in its term may have led that term and sent
        # entries it never fsynced (a leader sends before its own fsync, see node.py). DLedger
        # would let it win that term again and append other entries at those indexes under
        # the same term, which breaks Log Matching; so its first round is in a new term.
        self._last_parse_result = (
            ParseResult.WAIT_TO_VOTE_NEXT
            if hard_state.voted_for == self_id
            else ParseResult.WAIT_TO_REVOTE
        )
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
        self._notes: list[LogEvent] = []
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
            or self._notes
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
            log_records=self._notes,
        )
        self._handed_hs = hs
        self._unstable_from = self.last_index + 1
        self._apply_handed = max(self._apply_handed, self.commit_index)
        self._pending_snapshot = None
        self._msgs, self._notes, self._read_states, self._dropped_reads = [], [], [], []
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

    def _note(self, record: LogEvent) -> None:
        """A log record for the shell to write (the catalogue's raft_* events)."""
        self._notes.append(record)

    # ---------------------------------------------------------------- role changes

    def _change_to_candidate(self, term: int, reason: str) -> None:
        """DLedger changeRoleToCandidate: remember the term, do not adopt it yet."""
        if term < self.term:
            return
        self._known_max_term_in_group = max(self._known_max_term_in_group, term)
        if self._vote_round is not None and self._vote_round.term < term:
            self._vote_round = None  # ours, see the election.py docstring
        previous = self.role
        self.role = Role.CANDIDATE
        self.leader_id = None
        self._leave_leadership()
        if previous is not Role.CANDIDATE:
            self._note(
                RaftRoleChanged(
                    term=self.term, raft_role=str(self.role), reason=reason, seen_term=term
                )
            )

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
        self._note(
            RaftRoleChanged(
                term=self.term, raft_role=str(self.role), leader=leader_id, reason="heartbeat"
            )
        )

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
        self._note(
            RaftRoleChanged(
                term=self.term, raft_role=str(self.role), leader=self.self_id, reason="elected"
            )
        )
        self._note(
            RaftLeaderElected(term=self.term, leader=self.self_id, last_index=self.last_index)
        )
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
        self._note(RaftTermIncreased(term=self.term, previous_term=previous))
