"""RaftCore rules, one test (or table row) per rule of seeds/dledger-leader-election.zh.md,
then replication, commit, snapshots and reads. Time is passed in explicitly (ms)."""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs
import pytest

from rocketrio.actors.raft.config import RaftConfig, RaftConfigError, parse_peers
from rocketrio.actors.raft.core import (
    LeaderPendingFull,
    NotLeader,
    RaftCore,
    ReadState,
    Ready,
    Role,
)
from rocketrio.protocol.raft import (
    AppendEntriesRequest,
    AppendEntriesResponse,
    Entry,
    HardState,
    HeartBeatRequest,
    HeartBeatResponse,
    InstallSnapshotRequest,
    RaftMessage,
    ResponseCode,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

IDS = ("n0", "n1", "n2", "n3", "n4")


def make(
    self_id: str = "n0",
    n: int = 3,
    term: int = 0,
    voted_for: str | None = None,
    log_terms: tuple[int, ...] = (),
    now: int = 0,
    seed: int = 1,
    **cfg: int,
) -> RaftCore:
    peers = {i: f"10.0.0.{k}:9877" for k, i in enumerate(IDS[:n])}
    config = RaftConfig(
        group="g", selfId=self_id, peers=";".join(f"{k}-{v}" for k, v in peers.items()), **cfg
    )
    log = [Entry(i + 1, t, b"e%d" % (i + 1)) for i, t in enumerate(log_terms)]
    return RaftCore(
        self_id, peers, config, random.Random(seed), HardState(term, voted_for), log, None, now
    )


NOTHING = Ready(None, None, [], False, [], [], [], [], [])


def flush(core: RaftCore) -> Ready:
    """Take the Ready (as the shell would: persist, send, apply) and advance."""
    rd = core.ready()
    if rd is None:
        return NOTHING
    core.advance(rd)
    return rd


def sent(rd: Ready, cls: type) -> list[RaftMessage]:
    return [m for _, m in rd.messages if isinstance(m, cls)]


def events(rd: Ready, name: str) -> list[dict[str, object]]:
    """The fields of the core's log records named ``name``."""
    return [attrs.asdict(r) for r in rd.log_records if r.NAME == name]


class Net:
    """Cores that exchange messages synchronously until quiet (etcd's `stabilize`)."""

    def __init__(self, cores: list[RaftCore]) -> None:
        self.cores = {c.self_id: c for c in cores}
        self.down: set[str] = set()
        self.applied: dict[str, list[Entry]] = {c.self_id: [] for c in cores}
        self.reads: dict[str, list[ReadState]] = {c.self_id: [] for c in cores}

    def stabilize(self, now: int, drop: Callable[[str, RaftMessage], bool] | None = None) -> None:
        for _ in range(100):
            moved = False
            for cid, core in self.cores.items():
                if cid in self.down:
                    continue
                rd = core.ready()
                if rd is None:
                    continue
                core.advance(rd)
                self.applied[cid].extend(rd.committed_entries)
                self.reads[cid].extend(rd.read_states)
                for to, msg in rd.messages:
                    if to in self.down or (drop is not None and drop(to, msg)):
                        continue
                    self.cores[to].step(msg, now)
                    moved = True
            if not moved:
                return
        raise AssertionError("network did not settle")


def elected_cluster(n: int = 3, leader: str = "n0") -> Net:
    """`leader` campaigns first at t=0 and wins term 0 (the others have not voted yet)."""
    net = Net([make(i, n=n) for i in IDS[:n]])
    net.cores[leader].tick(0)
    net.stabilize(0)
    assert net.cores[leader].role is Role.LEADER
    return net


def vote_req(term: int, let: int = 0, lei: int = 0, frm: str = "n1", cand: str | None = None):
    return VoteRequest(frm, "n0", cand or frm, term, let, lei, 1)


def follower_of(leader: str, term: int, **kw: object) -> RaftCore:
    core = make(term=term, **kw)
    core.step(HeartBeatRequest(leader, "n0", leader, term, 1), 0)
    assert core.role is Role.FOLLOWER and core.leader_id == leader
    flush(core)
    return core


# ----------------------------------------------------------------------------- voter rules


@pytest.mark.parametrize(
    ("voter", "request_", "result", "answer_term"),
    [
        pytest.param(lambda: make(term=3), vote_req(3), VoteResult.ACCEPT, 3, id="accept"),
        pytest.param(
            lambda: make(term=3, voted_for="n1"), vote_req(3), VoteResult.ACCEPT, 3,
            id="accept_repeated_vote",
        ),
        pytest.param(
            lambda: make(term=3, log_terms=(1, 2)), vote_req(3, 2, 2), VoteResult.ACCEPT, 3,
            id="accept_equal_log",
        ),
        pytest.param(
            lambda: make(term=3), vote_req(3, cand="n9"), VoteResult.REJECT_UNKNOWN_LEADER, 3,
            id="unknown_leader",
        ),
        pytest.param(
            lambda: make(term=3), vote_req(3, cand="n0"), VoteResult.REJECT_UNEXPECTED_LEADER, 3,
            id="unexpected_leader",
        ),
        pytest.param(
            lambda: make(term=3, log_terms=(1, 2)), vote_req(5, 1, 9),
            VoteResult.REJECT_EXPIRED_LEDGER_TERM, 3, id="expired_ledger_term",
        ),
        pytest.param(
            lambda: make(term=3, log_terms=(1, 1, 1)), vote_req(5, 1, 2),
            VoteResult.REJECT_SMALL_LEDGER_END_INDEX, 3, id="small_ledger_end_index",
        ),
        pytest.param(
            lambda: make(term=5, log_terms=(1, 2)), vote_req(4, 1, 9),
            VoteResult.REJECT_EXPIRED_LEDGER_TERM, 5, id="ledger_checked_before_term",
        ),
        pytest.param(
            lambda: make(term=5), vote_req(4), VoteResult.REJECT_EXPIRED_VOTE_TERM, 5,
            id="expired_vote_term",
        ),
        pytest.param(
            lambda: make(term=3, voted_for="n2"), vote_req(3), VoteResult.REJECT_ALREADY_VOTED, 3,
            id="already_voted",
        ),
        pytest.param(
            lambda: follower_of("n2", 3, voted_for="n2"), vote_req(3),
            VoteResult.REJECT_ALREADY_HAS_LEADER, 3, id="already_has_leader",
        ),
        pytest.param(
            lambda: make(term=2), vote_req(3), VoteResult.REJECT_TERM_NOT_READY, 2,
            id="term_not_ready",
        ),
        pytest.param(
            # the term file is behind the log (DLedger guards this too): answer the ledger term
            lambda: make(term=1, log_terms=(1, 2)), vote_req(1, 2, 2),
            VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, 2, id="term_small_than_ledger",
        ),
    ],
)  # fmt: skip
def test_vote_decision(
    voter: Callable[[], RaftCore], request_: VoteRequest, result: VoteResult, answer_term: int
) -> None:
    core = voter()
    core.step(request_, 0)
    rd = flush(core)
    (answer,) = sent(rd, VoteResponse)
    assert (answer.result, answer.term, answer.round) == (result, answer_term, request_.round)
    if result is VoteResult.ACCEPT:
        assert core.voted_for == request_.leader_id


def test_granted_vote_is_in_the_hard_state_of_the_same_ready() -> None:
    core = make(term=3)
    core.step(vote_req(3), 0)
    rd = flush(core)
    assert rd.hard_state == HardState(3, "n1") and rd.must_sync
    assert sent(rd, VoteResponse)[0].result is VoteResult.ACCEPT


def test_restarted_voter_remembers_its_vote() -> None:
    core = make(term=3, voted_for="n2")  # as loaded from the term file
    core.step(vote_req(3), 0)
    assert sent(flush(core), VoteResponse)[0].result is VoteResult.REJECT_ALREADY_VOTED


def test_term_not_ready_voter_adopts_the_term_then_accepts_the_revote() -> None:
    core = follower_of("n2", 2)
    core.step(vote_req(3), 10)
    assert (core.role, core.term) == (Role.CANDIDATE, 2)  # the term moves on the next tick
    core.tick(11)
    rd = flush(core)
    assert (core.term, core.voted_for) == (3, None) and rd.hard_state == HardState(3, None)
    assert not sent(rd, VoteRequest)  # it waits a random interval before campaigning itself
    core.step(vote_req(3), 12)
    assert sent(flush(core), VoteResponse)[0].result is VoteResult.ACCEPT


# ----------------------------------------------------------------------------- candidate rounds


def start_round(core: RaftCore, now: int) -> list[VoteRequest]:
    core.tick(now)
    return sent(flush(core), VoteRequest)


def answer(core: RaftCore, req: VoteRequest, result: VoteResult, term: int, now: int) -> None:
    core.step(VoteResponse(req.to_id, req.from_id, term, req.round, result), now)


def first_round_after(core: RaftCore, start: int, limit: int = 5000) -> tuple[int, int]:
    """Tick every ms from `start`; return (time, term) of the next vote round."""
    for t in range(start, start + limit):
        core.tick(t)
        rd = core.ready()
        if rd is not None:
            core.advance(rd)
            reqs = sent(rd, VoteRequest)
            if reqs:
                return t, reqs[0].term
    raise AssertionError("no vote round")


A, R = VoteResult.ACCEPT, VoteResult


@pytest.mark.parametrize(
    ("n", "answers", "outcome", "next_round_ms", "next_term"),
    [
        # 1. someone has a bigger term: take it for the next round
        pytest.param(3, [(R.REJECT_EXPIRED_VOTE_TERM, 7), (R.REJECT_ALREADY_VOTED, 0)],
                     "WAIT_TO_VOTE_NEXT", (150, 400), 7, id="bigger_term"),
        pytest.param(3, [(R.REJECT_TERM_SMALL_THAN_LEDGER, 4), (R.REJECT_ALREADY_VOTED, 0)],
                     "WAIT_TO_VOTE_NEXT", (150, 400), 4, id="bigger_ledger_term"),
        # 2. a member already follows a leader: back off one leak period more
        pytest.param(3, [(R.REJECT_ALREADY_HAS_LEADER, 0)],
                     "WAIT_TO_REVOTE", (750, 1000), 0, id="already_has_leader"),
        # 3. not enough valid answers (UNKNOWN = unreachable)
        pytest.param(3, [(R.UNKNOWN, 0), (R.UNKNOWN, 0)],
                     "WAIT_TO_REVOTE", (150, 400), 0, id="valid_not_quorum"),
        # 4. biggerLedgerNum: too many members hold a longer log
        pytest.param(3, [(R.REJECT_SMALL_LEDGER_END_INDEX, 0), (R.REJECT_EXPIRED_LEDGER_TERM, 0)],
                     "WAIT_TO_REVOTE", (550, 800), 0, id="bigger_ledger_num"),
        # 5. a quorum accepted, even with a minority holding longer logs
        pytest.param(5, [(R.REJECT_SMALL_LEDGER_END_INDEX, 0), (A, 0), (A, 0)],
                     "PASSED", None, None, id="passed_despite_bigger_ledger_minority"),
        pytest.param(3, [(A, 0)], "PASSED", None, None, id="passed"),
        # 6. accepted + not ready make a quorum: vote again at once, same term
        pytest.param(3, [(R.REJECT_TERM_NOT_READY, 0)],
                     "REVOTE_IMMEDIATELY", (0, 0), 0, id="revote_immediately"),
        # 7. anything else: next round with term + 1
        pytest.param(3, [(R.REJECT_ALREADY_VOTED, 0), (R.REJECT_ALREADY_VOTED, 0)],
                     "WAIT_TO_VOTE_NEXT", (150, 400), 1, id="split_vote"),
    ],
)  # fmt: skip
def test_vote_round_outcome(
    n: int,
    answers: list[tuple[VoteResult, int]],
    outcome: str,
    next_round_ms: tuple[int, int] | None,
    next_term: int | None,
) -> None:
    core = make(n=n)
    reqs = start_round(core, 100)
    for req, (result, term) in zip(reqs, answers, strict=False):
        answer(core, req, result, term, 100)
    rd = flush(core)
    (verdict,) = events(rd, "raft_vote_result")
    assert verdict["outcome"] == outcome
    if outcome == "PASSED":
        assert core.role is Role.LEADER and core.term == 0
        assert len(sent(rd, HeartBeatRequest)) == n - 1  # the leader announces itself at once
        assert rd.entries == [Entry(1, 0, b"")]  # and appends its no-op
        return
    assert core.role is Role.CANDIDATE
    assert next_round_ms is not None
    at, term = first_round_after(core, 101 if next_round_ms[0] else 100)
    assert 100 + next_round_ms[0] <= at <= 100 + next_round_ms[1]
    assert term == next_term


def test_round_without_answers_is_decided_at_its_deadline() -> None:
    core = make(n=5)
    reqs = start_round(core, 0)
    answer(core, reqs[0], VoteResult.ACCEPT, 0, 5)  # 2 of 5 accepted, 2 of 5 valid
    core.tick(199)
    assert not events(flush(core), "raft_vote_result")
    core.tick(200)  # voteRequestTimeoutMs
    (verdict,) = events(flush(core), "raft_vote_result")
    assert (verdict["outcome"], verdict["valid_num"]) == ("WAIT_TO_REVOTE", 2)


def test_unreachable_member_counts_as_answered() -> None:
    core = make()
    reqs = start_round(core, 0)
    core.report_unreachable("n1", reqs[0], 3)
    core.report_unreachable("n2", reqs[1], 3)
    (verdict,) = events(flush(core), "raft_vote_result")
    assert (verdict["answered_num"], verdict["valid_num"]) == (3, 1)


def test_late_answer_of_an_old_round_is_ignored() -> None:
    core = make()
    old = start_round(core, 0)
    core.tick(200)  # deadline: WAIT_TO_REVOTE
    flush(core)
    answer(core, old[0], VoteResult.ACCEPT, 0, 201)
    assert core.role is Role.CANDIDATE


def test_single_member_elects_itself_and_commits() -> None:
    core = make(n=1)
    core.tick(0)
    assert core.role is Role.LEADER
    flush(core)  # persists the no-op
    assert core.commit_index == 1
    index = core.propose(b"x", 1)
    rd = flush(core)
    assert rd.entries == [Entry(index, 0, b"x")]
    assert flush(core).committed_entries == [Entry(index, 0, b"x")]


# ----------------------------------------------------------------------------- heartbeats (member)


def hb(term: int, leader: str = "n1", frm: str = "n1", commit: int = 0) -> HeartBeatRequest:
    return HeartBeatRequest(frm, "n0", leader, term, 9, commit)


@pytest.mark.parametrize(
    ("member", "beat", "code", "role", "leader"),
    [
        pytest.param(lambda: make(term=3), hb(3, leader="n9"), ResponseCode.UNKNOWN_MEMBER,
                     Role.CANDIDATE, None, id="unknown_member"),
        pytest.param(lambda: make(term=3), hb(3, leader="n0"), ResponseCode.UNEXPECTED_MEMBER,
                     Role.CANDIDATE, None, id="unexpected_member"),
        pytest.param(lambda: make(term=5), hb(4), ResponseCode.EXPIRED_TERM,
                     Role.CANDIDATE, None, id="expired_term"),
        pytest.param(lambda: make(term=3), hb(3), ResponseCode.SUCCESS,
                     Role.FOLLOWER, "n1", id="first_leader_of_the_term"),
        pytest.param(lambda: follower_of("n1", 3), hb(3), ResponseCode.SUCCESS,
                     Role.FOLLOWER, "n1", id="known_leader"),
        pytest.param(lambda: follower_of("n2", 3), hb(3), ResponseCode.INCONSISTENT_LEADER,
                     Role.FOLLOWER, "n2", id="inconsistent_leader"),
        pytest.param(lambda: follower_of("n1", 3), hb(4), ResponseCode.TERM_NOT_READY,
                     Role.CANDIDATE, None, id="term_not_ready"),
    ],
)  # fmt: skip
def test_heartbeat_answer(
    member: Callable[[], RaftCore],
    beat: HeartBeatRequest,
    code: ResponseCode,
    role: Role,
    leader: str | None,
) -> None:
    core = member()
    term_before = core.term
    core.step(beat, 50)
    (reply,) = sent(flush(core), HeartBeatResponse)
    assert (reply.code, reply.round, reply.term) == (code, beat.round, term_before)
    assert (core.role, core.leader_id) == (role, leader)


def test_bigger_term_heartbeat_then_follows_after_adopting_the_term() -> None:
    core = follower_of("n1", 3)
    core.step(hb(4, leader="n2", frm="n2"), 10)
    core.tick(11)
    assert core.term == 4
    core.step(hb(4, leader="n2", frm="n2"), 12)
    assert (core.role, core.leader_id, core.term) == (Role.FOLLOWER, "n2", 4)


def test_follower_turns_candidate_after_max_heartbeat_leak() -> None:
    core = follower_of("n1", 3)  # last heartbeat at 0
    core.step(hb(3), 500)
    core.tick(1100)  # 600 ms = maxHeartBeatLeak * heartBeatTimeIntervalMs: not yet
    assert core.role is Role.FOLLOWER
    core.tick(1101)
    rd = flush(core)
    assert (core.role, core.term, core.leader_id) == (Role.CANDIDATE, 3, None)
    assert events(rd, "raft_heartbeat_timeout")[0]["silent_ms"] == 601


def test_heartbeat_commit_is_applied_up_to_the_members_log() -> None:
    core = follower_of("n1", 1, log_terms=(1, 1))
    core.step(hb(1, commit=2), 5)
    assert flush(core).committed_entries == [Entry(1, 1, b"e1"), Entry(2, 1, b"e2")]


# ----------------------------------------------------------------------------- heartbeats (leader)


def leader_core(n: int = 3) -> tuple[RaftCore, list[HeartBeatRequest]]:
    """n0 elected at t=0; returns it and its first heartbeat round."""
    core = make(n=n)
    for req in start_round(core, 0)[: n // 2]:
        answer(core, req, VoteResult.ACCEPT, 0, 0)
    assert core.role is Role.LEADER
    return core, sent(flush(core), HeartBeatRequest)


def beat_back(core: RaftCore, beat: HeartBeatRequest, code: ResponseCode, term: int = 0) -> None:
    core.step(HeartBeatResponse(beat.to_id, "n0", term, beat.round, code), 1)


def test_heartbeat_quorum_keeps_the_lease() -> None:
    core, beats = leader_core()
    beat_back(core, beats[0], ResponseCode.SUCCESS)
    assert core.role is Role.LEADER
    assert core.is_leader_confirmed(399) and not core.is_leader_confirmed(400)


def test_bigger_term_in_heartbeat_answers_deposes_the_leader() -> None:
    core, beats = leader_core()
    beat_back(core, beats[0], ResponseCode.EXPIRED_TERM, term=9)
    beat_back(core, beats[1], ResponseCode.SUCCESS)  # a quorum, yet maxTerm wins
    assert core.role is Role.CANDIDATE
    assert first_round_after(core, 2)[1] == 9


def test_inconsistent_leader_without_quorum_deposes_the_leader() -> None:
    core, beats = leader_core()
    beat_back(core, beats[0], ResponseCode.INCONSISTENT_LEADER)
    core.report_unreachable("n2", beats[1], 2)
    assert core.role is Role.CANDIDATE


def test_not_ready_members_make_the_leader_beat_again_at_once() -> None:
    core, beats = leader_core()
    beat_back(core, beats[0], ResponseCode.TERM_NOT_READY)
    core.tick(2)  # long before the 200 ms interval
    assert len(sent(flush(core), HeartBeatRequest)) == 2
    assert core.role is Role.LEADER


def test_leader_steps_down_after_max_heartbeat_leak_without_quorum() -> None:
    core, _ = leader_core()  # elected (and last confirmed) at 0
    for t in (200, 400, 600):  # each round times out, the leak is not over yet
        core.tick(t)
        assert core.role is Role.LEADER
        assert len(sent(flush(core), HeartBeatRequest)) == 2
    core.tick(800)  # 800 - 0 > 600
    rd = flush(core)
    assert core.role is Role.CANDIDATE
    assert events(rd, "raft_role_changed")[0]["reason"] == "heartbeat_quorum_lost"


# ----------------------------------------------------------------------------- replication


def test_propose_on_a_follower_names_the_leader() -> None:
    core = follower_of("n1", 2)
    with pytest.raises(NotLeader) as err:
        core.propose(b"x", 0)
    assert (err.value.leader_id, err.value.leader_addr) == ("n1", "10.0.0.1:9877")
    assert "leader is n1" in str(err.value)


def test_propose_refuses_empty_data_and_a_full_pipeline() -> None:
    core, _ = leader_core()
    with pytest.raises(ValueError, match="non-empty"):
        core.propose(b"", 0)
    small = make(n=1, maxPendingRequestsNum=3)
    small.tick(0)  # leader with its (uncommitted) no-op
    small.propose([b"a", b"b"], 0)
    with pytest.raises(LeaderPendingFull):
        small.propose(b"c", 0)


def test_commit_needs_a_majority_of_durable_copies() -> None:
    net = elected_cluster()
    net.stabilize(1)
    leader = net.cores["n0"]
    index = leader.propose(b"x", 2)
    rd = leader.ready()  # handed to the shell, not yet durable on the leader
    assert rd is not None and rd.entries[-1].index == index
    (app,) = [m for to, m in rd.messages if to == "n1" and isinstance(m, AppendEntriesRequest)]
    net.cores["n1"].step(app, 3)
    ack = sent(flush(net.cores["n1"]), AppendEntriesResponse)[0]
    leader.step(ack, 4)
    assert leader.commit_index < index  # n1 + an unsynced leader is not a majority
    leader.advance(rd)
    assert leader.commit_index == index


def test_only_current_term_entries_commit_by_counting() -> None:
    """Raft figure 8: an old-term entry on a majority is not committed by counting copies."""
    core = make(term=3, log_terms=(1, 2))
    reqs = start_round(core, 0)
    answer(core, reqs[0], VoteResult.ACCEPT, 3, 0)
    assert core.role is Role.LEADER and core.last_index == 3  # its no-op: index 3, term 3
    flush(core)
    core.step(AppendEntriesResponse("n1", "n0", 3, ResponseCode.SUCCESS, 2), 1)
    assert core.commit_index == 0  # entry 2 (term 2) is on a majority, still not committed
    core.step(AppendEntriesResponse("n1", "n0", 3, ResponseCode.SUCCESS, 3), 2)
    assert core.commit_index == 3  # the no-op of term 3 commits everything before it


def append(term: int, prev: int, prev_term: int, entries: list[Entry], commit: int = 0):
    return AppendEntriesRequest("n1", "n0", "n1", term, prev, prev_term, commit, tuple(entries))


def test_follower_reports_a_gap_with_its_last_index() -> None:
    core = follower_of("n1", 2, log_terms=(1, 1))
    core.step(append(2, 5, 2, [Entry(6, 2, b"x")]), 1)
    (resp,) = sent(flush(core), AppendEntriesResponse)
    assert (resp.code, resp.index, resp.hint_index) == (ResponseCode.INCONSISTENT_STATE, 5, 3)


def test_follower_hints_the_first_index_of_the_conflicting_term() -> None:
    core = follower_of("n1", 3, log_terms=(1, 2, 2, 2))
    core.step(append(3, 4, 3, []), 1)
    (resp,) = sent(flush(core), AppendEntriesResponse)
    assert (resp.code, resp.index, resp.hint_index) == (ResponseCode.INCONSISTENT_STATE, 4, 2)


def test_conflicting_suffix_is_replaced_and_commit_is_bounded() -> None:
    core = follower_of("n1", 3, log_terms=(1, 2, 2, 2))
    core.step(append(3, 1, 1, [Entry(2, 3, b"new")], commit=4), 1)
    rd = flush(core)
    assert rd.entries == [Entry(2, 3, b"new")]  # storage truncates 2.. and appends
    assert events(rd, "raft_log_truncated")[0]["index"] == 2
    assert core.last_index == 2
    assert core.commit_index == 2  # not 4: only 1..2 are known to match the leader
    assert sent(rd, AppendEntriesResponse)[0].index == 2


def test_repeated_entries_are_not_written_twice() -> None:
    core = follower_of("n1", 1, log_terms=(1, 1))
    core.step(append(1, 0, 0, [Entry(1, 1, b"e1"), Entry(2, 1, b"e2"), Entry(3, 1, b"e3")]), 1)
    assert flush(core).entries == [Entry(3, 1, b"e3")]


def test_leader_backs_off_to_the_hint_and_catches_up() -> None:
    net = elected_cluster()
    net.stabilize(1)
    leader = net.cores["n0"]
    net.down.add("n2")
    for k in range(5):
        leader.propose(b"p%d" % k, 2)
        net.stabilize(2)
    lagging = net.cores["n2"]
    assert lagging.last_index == 1 and leader.last_index == 6
    net.down.clear()
    for t in (200, 400):  # a pipeline silent for a whole heartbeat interval is restarted
        leader.tick(t)
        net.stabilize(t)
    assert lagging.last_index == 6 and lagging.commit_index == 6
    assert [e.data for e in net.applied["n2"]] == [b"", b"p0", b"p1", b"p2", b"p3", b"p4"]


def test_pipeline_is_bounded_by_max_inflight_and_batches_are_capped() -> None:
    net = elected_cluster()
    net.stabilize(1)  # n1, n2 in REPLICATE
    leader = net.cores["n0"]
    cfg = leader.config
    leader.config = RaftConfig(
        group="g", selfId="n0", peers=cfg.peers, maxInflightPushNum=2, maxBatchPushNum=3
    )
    leader.propose([b"d%d" % k for k in range(20)], 2)
    rd = flush(leader)
    to_n1 = [m for to, m in rd.messages if to == "n1" and isinstance(m, AppendEntriesRequest)]
    assert [len(m.entries) for m in to_n1] == [3, 3]  # 2 messages in flight, 3 entries each
    assert [m.prev_index for m in to_n1] == [1, 4]  # pipelined: no wait for the first ack
    assert flush(leader).messages == []  # window full until an ack arrives
    leader.step(AppendEntriesResponse("n1", "n0", 0, ResponseCode.SUCCESS, 4), 3)
    more = [m for to, m in flush(leader).messages if to == "n1"]
    assert [m.prev_index for m in more] == [7]


def test_batch_bytes_cap_keeps_at_least_one_entry() -> None:
    core, _ = leader_core()
    core.config = RaftConfig(group="g", selfId="n0", peers=core.config.peers, maxBatchPushSize=70)
    core.step(AppendEntriesResponse("n1", "n0", 0, ResponseCode.SUCCESS, 1), 1)  # no-op acked
    core.propose([b"x" * 10, b"y" * 10, b"z" * 200, b"w"], 1)
    apps = [m for to, m in flush(core).messages if to == "n1"]
    # 20-byte entry header + data: two small entries fit in 70 bytes, the big one goes alone
    assert [[e.data[:1] for e in m.entries] for m in apps] == [[b"x", b"y"], [b"z"], [b"w"]]


def test_snapshot_installs_on_a_member_behind_the_compacted_log() -> None:
    net = elected_cluster()
    net.stabilize(1)
    leader = net.cores["n0"]
    net.down.add("n2")
    leader.propose([b"a", b"b", b"c"], 2)
    net.stabilize(2)
    assert leader.applied_index == 4
    leader.compact(4, 0, b"STATE@4")
    assert leader.snapshot_index == 4 and leader.first_index == 5
    leader.propose(b"d", 3)
    net.stabilize(3)
    net.down.clear()
    follower = net.cores["n2"]
    rd_seen: list[Ready] = []
    original = follower.ready

    def spy() -> Ready | None:
        rd = original()
        if rd is not None:
            rd_seen.append(rd)
        return rd

    follower.ready = spy
    for t in (200, 400):
        leader.tick(t)
        net.stabilize(t)
    installs = [rd.snapshot for rd in rd_seen if rd.snapshot is not None]
    assert [(s.meta.index, s.data) for s in installs] == [(4, b"STATE@4")]
    assert follower.snapshot_index == 4 and follower.last_index == 5
    assert follower.commit_index == 5
    assert net.applied["n2"] == [Entry(1, 0, b""), Entry(5, 0, b"d")]  # 2..4 via the snapshot


def test_install_snapshot_is_skipped_when_the_member_holds_that_entry() -> None:
    core = follower_of("n1", 1, log_terms=(1, 1, 1))
    core.step(InstallSnapshotRequest("n1", "n0", "n1", 1, 2, 1, b"S"), 1)
    rd = flush(core)
    assert rd.snapshot is None and core.commit_index == 2 and core.last_index == 3


def test_compaction_is_refused_beyond_the_applied_index() -> None:
    core, _ = leader_core()
    with pytest.raises(ValueError, match="beyond applied"):
        core.compact(1, 0, b"")


# ----------------------------------------------------------------------------- reads and restart


def test_read_index_in_a_cluster_and_without_quorum() -> None:
    net = elected_cluster()
    net.stabilize(1)
    leader = net.cores["n0"]
    leader.propose(b"w", 2)
    net.stabilize(2)
    leader.read_index(77, 3)
    net.stabilize(3)
    assert net.reads["n0"] == [ReadState(77, 2)]  # serve once index 2 is applied
    net.down.update({"n1", "n2"})
    leader.read_index(78, 4)
    for t in (200, 400, 600):
        leader.tick(t)
        net.stabilize(t)
    assert net.reads["n0"] == [ReadState(77, 2)]  # no quorum, no answer


def test_read_index_needs_a_round_started_after_the_read() -> None:
    core, beats = leader_core()  # first heartbeat round still unanswered
    core.read_index(5, 1)
    assert sent(flush(core), HeartBeatRequest) == []  # one round at a time
    beat_back(core, beats[0], ResponseCode.SUCCESS)  # confirms the leader, but from before
    rd = flush(core)
    assert rd.read_states == []
    new_beats = sent(rd, HeartBeatRequest)  # so a new round goes out at once
    assert len(new_beats) == 2
    beat_back(core, new_beats[0], ResponseCode.SUCCESS)
    assert flush(core).read_states == [ReadState(5, 1)]  # index covers the no-op at least


def test_pending_reads_are_dropped_when_leadership_is_lost() -> None:
    core, beats = leader_core()
    beat_back(core, beats[0], ResponseCode.SUCCESS)
    flush(core)
    core.read_index(6, 2)
    beats2 = sent(flush(core), HeartBeatRequest)
    beat_back(core, beats2[0], ResponseCode.EXPIRED_TERM, term=4)
    core.report_unreachable("n2", beats2[1], 3)
    rd = flush(core)
    assert core.role is Role.CANDIDATE and rd.dropped_reads == [6] and rd.read_states == []
    with pytest.raises(NotLeader):
        core.read_index(7, 4)


def test_restart_from_persisted_state_keeps_log_and_term() -> None:
    net = elected_cluster()
    net.stabilize(1)
    net.cores["n0"].propose(b"x", 2)
    net.stabilize(2)
    old = net.cores["n1"]
    log = old.entries(1, old.last_index)
    restarted = RaftCore(
        "n1", old.peers, old.config, random.Random(3), HardState(old.term, old.voted_for), log,
        None, 10,
    )  # fmt: skip
    assert (restarted.role, restarted.term, restarted.last_index) == (Role.CANDIDATE, 0, 2)
    assert restarted.commit_index == 0  # learnt again from the leader


@pytest.mark.parametrize(("voted_for", "first_term"), [("n0", 4), ("n1", 3), (None, 3)])
def test_a_member_that_voted_for_itself_campaigns_in_a_new_term_after_restart(
    voted_for: str | None, first_term: int
) -> None:
    """It may have led term 3 and sent entries it never fsynced (the leader sends before its
    fsync); winning term 3 again would put other entries at those indexes under term 3."""
    core = make(term=3, voted_for=voted_for, log_terms=(1, 3))
    reqs = start_round(core, 0)
    assert {r.term for r in reqs} == {first_term}


# ----------------------------------------------------------------------------- config


def test_peers_parse_in_order() -> None:
    assert parse_peers("n0-127.0.0.1:9877;n1-127.0.0.1:9878;") == {
        "n0": "127.0.0.1:9877",
        "n1": "127.0.0.1:9878",
    }


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"peers": "n0127.0.0.1:9877"}, "<id>-<host>:<port>"),
        ({"peers": "n0-127.0.0.1"}, "not <host>:<port>"),
        ({"peers": "n0-a:1;n0-b:2"}, "appears twice"),
        ({"selfId": "n7"}, "controllerDLegerSelfId"),
        ({"minVoteIntervalMs": 500}, "minVoteIntervalMs"),
        ({"heartBeatTimeIntervalMs": 0}, "heartBeatTimeIntervalMs"),
        ({"group": ""}, "controllerDLegerGroup"),
    ],
)
def test_bad_config_names_the_key(kwargs: dict[str, object], error: str) -> None:
    base: dict[str, object] = {"group": "g", "selfId": "n0", "peers": "n0-127.0.0.1:9877"}
    with pytest.raises((RaftConfigError, ValueError), match=error):
        RaftConfig(**{**base, **kwargs})


def test_config_from_controller_keys() -> None:
    c = RaftConfig.from_controller_keys(
        "DefaultControllerGroup", "n0-127.0.0.1:9877;n1-127.0.0.1:9878", "n1",
        heartBeatTimeIntervalMs=100,
    )  # fmt: skip
    assert (c.group, c.selfId, c.heartBeatTimeIntervalMs, c.leader_lost_after_ms) == (
        "DefaultControllerGroup", "n1", 100, 300,
    )  # fmt: skip
    with pytest.raises(RaftConfigError, match="unknown Raft setting"):
        RaftConfig.from_controller_keys("g", "n0-a:1", "n0", heartbeatMs=1)
