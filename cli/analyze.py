"""`rocketrio analyze LOGDIR... [--out DIR] [--master URL] [--since T] [--until T]`.

Runs the incident job (analysis/incidents.py) on a SparkSession, ``local[*]`` unless
``--master`` names a cluster, prints a progress line per phase (and the Spark stages' task
counts) on stderr and the plain-text summary on stdout; the Parquet tables, ``summary.json``
and ``report.html`` go to ``--out``. Exit status: 0 done, 1 a LOGDIR does not exist, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from rocketrio.cli.extras import missing_extra

EXIT_OK, EXIT_MISSING = 0, 1


def cmd_analyze(a: argparse.Namespace) -> int:
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
    add_args(p)
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_analyze)
