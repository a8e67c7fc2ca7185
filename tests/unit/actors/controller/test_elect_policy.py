"""ElectMaster policy: candidates, old master, designated broker, and the ranking order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.controller.elect_policy import candidate_rank, elect
from rocketrio.actors.controller.heartbeat_manager import BrokerLiveInfo


def info(broker_id: int, epoch: int = 1, max_offset: int = 0, priority: int = 2**31 - 1):
    return BrokerLiveInfo(
        "c", "b", broker_id, f"h:{broker_id}", 0, 10_000, epoch, max_offset, -1, priority
    )


def run(
    sss: set[int],
    alive: set[int],
    *,
    old: int | None = None,
    prefer: int | None = None,
    all_replicas: set[int] | None = None,
    infos: dict[int, BrokerLiveInfo] | None = None,
) -> int | None:
    infos = infos or {}
    return elect(
        sync_state_brokers=sss,
        all_replica_brokers=all_replicas,
        old_master=old,
        prefer_broker_id=prefer,
        is_valid=lambda b: b in alive,
        live_info=infos.get,
    )


CASES = [
    # (name, sss, alive, old, prefer, all_replicas, infos, expected)
    ("old master alive is kept", {1, 2}, {1, 2}, 1, None, None, {}, 1),
    ("old master kept even if behind", {1, 2}, {1, 2}, 1, None, None,
     {1: info(1, 1, 10), 2: info(2, 2, 99)}, 1),
    ("prefer equal to old master", {1, 2}, {1, 2}, 1, 1, None, {}, 1),
    ("designated wins over living old master", {1, 2}, {1, 2}, 1, 2, None, {}, 2),
    ("designated dead: nobody", {1, 2, 3}, {1, 3}, 1, 2, None, {}, None),
    ("designated outside SyncStateSet: nobody", {1, 2}, {1, 2, 3}, None, 3, None, {}, None),
    ("designated outside SyncStateSet, unclean", {1, 2}, {1, 2, 3}, None, 3, {1, 2, 3}, {}, 3),
    ("no candidate alive", {1, 2}, {3}, 1, None, None, {}, None),
    ("no SyncStateSet member alive, unclean", {1, 2}, {3, 4}, 1, None, {1, 2, 3, 4},
     {3: info(3, 1, 5), 4: info(4, 1, 9)}, 4),
    ("unclean only when the set round fails", {1, 2}, {2, 3}, 1, None, {1, 2, 3},
     {2: info(2, 1, 5), 3: info(3, 9, 999)}, 2),
    ("higher epoch beats higher offset", {1, 2, 3}, {2, 3}, 1, None, None,
     {2: info(2, 3, 10), 3: info(3, 2, 1000)}, 2),
    ("same epoch: higher offset", {1, 2, 3}, {2, 3}, 1, None, None,
     {2: info(2, 3, 10), 3: info(3, 3, 11)}, 3),
    ("same epoch and offset: lower priority value", {1, 2, 3}, {2, 3}, 1, None, None,
     {2: info(2, 3, 10, 5), 3: info(3, 3, 10, 1)}, 3),
    ("full tie: lowest brokerId", {1, 4, 7}, {4, 7}, 1, None, None,
     {4: info(4, 3, 10, 1), 7: info(7, 3, 10, 1)}, 4),
    ("no heartbeat info ranks last", {1, 2, 3}, {2, 3}, None, None, None,
     {3: info(3, 0, 0)}, 3),
    ("empty SyncStateSet", set(), {1}, None, None, None, {}, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("sss", "alive", "old", "prefer", "all_replicas", "infos", "expected"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_elect(sss, alive, old, prefer, all_replicas, infos, expected) -> None:
    assert run(sss, alive, old=old, prefer=prefer, all_replicas=all_replicas, infos=infos) == (
        expected
    )


def test_candidate_rank_order() -> None:
    ranked = sorted(
        [(5, info(5, 1, 100)), (2, info(2, 2, 0)), (3, info(3, 2, 0, 0)), (9, None)],
        key=lambda p: candidate_rank(p[0], p[1]),
    )
    assert [b for b, _ in ranked] == [3, 2, 5, 9]


@given(
    sss=st.sets(st.integers(1, 8), max_size=6),
    others=st.sets(st.integers(1, 8), max_size=6),
    alive=st.sets(st.integers(1, 8)),
    data=st.data(),
)
def test_winner_is_alive_and_best_of_its_round(sss, others, alive, data) -> None:
    infos = {
        b: info(
            b,
            data.draw(st.integers(0, 3)),
            data.draw(st.integers(0, 3)),
            data.draw(st.integers(0, 2)),
        )
        for b in sss | others
    }
    all_replicas = sss | others
    winner = run(sss, alive, all_replicas=all_replicas, infos=infos)
    live_sss = sss & alive
    if winner is None:
        assert not (all_replicas & alive)
        return
    assert winner in alive
    pool = live_sss or (all_replicas & alive)
    assert winner in pool
    assert all(candidate_rank(winner, infos[winner]) <= candidate_rank(b, infos[b]) for b in pool)
