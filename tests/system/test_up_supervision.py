"""`rocketrio up` as a supervisor, with real processes: nothing outlives it (kill -9, SIGHUP), a
second `up` on the same directory is refused and changes nothing, a killed child is restarted, a
child that keeps dying is given up, and bad flags are one-line errors (exit status 2)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness.system import UpProcess, free_port_block, log_problems, rr, start_up

pytestmark = pytest.mark.system

TRIO_WORKER_IDLE_S = 10  # trio's idle worker threads exit after this (trio/_core/_thread_cache)


def up_events(base_dir: str | Path, event: str) -> list[dict[str, Any]]:
    path = os.path.join(base_dir, "logs", "up.jsonl")
    with open(path, encoding="utf-8") as f:
        recs = [json.loads(line) for line in f]
    return [r for r in recs if r["event"] == event]


def _stat(pid: str | int) -> tuple[str, int] | None:
    """(state, process group) of a live process; None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[0], int(fields[2])


def alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[0] != "Z"  # a zombie waiting for its reaper is dead


def group_members(pgid: int) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit() and (st := _stat(p)) is not None and st[1] == pgid and st[0] != "Z":
            out.append(int(p))
    return out


def survivors(pids: list[int], deadline_s: float) -> list[int]:
    """The processes (or members of their groups) still alive after at most ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while True:
        left = [p for p in pids if alive(p)] + [m for p in pids for m in group_members(p)]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.05)


def produce_and_consume(ns: str, topic: str, tries_s: float = 30) -> None:
    end = time.monotonic() + tries_s
    while True:
        r = rr("produce", "-n", ns, "-t", topic, "-c", "1", timeout=60)
        if r.returncode == 0 and "SEND_OK" in r.stdout:
            break
        assert time.monotonic() < end, r.stdout + r.stderr
        time.sleep(0.5)
    r = rr(
        "consume", "-n", ns, "-t", topic, "-g", f"g_{topic}", "--count", "1", "--from-first",
        "--idle", "20",
    )  # fmt: skip
    assert r.returncode == 0 and f"recv {topic}" in r.stdout, r.stdout + r.stderr


def child_pids(up: UpProcess) -> list[int]:
    return [e["pid"] for e in up_events(up.base_dir, "child_started")]


def test_kill_9_of_up_leaves_no_process_behind(tmp_path: Path) -> None:
    t0 = time.monotonic()
    base = str(tmp_path / "c")
    up = start_up(base, "single")
    try:
        pids = child_pids(up)
        assert len(pids) == 2
        # first: children live on past the moment Trio's idle worker threads exit (they are
        # forked from up's own thread, so the parent-death signal does not fire with those)
        time.sleep(max(0.0, t0 + TRIO_WORKER_IDLE_S + 1.5 - time.monotonic()))
        assert up_events(base, "child_exited") == []
        assert all(alive(p) for p in pids)
        up.proc.send_signal(signal.SIGKILL)
        up.proc.wait(10)
        # the kernel kills them the moment up dies; 3 s is for the scheduler, not a grace period
        assert survivors(pids, 3.0) == []
        # killed, not stopped: the broker's store was left open (its abort marker is there)
        assert os.path.exists(os.path.join(base, "store", "broker-a", "abort"))
    finally:
        up.stop()  # when failing before the kill
        for p in child_pids(up):
            if alive(p):
                os.killpg(p, signal.SIGKILL)
    # the kernel released up.lock with the process: the same directory starts again
    _ns_host, ns_port = up.namesrv.rsplit(":", 1)
    r = rr(
        "up", "--mode", "single", "--dir", base, "--namesrv-port", ns_port,
        "--broker-port", str(up.broker_port), "--no-demo", "--exit-after-demo", "--no-console",
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cluster stopped" in r.stdout


def test_sighup_of_up_stops_the_cluster_gracefully(tmp_path: Path) -> None:
    base = str(tmp_path / "c")
    up = start_up(base, "2m-noslave")
    pids = child_pids(up)
    try:
        up.proc.send_signal(signal.SIGHUP)  # the terminal went away
        assert up.proc.wait(40) == 0
    finally:
        up.stop()
    assert survivors(pids, 1.0) == []
    up.read_until("cluster stopped", 5)
    assert [e["reason"] for e in up_events(base, "up_stopping")] == ["SIGHUP"]
    exits = up_events(base, "child_exited")
    # reverse start order, every one on its own after SIGTERM (exit status 0), none killed
    assert [(e["child"], e["exit_code"], e["stopping"]) for e in exits] == [
        ("broker-b", 0, True),
        ("broker-a", 0, True),
        ("namesrv", 0, True),
    ]
    assert up_events(base, "child_stop_escalated") == []
    for broker in ("broker-a", "broker-b"):
        # the store's clean-shutdown marker: <store>/abort exists only while the store is open
        assert os.path.isdir(os.path.join(base, "store", broker))
        assert not os.path.exists(os.path.join(base, "store", broker, "abort")), broker
        with open(os.path.join(base, "logs", f"{broker}.jsonl"), encoding="utf-8") as f:
            reasons = [
                r.get("reason") for r in map(json.loads, f) if r["event"] == "process_shutdown"
            ]
        # the launcher saw SIGTERM; the broker logged its end after closing its store
        assert reasons == ["SIGTERM", "cancelled"], broker
    assert log_problems(os.path.join(base, "logs")) == []


def _snapshot(base: str) -> dict[str, tuple[bytes, int]]:
    out = {}
    rels = ["up.lock", "logs/up.jsonl", "store/broker-a/lock", "store/broker-a/abort"]
    for rel in rels + [f"conf/{n}" for n in os.listdir(f"{base}/conf")]:
        p = os.path.join(base, rel)
        out[rel] = (Path(p).read_bytes(), os.stat(p).st_mtime_ns)
    return out


def test_a_second_up_on_the_same_dir_is_refused_and_the_first_is_untouched(
    tmp_path: Path,
) -> None:
    base = str(tmp_path / "c")
    up = start_up(base, "single")
    try:
        before = _snapshot(base)
        stores = sorted(os.listdir(os.path.join(base, "store")))
        other = free_port_block(2)
        _h, same = up.namesrv.rsplit(":", 1)
        for ns_port, broker_port in ((other, other + 10), (int(same), up.broker_port)):
            r = rr(
                "up", "--mode", "single", "--dir", base, "--namesrv-port", str(ns_port),
                "--broker-port", str(broker_port), "--no-demo", "--no-console",
            )  # fmt: skip
            assert r.returncode == 2, r.stdout + r.stderr
            assert r.stdout == ""
            [line] = r.stderr.splitlines()
            assert f"is in use by rocketrio up pid {up.proc.pid}" in line
            assert "running since 20" in line and "rocketrio up --mode single --dir" in line
        assert _snapshot(base) == before  # configs, locks, store markers, up's log: untouched
        assert sorted(os.listdir(os.path.join(base, "store"))) == stores
        assert up.proc.poll() is None
        produce_and_consume(up.namesrv, "StillFlowing")
    finally:
        up.stop()
    assert len(up_events(base, "child_started")) == 2  # nobody started a second broker


def test_a_child_killed_9_is_restarted_and_logged(tmp_path: Path) -> None:
    base = str(tmp_path / "c")
    up = start_up(base, "single", "--restart-backoff", "0.2")
    try:
        old = up.pid_of("broker-a")
        n = len(up.lines)
        os.kill(old, signal.SIGKILL)
        up.read_until(r"broker-a exited with status -9; restarting in 0.2s", 10, start=n)
        up.read_until(r"broker\s+broker-a\s+\S+\s+pid \d+", 10, start=n)
        new = up.pid_of("broker-a")
        assert new != old and alive(new)
        [ex] = up_events(base, "child_exited")
        assert ex | {"ran_s": 0, "ts": ""} == ex | {
            "child": "broker-a", "pid": old, "exit_code": None, "signal": "SIGKILL",
            "ran_s": 0, "ts": "", "stopping": False, "restart": 1, "next_delay_s": 0.2,
            "gave_up": False,
        }  # fmt: skip
        restarted = [e for e in up_events(base, "child_started") if e["restart"] == 1]
        assert [(e["child"], e["pid"]) for e in restarted] == [("broker-a", new)]
        produce_and_consume(up.namesrv, "AfterRestart")  # the restarted broker serves
    finally:
        up.stop()


def test_a_child_that_keeps_dying_is_given_up(tmp_path: Path) -> None:
    base = str(tmp_path / "c")
    up = start_up(base, "single", "--max-restarts", "2", "--restart-backoff", "0.1")
    pids = child_pids(up)
    try:
        conf = Path(base, "conf", "broker-a.conf")
        conf.write_text(conf.read_text() + "listenPrt=1\n")  # every restart now exits 2
        os.kill(up.pid_of("broker-a"), signal.SIGKILL)
        assert up.proc.wait(60) == 1
    finally:
        up.stop()
    up.read_until(r"broker-a keeps exiting \(status 2, 2 restarts in a row\); giving up", 5)
    up.read_until("cluster stopped", 5)
    exits = [e for e in up_events(base, "child_exited") if e["child"] == "broker-a"]
    assert [(e["exit_code"], e["restart"], e["gave_up"]) for e in exits] == [
        (None, 1, False),  # the SIGKILL
        (2, 2, False),
        (2, None, True),
    ]
    assert up_events(base, "up_stopped")[-1]["exit_code"] == 1
    all_pids = pids + [e["pid"] for e in up_events(base, "child_started")]
    assert survivors(all_pids, 1.0) == []


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--namesrv-port", "0"], "argument --namesrv-port: 0 is outside 1..65535"),
        (["--broker-port", "70000"], "argument --broker-port: 70000 is outside 1..65535"),
        (["--broker-port", "65530"], "--broker-port 65530 puts broker-a-1's listenPort at 65540"),
        (["--namesrv-port", "30000", "--broker-port", "30002"], "port 30002 would be both"),
        (["--mode", "3m"], "argument --mode: unknown mode '3m'; choose one of controller"),
        (["--namesrv-port", "x"], "argument --namesrv-port: 'x' is not a port number"),
        (["--dir", "{file}"], "is a file, not a directory"),
        (["--dir", "{file}/sub"], "cannot be created: Not a directory"),
    ],
)
def test_bad_flags_are_one_line_errors(tmp_path: Path, flags: list[str], message: str) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    flags = [f.replace("{file}", str(afile)) for f in flags]
    if "--dir" not in flags:
        flags += ["--dir", str(tmp_path / "c")]
    r = rr("up", "--no-demo", "--no-console", *flags)
    assert r.returncode == 2
    [line] = r.stderr.splitlines()
    assert line.startswith("rocketrio up: ") and message in line, line
    assert r.stdout == ""
    assert not (tmp_path / "c").exists()  # refused before writing anything


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_dir_is_a_one_line_error(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    r = rr("up", "--dir", str(ro), "--no-demo", "--no-console")
    assert r.returncode == 2 and r.stderr.strip().endswith("is not writable by this user")
