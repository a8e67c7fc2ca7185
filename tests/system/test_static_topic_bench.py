"""System test with real processes: bench/static_topic.py in a tiny mode (issue 12).

Runs the benchmark script as a user would (a NameServer and two broker processes, an ordinary
and a static topic of 8 queues over both, then a remapped static topic) and checks that its one
JSON line carries every figure for both kinds, the same-run ratios, that every consumer read
its whole backlog, that the remapping moved bench-a's four logic queues, and that the script
removed its data directory. The figures themselves are not judged: this size says nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.harness.paths import REPO as REPO_PATH

pytestmark = pytest.mark.system

REPO = str(REPO_PATH)
TINY = ["--rounds", "2", "--sync-count", "50", "--async-count", "300", "--remote-count", "400"]
FIGURE_KEYS = {
    "sync_send": {"msgs_per_s", "p50_ms", "p99_ms", "broker_cpu_us_per_msg",
                  "client_cpu_us_per_msg"},
    "async_send": {"msgs_per_s", "broker_cpu_us_per_msg", "client_cpu_us_per_msg"},
    "consume": {"msgs_per_s", "first_message_s", "broker_cpu_us_per_msg",
                "client_cpu_us_per_msg"},
}  # fmt: skip


def test_tiny_run_prints_every_figure_and_cleans_up() -> None:
    out = subprocess.run(
        [sys.executable, "bench/static_topic.py", *TINY],
        cwd=REPO, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    result = json.loads(lines[0])
    assert result["bench"] == "static_topic"
    assert result["command"].endswith("bench/static_topic.py " + " ".join(TINY))
    assert result["machine"]["cpu_count"] >= 1 and len(result["machine"]["loadavg_at_end"]) == 3
    assert result["complete"] is True
    for kind in ("ordinary", "static"):
        for fig, keys in FIGURE_KEYS.items():
            rec = result["topics"][kind][fig]
            assert keys <= set(rec), (kind, fig, keys - set(rec))
            assert all(len(rec[f"{k}_rounds"]) == 2 for k in keys)
            assert rec["msgs_per_s"] > 0
    # each round's backlog is every message sent so far (plus one untimed send per phase)
    sent = 2 * (50 + 1) + 2 * (300 + 1)
    assert result["topics"]["static"]["consume"]["consumed_total"] >= (sent // 2) + sent
    ratios = result["ratio_static_vs_ordinary"]
    for fig, keys in FIGURE_KEYS.items():
        for k in keys:
            value = ratios[f"{fig}_{k}"]
            if value is None and k.endswith("_cpu_us_per_msg"):
                # /proc counts CPU in 10 ms ticks: a phase this small can measure 0 for a side
                # (then there is no ratio), never a missing figure
                sides = [result["topics"][kind][fig][k] for kind in ("ordinary", "static")]
                assert 0 in sides, (fig, k, sides)
                continue
            assert value is not None and value > 0, (fig, k)
    remote = result["remote_read"]
    assert remote["complete"] is True
    assert remote["logic_queues_moved"] == 4
    assert remote["ratio_remote_vs_local"]["consume_msgs_per_s"] > 0
    assert not os.path.exists(result["work_dir"])
