"""The report renders in a real headless browser (Debian's Chromium, installed by
tests/install-browser.sh, which the README's test command runs): the DOM has the headline and
the timeline SVG, and the screenshot (kept in tests/artifacts/) is a real picture."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from rocketrio.analysis.report import render_html
from tests.harness.paths import ARTIFACTS
from tests.harness.report_summaries import summary

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (tests/install-browser.sh installs it)"
)


def png_pixels(data: bytes) -> tuple[int, int, set[bytes]]:
    """(width, height, distinct RGB(A) pixels of the first rows) of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 3
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels + 1
    seen: set[bytes] = set()
    prev = bytearray(stride - 1)
    for row in range(min(height, 600)):  # undo the PNG filters of the first rows
        f = raw[row * stride]
        line = bytearray(raw[row * stride + 1 : (row + 1) * stride])
        for i in range(len(line)):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        seen.update(bytes(line[i : i + 3]) for i in range(0, len(line), channels * 7))
        prev = line
    return width, height, seen


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    assert CHROMIUM is not None
    page = tmp_path / "report.html"
    page.write_text(render_html(summary()), encoding="utf-8")
    profile = tmp_path / "profile"
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "incident-report.png"
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<svg" in dom.stdout and "new master 2 writable at 23:20:25.873" in dom.stdout
    run = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={shot}",
            "--window-size=1280,1400",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    width, height, colors = png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 1400)
    assert len(colors) > 20, "the screenshot is blank"  # text, the timeline's colours
    print(f"screenshot: {shot}")
