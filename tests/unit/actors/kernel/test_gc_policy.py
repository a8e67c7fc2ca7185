"""The server GC policy (actors/kernel/gc_policy.py) and where the launcher applies it: the boot
heap collected then frozen, the young threshold raised (never lowered), the middle and old
thresholds kept; applied once, after a broker (or container) serves, and to no other role."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from rocketrio.actors.kernel import gc_policy
from rocketrio.actors.kernel.gc_policy import YOUNG_THRESHOLD, tune_server_gc
from rocketrio.cli import main as cli_main


class Recorder:
    def __init__(self, threshold: tuple[int, int, int]) -> None:
        self.threshold = threshold
        self.calls: list[str] = []

    def collect(self) -> int:
        self.calls.append("collect")
        return 0

    def freeze(self) -> None:
        self.calls.append("freeze")

    def get_threshold(self) -> tuple[int, int, int]:
        return self.threshold

    def set_threshold(self, threshold0: int, threshold1: int, threshold2: int, /) -> None:
        self.calls.append("set_threshold")
        self.threshold = (threshold0, threshold1, threshold2)


def test_the_boot_heap_is_collected_then_frozen_and_the_young_threshold_raised() -> None:
    gc = Recorder((700, 10, 10))
    tune_server_gc(gc)
    assert gc.calls == ["collect", "freeze", "set_threshold"]
    assert gc.threshold == (YOUNG_THRESHOLD, 10, 10) and YOUNG_THRESHOLD >= 10 * 700


def test_a_young_threshold_set_higher_already_is_kept() -> None:
    gc = Recorder((50_000, 5, 3))
    tune_server_gc(gc)
    assert gc.threshold == (50_000, 5, 3)


@pytest.mark.parametrize(
    ("role", "tuned"), [("broker", True), ("container", True), ("namesrv", False)]
)
def test_the_launcher_tunes_a_broker_once_it_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, role: str, tuned: bool
) -> None:
    seen: list[str] = []
    monkeypatch.setattr(gc_policy, "tune_server_gc", lambda: seen.append("tuned"))

    async def service(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        seen.append("booting")
        await trio.sleep(0)
        task_status.started()
        seen.append("serving")
        await trio.sleep(0)

    assert cli_main.run_service("node-gc", role, str(tmp_path), service) == 0
    assert seen == (["booting", "serving", "tuned"] if tuned else ["booting", "serving"])
