"""Renders the incident job's summary: a self-contained HTML report and the stdout text.

The HTML opens offline (inline CSS and SVG, no script, font or image from anywhere): one
headline and one timeline picture per failover, then the tables. Every string that came from
the logs is escaped: log text is untrusted. Pure functions of the summary dict that
`analysis.incidents.run` returns (and writes as ``summary.json``).
"""

from __future__ import annotations

import html
import time
from typing import Any

ROWS = 200  # longest table shown; the Parquet tables have every row


def _hms(ms: int | None) -> str:
    if ms is None:
        return "-"
    return time.strftime("%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}"


def _day(ms: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(ms / 1000))


def _e(v: Any) -> str:
    return html.escape("-" if v is None else str(v))


# ---------------------------------------------------------------------------- text


def render_text(s: dict[str, Any]) -> str:
    """The plain-text summary `rocketrio analyze` prints."""
    ln = s["lines"]
    sk = ln["skipped"]
    out = [
        f"read {ln['read']} lines from {ln['files']} files: {ln['parsed']} parsed, skipped "
        f"{sk['malformed']} malformed, {sk['unknown_event']} unknown events, "
        f"{sk['bad_field']} bad fields, {sk['empty_files']} empty files",
    ]
    if ln["read"] == 0:
        out.append("no log lines found")
    fos = s["failovers"]
    out.append(f"failovers: {len(fos)}")
    out.extend(f"  {f['headline']}" for f in fos)
    ch = s["raft_churn"]
    out.append(
        f"controller: {ch['elections']} leader elections, {ch['role_changes']} role changes; "
        f"SyncStateSet changes: {len(s['sync_state_set_changes'])}; "
        f"truncations: {len(s['truncations'])}"
    )
    out.append(f"unavailability windows: {len(s['windows'])}")
    for w in s["windows"][:10]:
        where = w["broker"] + (f"/{w['topic']}" if w["topic"] else "")
        out.append(
            f"  {w['op']} {where}: {_hms(w['start_ms'])} - {_hms(w['end_ms'])}, {w['length_ms']} ms"
        )
    if s["traced"]:
        out.append(
            f"traced: {s['acked']} acked, {s['consumed']} consumed, {len(s['lost'])} acked "
            f"but lost, {len(s['duplicates'])} duplicated"
        )
        out.extend(
            f"  lost {m['msg_id']} {m['topic']} {m['broker']}:{m['queue_id']}@{m['queue_offset']}"
            for m in s["lost"][:10]
        )
    else:
        out.append("no message traces (turn on client tracing to check for lost messages)")
    return "\n".join(out)


# ---------------------------------------------------------------------------- timeline


def timeline_svg(f: dict[str, Any], width: int = 900) -> str:
    """One failover as a horizontal timeline with its marks and the write gap shaded."""
    marks = [
        ("master lost", f.get("lost_ms"), "#c0392b"),
        (f"elected (term {f.get('term')}, epoch {f.get('epoch')})", f.get("elected_ms"), "#8e44ad"),
        (f"master {f.get('new_master_id')} writable", f.get("writable_ms"), "#27ae60"),
        ("first write", f.get("first_write_ms"), "#2980b9"),
    ]
    back = "old master back as slave"
    if f.get("old_truncated_bytes"):
        back += f" (truncated {f['old_truncated_bytes']} B)"
    marks.append((back, f.get("old_back_ms"), "#7f8c8d"))
    present = [(label, t, c) for label, t, c in marks if t is not None]
    times = [t for _, t, _ in present]
    gap_end = None
    if f.get("write_gap_ms") is not None and f.get("lost_ms") is not None:
        gap_end = f["lost_ms"] + f["write_gap_ms"]
    lo, hi = min(times), max(times)
    span = max(hi - lo, 1)
    left, right = 40, width - 40
    height = 70 + 26 * len(present)

    def x(t: int) -> float:
        return left + (t - lo) / span * (right - left)

    parts = [
        f'<svg width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(f.get("headline"))}">',
        f'<line x1="{left}" y1="40" x2="{right}" y2="40" stroke="#333" stroke-width="2"/>',
    ]
    if gap_end is not None and f.get("lost_ms") is not None:
        g0, g1 = x(max(f["lost_ms"] - 0, lo)), x(min(gap_end, hi))
        parts.append(
            f'<rect x="{g0:.1f}" y="30" width="{max(g1 - g0, 1):.1f}" height="20" '
            f'fill="#f5b7b1" opacity="0.7"><title>write gap {f["write_gap_ms"]} ms</title></rect>'
        )
    for i, (label, t, color) in enumerate(present):
        xi = x(t)
        y = 70 + 26 * i
        parts.append(f'<circle cx="{xi:.1f}" cy="40" r="6" fill="{color}"/>')
        parts.append(
            f'<line x1="{xi:.1f}" y1="46" x2="{xi:.1f}" y2="{y - 12}" stroke="{color}" '
            f'stroke-dasharray="3,3"/>'
        )
        anchor = "end" if xi > width * 0.6 else "start"
        parts.append(
            f'<text x="{xi:.1f}" y="{y}" font-size="13" fill="{color}" '
            f'text-anchor="{anchor}">{_e(label)} {_hms(t)} (+{t - lo} ms)</text>'
        )
    parts.append(
        f'<text x="{left}" y="18" font-size="12" fill="#555">{_hms(lo)}</text>'
        f'<text x="{right}" y="18" font-size="12" fill="#555" text-anchor="end">{_hms(hi)}'
        f" ({span} ms)</text></svg>"
    )
    return "".join(parts)


# ---------------------------------------------------------------------------- html


def _table(title: str, rows: list[dict[str, Any]], cols: list[tuple[str, str]]) -> str:
    if not rows:
        return f"<h2>{_e(title)}</h2><p class='none'>none</p>"
    head = "".join(f"<th>{_e(label)}</th>" for _, label in cols)
    body = []
    for r in rows[:ROWS]:
        cells = []
        for key, _ in cols:
            v = r.get(key)
            if key.endswith("_ms") and key not in ("length_ms", "write_gap_ms") and v is not None:
                v = _hms(v)
            elif isinstance(v, list):
                v = ",".join(str(i) for i in v)
            cells.append(f"<td>{_e(v)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = (
        f"<p class='more'>{len(rows) - ROWS} more rows in the Parquet table</p>"
        if len(rows) > ROWS
        else ""
    )
    return (
        f"<h2>{_e(title)} ({len(rows)})</h2><table><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>{more}"
    )


_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px}
th{background:#f3f3f3}.headline{font-family:monospace;font-size:14px;margin:6px 0}
.none{color:#777}.more{color:#777;font-size:12px}.failover{margin:18px 0}
"""


# the columns of each table: (summary key, heading)
FAILOVER_COLUMNS = [
    ("broker", "broker set"),
    ("epoch", "epoch"),
    ("term", "term"),
    ("old_master_id", "old master"),
    ("new_master_id", "new master"),
    ("reason", "reason"),
    ("candidates", "candidates"),
    ("lost_ms", "lost"),
    ("lost_signal", "signal"),
    ("elected_ms", "elected"),
    ("writable_ms", "writable"),
    ("first_write_ms", "first write"),
    ("old_back_ms", "old back"),
    ("old_truncated_bytes", "truncated B"),
    ("write_gap_ms", "write gap ms"),
    ("acked_lost", "acked lost"),
]
WINDOW_COLUMNS = [
    ("op", "op"),
    ("broker", "broker set"),
    ("topic", "topic"),
    ("start_ms", "from"),
    ("end_ms", "to"),
    ("length_ms", "length ms"),
]
LEADER_COLUMNS = [("term", "term"), ("leader", "leader"), ("at_ms", "at")]
SYNC_STATE_SET_COLUMNS = [
    ("broker", "broker set"),
    ("epoch", "epoch"),
    ("members", "members"),
    ("change", "change"),
    ("at_ms", "at"),
]
TRUNCATION_COLUMNS = [
    ("node", "node"),
    ("broker", "broker set"),
    ("broker_id", "broker id"),
    ("kind", "kind"),
    ("epoch", "epoch"),
    ("from_offset", "from"),
    ("to_offset", "to"),
    ("bytes", "bytes"),
    ("at_ms", "at"),
]
LOST_COLUMNS = [
    ("msg_id", "msg id"),
    ("topic", "topic"),
    ("broker", "broker set"),
    ("queue_id", "queue"),
    ("queue_offset", "offset"),
    ("acked_ms", "acked"),
]
DUPLICATE_COLUMNS = [("group", "group"), ("msg_id", "msg id"), ("count", "deliveries")]
SKIPPED_COLUMNS = [("file", "file"), ("why", "why"), ("line", "line")]


def render_html(s: dict[str, Any]) -> str:
    """The self-contained report (module docstring)."""
    day = _day(s["generated_at_ms"])
    fos = s["failovers"]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>rocketrio incident report</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>rocketrio incident report</h1><p>Generated {day} (times UTC). Inputs: "
        f"{_e(', '.join(s['inputs']))}</p>",
        "<h2>Headlines</h2>",
    ]
    if not fos:
        parts.append("<p class='none'>no incidents: no failover in these logs</p>")
    for f in fos:
        parts.append(
            f"<div class='failover'><p class='headline'>{_e(f['headline'])}</p>"
            f"{timeline_svg(f)}</div>"
        )
    parts.append(_table("Failovers", fos, FAILOVER_COLUMNS))
    parts.append(_table("Unavailability windows", s["windows"], WINDOW_COLUMNS))
    ch = s["raft_churn"]
    parts.append(
        f"<h2>Controller churn</h2><p>{ch['elections']} leader elections, {ch['terms']} terms, "
        f"{ch['role_changes']} role changes</p>"
    )
    parts.append(_table("Controller leaders", s["raft_leaders"], LEADER_COLUMNS))
    parts.append(
        _table("SyncStateSet changes", s["sync_state_set_changes"], SYNC_STATE_SET_COLUMNS)
    )
    parts.append(_table("Truncations", s["truncations"], TRUNCATION_COLUMNS))
    parts.extend(_messages_html(s))
    parts.extend(_input_html(s["lines"]))
    parts.append("</body></html>")
    return "\n".join(parts)


def _messages_html(s: dict[str, Any]) -> list[str]:
    """The report's Messages section: what the client traces show, or how to get them."""
    if not s["traced"]:
        return [
            "<h2>Messages</h2><p class='none'>no message traces in these logs (turn on client "
            "tracing to find acknowledged-but-lost messages)</p>"
        ]
    return [
        f"<h2>Messages</h2><p>{s['acked']} acknowledged, {s['consumed']} consumed, "
        f"{len(s['lost'])} acknowledged but lost, {len(s['duplicates'])} duplicated</p>",
        _table("Acknowledged but lost", s["lost"], LOST_COLUMNS),
        _table("Duplicates", s["duplicates"], DUPLICATE_COLUMNS),
    ]


def _input_html(ln: dict[str, Any]) -> list[str]:
    """The report's Input section: what was read and skipped, with examples."""
    sk = ln["skipped"]
    parts = [
        f"<h2>Input</h2><p>{ln['read']} lines in {ln['files']} files, {ln['parsed']} parsed; "
        f"skipped {sk['malformed']} malformed, {sk['unknown_event']} of unknown events, "
        f"{sk['bad_field']} with a bad field; {sk['empty_files']} empty files.</p>"
    ]
    if ln["read"] == 0:
        parts.append("<p><strong>no log lines found</strong></p>")
    parts.append(_table("Skipped lines (examples)", ln["skipped_examples"], SKIPPED_COLUMNS))
    return parts
