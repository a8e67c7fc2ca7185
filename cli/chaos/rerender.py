"""`rocketrio analyze --chaos RUNDIR`: a finished chaos run rendered again from the files it
wrote (``result.json``, ``chaos.jsonl``), by the code the run itself uses (`report`): the
one-screen summary, and ``report.html`` rewritten with the latency plot and tables. A run
written by an older chaos gets the figures it lacked and that the traces can give (the send
latency per fault kind); its checks are shown as that run found them (the route polls the
metadata check read are not in the files, so nothing is checked again).
"""

from __future__ import annotations

import json
import os
from typing import Any

from rocketrio.cli.chaos import report
from rocketrio.cli.chaos.checkers import latency_by_kind
from rocketrio.cli.chaos.history import FaultWindow, History, TopicSpec, from_lines


class RunDirError(Exception):
    """Not a chaos run's directory; the message is one line for the user."""


def _topic(t: dict[str, Any]) -> TopicSpec:
    return TopicSpec(
        t["topic"], int(t["read_queues"]), int(t["write_queues"]), int(t["perm"]),
        tuple(t.get("groups", ())), tuple(t.get("orderly_groups", ())),
        bool(t.get("needs_intent", False)),
    )  # fmt: skip


def _fault(f: dict[str, Any]) -> FaultWindow:
    return FaultWindow(int(f["index"]), f["name"], f["kind"], tuple(f["targets"]),
                       int(f["started_ms"]), int(f["healed_ms"]))  # fmt: skip


def load(run_dir: str) -> tuple[History, dict[str, Any]]:
    """The run's result and its history (acknowledgements and consumptions from the traces,
    faults and topics from the result)."""
    path = os.path.join(run_dir, "result.json")
    try:
        with open(path, encoding="utf-8") as f:
            res = json.load(f)
        h = History(topics=[_topic(t) for t in res.get("topics", [])],
                    faults=[_fault(f) for f in res["faults"]])  # fmt: skip
    except OSError as e:
        raise RunDirError(f"{path}: {e.strerror}; not a chaos run's directory") from None
    except (ValueError, KeyError, TypeError) as e:
        raise RunDirError(f"{path} is not a chaos result ({type(e).__name__}: {e})") from None
    traces = os.path.join(run_dir, "chaos.jsonl")
    if os.path.exists(traces):
        with open(traces, encoding="utf-8", errors="replace") as f:
            from_lines(f, [t.topic for t in h.topics], h)
    times = [a.ts_ms for a in h.acks] + [f.started_ms for f in h.faults]
    h.start_ms = int(res.get("start_ms") or min(times, default=0))
    h.end_ms = int(res.get("end_ms") or max(times, default=0))
    res.setdefault("latency_by_kind", latency_by_kind(h))
    return h, res


def render(run_dir: str) -> tuple[list[str], str]:
    """Rewrite ``run_dir``/report.html; return the summary lines and the page's path."""
    h, res = load(run_dir)
    page = os.path.join(run_dir, "report.html")
    with open(page, "w", encoding="utf-8") as f:
        f.write(report.html_report(h, res))
    return report.summary(res), page
