"""The seeded runs' replication draws and PushConsumer (issue 26 item 2): what a seed draws, the
rule each ack mode promises (cluster_checks.py, replication_draw.py), the offset watch
(offset_watch.py), and the seeds that catch the mutants these checkers exist for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.protocol.message_format import MessageExt
from tests.sim.cluster_checks import ClusterChecker, ClusterFailure
from tests.sim.cluster_clients import TOPIC
from tests.sim.cluster_push import OrderlyDriver
from tests.sim.cluster_run import run_seed
from tests.sim.cluster_sim import SimSpec
from tests.sim.metadata_checks import OFFSET_LAG_BOUND_S
from tests.sim.mutants import applied
from tests.sim.offset_watch import OffsetWatch
from tests.sim.replication_draw import ReplicationDraw

# ---------------------------------------------------------------------------- the draws


def test_seeds_draw_every_replication_option() -> None:
    # controller-mode seeds (an acting-mode seed keeps the product's default options and runs
    # no push group: cluster_sim.SimSpec._maybe_acting)
    draws = [d for d in map(SimSpec.draw, range(200)) if d.mode == "controller"]
    acting = [d for d in map(SimSpec.draw, range(200)) if d.mode == "acting"]
    assert acting and all(d.options == ReplicationDraw() and not d.push for d in acting)
    opts = [d.options for d in draws]
    assert {o.all_ack for o in opts} == {True, False}
    assert {o.in_sync_replicas for o in opts if not o.all_ack} == {1, 2, 3}
    assert {s for o in opts for s in o.learner_sets} == {"broker-a", "broker-b"}
    assert {o.batch_share for o in opts} == {0.0, 0.25, 0.5, 1.0}
    assert {o.push_fail_share for o in opts} == {0.0, 0.05, 0.2}
    assert {o.orderly for o in opts} == {True, False}
    assert all(d.push for d in draws)
    # the weak rule is drawn too (quorum below the voting replicas), and the strict one
    assert any(d.options.weak_sets(d.set_sizes) for d in draws)
    assert any(not d.options.all_ack and not d.options.weak_sets(d.set_sizes) for d in draws)
    # a failing seed prints what it drew: the spec line is the run's first trace line
    spec = draws[6].describe()
    assert "inSyncReplicas=2" in spec and "learner broker-a" in spec and "batch share" in spec


def test_a_learner_never_counts_and_quorums_are_clipped_to_the_voters() -> None:
    d = ReplicationDraw(all_ack=False, in_sync_replicas=3, min_in_sync_replicas=3,
                        learner_sets=("broker-a",))  # fmt: skip
    assert dict(d.overrides("broker-a", 2, 3)) == {
        "allAckInSyncStateSet": False, "inSyncReplicas": 2, "minInSyncReplicas": 2,
        "asyncLearner": True,
    }  # fmt: skip
    assert "asyncLearner" not in dict(d.overrides("broker-a", 1, 3))
    assert dict(d.overrides("broker-b", 0, 2))["inSyncReplicas"] == 2
    assert d.weak_sets((3, 2)) == {}  # k copies = every voter: as strict as allAck
    weak = ReplicationDraw(all_ack=False, in_sync_replicas=2).weak_sets((3, 2))
    assert set(weak) == {"broker-a"}
    assert ReplicationDraw().overrides("broker-a", 0, 3) == ()


# ---------------------------------------------------------------------------- the ack rules


def _checker(weak: bool) -> ClusterChecker:
    c = ClusterChecker(7)
    if weak:
        c.weak_sets = {"s": "inSyncReplicas=1 of 2 voting replicas"}
    c.on_send_ok(("s", "T", 0, 3), b"a", "ok", epoch=1)
    return c


def test_a_strict_set_loses_nothing_acknowledged_whatever_the_epochs() -> None:
    c = _checker(weak=False)
    c.epoch_start[("s", 2)] = (100, "b1#1")
    with pytest.raises(ClusterFailure, match="acknowledged message lost"):
        c.check_final_queue("s", "T", 0, {})
    c = _checker(weak=False)
    c.on_send_ok(("s", "T", 0, 3), b"b", "later", epoch=2)
    with pytest.raises(ClusterFailure, match="queue offset reused"):
        c.raise_problems()


def test_a_weak_set_loses_an_ack_only_across_a_later_failover() -> None:
    c = _checker(weak=True)
    with pytest.raises(ClusterFailure, match="acknowledged message lost"):
        c.check_final_queue("s", "T", 0, {})  # no later epoch: still lost
    c = _checker(weak=True)
    c.on_send_ok(("s", "T", 0, 3), b"b", "same epoch", epoch=1)
    with pytest.raises(ClusterFailure, match="queue offset reused"):
        c.raise_problems()
    c = _checker(weak=True)
    c.on_send_ok(("s", "T", 0, 3), b"b", "a later master", epoch=2)
    c.raise_problems()
    assert c.acked[("s", "T", 0, 3)] == b"b" and c.stats["lost_by_ack_mode"] == 1
    c = _checker(weak=True)
    c.epoch_start[("s", 2)] = (100, "b1#1")
    c.check_final_queue("s", "T", 0, {})
    assert c.excused == {("s", "T", 0, 3): b"a"}


def test_a_weak_set_never_loses_a_consumed_message() -> None:
    c = _checker(weak=True)
    c.on_received(("s", "T", 0, 3), b"a", "b0#1")
    c.on_send_ok(("s", "T", 0, 3), b"b", "a later master", epoch=2)
    with pytest.raises(ClusterFailure, match="consumed b'a'"):
        c.raise_problems()


# ---------------------------------------------------------------------------- offsets


def _broker(
    name: str,
    ip: str,
    offsets: dict[int, int],
    master: bool,
    *,
    epoch: int = 1,
    follows: str | None = "10.0.2.1:10911",
    incarnation: int = 1,
) -> Any:
    """A broker process as the watch sees it: master at ``epoch``, or a slave whose
    SlaveSynchronize copies from ``follows`` (None: it has no role yet)."""
    roles = SimpleNamespace(serving_as_master=lambda: master, master_epoch=epoch,
                            master_to_sync=lambda: None if master else follows)  # fmt: skip
    tables = SimpleNamespace(offsets=SimpleNamespace(query=lambda g, t, q: offsets.get(q, -1)))
    live = SimpleNamespace(recovery=object(), roles=roles, tables=tables)
    return SimpleNamespace(name=name, incarnation=incarnation, host=SimpleNamespace(ip=ip),
                           addr=f"{ip}:10911", live_broker=live)  # fmt: skip


async def _switch(
    contact_s: float,
    new_offset: int,
    after: int | None = None,
    follows: str | None = "10.0.2.1:10911",
) -> ClusterChecker:
    """b0 is master for 20 s, its offset growing by 1 a second; b1 is its slave in contact for
    the last ``contact_s``, holding ``new_offset`` (copying from ``follows``, b0 by default);
    then b1 is master (with ``after``: a consumer committed that to it since)."""
    c = ClusterChecker(3)
    watch = OffsetWatch(c, "g", 1)
    old_offsets: dict[int, int] = {}
    old = _broker("b0", "10.0.2.1", old_offsets, True)
    for t in range(21):
        old_offsets[0] = t
        slave = _broker("b1", "10.0.2.2", {0: new_offset}, False, follows=follows)
        watch.step("s", old, [old, slave], lambda a, b, t=t: t < 20 - contact_s)
        await trio.sleep(1)
    new = _broker("b1", "10.0.2.2", {0: new_offset if after is None else after}, True, epoch=2)
    watch.step("s", new, [new], lambda a, b: False)
    return c


async def test_the_offset_watch_allows_the_documented_rewind_and_no_more(
    mock_clock: trio.testing.MockClock,
) -> None:
    bound = int(OFFSET_LAG_BOUND_S)
    c = await _switch(10, 20 - bound)  # held 14 six seconds before the last contact (20)
    assert c.stats["offset_switch_checked"] == 1 and c.stats["offset_rewound_max"] == bound
    with pytest.raises(ClusterFailure, match="moved backwards beyond the bound"):
        await _switch(10, 20 - bound - 1)
    c = await _switch(3, 0)  # no full sync round in contact: not judged
    assert c.stats["offset_switch_unchecked"] == 1
    # what slave sync gave it is judged; a consumer's lower commit after the promotion is counted
    c = await _switch(10, 20 - bound, after=3)
    assert c.stats["offset_lowered_by_a_consumer"] == 1


async def test_a_replica_that_copies_from_no_master_or_another_is_not_in_contact(
    mock_clock: trio.testing.MockClock,
) -> None:
    # reachable for 10 s, but with no role (controllers unreachable) or following another
    # master: SlaveSynchronize never copied b0's offsets into it, so the switch is not judged
    for follows in (None, "10.0.2.3:10911"):
        c = await _switch(10, 0, follows=follows)
        assert c.stats["offset_switch_unchecked"] == 1 and "offset_switch_checked" not in c.stats


async def test_a_deposed_master_is_not_the_sets_master_once_the_newest_dies(
    mock_clock: trio.testing.MockClock,
) -> None:
    """Seed 59369's shape: b1, master of epoch 2, is cut off from the controllers and keeps
    serving; b0 is elected in epoch 3, takes commits, is killed and restarts (b0#2) without
    reaching the controllers, so it has no role and copies nothing, while b1 (the only broker
    serving as master now) holds higher offsets; then b0#2 is elected in epoch 5 with what its
    disk held. b1 was never the master b0#2 was promised to follow: nothing to judge."""
    c = ClusterChecker(3)
    watch = OffsetWatch(c, "g", 1)
    deposed = _broker("b1", "10.0.2.2", {0: 23}, True, epoch=2)
    b0 = _broker("b0", "10.0.2.1", {0: 23}, True, epoch=3)
    for _ in range(5):
        watch.step("s", b0, [b0, deposed], lambda a, b: False)
        await trio.sleep(1)
    restarted = _broker("b0", "10.0.2.1", {0: 20}, False, follows=None, incarnation=2)
    for _ in range(10):  # b0 gone: the highest masterEpoch still serving is b1's old one
        watch.step("s", deposed, [restarted, deposed], lambda a, b: False)
        await trio.sleep(1)
    assert c.stats["offset_watch_deposed_master"] == 10
    elected = _broker("b0", "10.0.2.1", {0: 20}, True, epoch=5, incarnation=2)
    watch.step("s", elected, [elected, deposed], lambda a, b: False)
    assert c.stats["offset_switch_unchecked"] == 1 and "offset_switch_checked" not in c.stats
    assert c.stats["offset_switch_restarted"] == 1  # b0#1 -> b0#2: what its disk held


# ---------------------------------------------------------------------------- order


def test_the_orderly_group_may_consume_again_but_never_skip_ahead() -> None:
    c = ClusterChecker(2)
    d = OrderlyDriver(c, "", None)

    def deliver(*offsets: int) -> None:
        for o in offsets:
            m = MessageExt(TOPIC, b"m%d" % o, queue_id=1, queue_offset=o,
                           store_host="10.0.3.1:10911")  # fmt: skip
            d.listener([m], None)

    deliver(0, 1, 2, 1, 2, 3)  # a failover rewound it to 1: consumed again, in order
    c.raise_problems()
    assert d.next_offset == {("broker-b", 1): 4}
    deliver(5)
    with pytest.raises(ClusterFailure, match="broker-b queue 1 offset 5 before offset 4"):
        c.raise_problems()


# ---------------------------------------------------------------------------- mutants

# (mutant, seed that catches it, the failure it must produce); found with
# `python -m tests.sim.run_mutants --mutant NAME --seeds N` (send_back_answered_not_stored is
# caught by the same check and seed as push_failure_committed: docs/testing.md)
CAUGHT = [
    ("push_failure_committed", 4, "never consumed by the consumer group SimPush"),
    ("slave_sync_skips_offsets", 2, "consumer offset moved backwards beyond the bound"),
    ("learner_joins_the_sync_state_set", 3, "asyncLearner broker-a-2 serves as master"),
    ("orderly_takes_newest_first", 5, "per-queue order broken"),
]


@pytest.mark.parametrize(("mutant", "seed", "failure"), CAUGHT)
async def test_the_seeded_checkers_catch_a_broken_product(
    mock_clock: trio.testing.MockClock, mutant: str, seed: int, failure: str
) -> None:
    with applied(mutant), pytest.raises(ClusterFailure, match=failure):
        await run_seed(seed)
