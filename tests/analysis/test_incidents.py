"""The incident job on hand-written logs (SPEC T4): exact timelines to the millisecond, epoch
ordering under clock skew, windows, churn, truncations, lost and duplicated messages, bad lines
counted and reported, --since/--until, and the `rocketrio analyze` command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from rocketrio.analysis.incidents import run
from tests.harness.incident_logs import T0, Logs, failover_logs


def test_a_failover_is_reported_exactly_and_joined_by_epoch(
    spark: SparkSession, tmp_path: Path
) -> None:
    logs = failover_logs(skew_new_master_ms=800).write(str(tmp_path / "logs"))
    s = run(spark, [logs], str(tmp_path / "out"))
    assert s["lines"]["skipped"] == {
        "malformed": 0,
        "unknown_event": 0,
        "bad_field": 0,
        "empty_files": 0,
    }
    [f] = s["failovers"]
    assert {k: v for k, v in f.items() if k != "headline"} == {
        "broker": "broker-a",
        "epoch": 2,
        "term": 3,
        "old_master_id": 1,
        "new_master_id": 2,
        "reason": "master_channel_closed",  # the leader's line, not a follower's "unknown"
        "candidates": [2],
        "lost_ms": T0 + 1020,
        "lost_signal": "broker_heartbeat_timeout",
        "elected_ms": T0 + 1030,
        # the new master's host runs 800 ms ahead: still its role change and first write of
        # epoch 2 (joined by epoch, whatever the clocks say)
        "writable_ms": T0 + 1840,
        "first_write_ms": T0 + 1900,
        "old_back_ms": T0 + 3000,
        "old_truncated_bytes": 100,
        "write_gap_ms": 1200,
        "acked_lost": 1,
    }
    assert f["headline"] == (
        "broker-a: master 1 lost at 11:06:41.020, new master 2 writable at 11:06:41.840, "
        "820 ms, 1 acked lost"
    )
    assert [(w["op"], w["broker"], w["topic"], w["length_ms"]) for w in s["windows"]] == [
        ("send", "broker-a", None, 1200),
        ("send", "broker-a", "T", 1200),
    ]
    assert s["windows"][0]["start_ms"] == T0 + 500 and s["windows"][0]["end_ms"] == T0 + 1700
    assert s["raft_leaders"] == [{"term": 3, "leader": "n0", "at_ms": T0 - 5000}]
    assert s["raft_churn"] == {"elections": 1, "terms": 1, "role_changes": 2}
    assert [(c["epoch"], c["members"], c["change"]) for c in s["sync_state_set_changes"]] == [
        (1, [1], "initial"),
        (2, [1, 2], "expand"),
        (3, [2], "shrink"),
    ]
    [t] = s["truncations"]
    assert (t["node"], t["broker"], t["broker_id"], t["kind"], t["bytes"], t["epoch"]) == (
        "b-1",
        "broker-a",
        1,
        "ha_truncated",
        100,
        1,
    )
    assert (s["acked"], s["consumed"], s["traced"]) == (8, 8, True)
    assert [m["msg_id"] for m in s["lost"]] == ["m3"]
    assert s["lost"][0]["acked_ms"] == T0 + 300
    assert s["duplicates"] == [{"group": "g1", "msg_id": "m5", "count": 2}]
    # the Parquet tables and the files are there, and summary.json is what run() returned
    out = tmp_path / "out"
    for table in ("failovers", "windows", "lost", "duplicates", "truncations", "skipped"):
        assert list((out / table).glob("*.parquet")), table
    assert json.loads((out / "summary.json").read_text())["failovers"][0]["epoch"] == 2
    assert spark.read.parquet(str(out / "failovers")).count() == 1
    assert "<svg" in (out / "report.html").read_text()


def test_idle_time_is_no_window_and_a_waiting_message_is(
    spark: SparkSession, tmp_path: Path
) -> None:
    """a1 acked at 0; a2 sent and acked at 5000 after 5 idle seconds (no window); a3 sent at
    5500 and acked at 7000 (a 1500 ms send window). a2 is consumed as soon as it is acked after
    5 s without consumption (no window); a3 waits from its ack at 7000 to 9000 (a pull
    window)."""
    lg = Logs()
    for name, at, latency, consumed_at in (("a1", 0, 2, 10), ("a2", 5000, 3, 5010),
                                           ("a3", 7000, 1500, 9000)):  # fmt: skip
        common = {"msg_id": name, "topic": "T", "broker": "b", "queue_id": 0, "queue_offset": 0}
        lg.add("p", "client", at, "trace_send_acked", **common, producer_group="pg",
               client_id="p1", latency_ms=latency)  # fmt: skip
        lg.add("c", "client", consumed_at, "trace_consumed", **common, group="g",
               client_id="c1", reconsume_times=0)  # fmt: skip
    s = run(spark, [lg.write(str(tmp_path / "logs"))], str(tmp_path / "out"))
    got = [(w["op"], w["topic"], w["start_ms"] - T0, w["end_ms"] - T0) for w in s["windows"]]
    assert sorted(got, key=str) == sorted(
        [("send", None, 5500, 7000), ("send", "T", 5500, 7000),
         ("pull", None, 7000, 9000), ("pull", "T", 7000, 9000)], key=str,
    )  # fmt: skip


def test_until_leaves_out_what_came_later(spark: SparkSession, tmp_path: Path) -> None:
    logs = failover_logs().write(str(tmp_path / "logs"))
    s = run(spark, [logs], str(tmp_path / "out"), until_ms=T0 + 900)
    assert s["failovers"] == [] and s["windows"] == [] and s["acked"] == 5
    assert s["lines"]["read"] > s["lines"]["parsed"] - 1  # every line was read, then filtered


def test_bad_lines_are_counted_with_examples_and_never_fatal(
    spark: SparkSession, tmp_path: Path
) -> None:
    lg = failover_logs()
    lg.raw("b-1", '{"ts":"2026-11-18T11:06:45.000Z","level":"info","node":"b-1","ev')  # cut
    lg.raw("b-1", "not json at all")
    lg.add("b-1", "broker", 4000, "made_up_event", x=1)  # not in the catalogue
    lg.add("b-1", "broker", 4001, "master_first_write", epoch="two", offset=1)  # wrong type
    lg.add("b-1", "broker", 4002, "master_first_write", epoch=3)  # offset missing
    d = lg.write(str(tmp_path / "logs"))
    (tmp_path / "logs" / "empty-host").mkdir()
    (tmp_path / "logs" / "empty-host" / "x.jsonl").write_text("")
    s = run(spark, [d], str(tmp_path / "out"))
    assert s["lines"]["skipped"] == {
        "malformed": 2,
        "unknown_event": 1,
        "bad_field": 2,
        "empty_files": 1,
    }
    whys = sorted(e["why"] for e in s["lines"]["skipped_examples"])
    assert whys == ["bad_field", "bad_field", "malformed", "malformed", "unknown_event"]
    assert len(s["failovers"]) == 1  # the good lines still tell the story


def test_an_empty_directory_gives_an_empty_report(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "none").mkdir()
    s = run(spark, [str(tmp_path / "none")], str(tmp_path / "out"))
    assert s["lines"]["read"] == 0 and s["failovers"] == [] and s["traced"] is False
    assert "no log lines found" in (tmp_path / "out" / "report.html").read_text()


def test_analyze_command_exit_codes(tmp_path: Path) -> None:
    rocketrio = os.path.join(os.path.dirname(sys.executable), "rocketrio")
    run_ = subprocess.run(
        [rocketrio, "analyze", str(tmp_path / "missing")], capture_output=True, text=True
    )
    assert run_.returncode == 1 and "no such log directory" in run_.stderr
    run_ = subprocess.run(
        [rocketrio, "analyze", str(tmp_path), "--since", "yesterday"],
        capture_output=True,
        text=True,
    )
    assert run_.returncode == 2 and "--since" in run_.stderr


@pytest.mark.parametrize("text", ["2026-11-18T11:06:40Z", "2026-11-18T11:06:40+00:00"])
def test_since_until_accept_iso_and_epoch_ms(text: str) -> None:
    from rocketrio.analysis.incidents import parse_time

    assert parse_time(text) == parse_time(str(T0)) == T0


def test_logs_helper_writes_one_file_per_node(tmp_path: Path) -> None:
    lg = Logs()
    lg.add("x", "broker", 0, "master_first_write", epoch=1, offset=0)
    lg.write(str(tmp_path))
    assert (tmp_path / "host-x" / "x.jsonl").read_text().count("\n") == 1
