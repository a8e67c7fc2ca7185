"""Seeded whole-cluster simulations (SPEC F1): every seed must keep every invariant.

Each seed draws a cluster and its faults (tests/sim/cluster_sim.py) and runs it under the mock
clock; `ClusterFailure` names the invariant, the seed and the last steps, and says how to replay
it: ``pytest tests/sim/test_cluster_sim.py --seed N``.

Which seeds run (tests/harness/seeds.py, printed at the start of the run):

- by default a rotating window of `WINDOW` seeds, a different window on each run (from the
  run's start time, in minutes; pinned with CLUSTER_SIM_WINDOW_START=K), so runs over time
  cover ever more seeds while one run stays short; the named scenarios of
  test_cluster_scenarios.py always run;
- ``--seeds N`` runs seeds 0..N-1: the soak (``pytest tests/sim/test_cluster_sim.py --seeds
  5000 -n 2`` runs thousands; the option sets RAFT_SIM_SEEDS, which the other simulators read
  too; or set CLUSTER_SIM_SEEDS);
- ``--seed K`` replays seed K (CLUSTER_SIM_SEED), as a failure says;
- ``--mutant NAME`` (tests/sim/mutants.py) runs the seeds against that broken product, which
  they are expected to catch (the run passes when a seed catches it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.storage.epoch_file import EpochRecord
from tests.harness.seeds import cluster_sim_seeds
from tests.sim.cluster_checks import ClusterChecker, ClusterFailure, ReplicaState
from tests.sim.cluster_run import run_seed
from tests.sim.mutants import MUTANTS, applied


def _seeds() -> list[int]:
    return cluster_sim_seeds()


MUTANT = os.environ.get("CLUSTER_SIM_MUTANT")


@pytest.mark.parametrize("seed", [] if MUTANT else _seeds())
async def test_seed_keeps_every_invariant(mock_clock: trio.testing.MockClock, seed: int) -> None:
    stats = await run_seed(seed)
    assert set(stats.liveness_s) == {"broker-a", "broker-b"}


@pytest.mark.parametrize("seed", _seeds() if MUTANT else [])
async def test_mutant_is_caught(mock_clock: trio.testing.MockClock, seed: int) -> None:
    """Passes when the seed catches the mutant (the harness has teeth), fails when it does not.
    Most seeds do not reach a mutant's fault: read the failures as "not caught by this seed"."""
    assert MUTANT is not None
    with applied(MUTANT), pytest.raises(ClusterFailure):
        await run_seed(seed)


def test_a_seed_replays_the_same_run() -> None:
    """Same seed, same run: the fault schedule, the network jitter, the disks' crash choices
    and Trio's task order all come from the seed, and time is the mock clock's, from 0 (as in
    every test: the clock's absolute value matters, timers are whole milliseconds)."""

    def once() -> tuple[dict[str, int], dict[str, float], float]:
        clock = trio.testing.MockClock(autojump_threshold=0)
        stats = trio.run(run_seed, 13, clock=clock)
        return stats.stats, stats.liveness_s, clock.current_time()

    assert once() == once()


_REPLAY = """
import trio, trio.testing
from tests.sim.cluster_run import run_seed
clock = trio.testing.MockClock(autojump_threshold=0)
stats = trio.run(run_seed, {seed}, clock=clock)
print(sorted(stats.stats.items()), sorted(stats.liveness_s.items()), clock.current_time())
"""


def test_a_seed_replays_the_same_run_in_another_process() -> None:
    """A seed CI prints must replay on another machine. Python salts str hashes per process,
    so nothing a run does may follow a set's iteration order: seed 59369 ran two ways, its
    PushConsumer asking for its topics' routes in set order (found 2026-11-28)."""

    def once(hash_seed: str) -> str:
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        root = Path(__file__).resolve().parents[2]
        code = _REPLAY.format(seed=59369)
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True,
            timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip().splitlines()[-1]

    assert once("0") == once("4")  # these two hash salts ran seed 59369 differently


def test_every_mutant_has_a_description() -> None:
    assert len(MUTANTS) >= 7
    assert all(m.doc for m in MUTANTS.values())


# ---------------------------------------------------------------------------- the checker


def _replica(
    key: str, confirm: int, end: int, epochs: tuple[tuple[int, int], ...] = ()
) -> ReplicaState:
    return ReplicaState(key, "s", 0, end, confirm, [EpochRecord(e, o) for e, o in epochs])


