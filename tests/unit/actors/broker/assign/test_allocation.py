"""The broker's queue assignment core (actors/broker/assign/allocation.py) against upstream's
rules: AVG and AVG_BY_CIRCLE split the sorted queues among the sorted consumers (every queue
exactly once; AVG the same table as the client's own rebalance), the POP share, the mode
defaults (retry topics PULL), BROADCASTING, LMQ, and when there is no answer at all."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.assign.allocation import (
    ANY_QUEUE,
    STRATEGIES,
    Assigned,
    ModeDefaults,
    NoAssignment,
    StrategyInputError,
    allocate_averagely,
    allocate_by_circle,
    allocate_for_pop,
    assign,
    effective_mode,
)
from rocketrio.actors.client.rebalance import allocate as client_allocate
from rocketrio.protocol.assignment import (
    BROADCASTING,
    POP,
    PULL,
    QueryAssignmentRequestBody,
    SetMessageRequestModeRequestBody,
)
from rocketrio.protocol.bodies import MessageQueue


def mqs(n: int, topic: str = "T", broker: str = "broker-a") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def cids(n: int) -> list[str]:
    return [f"c{i}" for i in range(n)]


def ids(queues: list[MessageQueue]) -> list[int]:
    return [q.queueId for q in queues]


sizes = st.tuples(st.integers(1, 12), st.integers(1, 8))


# --- the strategies ----------------------------------------------------------------------------


def test_avg_gives_contiguous_blocks_and_the_first_clients_one_more() -> None:
    assert [ids(allocate_averagely(c, mqs(5), cids(2))) for c in cids(2)] == [[0, 1, 2], [3, 4]]
    assert [ids(allocate_averagely(c, mqs(2), cids(3))) for c in cids(3)] == [[0], [1], []]


def test_by_circle_deals_the_queues_round_robin() -> None:
    assert [ids(allocate_by_circle(c, mqs(5), cids(2))) for c in cids(2)] == [[0, 2, 4], [1, 3]]
    assert [ids(allocate_by_circle(c, mqs(2), cids(3))) for c in cids(3)] == [[0], [1], []]


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@given(sizes)
def test_every_queue_goes_to_exactly_one_consumer(name: str, size: tuple[int, int]) -> None:
    n_mq, n_cid = size
    strategy = STRATEGIES[name]
    shares = [strategy(c, mqs(n_mq), cids(n_cid)) for c in cids(n_cid)]
    flat = [q for s in shares for q in s]
    assert sorted(ids(flat)) == list(range(n_mq))


@given(sizes)
def test_avg_is_the_table_the_clients_compute_themselves(size: tuple[int, int]) -> None:
    n_mq, n_cid = size
    for c in cids(n_cid):
        assert allocate_averagely(c, mqs(n_mq), cids(n_cid)) == client_allocate(
            c, mqs(n_mq), cids(n_cid)
        )


def test_a_stranger_gets_nothing_and_empty_input_is_refused() -> None:
    assert allocate_averagely("x", mqs(4), cids(2)) == []
    for call in (
        lambda: allocate_averagely("", mqs(4), cids(2)),
        lambda: allocate_by_circle("c0", [], cids(2)),
        lambda: allocate_averagely("c0", mqs(4), []),
    ):
        with pytest.raises(StrategyInputError):
            call()


# --- POP -------------------------------------------------------------------------------------


def test_pop_without_a_share_gives_every_consumer_every_broker() -> None:
    two_brokers = mqs(3) + mqs(2, broker="broker-b")
    for share in (0, -1, 3, 2):  # <= 0, or >= consumers - 1 (3 consumers)
        got = allocate_for_pop(allocate_averagely, "c1", two_brokers, cids(3), share)
        assert {(q.brokerName, q.queueId) for q in got} == {
            ("broker-a", ANY_QUEUE),
            ("broker-b", ANY_QUEUE),
        }


def test_pop_share_adds_the_next_consumers_queues_wrapping_around() -> None:
    # 6 queues, 4 consumers, AVG: c0 [0,1] c1 [2,3] c2 [4] c3 [5]; share 1: plus the next one's
    got = {c: ids(allocate_for_pop(allocate_averagely, c, mqs(6), cids(4), 1)) for c in cids(4)}
    assert got == {"c0": [0, 1, 2, 3], "c1": [2, 3, 4], "c2": [4, 5], "c3": [5, 0, 1]}
    assert allocate_for_pop(allocate_averagely, "x", mqs(6), cids(4), 1) == []


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@given(st.integers(3, 8), st.integers(0, 8), st.integers(1, 6))
def test_with_a_share_of_k_every_queue_is_popped_by_k_plus_one_consumers(
    name: str, n_cid: int, extra_mq: int, k: int
) -> None:
    share = min(k, n_cid - 2)  # 0 < share < consumers - 1: a real share
    n_mq = n_cid + extra_mq  # no more consumers than queues
    got = [
        allocate_for_pop(STRATEGIES[name], c, mqs(n_mq), cids(n_cid), share) for c in cids(n_cid)
    ]
    counts = [sum(q in set(g) for g in got) for q in mqs(n_mq)]
    assert counts == [share + 1] * n_mq


def test_pop_with_more_consumers_than_queues_gives_each_one_queue() -> None:
    got = [ids(allocate_for_pop(allocate_averagely, c, mqs(2), cids(5), 1)) for c in cids(5)]
    assert got == [[0], [1], [0], [1], [0]]


# --- the mode and the whole answer -----------------------------------------------------------


def req(
    cid: str = "c0", topic: str = "T", strategy: str | None = "AVG", model: str = "CLUSTERING"
) -> QueryAssignmentRequestBody:
    return QueryAssignmentRequestBody(topic, "G", cid, strategy, model)


def test_the_mode_set_wins_then_pull_for_retry_topics_then_the_default() -> None:
    pop = ModeDefaults(POP, 2)
    stored = SetMessageRequestModeRequestBody("T", "G", PULL, 0)
    assert effective_mode(stored, "T", "G", pop) is stored
    assert effective_mode(None, "%RETRY%G", "G", pop).mode == PULL
    d = effective_mode(None, "T", "G", pop)
    assert (d.mode, d.popShareQueueNum) == (POP, 2)
    d = effective_mode(None, "T", "G", ModeDefaults())
    assert (d.mode, d.popShareQueueNum) == (PULL, 0)


def test_assign_answers_the_sorted_queues_with_the_mode() -> None:
    mode = SetMessageRequestModeRequestBody("T", "G", PULL)
    out = assign(req("c1"), mode, list(reversed(mqs(4))), ["c1", "c0"], broker_name="broker-a")
    assert isinstance(out, Assigned)
    assert [(a.messageQueue.queueId, a.mode) for a in out.assignments] == [(2, PULL), (3, PULL)]
    pop = SetMessageRequestModeRequestBody("T", "G", POP, 0)
    out = assign(req("c1"), pop, mqs(4), ["c0", "c1"], broker_name="broker-a")
    assert isinstance(out, Assigned)
    assert [(a.messageQueue.queueId, a.mode) for a in out.assignments] == [(ANY_QUEUE, POP)]


def test_broadcasting_and_no_server_balance_give_every_queue() -> None:
    mode = SetMessageRequestModeRequestBody("T", "G", PULL)
    for out in (
        assign(req(model=BROADCASTING), mode, mqs(3), None, broker_name="b"),
        assign(req(), mode, mqs(3), ["c0", "c1"], broker_name="b", server_balance=False),
    ):
        assert isinstance(out, Assigned) and len(out.assignments) == 3


def test_an_lmq_topic_is_its_one_queue_on_this_broker() -> None:
    mode = SetMessageRequestModeRequestBody("%LMQ%x", "G", PULL)
    out = assign(req(topic="%LMQ%x"), mode, None, ["c0"], broker_name="broker-z")
    assert isinstance(out, Assigned)
    assert [a.messageQueue for a in out.assignments] == [MessageQueue("%LMQ%x", "broker-z", 0)]


@pytest.mark.parametrize(
    ("request_", "queues", "consumers", "reason"),
    [
        (req(), None, ["c0"], "does not exist"),
        (req(), mqs(2), None, "no consumer of group G"),
        (req(strategy="HASH"), mqs(2), ["c0"], "unsupported strategy HASH"),
        (req(strategy=None), mqs(2), ["c0"], "unsupported strategy None"),
        (req(), [], ["c0"], "mqAll is null"),
        (req(), mqs(2), [], "cidAll is null"),
        (req(cid=""), mqs(2), ["c0"], "currentCID is empty"),
    ],
)
def test_no_answer_cases(
    request_: QueryAssignmentRequestBody,
    queues: list[MessageQueue] | None,
    consumers: list[str] | None,
    reason: str,
) -> None:
    mode = SetMessageRequestModeRequestBody("T", "G", PULL)
    out = assign(request_, mode, queues, consumers, broker_name="b")
    assert isinstance(out, NoAssignment) and reason in out.reason
