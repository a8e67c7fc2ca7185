"""`rocketrio console` as its own process, as the README shows it: it prints its URL, serves
the page and the live channel on one port, is read-only without --token-file, and refuses a
token file that is missing or too short with a one-line error and exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import trio
import trio_websocket

from tests.harness.system import free_port_block, start_up

pytestmark = pytest.mark.system


def console_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "rocketrio.cli.main", "console", *args]


def test_console_command_serves_a_read_only_page(tmp_path: Path) -> None:
    up = start_up(str(tmp_path / "c"), "single", "--no-console")
    port = free_port_block(1, extra=())
    proc = subprocess.Popen(
        console_cmd("-n", up.namesrv, "--listen", f"127.0.0.1:{port}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == f"console: http://127.0.0.1:{port}/ (read-only (no --token-file))"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
            assert resp.status == 200 and b"<title>rocketrio console</title>" in resp.read()

        async def talk() -> dict[str, object]:
            async with trio_websocket.open_websocket("127.0.0.1", port, "/ws", use_ssl=False) as ws:
                hello = json.loads(await ws.get_message())
                assert hello["type"] == "hello" and hello["actions"] is False
                msg = {
                    "v": 1,
                    "type": "action",
                    "id": "1",
                    "action": "updateTopic",
                    "args": {"topic": "T", "cluster": "DefaultCluster"},
                    "token": "guess",
                }
                await ws.send_message(json.dumps(msg))
                while True:
                    got = json.loads(await ws.get_message())
                    if got["type"] == "actionResult":
                        return got

        result = trio.run(talk)
        assert result["ok"] is False and "read-only" in str(result["error"])
    finally:
        proc.terminate()
        proc.wait(10)
        up.stop()


def test_a_bad_token_file_is_a_one_line_error(tmp_path: Path) -> None:
    short = tmp_path / "short.token"
    short.write_text("abc\n")
    for path, why in [(tmp_path / "missing.token", "No such file"), (short, "at least 16")]:
        r = subprocess.run(
            console_cmd("-n", "127.0.0.1:9", "--token-file", str(path)),
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert r.returncode == 2, r.stderr
        [line] = r.stderr.splitlines()
        assert line.startswith("rocketrio: config error: token file") and why in line, line
