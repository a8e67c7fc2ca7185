"""`rocketrio analyze LOGDIR... [--out DIR] [--master URL] [--since T] [--until T]`, or
`rocketrio analyze --chaos RUNDIR` (a `rocketrio chaos` run rendered again, no Spark).

Runs the incident job (analysis/incidents.py) on a SparkSession, ``local[*]`` unless
``--master`` names a cluster, prints a progress line per phase (and the Spark stages' task
counts) on stderr and the plain-text summary on stdout; the Parquet tables, ``summary.json``
and ``report.html`` go to ``--out``. Exit status: 0 done, 1 a LOGDIR does not exist, 2 usage.

``--chaos RUNDIR`` prints a chaos run's summary and rewrites its ``report.html`` through the
chaos report code (`cli/chaos/rerender.py`); exit 1 if RUNDIR holds no chaos result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from rocketrio.cli.extras import missing_extra

EXIT_OK, EXIT_MISSING, EXIT_USAGE = 0, 1, 2


def cmd_chaos_report(run_dir: str, as_json: bool) -> int:
    from rocketrio.cli.chaos.rerender import RunDirError, load, render

    try:
        if as_json:
            print(json.dumps(load(run_dir)[1], indent=1, sort_keys=True))
            return EXIT_OK
        lines, page = render(run_dir)
    except RunDirError as e:
        print(f"rocketrio analyze: {e}", file=sys.stderr)
        return EXIT_MISSING
    for line in lines:
        print(line)
    print(f"report: {page}")
    return EXIT_OK


def cmd_analyze(a: argparse.Namespace) -> int:
    if a.chaos is not None or not a.logdirs:
        if a.chaos is None or a.logdirs:
            print("rocketrio analyze: give LOGDIR... or --chaos RUNDIR (not both)", file=sys.stderr)
            return EXIT_USAGE
        return cmd_chaos_report(a.chaos, a.json)
    missing = [p for p in a.logdirs if "://" not in p and not os.path.exists(p)]
    if missing:
        print(f"rocketrio analyze: no such log directory or file: {missing[0]}", file=sys.stderr)
        return EXIT_MISSING
    if (missing := missing_extra("analysis", "rocketrio analyze")) is not None:
        print(missing, file=sys.stderr)
        return EXIT_MISSING
    from rocketrio.analysis import incidents
    from rocketrio.analysis.report import render_text

    started = time.monotonic()

    def progress(msg: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    progress(f"starting Spark ({a.master or 'local[*]'})")
    spark = incidents.session(a.master)
    try:
        with incidents.StageProgress(spark, sys.stderr, every_s=2.0):
            summary = incidents.run(
                spark,
                a.logdirs,
                a.out,
                since_ms=a.since,
                until_ms=a.until,
                gap_ms=a.gap_ms,
                progress=progress,
            )
    finally:
        spark.stop()
    progress(f"done; tables, summary.json and report.html in {a.out}")
    if a.json:
        print(json.dumps(summary, indent=1))
    else:
        print(render_text(summary))
        print(f"report: {os.path.join(a.out, 'report.html')}")
    return EXIT_OK


def add_parser(sub: Any) -> None:
    from rocketrio.analysis.args import add_args

    p = sub.add_parser(
        "analyze",
        help="report incidents (failovers, unavailability, lost messages) from JSON logs",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    add_args(p, logdirs_optional=True)
    p.add_argument(
        "--chaos", metavar="RUNDIR",
        help="render a rocketrio chaos run (its --out directory) again, no Spark",
    )  # fmt: skip
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_analyze)
