"""Run the cluster simulation against every mutant (tests/sim/mutants.py); one JSON line each.

``python -m tests.sim.run_mutants [--seeds N] [--first K] [--mutant NAME ...] [--stop-at M]``
prints, per mutant: the seeds run, the seeds that caught it (a `ClusterFailure`), the first
catching seed and which invariant fired there (the failure's first line). ``--stop-at M`` stops
a mutant after M catching seeds. ``--raft-sim`` runs the Raft mutants against the seeded
RaftCore simulation (tests/sim/raft_sim.py) instead, which is much faster per seed. Not part of
CI: a mutant is a deliberately broken product (the scripted scenarios that must catch each
mutant are: tests/sim/test_raft_sim.py, tests/sim/test_cluster_scenarios.py).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import sys
import time

import trio
import trio.testing

from tests.sim.cluster_checks import ClusterFailure
from tests.sim.cluster_run import run_seed
from tests.sim.mutants import MUTANTS, applied
from tests.sim.raft_sim import RaftSim, SimFailure

# the mutants of RaftCore itself (raft_sync_without_fsync breaks RaftLog, which RaftSim models)
RAFT_CORE_MUTANTS = ("raft_leader_counts_unsynced", "raft_commit_earlier_term")


def invariant_of(message: str) -> str:
    """A short name for the invariant a failure message reports."""
    first = message.splitlines()[0]
    return re.sub(r"[0-9]+", "N", first)[:120]


def run_one(name: str, seed: int) -> str | None:
    """None if the seed passed, else the failure's first line."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    with applied(name), contextlib.redirect_stdout(io.StringIO()):
        try:
            trio.run(run_seed, seed, clock=clock)
        except ClusterFailure as e:
            return str(e).splitlines()[0]
    return None


def run_one_raft(name: str, seed: int) -> str | None:
    with applied(name):
        try:
            RaftSim(seed).run()
        except SimFailure as e:
            return str(e).split("): ", 1)[-1].splitlines()[0]
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--first", type=int, default=0, help="first seed")
    parser.add_argument("--mutant", action="append", help="only these mutants")
    parser.add_argument("--stop-at", type=int, default=0, help="stop after M catching seeds")
    parser.add_argument("--raft-sim", action="store_true", help="Raft mutants on RaftSim")
    args = parser.parse_args(argv)
    names = args.mutant or list(MUTANTS)
    one = run_one
    if args.raft_sim:
        names = [n for n in names if n in RAFT_CORE_MUTANTS]
        one = run_one_raft
    for name in names:
        began = time.monotonic()
        caught: list[int] = []
        first_failure: str | None = None
        ran = 0
        for seed in range(args.first, args.first + args.seeds):
            ran += 1
            failure = one(name, seed)
            if failure is not None:
                caught.append(seed)
                first_failure = first_failure or failure
                if args.stop_at and len(caught) >= args.stop_at:
                    break
        line = {
            "mutant": name,
            "seeds_run": ran,
            "seeds_caught": len(caught),
            "first_catching_seed": caught[0] if caught else None,
            "invariant": first_failure,
            "caught_seeds": caught[:20],
            "wall_s": round(time.monotonic() - began, 1),
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())
