"""The chaos report: the JSON result, the summary, the per-kind table, the SVG plot, the page."""

from __future__ import annotations

from xml.etree import ElementTree

from rocketrio.cli.chaos import checkers, report
from rocketrio.cli.chaos.history import Ack, Consume, FaultWindow, History, TopicSpec


def test_report_json_text_and_an_svg_marking_each_fault() -> None:
    h = History(start_ms=0, end_ms=10_000, topics=[TopicSpec("T", 4, 4, 6, ("g",))])
    h.acks = [Ack(f"m{i}", "T", "b", 0, i, i * 100, 3 + i % 7) for i in range(100)]
    h.consumes = [Consume(a.msg_id, "g", "T", "b", 0, a.queue_offset, a.ts_ms + 5) for a in h.acks]
    h.faults = [FaultWindow(0, "kill-master", "kill", ("broker-a-0",), 4000, 4000)]
    checks, recs = checkers.run_all(h)
    res = report.result(h, checks, recs, {"run_id": "r1"})
    assert res["ok"] and res["acked"] == 100
    assert any("kill-master" in line for line in report.summary(res))
    assert report.kind_table(res)[2].startswith("| kill-master | 1 |")
    svg = report.latency_svg(h)
    root = ElementTree.fromstring(svg)  # well-formed, no script
    assert root.tag.endswith("svg") and "<script" not in svg
    assert svg.count("<circle") == 100 and "kill-master on broker-a-0" in svg
    page = report.html_report(h, res)
    assert "<svg" in page and "OK" in page


def test_skipped_faults_are_listed_and_the_planned_count_said() -> None:
    h = History(start_ms=0, end_ms=10_000)
    checks, recs = checkers.run_all(h)
    res = report.result(h, checks, recs, {"planned": 3, "skipped": ["kill-master #0: x"] * 7})
    lines = report.summary(res)
    assert lines[0].startswith("chaos run : 0 faults injected of 3 planned, ")
    assert sum(line.startswith("  skipped: kill-master #0") for line in lines) == 5
    assert "  skipped: 2 more (result.json)" in lines


def test_a_fault_that_slows_shows_in_the_latency_of_the_sends_begun_during_it() -> None:
    """A slow disk never pauses acknowledgements (its recovery time says little): the sends begun
    while it was injected are slower, those begun before or after it are not counted in it."""
    h = History(start_ms=0, end_ms=10_000)
    h.acks = [Ack(f"m{i}", "T", "b", 0, i, i * 100 + (300 if 30 <= i < 60 else 5),
                  300 if 30 <= i < 60 else 5, i * 100) for i in range(100)]  # fmt: skip
    h.faults = [FaultWindow(0, "slowdisk-master", "slowdisk", ("broker-a-0",), 3000, 5950)]
    checks, recs = checkers.run_all(h)
    res = report.result(h, checks, recs, {})
    assert res["latency_by_kind"] == {
        "slowdisk-master": {"during_p50_ms": 300, "during_p99_ms": 300, "outside_p50_ms": 5}
    }
    table = report.kind_table(res)
    assert "outside faults p50 5" in table[0]
    assert table[2].startswith("| slowdisk-master | 1 |") and table[2].endswith("| 300 / 300 |")
