"""The command-line arguments of the incident job, shared by `rocketrio analyze` and
``spark-submit incidents.py``; no pyspark here, so the CLI builds its parser without Spark."""

from __future__ import annotations

import argparse

__all__ = ["add_args", "parse_time"]


def parse_time(text: str) -> int:
    """``--since``/``--until``: epoch ms, or ISO-8601 (UTC unless it names a zone)."""
    if text.isdigit():
        return int(text)
    from datetime import UTC, datetime

    t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return int(t.timestamp() * 1000)


def add_args(p: argparse.ArgumentParser, *, logdirs_optional: bool = False) -> None:
    """``logdirs_optional``: `rocketrio analyze --chaos RUNDIR` needs none (it checks)."""
    p.add_argument("logdirs", nargs="*" if logdirs_optional else "+", metavar="LOGDIR",
                   help="log directories or files")  # fmt: skip
    p.add_argument("--out", default="incidents", help="output directory (default ./incidents)")
    p.add_argument("--since", type=parse_time, help="first time (ISO-8601 or epoch ms)")
    p.add_argument("--until", type=parse_time, help="last time (ISO-8601 or epoch ms)")
    p.add_argument("--gap-ms", type=int, default=1000, help="shortest unavailability window")
