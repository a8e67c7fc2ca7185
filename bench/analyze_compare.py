"""Compare two outputs of the incident job (SPEC T4) field by field: ``summary.json`` and every
Parquet table (its column names and types, then its rows, in any order).

Used to show that a faster job writes what the old one wrote on the same input:

    .venv/bin/python bench/analyze_compare.py OUT_A OUT_B     # exit 0: identical

``took_s``, ``generated_at_ms`` and ``inputs`` (the run's time and paths) are left out of the
summary comparison. Prints one line per difference found, then a JSON verdict.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rocketrio.analysis.incidents import TABLES

RUN_FIELDS = ("took_s", "generated_at_ms", "inputs")


def _canon(v: Any) -> Any:
    """Rows of a Spark table as plain, hashable, sortable values."""
    if hasattr(v, "asDict"):
        v = v.asDict(recursive=True)
    if isinstance(v, dict):
        return tuple(sorted((k, _canon(x)) for k, x in v.items()))
    if isinstance(v, list):
        return tuple(_canon(x) for x in v)
    return v


def diff_summaries(a: dict[str, Any], b: dict[str, Any], path: str = "") -> list[str]:
    """Every field where ``a`` and ``b`` differ (run fields aside at the top)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if not path and k in RUN_FIELDS:
                continue
            if k not in a or k not in b:
                out.append(f"{path}{k}: only in {'b' if k not in a else 'a'}")
            else:
                out.extend(diff_summaries(a[k], b[k], f"{path}{k}."))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path.rstrip('.')}: {len(a)} against {len(b)} items"]
        return [
            x
            for i, (p, q) in enumerate(zip(a, b, strict=True))
            for x in diff_summaries(p, q, f"{path}{i}.")
        ]
    return [] if a == b else [f"{path.rstrip('.')}: {a!r} against {b!r}"]


def diff_tables(a_dir: str, b_dir: str) -> list[str]:
    from rocketrio.analysis.incidents import session

    spark = session()
    out = []
    try:
        for name in TABLES:
            a = spark.read.parquet(os.path.join(a_dir, name))
            b = spark.read.parquet(os.path.join(b_dir, name))
            sa = [(f.name, f.dataType.simpleString()) for f in a.schema.fields]
            sb = [(f.name, f.dataType.simpleString()) for f in b.schema.fields]
            if sa != sb:
                out.append(f"table {name}: columns {sa} against {sb}")
                continue
            ra = sorted(map(_canon, a.collect()), key=repr)
            rb = sorted(map(_canon, b.collect()), key=repr)
            if ra != rb:
                only_a = [r for r in ra if r not in rb][:3]
                only_b = [r for r in rb if r not in ra][:3]
                out.append(f"table {name}: {len(ra)} rows against {len(rb)}; "
                           f"only in a {only_a}, only in b {only_b}")  # fmt: skip
    finally:
        spark.stop()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("a")
    p.add_argument("b")
    args = p.parse_args()
    with open(os.path.join(args.a, "summary.json")) as f:
        sa = json.load(f)
    with open(os.path.join(args.b, "summary.json")) as f:
        sb = json.load(f)
    diffs = diff_summaries(sa, sb) + diff_tables(args.a, args.b)
    for d in diffs:
        print(d)
    print(json.dumps({"identical": not diffs, "differences": len(diffs),
                      "failovers": len(sa["failovers"]), "tables": len(TABLES)}))  # fmt: skip
    return 0 if not diffs else 1


if __name__ == "__main__":
    sys.exit(main())
