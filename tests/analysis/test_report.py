"""The incident report (analysis/report.py): self-contained HTML with a timeline per failover,
escaped log text, the skipped-lines section, and the plain-text summary."""

from __future__ import annotations

import re

from rocketrio.analysis.report import ROWS, render_html, render_text, timeline_svg
from tests.harness.report_summaries import T, failover, summary


def test_the_report_is_self_contained() -> None:
    html = render_html(summary())
    assert "<svg" in html and html.count("<svg") == 1
    # nothing is fetched: no URL anywhere (scripts, styles, fonts, images)
    assert not re.search(r"(src|href)\s*=", html) and "http" not in html and "<script" not in html


def test_headline_and_tables() -> None:
    html = render_html(summary())
    assert "broker-a: master 1 lost at 23:20:25.862, new master 2 writable at 23:20:25.873" in html
    for title in (
        "Failovers (1)",
        "Unavailability windows (1)",
        "Truncations (1)",
        "Duplicates (1)",
    ):
        assert title in html
    assert "1 malformed, 1 of unknown events, 1 with a bad field" in html


def test_log_text_is_escaped() -> None:
    evil = failover(reason="<script>alert(1)</script>", broker="b<&>")
    html = render_html(summary(failovers=[evil]))
    assert "<script>" not in html and "&lt;script&gt;" in html and "b&lt;&amp;&gt;" in html


def test_the_timeline_marks_every_step_in_order() -> None:
    svg = timeline_svg(failover())
    labels = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    steps = [x.split(" ")[0] for x in labels[:5]]
    assert steps == ["master", "elected", "master", "first", "old"]
    assert "truncated 4096 B" in svg and "write gap 114 ms" in svg
    xs = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', svg)]
    assert xs == sorted(xs) and len(xs) == 5


def test_long_tables_are_capped() -> None:
    lost = [
        {"msg_id": f"id{i}", "topic": "T", "broker": "b", "queue_id": 0, "queue_offset": i,
         "acked_ms": T + i}
        for i in range(ROWS + 5)
    ]  # fmt: skip
    html = render_html(summary(lost=lost))
    assert "5 more rows in the Parquet table" in html and f"id{ROWS + 4}" not in html


def test_an_empty_summary_says_no_incidents() -> None:
    s = summary(failovers=[], windows=[], truncations=[], traced=False, duplicates=[])
    s["lines"]["read"] = 0
    html = render_html(s)
    assert "no incidents" in html and "no log lines found" in html and "no message traces" in html
    text = render_text(s)
    assert "failovers: 0" in text and "no log lines found" in text


def test_text_summary() -> None:
    text = render_text(summary())
    assert text.splitlines()[0].startswith("read 1200 lines from 5 files: 1197 parsed")
    assert "  broker-a: master 1 lost at 23:20:25.862" in text
    assert "traced: 3000 acked, 3001 consumed, 0 acked but lost, 1 duplicated" in text
