"""`up`'s recovery lines (cli/up_progress.py): which log lines become which console lines, and
the tail that reads whole new lines only."""

from __future__ import annotations

import json
from pathlib import Path

from rocketrio.cli.up_progress import LogTail, progress_line


def test_progress_and_recovered_lines() -> None:
    raw = json.dumps(
        {
            "event": "store_recovery_progress",
            "phase": "redispatch",
            "done_bytes": 64 << 20,
            "total_bytes": 256 << 20,
            "percent": 25,
        }
    )
    assert progress_line("broker-a", raw) == (
        "  broker-a: recovering its store, redispatch 25% (64 of 256 MiB)"
    )
    done = json.dumps(
        {
            "event": "commitlog_recovered",
            "took_ms": 812,
            "unclean_shutdown": True,
            "bytes_scanned": 4096,
            "redispatched": 12,
        }
    )
    assert progress_line("broker-a", done) == (
        "  broker-a: store recovered in 812 ms (after an unclean shutdown, 4096 bytes checked, "
        "12 records re-dispatched)"
    )
    assert progress_line("n", json.dumps({"event": "broker_boot"})) is None
    assert progress_line("n", "not json store_recovery_progress") is None


def test_tail_reads_only_new_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "broker-a.jsonl"
    log.write_text('{"old": 1}\n')
    (tmp_path / "other.out").write_text("ignored\n")
    tail = LogTail(str(tmp_path))
    tail.skip_existing()
    assert tail.read() == []
    with log.open("a") as f:
        f.write('{"a": 1}\n{"b":')
    assert tail.read() == [("broker-a", '{"a": 1}')]
    with log.open("a") as f:
        f.write(" 2}\n")
    (tmp_path / "ns.jsonl").write_text('{"c": 3}\n')
    assert tail.read() == [("broker-a", '{"b": 2}'), ("ns", '{"c": 3}')]
    assert LogTail(str(tmp_path / "missing")).read() == []
