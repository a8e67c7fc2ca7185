"""The tally that lets a controller leader depose a master (upstream #4800), as a pure function,
and the wire headers of CONTROLLER_CHECK_BROKER_ALIVE."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.controller.death_check import DeathTally, majority, tally_death
from rocketrio.protocol.controller_headers import (
    BrokerAliveVerdict,
    CheckBrokerAliveRequestHeader,
    CheckBrokerAliveResponseHeader,
)
from rocketrio.protocol.serde import HeaderError, from_ext, to_ext

A, D, U = BrokerAliveVerdict.ALIVE, BrokerAliveVerdict.DEAD, BrokerAliveVerdict.UNKNOWN
G3 = ("n0", "n1", "n2")
G5 = ("n0", "n1", "n2", "n3", "n4")


@pytest.mark.parametrize(("size", "quorum"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)])
def test_majority(size: int, quorum: int) -> None:
    assert majority(size) == quorum


def test_majority_of_nobody_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one replica"):
        majority(0)


# (group, answers with the leader n0 first, confirmed, cannot_confirm)
CASES = [
    # one replica (the embedded default): the leader is the majority, nothing to ask
    (("n0",), {"n0": D}, True, False),
    # three: the leader's word alone never suffices
    (G3, {"n0": D}, False, False),  # still waiting for n1, n2
    (G3, {"n0": D, "n1": D}, True, False),  # decided without waiting for n2
    (G3, {"n0": D, "n1": A}, False, False),  # n2 could still confirm
    (G3, {"n0": D, "n1": A, "n2": A}, False, True),  # asymmetric partition
    (G3, {"n0": D, "n1": A, "n2": D}, True, False),
    (G3, {"n0": D, "n1": U, "n2": U}, False, True),  # peers too young to judge
    (G3, {"n0": D, "n1": U, "n2": D}, True, False),
    # five: 3 DEAD needed
    (G5, {"n0": D, "n1": D}, False, False),
    (G5, {"n0": D, "n1": D, "n2": D}, True, False),
    (G5, {"n0": D, "n1": A, "n2": A, "n3": U}, False, True),
    (G5, {"n0": D, "n1": D, "n2": A, "n3": A}, False, False),  # n4 decides
    # two: both must agree
    (("n0", "n1"), {"n0": D}, False, False),
    (("n0", "n1"), {"n0": D, "n1": A}, False, True),
    (("n0", "n1"), {"n0": D, "n1": D}, True, False),
]


@pytest.mark.parametrize(("group", "answers", "confirmed", "cannot"), CASES)
def test_tally(
    group: tuple[str, ...],
    answers: dict[str, BrokerAliveVerdict],
    confirmed: bool,
    cannot: bool,
) -> None:
    t = tally_death(group, answers)
    assert (t.confirmed, t.cannot_confirm, t.decided) == (confirmed, cannot, confirmed or cannot)


def test_tally_fields_name_who_said_what() -> None:
    t = tally_death(G3, {"n2": U, "n0": D})
    assert t == DeathTally(3, dead=("n0",), unknown=("n2",), no_answer=("n1",))
    assert t.fields() == {
        "dead": ["n0"],
        "alive": [],
        "unknown": ["n2"],
        "no_answer": ["n1"],
        "quorum": 2,
        "group_size": 3,
    }


def test_answers_from_outside_the_group_are_a_bug() -> None:
    with pytest.raises(ValueError, match=r"outside the group .*\['n7'\]"):
        tally_death(G3, {"n0": D, "n7": D})


verdicts = st.sampled_from([A, D, U, None])  # None: no answer


@given(st.integers(1, 7).flatmap(lambda n: st.lists(verdicts, min_size=n, max_size=n)))
def test_confirmed_exactly_when_a_majority_says_dead(said: list[BrokerAliveVerdict | None]) -> None:
    group = [f"n{i}" for i in range(len(said))]
    answers = {g: v for g, v in zip(group, said, strict=True) if v is not None}
    t = tally_death(group, answers)
    dead = said.count(D)
    assert t.confirmed == (dead > len(said) / 2)
    # a decided round stays decided whatever the missing answers turn out to be
    for late in (A, D, U):
        filled = tally_death(group, {g: answers.get(g, late) for g in group})
        if t.confirmed:
            assert filled.confirmed
        if t.cannot_confirm:
            assert not filled.confirmed
    if len(said) >= 3 and said[0] is D and said[1:].count(D) == 0:
        assert not t.confirmed  # the leader alone never deposes in a group of 3+


def test_check_headers_round_trip_and_refuse_a_bad_verdict() -> None:
    req = CheckBrokerAliveRequestHeader("DefaultCluster", "broker-a", 1, 250)
    ext = to_ext(req)
    assert ext == {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "1",
        "waitMillis": "250",
    }
    assert from_ext(CheckBrokerAliveRequestHeader, ext) == req
    assert from_ext(CheckBrokerAliveRequestHeader, {**ext, "waitMillis": "0"}).waitMillis == 0
    resp = CheckBrokerAliveResponseHeader(BrokerAliveVerdict.DEAD, 1200)
    assert to_ext(resp) == {"verdict": "DEAD", "silentMillis": "1200"}
    back = from_ext(CheckBrokerAliveResponseHeader, {"verdict": "UNKNOWN"})
    assert back.verdict is BrokerAliveVerdict.UNKNOWN and back.silentMillis is None
    with pytest.raises(HeaderError, match="MAYBE"):
        from_ext(CheckBrokerAliveResponseHeader, {"verdict": "MAYBE"})
    with pytest.raises(HeaderError, match="brokerId"):
        from_ext(CheckBrokerAliveRequestHeader, {"clusterName": "c", "brokerName": "b"})
