"""Interleaved A/B runs of one bench script in two checkouts of rocketrio (each with its own
``.venv``), alternating which goes first every pair, so both see the same machine and minute.

    python3 bench/ab_trees.py BEFORE_DIR AFTER_DIR SCRIPT PAIRS [ARGS...]
    e.g. python3 bench/ab_trees.py ../before . produce_consume.py 6

Prints each run's JSON line (with ``pair`` and ``tree``) and, last, per numeric figure the
median after/before ratio over the pairs (for latencies and CPU, below 1 is better). A run that
fails prints ``failed`` (its exit status) and the last lines of its stderr instead, the pairs go on,
and a pair with a failed run is left out of the ratios.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STDERR_TAIL = 2000  # characters of a failed run's stderr kept in its line


def run(root: Path, script: str, extra: list[str]) -> dict[str, Any]:
    """The run's last JSON line, or ``{"failed": status, "stderr": tail}`` when it has none."""
    try:
        out = subprocess.run(
            [str(root / ".venv/bin/python"), f"bench/{script}", *extra],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=3600,
        )
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr
        return {"failed": "timeout", "stderr": (err or "")[-STDERR_TAIL:]}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        return {"failed": out.returncode, "stderr": out.stderr[-STDERR_TAIL:]}
    result: dict[str, Any] = json.loads(lines[-1])
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
    done: list[dict[str, dict[str, float]]] = []  # the pairs whose two runs both succeeded
    failed = 0
    for i in range(pairs):
        pair: dict[str, dict[str, float]] = {}
        for which in ("before", "after") if i % 2 == 0 else ("after", "before"):
            result = run(trees[which], script, extra)
            print(json.dumps({"pair": i, "tree": which, **result}), flush=True)
            if "failed" in result:
                failed += 1
            else:
                pair[which] = dict(flat(result))
        if len(pair) == 2:
            done.append(pair)
    ratios = {}
    for key in done[0]["after"] if done else ():
        rs = [
            p["after"][key] / p["before"][key]
            for p in done
            if p["before"].get(key) and key in p["after"]
        ]
        if rs:
            ratios[key] = round(statistics.median(rs), 3)
    summary = {"bench": script, "pairs": len(done), "failed_runs": failed}
    print(json.dumps({**summary, "median_ratio_after_over_before": ratios}))


if __name__ == "__main__":
    main()
