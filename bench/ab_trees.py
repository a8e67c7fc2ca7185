"""Interleaved A/B runs of one bench script in two checkouts of rocketrio (each with its own
``.venv``), alternating which goes first every pair, so both see the same machine and minute.

    python3 bench/ab_trees.py BEFORE_DIR AFTER_DIR SCRIPT PAIRS [ARGS...]
    e.g. python3 bench/ab_trees.py ../before . produce_consume.py 6

Prints each run's JSON line (with ``pair`` and ``tree``) and, last, per numeric figure the
median after/before ratio over the pairs (for latencies and CPU, below 1 is better).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def run(root: Path, script: str, extra: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [str(root / ".venv/bin/python"), f"bench/{script}", *extra],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=3600,
        check=True,
    )
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)
    return result


def flat(d: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    for k, v in d.items():
        if isinstance(v, dict):
            yield from flat(v, f"{prefix}{k}.")
        elif isinstance(v, int | float) and not isinstance(v, bool):
            yield f"{prefix}{k}", v


def main() -> None:
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    trees = {"before": Path(sys.argv[1]).resolve(), "after": Path(sys.argv[2]).resolve()}
    script, pairs, extra = sys.argv[3], int(sys.argv[4]), sys.argv[5:]
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for i in range(pairs):
        for which in ("before", "after") if i % 2 == 0 else ("after", "before"):
            result = run(trees[which], script, extra)
            runs[which].append(dict(flat(result)))
            print(json.dumps({"pair": i, "tree": which, **result}), flush=True)
    ratios = {}
    for key in runs["after"][0]:
        pairs_of = zip(runs["after"], runs["before"], strict=True)
        rs = [a[key] / b[key] for a, b in pairs_of if b.get(key) and key in a]
        if rs:
            ratios[key] = round(statistics.median(rs), 3)
    print(json.dumps({"bench": script, "pairs": pairs, "median_ratio_after_over_before": ratios}))


if __name__ == "__main__":
    main()
