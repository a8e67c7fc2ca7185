"""Run the cluster simulation against every mutant (tests/sim/mutants.py); one JSON line each.

``python -m tests.sim.run_mutants [--seeds N] [--first K] [--mutant NAME ...] [--stop-at M]``
prints, per mutant: the seeds run, the seeds that caught it (a `ClusterFailure`), the first
catching seed and which invariant fired there (the failure's first line). ``--stop-at M`` stops
a mutant after M catching seeds. Not part of CI: a mutant is a deliberately broken product.
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--first", type=int, default=0, help="first seed")
    parser.add_argument("--mutant", action="append", help="only these mutants")
    parser.add_argument("--stop-at", type=int, default=0, help="stop after M catching seeds")
    args = parser.parse_args(argv)
    for name in args.mutant or list(MUTANTS):
        began = time.monotonic()
        caught: list[int] = []
        first_failure: str | None = None
        ran = 0
        for seed in range(args.first, args.first + args.seeds):
            ran += 1
            failure = run_one(name, seed)
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
