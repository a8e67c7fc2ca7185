"""Which seeds the whole-cluster simulation runs (tests/sim/test_cluster_sim.py).

`cluster_sim_seeds` reads the environment that tests/conftest.py sets from ``--seed``,
``--seeds`` (with ``--seeds-from``) and the rotating window: a replay (one seed), a soak (seeds
0..N-1, or K..K+N-1: seeds no window reaches), or by default
`WINDOW` consecutive seeds starting at `window_start`, which moves on every run so that runs
over time cover ever more of the seed space while each run stays short. The window is chosen
once per run, in the controlling process (before pytest-xdist starts its workers, which inherit
it), so every worker collects the same seeds.
"""

from __future__ import annotations

import os
import time

WINDOW = 24
SEED_SPACE = 100_000  # window starts wrap here, so seeds stay short enough to type
WINDOW_ENV = "CLUSTER_SIM_WINDOW_START"
FROM_ENV = "CLUSTER_SIM_SEEDS_FROM"  # a soak's first seed (0 when unset)


def window_start(now_s: float | None = None) -> int:
    """The first seed of this run's window: a new window every minute, consecutive windows
    next to each other (minute m starts at m * WINDOW, modulo `SEED_SPACE`)."""
    minute = int((time.time() if now_s is None else now_s) // 60)
    return (minute * WINDOW) % SEED_SPACE


def choose_window() -> int:
    """This run's window start: CLUSTER_SIM_WINDOW_START if set, else chosen now and set."""
    if WINDOW_ENV not in os.environ:
        os.environ[WINDOW_ENV] = str(window_start())
    return int(os.environ[WINDOW_ENV])


def cluster_sim_seeds() -> list[int]:
    one = os.environ.get("CLUSTER_SIM_SEED") or os.environ.get("RAFT_SIM_SEED")
    if one:
        return [int(one)]
    count = os.environ.get("CLUSTER_SIM_SEEDS") or os.environ.get("RAFT_SIM_SEEDS")
    if count:
        first = int(os.environ.get(FROM_ENV) or 0)
        return list(range(first, first + int(count)))
    start = choose_window()
    return list(range(start, start + WINDOW))


def describe() -> str:
    """One line for the start of the run: which cluster-simulation seeds run, and how to replay."""
    seeds = cluster_sim_seeds()
    if len(seeds) == 1:
        what = f"seed {seeds[0]} (replay)"
    elif WINDOW_ENV in os.environ and seeds[0] == int(os.environ[WINDOW_ENV]):
        what = f"seeds {seeds[0]}..{seeds[-1]} (a window of {WINDOW}, another one next run)"
    else:
        what = f"seeds {seeds[0]}..{seeds[-1]} (soak)"
    return (
        f"cluster simulation: {what}; replay one with "
        "`pytest tests/sim/test_cluster_sim.py --seed N`, soak with `--seeds 5000` "
        "(`--seeds-from K`: seeds K..)"
    )
