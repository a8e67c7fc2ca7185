"""System test with real processes: bench/store_scale.py in a tiny mode (issue 14).

Runs the benchmark script as a user would (a NameServer and a broker process, two small sizes,
1 MiB segments) and checks that its one JSON line carries every figure, each size its ratios
to the same-run references, that every queried key was found exactly, and that the script
removed its data directory. The figures themselves are not judged here: this size says
nothing about scale.
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
TINY = ["--sizes", "2000,4000", "--burst", "1000", "--burst-repeat", "1", "--segment-mb", "1",
        "--query-keys", "20", "--missing-keys", "2", "--retention-wait-s", "5"]  # fmt: skip

RESTART_KEYS = {"how", "ready_s", "send_ok_s", "pull_ok_s", "shutdown_s", "log_first_line_s",
                "recovery_began_s", "recovered_at_s", "boot_at_s", "recovery"}  # fmt: skip
SIZE_KEYS = {
    "messages", "commitlog_bytes", "fill_msgs_per_s", "rss_after_fill_mb", "rss_mb",
    "rss_anon_mb", "query_first_ms", "query_p50_ms", "query_p99_ms", "query_missing_max_ms",
    "query_errors", "query_wrong", "burst_msgs_per_s", "clean_restart", "kill9_restart",
    "query_first_after_restart_ms", "rss_after_restart_mb", "rss_vs_empty", "rss_anon_vs_empty",
    "burst_vs_empty", "burst_broker_cpu_us_per_msg", "burst_broker_cpu_vs_empty",
    "clean_restart_vs_empty", "kill9_restart_vs_empty", "query_p99_vs_first",
    "query_first_over_cli_timeout", "query_route_lost_s", "namesrv_broker_expired",
}  # fmt: skip
RETENTION_KEYS = {"refused_keys", "commitlog_bytes_before", "commitlog_bytes_after", "deleted",
                  "waited_s", "log_events", "answers_after", "note"}  # fmt: skip


def test_tiny_run_prints_every_figure_and_cleans_up() -> None:
    out = subprocess.run(
        [sys.executable, "bench/store_scale.py", *TINY],
        cwd=REPO, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout
    result = json.loads(lines[0])
    assert result["bench"] == "store_scale"
    assert result["command"].endswith("bench/store_scale.py " + " ".join(TINY))
    assert result["machine"]["cpu_count"] >= 1 and result["machine"]["python"]
    assert result["settings"]["sizes"] == [2000, 4000]
    empty = result["empty"]
    assert empty["rss_mb"] > 0 and empty["burst_msgs_per_s"] > 0
    assert empty["burst_broker_cpu_us_per_msg"] > 0
    for how in ("clean_restart", "kill9_restart"):
        assert set(empty[how]) == RESTART_KEYS
        assert 0 < empty[how]["send_ok_s"] <= empty[how]["ready_s"]
    assert empty["kill9_restart"]["recovery"]["unclean_shutdown"] is True
    sizes = result["sizes"]
    assert [r["messages"] for r in sizes] == [2000, 4000]
    for record in sizes:
        assert SIZE_KEYS <= set(record), SIZE_KEYS - set(record)
        assert record["query_errors"] == 0 and record["query_wrong"] == 0
        assert record["clean_restart"]["recovery"]["unclean_shutdown"] is False
        assert record["kill9_restart"]["recovery"]["unclean_shutdown"] is True
        assert record["commitlog_bytes"] > record["messages"] * 1024
    assert sizes[0]["query_p99_vs_first"] == 1.0
    retention = result["retention"]
    assert RETENTION_KEYS <= set(retention)
    assert retention["answers_after"] is True
    assert retention["deleted"] == (
        retention["commitlog_bytes_after"] < retention["commitlog_bytes_before"]
    )
    assert retention["deleted"] or retention["note"]
    assert set(result["largest_meets"]) == {"rss_mb", "restart_s", "query_p99_ms", "burst_ratio"}
    assert not os.path.exists(result["work_dir"])
