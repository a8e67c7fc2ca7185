"""The outputs of a chaos run (pure): the JSON result, the one-screen text summary and the HTML
report with a latency-over-time plot marking each fault (inline SVG, no script, no network),
like OpenChaos' latency point graph."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import attrs

from rocketrio.cli.chaos.checkers import Check, Recovery, by_kind, latency_by_kind
from rocketrio.cli.chaos.history import History

PLOT_W, PLOT_H, PAD = 960, 320, 48
MAX_POINTS = 6000  # more acks than this are thinned evenly (every fault stays marked)


def result(
    h: History, checks: Sequence[Check], recs: Sequence[Recovery], meta: dict[str, Any]
) -> dict[str, Any]:
    acked = h.first_acks()
    consumed: dict[str, int] = {}
    for c in h.consumes:
        consumed[c.group] = consumed.get(c.group, 0) + 1
    breaches = [c.name for c in checks if c.breach]
    return {
        **meta,
        "acked": len(acked),
        "consumed": dict(sorted(consumed.items())),
        "faults": [attrs.asdict(f) for f in h.faults],
        "checks": {c.name: attrs.asdict(c) for c in checks},
        "recovery": [attrs.asdict(r) for r in recs],
        "recovery_by_kind": {"send": by_kind(recs, "send"), "consume": by_kind(recs, "consume")},
        "latency_by_kind": latency_by_kind(h),
        "breaches": breaches,
        "ok": not breaches,
    }


def _ms(v: int | None) -> str:
    return "-" if v is None else f"{v}"


def kind_table(res: dict[str, Any]) -> list[str]:
    """Markdown rows: fault, count, send recovery p50/p99/max, consume recovery p50/p99/max,
    send latency p50/p99 of the sends begun during the fault (and p50 outside every fault)."""
    send, cons = res["recovery_by_kind"]["send"], res["recovery_by_kind"]["consume"]
    lat = res.get("latency_by_kind", {})
    base = next(iter(lat.values()), {}).get("outside_p50_ms")
    rows = [
        "| fault | count | send recovery p50 / p99 / max (ms) | consume recovery p50 / p99 / "
        f"max (ms) | send latency during p50 / p99 (ms; outside faults p50 {_ms(base)}) |",
        "|---|---|---|---|---|",
    ]
    for name, s in send.items():
        c, la = cons.get(name, {}), lat.get(name, {})
        rows.append(
            f"| {name} | {s['faults']} | {_ms(s['p50_ms'])} / {_ms(s['p99_ms'])} / "
            f"{_ms(s['max_ms'])} | {_ms(c.get('p50_ms'))} / {_ms(c.get('p99_ms'))} / "
            f"{_ms(c.get('max_ms'))} | {_ms(la.get('during_p50_ms'))} / "
            f"{_ms(la.get('during_p99_ms'))} |"
        )
    return rows


def summary(res: dict[str, Any]) -> list[str]:
    ch = res["checks"]
    lines = [
        f"chaos run {res.get('run_id', '')}: {len(res['faults'])} faults injected"
        + (f" of {res['planned']} planned" if "planned" in res else "")
        + ", "
        f"{res['acked']} messages acknowledged",
        "  consumed: " + ", ".join(f"{g} {n}" for g, n in res["consumed"].items()),
        f"  lost {ch['lost']['count']}, duplicates {ch['duplicates']['count']}, order violations "
        f"{ch['order']['count']}, delayed early {ch['delayed_early']['count']}, rolled back "
        f"delivered {ch['rolled_back_delivered']['count']}, metadata changes "
        f"{ch['metadata']['count']}, unrecovered {ch['unrecovered']['count']}",
    ]
    for name in res["breaches"]:
        for ex in ch[name]["examples"][:3]:
            lines.append(f"  BREACH {name}: {ex}")
    for kind, why in res.get("unavailable", {}).items():
        lines.append(f"  unavailable: {kind}: {why}")
    skipped = res.get("skipped", [])
    lines += [f"  skipped: {s}" for s in skipped[:5]]
    if len(skipped) > 5:
        lines.append(f"  skipped: {len(skipped) - 5} more (result.json)")
    lines += ["  " + r for r in kind_table(res)]
    verdict = "OK" if res["ok"] else "FAILED (" + ", ".join(res["breaches"]) + ")"
    lines.append(f"  result: {verdict}")
    return lines


def _points(h: History) -> list[tuple[int, int]]:
    acks = sorted(h.first_acks().values(), key=lambda a: a.ts_ms)
    step = max(1, len(acks) // MAX_POINTS)
    return [(a.ts_ms, a.latency_ms) for a in acks[::step]]


def latency_svg(h: History) -> str:
    """Acknowledgement latency (ms, y) over time (s since the start, x); a shaded band and a
    numbered line per fault."""
    pts = _points(h)
    t0 = h.start_ms or (pts[0][0] if pts else 0)
    t1 = max(h.end_ms, pts[-1][0] if pts else t0 + 1, t0 + 1)
    y_max = max([lat for _, lat in pts] + [100])
    w, hh = PLOT_W - 2 * PAD, PLOT_H - 2 * PAD

    def x(ts: int) -> float:
        return PAD + (ts - t0) / (t1 - t0) * w

    def y(lat: int) -> float:
        return PAD + hh - lat / y_max * hh

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{PLOT_W}" height="{PLOT_H}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect x="{PAD}" y="{PAD}" width="{w}" height="{hh}" fill="none" stroke="#888"/>',
    ]
    for f in h.faults:
        x0, x1 = x(f.started_ms), max(x(f.healed_ms), x(f.started_ms) + 2)
        title = html.escape(f"{f.index}: {f.name} on {', '.join(f.targets)}")
        out.append(
            f'<g><title>{title}</title><rect x="{x0:.1f}" y="{PAD}" width="{x1 - x0:.1f}" '
            f'height="{hh}" fill="#f4a6a6" opacity="0.5"/><line x1="{x0:.1f}" y1="{PAD}" '
            f'x2="{x0:.1f}" y2="{PAD + hh}" stroke="#c00"/><text x="{x0 + 2:.1f}" '
            f'y="{PAD - 4}" fill="#c00">{f.index}</text></g>'
        )
    out += [
        f'<circle cx="{x(ts):.1f}" cy="{y(lat):.1f}" r="1.5" fill="#1f5fa8"/>' for ts, lat in pts
    ]
    secs = (t1 - t0) / 1000
    for i in range(6):
        tx = PAD + w * i / 5
        out.append(f'<text x="{tx:.0f}" y="{PAD + hh + 16}" text-anchor="middle">'
                   f"{secs * i / 5:.0f} s</text>")  # fmt: skip
        ly = PAD + hh - hh * i / 5
        out.append(f'<text x="{PAD - 4}" y="{ly:.0f}" text-anchor="end">{y_max * i / 5:.0f}</text>')
    out.append(f'<text x="{PAD}" y="{PAD - 24}">send latency (ms) over time; red: faults</text>')
    out.append("</svg>")
    return "\n".join(out)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    th = "".join(f"<th>{html.escape(str(c))}</th>" for c in head)
    trs = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><tr>{th}</tr>{trs}</table>"


_kind_head = (
    "fault", "count", "send recovery p50 / p99 / max (ms)", "send latency during p50 / p99 (ms)",
    "send latency outside faults p50 (ms)",
)  # fmt: skip


def _kind_rows(res: dict[str, Any]) -> list[tuple[Any, ...]]:
    lat = res.get("latency_by_kind", {})
    rows = []
    for name, s in res["recovery_by_kind"]["send"].items():
        la = lat.get(name, {})
        rows.append((name, s["faults"], f"{_ms(s['p50_ms'])} / {_ms(s['p99_ms'])} / "
                     f"{_ms(s['max_ms'])}", f"{_ms(la.get('during_p50_ms'))} / "
                     f"{_ms(la.get('during_p99_ms'))}", _ms(la.get("outside_p50_ms"))))  # fmt: skip
    return rows


def html_report(h: History, res: dict[str, Any]) -> str:
    checks = [
        (n, c["count"], "BREACH" if c["breach"] else "ok", "; ".join(c["examples"][:3]))
        for n, c in res["checks"].items()
    ]
    faults = [
        (f["index"], f["name"], ", ".join(f["targets"]), f["started_ms"] - h.start_ms,
         f["healed_ms"] - h.start_ms)
        for f in res["faults"]
    ]  # fmt: skip
    recs = [
        (r["fault"], r["name"], r["op"], _ms(r["recovery_ms"]), _ms(r["gap_ms"]))
        for r in res["recovery"]
    ]
    status = "OK" if res["ok"] else "FAILED: " + ", ".join(res["breaches"])
    style = (
        "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}"
    )
    return "\n".join([
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>rocketrio chaos {html.escape(str(res.get('run_id', '')))}</title>",
        f"<style>{style}</style></head><body>",
        f"<h1>rocketrio chaos: {html.escape(status)}</h1>",
        f"<p>{res['acked']} acknowledged; consumed {html.escape(str(res['consumed']))}; "
        f"command: <code>{html.escape(str(res.get('command', '')))}</code></p>",
        latency_svg(h),
        "<h2>Checks</h2>", _table(("check", "count", "verdict", "examples"), checks),
        "<h2>Faults</h2>",
        _table(("#", "fault", "targets", "started (ms)", "healed (ms)"), faults),
        "<h2>Per fault kind</h2>", _table(_kind_head, _kind_rows(res)),
        "<h2>Recovery per fault</h2>",
        _table(("#", "fault", "op", "recovery (ms)", "gap (ms)"), recs),
        "</body></html>",
    ])  # fmt: skip
