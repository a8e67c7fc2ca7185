"""`rocketrio analyze --chaos RUNDIR`: a chaos run rendered again from its files by the run's
own report code: the same summary, report.html rewritten; a run from before the latency figures
gets them from its traces; a directory that is not a run is refused (exit 1), no argument at
all is a usage error (exit 2)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import attrs
import pytest

from rocketrio.cli.chaos import checkers, report
from rocketrio.cli.chaos.history import Ack, FaultWindow, History, TopicSpec
from rocketrio.cli.chaos.rerender import RunDirError, load, render
from rocketrio.cli.main import main

T0 = 1_800_000_000_000


def _line(a: Ack) -> str:
    ts = datetime.fromtimestamp(a.ts_ms / 1000, UTC).isoformat(timespec="milliseconds")
    return json.dumps({"ts": ts.replace("+00:00", "Z"), "event": "trace_send_acked",
                       "msg_id": a.msg_id, "topic": a.topic, "broker": a.broker,
                       "queue_id": a.queue_id, "queue_offset": a.queue_offset,
                       "latency_ms": a.latency_ms, "sent_ms": a.sent_ms})  # fmt: skip


def _run_dir(tmp_path: Path, *, old: bool = False) -> tuple[Path, dict[str, object]]:
    h = History(start_ms=T0, end_ms=T0 + 10_000, topics=[TopicSpec("T", 4, 4, 6, ())])
    slow = range(30, 60)
    h.acks = [Ack(f"m{i}", "T", "b", 0, i, T0 + i * 100 + (300 if i in slow else 5),
                  300 if i in slow else 5, T0 + i * 100) for i in range(100)]  # fmt: skip
    h.faults = [FaultWindow(0, "slowdisk-master", "slowdisk", ("broker-a-0",), T0 + 3000,
                            T0 + 5950)]  # fmt: skip
    checks, recs = checkers.run_all(h)
    meta = {"run_id": "r1", "topics": [attrs.asdict(t) for t in h.topics],
            "start_ms": h.start_ms, "end_ms": h.end_ms}  # fmt: skip
    res = report.result(h, checks, recs, meta)
    if old:  # written before chaos kept these
        for k in ("latency_by_kind", "start_ms", "end_ms"):
            del res[k]
    (tmp_path / "result.json").write_text(json.dumps(res))
    (tmp_path / "chaos.jsonl").write_text("\n".join(_line(a) for a in h.acks) + "\n")
    return tmp_path, report.result(h, checks, recs, meta)


def test_a_run_renders_again_with_the_same_summary_and_a_new_page(tmp_path: Path) -> None:
    run, res = _run_dir(tmp_path)
    lines, page = render(str(run))
    assert lines == report.summary(res)
    text = Path(page).read_text()
    assert "<svg" in text and text.count("<circle") == 100
    assert "<td>300 / 300</td>" in text  # the per-kind latency table
    h, _ = load(str(run))
    assert len(h.acks) == 100 and h.start_ms == T0


def test_an_older_run_gets_its_latency_figures_from_the_traces(tmp_path: Path) -> None:
    run, res = _run_dir(tmp_path, old=True)
    h, loaded = load(str(run))
    assert loaded["latency_by_kind"] == res["latency_by_kind"]
    assert h.start_ms == T0 + 5  # the first acknowledgement: the run's start was not kept


def test_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run").mkdir()
    run, _ = _run_dir(tmp_path / "run")
    assert main(["analyze", "--chaos", str(run)]) == 0
    out = capsys.readouterr().out
    assert "slowdisk-master" in out and out.rstrip().endswith("report.html")
    assert main(["analyze", "--chaos", str(tmp_path / "nothing")]) == 1
    assert "not a chaos run's directory" in capsys.readouterr().err
    assert main(["analyze"]) == 2
    assert main(["analyze", "--chaos", str(run), "some-logdir"]) == 2
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "result.json").write_text("{}")
    with pytest.raises(RunDirError, match="not a chaos result"):
        load(str(tmp_path / "bad"))