def test_checker_flags_two_masters_in_one_epoch() -> None:
    c = ClusterChecker(5)
    c.on_master_ack("s", 3, "b0#1")
    c.on_master_ack("s", 3, "b0#1")
    c.on_master_ack("s", 4, "b1#1")
    c.raise_problems()
    c.on_master_ack("s", 4, "b0#2")
    with pytest.raises(ClusterFailure, match=r"(?s)two masters.*masterEpoch 4.*--seed 5"):
        c.raise_problems()


def test_checker_flags_a_reused_queue_offset_and_a_lost_message() -> None:
    c = ClusterChecker(1)
    c.on_send_ok(("s", "T", 0, 7), b"a", "first")
    c.on_send_ok(("s", "T", 0, 7), b"a", "retry answer")
    c.raise_problems()
    c.on_send_ok(("s", "T", 0, 7), b"b", "second")
    with pytest.raises(ClusterFailure, match="queue offset reused"):
        c.raise_problems()
    c = ClusterChecker(1)
    c.on_send_ok(("s", "T", 0, 7), b"a", "ok")
    with pytest.raises(ClusterFailure, match="acknowledged message lost"):
        c.check_final_queue("s", "T", 0, {7: b"x"})
    c.check_final_queue("s", "T", 1, {})


def test_checker_flags_a_consumed_message_that_is_gone() -> None:
    c = ClusterChecker(1)
    c.on_received(("s", "T", 0, 2), b"a", "b1#1")
    c.on_received(("s", "T", 0, 2), b"a", "b0#1")
    c.raise_problems()
    with pytest.raises(ClusterFailure, match="consumed message truncated"):
        c.check_final_queue("s", "T", 0, {})
    c.on_received(("s", "T", 0, 2), b"b", "b2#1")
    with pytest.raises(ClusterFailure, match="later"):
        c.raise_problems()


def test_checker_flags_changed_confirmed_bytes() -> None:
    c = ClusterChecker(1)
    log_a = b"abcdefgh"
    log_b = b"abcdXfgh"
    c.check_replica(_replica("a#1", 6, 8), lambda o, n: log_a[o : o + n])
    c.check_replica(_replica("b#1", 4, 8), lambda o, n: log_b[o : o + n])  # agrees below 4
    with pytest.raises(ClusterFailure, match="offset 4 differs"):
        c.check_replica(_replica("b#1", 8, 8), lambda o, n: log_b[o : o + n])


def test_checker_flags_epoch_files_that_disagree() -> None:
    c = ClusterChecker(1)
    c.check_epochs([_replica("a#1", 0, 0, ((1, 0), (2, 100)))])
    c.check_epochs([_replica("b#1", 0, 0, ((1, 0),))])
    with pytest.raises(ClusterFailure, match="epoch 2 starts at 90"):
        c.check_epochs([_replica("b#2", 0, 0, ((1, 0), (2, 90)))])


def test_checker_flags_two_raft_leaders_in_one_term() -> None:
    c = ClusterChecker(1)
    c.check_raft_leaders([(3, "n0"), (4, "n1")])
    c.check_raft_leaders([(3, "n0")])
    with pytest.raises(ClusterFailure, match="two controller Raft leaders in term 4"):
        c.check_raft_leaders([(4, "n2")])


def test_checker_flags_a_process_that_died_of_a_product_error() -> None:
    with pytest.raises(ClusterFailure, match="a product process failed: b0#1 died"):
        ClusterChecker(1).check_processes(["b0#1 died: KeyError: 3"])


def test_a_failure_says_how_to_replay() -> None:
    c = ClusterChecker(42)
    c.note("step 0: crash")
    with pytest.raises(ClusterFailure) as e:
        c.fail("boom")
    assert "reproduce with --seed 42" in str(e.value) and "step 0: crash" in str(e.value)


async def test_a_livelock_is_reported_not_hung(mock_clock: trio.testing.MockClock) -> None:
    from tests.sim.cluster_run import Watchdog

    with trio.CancelScope() as scope:
        dog = Watchdog(scope, stuck_loops=20_000)
        trio.lowlevel.add_instrument(dog)
        try:
            while True:  # a task that never sleeps: the mock clock cannot move
                await trio.lowlevel.checkpoint()
        finally:
            trio.lowlevel.remove_instrument(dog)
    assert dog.fired is not None and "livelock" in dog.fired
