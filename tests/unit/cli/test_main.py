"""Start-up failures of a role are an ERROR line in its JSON log and one line on stderr, and
the process exits non-zero (issue 7, item 3); a failure after start is ``process_failed``."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from rocketrio.actors.observe import events
from rocketrio.cli.main import run_service


async def fails_at_start(
    why: str, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    await trio.sleep(0)
    raise RuntimeError(why)


async def fails_later(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    task_status.started()
    await trio.sleep(0)
    raise OSError("disk gone")


def events_of(log_dir: Path, name: str) -> list[dict[str, Any]]:
    with open(os.path.join(log_dir, f"{name}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_a_role_that_cannot_start_logs_startup_failed_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_service("node-x", "broker", str(tmp_path), fails_at_start, "store locked") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "rocketrio broker node-x: start-up failed: RuntimeError: store locked"
    [line] = [e for e in events_of(tmp_path, "node-x") if e["event"] == events.StartupFailed.NAME]
    assert line["level"] == "error" and line["role"] == "broker"
    assert line["error"] == "RuntimeError: store locked"
    assert line["traceback"].startswith("Traceback") and "fails_at_start" in line["traceback"]


def test_a_role_that_fails_after_starting_logs_process_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_service("node-y", "namesrv", str(tmp_path), fails_later) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("failed: OSError: disk gone")
    found = [e["event"] for e in events_of(tmp_path, "node-y") if e["level"] == "error"]
    assert found == [events.ProcessFailed.NAME]
