"""Leader election and heartbeats of RaftCore (a mixin; the state lives on RaftCore).

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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketrio.actors.observe.events import RaftHeartbeatTimeout, RaftVoteResult
from rocketrio.actors.raft.state import (
    HeartBeatRound,
    ParseResult,
    Progress,
    ProgressState,
    ReadState,
    Role,
    VoteRound,
)
from rocketrio.protocol.raft import (
    HeartBeatRequest,
    HeartBeatResponse,
    ResponseCode,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

if TYPE_CHECKING:
    import random

    from rocketrio.actors.raft.config import RaftConfig


class ElectionMixin:
    """RaftCore's vote rounds (candidate and voter side) and heartbeat rounds.

    Uses RaftCore's state (annotated below) and its `_send`, `_note`, `_ledger_end`,
    `_quorum`, `_change_to_*` and `_check_replication_stalls` methods.
    """

    self_id: str
    peers: dict[str, str]
    config: RaftConfig
    term: int
    voted_for: str | None
    leader_id: str | None
    commit_index: int
    role: Role
    _rng: random.Random
    _others: list[str]
    _known_max_term_in_group: int
    _need_increase_term_immediately: bool
    _next_time_to_request_vote: int
    _last_parse_result: ParseResult
    _vote_round: VoteRound | None
    _round_seq: int
    _last_leader_heartbeat_ms: int
    _progress: dict[str, Progress]
    _hb_round: HeartBeatRound | None
    _last_send_heartbeat_ms: int | None
    _last_succ_heartbeat_ms: int
    _confirmed_sent_ms: int | None
    _heartbeat_wanted: bool
    _pending_reads: list[tuple[int, int, int]]
    _read_states: list[ReadState]

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
        self._note(
            RaftVoteResult(
                term=rnd.term,
                outcome=str(result),
                member_num=len(self.peers),
                answered_num=len(rnd.answered),
                valid_num=rnd.valid_num,
                accepted_num=rnd.accepted_num,
                not_ready_term_num=rnd.not_ready_term_num,
                bigger_ledger_num=rnd.bigger_ledger_num,
                already_has_leader=rnd.already_has_leader,
                known_max_term_in_group=rnd.known_max_term_in_group,
            )
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
            self._note(
                RaftHeartbeatTimeout(term=self.term, leader=self.leader_id, silent_ms=silent_ms)
            )
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
