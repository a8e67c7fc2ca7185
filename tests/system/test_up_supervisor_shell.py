"""`up`'s supervising shell on tiny real processes: restarts, give-up, stop order, escalation,
stragglers in the process group, and children that outlive Trio's worker threads.

The children are `python -c` scripts instead of roles (the shell is the same: `spawn`, the pidfd
wait, the process groups, the restart policy); each test takes well under a few seconds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio._core._thread_cache as thread_cache

from rocketrio.actors.kernel.restart_policy import RestartPolicy
from rocketrio.actors.observe import events
from rocketrio.cli.up_plan import ProcSpec
from rocketrio.cli.up_supervisor import Supervisor

pytestmark = pytest.mark.system  # in conftest.XDIST_GROUPS


def _spec(name: str) -> ProcSpec:
    return ProcSpec(name, "broker", {}, "", "127.0.0.1:1", (), "test")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _sup(tmp_path: Path, scripts: dict[str, str], policy: RestartPolicy) -> Supervisor:
    def command(spec: ProcSpec, _conf: str) -> list[str]:
        return [sys.executable, "-c", scripts[spec.name]]

    lines: list[str] = []
    return Supervisor(
        [_spec(n) for n in scripts],
        {n: "" for n in scripts},
        str(tmp_path),
        policy,
        say=lines.append,
        say_err=lines.append,
        command=command,
    )


def _events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


async def test_a_dying_child_is_restarted_with_backoff_then_given_up(tmp_path: Path) -> None:
    sup = _sup(tmp_path, {"flaky": "import sys; sys.exit(3)"}, RestartPolicy(0.05, 1, 2, 60))
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as n:
            await n.start(sup.run)
            with trio.fail_after(20):
                await sup.gave_up.wait()
            await sup.stop(1)
    started = _events(logs, events.ChildStarted.NAME)
    exited = _events(logs, events.ChildExited.NAME)
    assert [e["restart"] for e in started] == [0, 1, 2]
    assert len({e["pid"] for e in started}) == 3  # a new process each time
    assert [(e["exit_code"], e["signal"]) for e in exited] == [(3, None)] * 3
    assert [(e["restart"], e["next_delay_s"], e["gave_up"]) for e in exited] == [
        (1, 0.05, False),
        (2, 0.1, False),
        (None, None, True),
    ]
    assert [e["pid"] for e in exited] == [e["pid"] for e in started]
    assert "flaky keeps exiting (status 3, 2 restarts in a row)" in sup.gave_up_line


async def test_stop_goes_in_reverse_order_and_escalates_then_clears_the_group(
    tmp_path: Path,
) -> None:
    order = tmp_path / "order"
    polite = (
        "import signal, sys, time\n"
        "def bye(*_):\n"
        f"    open({str(order)!r}, 'a').write(sys.argv[1] + '\\n'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "time.sleep(60)\n"
    )
    # ignores SIGTERM and leaves a grandchild (same process group) behind
    stubborn = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(tmp_path / 'grandchild')!r}, 'w').write(str(g.pid))\n"
        "time.sleep(60)\n"
    )
    scripts = {
        "first": polite.replace("sys.argv[1]", "'first'"),
        "stubborn": stubborn,
        "last": polite.replace("sys.argv[1]", "'last'"),
    }
    sup = _sup(tmp_path, scripts, RestartPolicy(1, 1, 0))
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as n:
            await n.start(sup.run)
            with trio.fail_after(10):
                while not (tmp_path / "grandchild").exists():
                    await trio.sleep(0.02)
                await trio.sleep(0.3)  # the polite ones have set their handlers
            grandchild = int((tmp_path / "grandchild").read_text())
            pids = [s.pid for s in sup.slots]
            with trio.fail_after(10):
                await sup.stop(0.5)
    survivors = [p for p in [*pids, grandchild] if p is not None and _alive(p)]
    for p in survivors:  # leave nothing behind even when failing
        os.kill(p, 9)
    assert survivors == []
    assert order.read_text().split() == ["last", "first"]
    escalated = _events(logs, events.ChildStopEscalated.NAME)
    assert [e["child"] for e in escalated] == ["stubborn"]
    exited = {e["child"]: e for e in _events(logs, events.ChildExited.NAME)}
    assert exited["stubborn"]["signal"] == "SIGKILL" and exited["stubborn"]["stopping"]
    assert exited["first"]["exit_code"] == 0


async def test_a_second_signal_skips_the_grace_period(tmp_path: Path) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    sup = _sup(tmp_path, {"a": stubborn}, RestartPolicy(1, 1, 0))
    async with trio.open_nursery() as n:
        await n.start(sup.run)
        await trio.sleep(0.3)
        t0 = trio.current_time()
        with trio.fail_after(10):
            async with trio.open_nursery() as stopping:
                stopping.start_soon(sup.stop, 30.0)
                await trio.sleep(0.2)
                sup.hurry()
    assert trio.current_time() - t0 < 10  # not the 30 s grace
    assert not _alive(sup.slots[0].pid or 0)


async def test_children_outlive_trios_worker_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent-death signal fires when the thread that forked the child exits: children
    forked from one of Trio's worker threads (as trio.open_process does) would die when that
    thread idles out. Idle threads are made to exit after 1 s here instead of 10 s (long enough
    for a child to have set its parent-death signal before its forking thread is gone)."""
    monkeypatch.setattr(thread_cache, "IDLE_TIMEOUT", 1.0)
    bound = (
        "import time; from rocketrio.cli.parent_death import bind_to_supervisor\n"
        "bind_to_supervisor(); time.sleep(60)\n"
    )
    sup = _sup(tmp_path, {"a": bound, "b": bound}, RestartPolicy(1, 1, 0))
    with structlog.testing.capture_logs() as logs:
        async with trio.open_nursery() as n:
            await n.start(sup.run)
            await trio.sleep(2.5)  # any worker thread used so far has idled out
            assert _events(logs, events.ChildExited.NAME) == []
            assert all(_alive(s.pid or 0) for s in sup.slots)
            await sup.stop(5)
