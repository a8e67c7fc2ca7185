"""The whole-cluster simulation's replication options, each scripted into its critical situation
(issue 26, "also known": asyncLearner, inSyncReplicas without allAckInSyncStateSet, batch sends;
the seeded runs draw them too, replication_draw.py, but do not aim at these situations).

Each scenario runs on the world of tests/sim/cluster_sim.py with every invariant checked after
every step and at the end (one acknowledging master per epoch, nothing acknowledged lost,
confirmed bytes identical on every replica, nothing consumed truncated, epoch files agreeing,
the metadata invariants), and asserts its own critical situation; each also fails against a
mutant of tests/sim/mutants.py that breaks what it depends on.

- an asyncLearner (the third broker of broker-a) replicates the log but never joins the
  SyncStateSet and is never elected, across a power cut of the master;
- ``allAckInSyncStateSet=false, inSyncReplicas=2`` on three replicas: a message is acknowledged
  once the master and one slave hold it; the master loses power: the controller elects the most
  advanced slave, which holds every acknowledged message;
- producers send SEND_BATCH_MESSAGE batches (each message of a batch checked at its own queue
  offset) while the master loses power and comes back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from tests.sim.cluster_checks import ClusterFailure
from tests.sim.cluster_nodes import BrokerProc
from tests.sim.cluster_run import run_seed
from tests.sim.cluster_sim import World
from tests.sim.mutants import applied
from tests.sim.scenario_kit import (
    SEED,
    A,
    bid,
    controller_view,
    hold,
    master_proc,
    spec,
    wait_until,
)

LEARNER = "broker-a-2"
QUORUM = (("allAckInSyncStateSet", False), ("inSyncReplicas", 2), ("minInSyncReplicas", 2))


async def run(name: str, script: Callable[[World], Awaitable[None]], **kw: object) -> None:
    await run_seed(
        SEED, spec=spec(**kw), chaos=script,
        replay=f"pytest tests/sim/test_cluster_options.py -k {name}",
    )  # fmt: skip


def acked_in(w: World) -> int:
    return sum(1 for pos in w.checker.acked if pos[0] == A)


async def _members(w: World, n: int) -> frozenset[int]:
    def ok() -> bool:
        v = controller_view(w)
        return v is not None and v.master is not None and len(v.sync_state_set) == n

    await wait_until(w, ok, 30, f"{A}'s SyncStateSet holds {n} brokers")
    v = controller_view(w)
    assert v is not None
    return v.sync_state_set


async def _power_cut_master(w: World) -> BrokerProc:
    """Under traffic, the master is cut from every other process (its clients still reach
    it, so it keeps being asked to write) until a new master is elected; then it loses
    power and the network heals."""
    m = master_proc(w)
    before = acked_in(w)
    await wait_until(w, lambda: acked_in(w) >= before + 10, 20, "10 more writes acked")
    w.partition([m.host.ip], [p.host.ip for p in w.processes if p is not m])
    w.checker.note(f"isolated the master {m.name}")
    await wait_until(
        w, lambda: (n := w.master_of(A)) is not None and n is not m, 20, "a new master elected"
    )  # fmt: skip
    await hold(w, 1, "clients still reach the old master")
    await w.kill(m, machine=True, lose=True)
    w.checker.note(f"power cut of the old master {m.name}")
    w.heal_network()
    return m


async def script_learner(w: World) -> None:
    learner = next(p for p in w.brokers[A] if p.name == LEARNER)
    members = await _members(w, 2)
    await hold(w, 3, "the learner replicates")
    assert bid(learner) not in members
    lb, mb = learner.live_broker, master_proc(w).live_broker
    assert lb is not None and mb is not None
    assert lb.store.message_store.get_commitlog_max_offset() > 0, "the learner got nothing"
    old = await _power_cut_master(w)
    assert w.master_of(A) is not learner
    await hold(w, 3, "the new master takes writes")
    v = controller_view(w)
    assert v is not None and bid(learner) not in v.sync_state_set
    await w.restart(old)
    await hold(w, 3, "the old master back")


async def script_quorum(w: World) -> None:
    await _members(w, 3)
    await hold(w, 2, "traffic acknowledged by the master and one slave")
    old = await _power_cut_master(w)
    await hold(w, 3, "the new master takes writes")
    await w.restart(old)
    await hold(w, 3, "the old master back")


async def script_batches(w: World) -> None:
    await _members(w, 2)
    old = await _power_cut_master(w)
    await hold(w, 3, "the new master takes batches")
    await w.restart(old)
    await hold(w, 3, "the old master back")
    assert w.checker.stats.get("batches_acked", 0) > 10


LEARNER_SPEC = {"set_sizes": (3, 2), "broker_overrides": ((LEARNER, (("asyncLearner", True),)),)}
QUORUM_SPEC = {
    "set_sizes": (3, 2),
    "broker_overrides": tuple((f"{A}-{k}", QUORUM) for k in range(3)),
}
BATCH_SPEC = {"batch_sends": True}
SCENARIOS: dict[str, tuple[Callable[[World], Awaitable[None]], dict[str, object]]] = {
    "learner": (script_learner, LEARNER_SPEC),
    "quorum": (script_quorum, QUORUM_SPEC),
    "batches": (script_batches, BATCH_SPEC),
}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_option_keeps_every_invariant(mock_clock: trio.testing.MockClock, name: str) -> None:
    script, kw = SCENARIOS[name]
    await run(name, script, **kw)


@pytest.mark.parametrize(
    ("mutant", "name"),
    [
        ("ack_before_replicas", "batches"),
        ("learner_joins_the_sync_state_set", "learner"),
        ("ack_before_replicas", "quorum"),
    ],
)
async def test_the_option_scenarios_catch_a_broken_product(
    mock_clock: trio.testing.MockClock, mutant: str, name: str
) -> None:
    script, kw = SCENARIOS[name]
    with applied(mutant), pytest.raises(ClusterFailure) as caught:
        await run(f"{mutant}-{name}", script, **kw)
    print(f"{mutant} caught by {name}: {str(caught.value).splitlines()[0]}")
