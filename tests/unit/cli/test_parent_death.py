"""The child side of `up`'s parent-death binding (cli/parent_death.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketrio.cli.parent_death import SUPERVISOR_ENV, SupervisorGone, bind_to_supervisor


def test_not_supervised_does_nothing() -> None:
    calls: list[int] = []
    assert bind_to_supervisor({}, set_pdeathsig=calls.append, getppid=lambda: 1) is None
    assert calls == []


def test_supervised_asks_for_sigkill_on_parent_death_then_checks_the_parent() -> None:
    calls: list[int] = []
    env = {SUPERVISOR_ENV: "77"}
    assert bind_to_supervisor(env, set_pdeathsig=calls.append, getppid=lambda: 77) == 77
    assert calls == [signal.SIGKILL]
    # the supervisor died before the prctl took effect: we were re-parented, do not start
    with pytest.raises(SupervisorGone, match=r"pid 77\) is gone"):
        bind_to_supervisor(env, set_pdeathsig=calls.append, getppid=lambda: 1)
    assert calls == [signal.SIGKILL, signal.SIGKILL]  # set before the check: no window
    with pytest.raises(SupervisorGone, match="not a pid"):
        bind_to_supervisor({SUPERVISOR_ENV: "x"}, set_pdeathsig=calls.append, getppid=lambda: 1)


@pytest.mark.system  # real processes
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_the_real_prctl_kills_the_child_when_its_parent_dies(tmp_path: Path) -> None:
    """A middle process starts a grandchild that binds to it, then the middle one is killed -9:
    the grandchild must be gone at once (it would sleep 60 s otherwise)."""
    grandchild = (
        "import time; from rocketrio.cli.parent_death import bind_to_supervisor; "
        "bind_to_supervisor(); print('bound', flush=True); time.sleep(60)"
    )
    middle = (
        "import os, subprocess, sys, time\n"
        f"env = dict(os.environ, {SUPERVISOR_ENV}=str(os.getpid()))\n"
        f"p = subprocess.Popen([sys.executable, '-c', {grandchild!r}], env=env,"
        " stdout=subprocess.PIPE, text=True)\n"
        "assert p.stdout.readline().strip() == 'bound'\n"
        "print(p.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    m = subprocess.Popen([sys.executable, "-c", middle], stdout=subprocess.PIPE, text=True)
    assert m.stdout is not None
    pid = int(m.stdout.readline())
    assert _alive(pid)
    m.kill()
    m.wait()
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as dead)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.system  # real processes
def test_a_role_started_for_a_gone_supervisor_does_not_start(tmp_path: Path) -> None:
    conf = tmp_path / "n.conf"
    conf.write_text(f"listenPort=1\nlogDir={tmp_path}\n")
    env = dict(os.environ, **{SUPERVISOR_ENV: "1"})  # pid 1 is not our parent
    r = subprocess.run(
        [sys.executable, "-m", "rocketrio.cli.main", "namesrv", "-c", str(conf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,  # refused at once; a started NameServer would run until this kills it
        check=False,
    )
    assert r.returncode == 1
    assert "supervisor rocketrio up (pid 1) is gone; not starting" in r.stderr
