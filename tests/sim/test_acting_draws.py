"""The seeded runs' share of classic acting-master clusters (SimSpec.draw, acting_world.py):
a small share, drawn apart so controller-mode seeds keep their runs, and replayable."""

from __future__ import annotations

import random

import trio
import trio.testing

from tests.sim.cluster_run import run_seed
from tests.sim.cluster_sim import ACTING_SHARE, SimSpec


def test_a_small_share_of_seeds_is_acting_master_and_the_rest_keep_their_draw() -> None:
    specs = [SimSpec.draw(seed) for seed in range(1000)]
    acting = [s for s in specs if s.mode == "acting"]
    assert 0.5 * ACTING_SHARE * 1000 <= len(acting) <= 1.5 * ACTING_SHARE * 1000
    for s in acting:  # SYNC_FLUSH (classic ASYNC_FLUSH loses acks in a power cut), no controller
        assert s.sync_flush and s.controllers == 0 and s.focus != "controllers"
    # a controller-mode seed's spec is what the seed alone draws (its faults and jitter come
    # from the world's RNG, seeded the same): the acting draw takes nothing from its stream
    rng = random.Random(13)
    assert SimSpec.draw(13).mode == "controller"
    assert SimSpec.draw(13).controllers == (1 if rng.random() < 0.4 else 3)


def test_an_acting_seed_replays_the_same_run() -> None:
    seed = next(s for s in range(100) if SimSpec.draw(s).mode == "acting")

    def once() -> tuple[dict[str, int], dict[str, float], float]:
        clock = trio.testing.MockClock(autojump_threshold=0)
        stats = trio.run(run_seed, seed, clock=clock)
        return stats.stats, stats.liveness_s, clock.current_time()

    first = once()
    assert first[0].get("acting_slave_steps", 0) >= 0 and first == once()
