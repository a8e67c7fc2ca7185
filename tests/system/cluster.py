"""Helpers for system tests: free ports, a `rocketrio up` process, log scanning."""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import attrs

from rocketrio.cli.up_plan import Layout, PlanError, load_templates, plan_from


def free_port_block(count: int, step: int = 10, extra: tuple[int, ...] = (2,)) -> int:
    """A base port such that base, base+step, ... (and base+extra) are free on 127.0.0.1."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + step * count > 65000:
            continue
        ok = True
        for port in [base + i * step for i in range(count)] + [base + e for e in extra]:
            with socket.socket() as t:
                try:
                    t.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block")


@attrs.define
class UpProcess:
    proc: subprocess.Popen[str]
    base_dir: str
    namesrv: str
    broker_port: int = 0
    lines: list[str] = attrs.field(factory=list)
    _reader: threading.Thread | None = None

    def __attrs_post_init__(self) -> None:
        def pump() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line.rstrip("\n"))

        self._reader = threading.Thread(target=pump, daemon=True)
        self._reader.start()

    def read_until(self, pattern: str, timeout_s: float, start: int = 0) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        rx = re.compile(pattern)
        seen = start
        while time.monotonic() < deadline:
            while seen < len(self.lines):
                if m := rx.search(self.lines[seen]):
                    return m
                seen += 1
            if self.proc.poll() is not None and self._reader is not None:
                self._reader.join(1)
                if seen >= len(self.lines):
                    break
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} not seen; output so far:\n" + "\n".join(self.lines))

    def pid_of(self, name: str) -> int:
        pids = [
            int(m.group(1))
            for line in self.lines
            if (m := re.search(rf"\s{re.escape(name)}\s+\S+\s+pid (\d+)", line))
        ]
        assert pids, f"no pid line for {name}"
        return pids[-1]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _all_free(ports: list[int]) -> bool:
    for port in ports:
        with socket.socket() as t:
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as `up`'s own check does
            try:
                t.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def free_up_ports(mode: str, base_dir: str) -> int:
    """A NameServer port ``base`` such that every port `up --mode` would listen on (with
    ``--namesrv-port base --broker-port base+10``: listen ports, HA ports, controller peers)
    is free."""
    templates = load_templates(mode)
    for _ in range(50):
        base = free_port_block(1, extra=())
        if base + 200 > 65000:
            continue
        try:
            specs = plan_from(templates, Layout(base_dir, namesrv_port=base, broker_port=base + 10))
        except PlanError:
            continue
        if _all_free([use.port for spec in specs for use in spec.listens]):
            return base
    raise RuntimeError(f"no free port layout for mode {mode}")


def start_up(base_dir: str, mode: str, *extra: str) -> UpProcess:
    base = free_up_ports(mode, base_dir)
    cmd = [
        sys.executable,
        "-m",
        "rocketrio.cli.main",
        "up",
        "--mode",
        mode,
        "--dir",
        base_dir,
        "--namesrv-port",
        str(base),
        "--broker-port",
        str(base + 10),
        "--no-demo",
        *extra,
    ]
    if "--no-console" not in extra and "--console-port" not in extra:
        cmd += ["--console-port", str(free_port_block(1, extra=()))]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    up = UpProcess(proc, base_dir, f"127.0.0.1:{base}", base + 10)
    up.read_until("running; press Ctrl-C to stop", 60)
    return up


def stop_processes(procs: list[subprocess.Popen[Any]], grace_s: float = 30) -> None:
    """SIGINT every process still running, then wait for each; kill what does not stop."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(grace_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def log_problems(log_dir: str) -> list[str]:
    """Lines of the JSON logs that carry a traceback or are at error level."""
    bad = []
    for path in glob.glob(os.path.join(log_dir, "*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    bad.append(f"{path}: unparsable line {line[:200]!r}")
                    continue
                if "exception" in rec or rec.get("level") in ("error", "critical"):
                    bad.append(f"{os.path.basename(path)}: {line[:500]}")
    for path in glob.glob(os.path.join(log_dir, "*.out")):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if "Traceback" in text:
            bad.append(f"{path}: traceback in console output")
    return bad
