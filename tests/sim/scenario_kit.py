"""Helpers of the named whole-cluster scenarios (tests/sim/test_cluster_scenarios.py), shared
with the analysis job's ground-truth test: a fixed seed and spec, and reading the simulated
cluster's controller view, SyncStateSet and master.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio
import trio.testing

from tests.sim.cluster_nodes import BrokerProc
from tests.sim.cluster_sim import SimSpec, World

A = "broker-a"


SEED = 4242  # network jitter, disk choices and Trio's task order; the faults are scripted


def spec(**kw: object) -> SimSpec:
    base = dict(
        seed=SEED, controllers=3, embedded=False, sync_flush=True, set_sizes=(2, 2),
        segment_size=32 * 1024, cq_entries=32, index=True, queues=2, producers=1,
        senders=2, max_messages=400, steps=0,
    )  # fmt: skip
    base.update(kw)
    return SimSpec(**base)  # type: ignore[arg-type]


async def wait_until(w: World, pred: Callable[[], bool], bound_s: float, what: str) -> None:
    deadline = trio.current_time() + bound_s
    while not pred():
        if trio.current_time() > deadline:
            w.checker.fail(f"scenario: {what} did not happen within {bound_s}s")
        w.check_step()
        await trio.sleep(0.1)
    w.checker.note(f"{what} (t={trio.current_time():.2f})")


async def hold(w: World, seconds: float, what: str) -> None:
    """Let time pass, checking every invariant as it does."""
    w.checker.note(f"{what} for {seconds}s (t={trio.current_time():.2f})")
    end = trio.current_time() + seconds
    while trio.current_time() < end:
        w.check_step()
        await trio.sleep(0.25)


def bid(p: BrokerProc) -> int:
    """The broker's controller-assigned id."""
    b = p.live_broker
    assert b is not None and b.roles is not None and b.roles.broker_controller_id
    return b.roles.broker_controller_id


@attrs.frozen
class View:
    master: int | None
    epoch: int
    sync_state_set: frozenset[int]


def controller_view(w: World, set_name: str = A) -> View | None:
    """The set as the controller leader's state machine holds it."""
    leader = w.controller_leader()
    c = leader.live_controller if leader else None
    info = c.replicas.sync_state_info(set_name) if c else None
    if info is None:
        return None
    return View(info.master_broker_id, info.master_epoch, frozenset(info.sync_state_set))


def master_proc(w: World, set_name: str = A) -> BrokerProc:
    m = w.master_of(set_name)
    assert m is not None
    return m


async def full_set(w: World, set_name: str = A, bound_s: float = 20.0) -> View:
    n = len(w.brokers[set_name])

    def ok() -> bool:
        v = controller_view(w, set_name)
        return v is not None and v.master is not None and len(v.sync_state_set) == n

    await wait_until(w, ok, bound_s, f"{set_name}'s SyncStateSet holds all {n} brokers")
    v = controller_view(w, set_name)
    assert v is not None
    return v
