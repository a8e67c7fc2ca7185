"""A real `rocketrio namesrv` process under the half-frame attack of the hardening issue.

20 connections each send the first half of a 15 MiB frame and stop. With
serverMaxBufferedInputBytes=32 MiB and serverFrameReadTimeoutMillis=3000 the process must hold
at most its budget plus 16 KiB per connection: while the frames are held its RSS is less than
budget + 24 MiB above where it started (measured: +36 to +44 MiB), and its peak (VmHWM, which
also sees a growing buffer's reallocation copy for a moment) less than budget + 40 MiB
(measured: +50 to +59 MiB); without the budget it would be 20 x 7.5 MiB = 150 MiB. And every
socket must see the server close it (EOF or reset) once the read timeout has passed: no earlier
than 3 s after it connected, and no later than 3 s plus 2 s of scheduling slack on a shared VM.
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.harness.system import free_port_block

pytestmark = pytest.mark.system  # in conftest.XDIST_GROUPS

MiB = 1024 * 1024
BUDGET = 32 * MiB
HELD_SLACK = 24 * MiB  # interpreter, allocator and 16 KiB a connection outside the budget
PEAK_SLACK = 40 * MiB  # plus, for a moment, a growing buffer's reallocation copy (< one frame)
READ_TIMEOUT_S = 3.0
LATE_S = 2.0
FRAME = 15 * MiB
CONNECTIONS = 20


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the namesrv process exited during start-up"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"namesrv did not listen on {port} within {timeout_s}s")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (Linux)")
def test_half_frames_against_a_real_namesrv_stay_within_the_budget(tmp_path: Path) -> None:
    port = free_port_block(1, extra=())
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        f"listenHost=127.0.0.1\nlistenPort={port}\nlogDir={tmp_path / 'logs'}\n"
        f"serverMaxBufferedInputBytes={BUDGET}\n"
        f"serverFrameReadTimeoutMillis={int(READ_TIMEOUT_S * 1000)}\n"
    )
    with open(tmp_path / "namesrv.out", "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "rocketrio.cli.main", "namesrv", "-c", str(conf),
             "--name", "ns-limits"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _wait_listening(port, proc)
        time.sleep(0.5)
        rss_before = _status_kib(proc.pid, "VmRSS") * 1024
        header = b'{"code":105,"flag":0,"opaque":1}'
        half = struct.pack(">ii", FRAME, len(header)) + header + bytes(FRAME // 2)
        closed_after: dict[int, float] = {}
        errors: list[str] = []

        def attacker(i: int) -> None:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                t0 = time.monotonic()
                s.settimeout(READ_TIMEOUT_S + LATE_S + 5)
                try:
                    s.sendall(half)  # blocks once the server stops reading; fails when closed
                    while s.recv(65536):
                        pass
                except (ConnectionResetError, BrokenPipeError):
                    pass
                closed_after[i] = time.monotonic() - t0
                s.close()
            except Exception as e:  # reported below with the connection number
                errors.append(f"connection {i}: {type(e).__name__}: {e}")

        threads = [threading.Thread(target=attacker, args=(i,)) for i in range(CONNECTIONS)]
        for t in threads:
            t.start()
        time.sleep(READ_TIMEOUT_S / 2)  # all connected, the budget full, nothing closed yet
        held = _status_kib(proc.pid, "VmRSS") * 1024
        for t in threads:
            t.join(READ_TIMEOUT_S + LATE_S + 15)
        assert not errors, errors
        assert sorted(closed_after) == list(range(CONNECTIONS))
        for i, after in closed_after.items():
            assert READ_TIMEOUT_S - 0.05 <= after <= READ_TIMEOUT_S + LATE_S, (i, after)
        peak = _status_kib(proc.pid, "VmHWM") * 1024
        print(
            f"namesrv RSS before {rss_before / MiB:.1f} MiB, while held {held / MiB:.1f} MiB, "
            f"peak {peak / MiB:.1f} MiB"
        )
        assert held - rss_before < BUDGET + HELD_SLACK, (rss_before, held)
        assert peak - rss_before < BUDGET + PEAK_SLACK, (rss_before, peak)
        assert proc.poll() is None, "the namesrv process died"
        log = (tmp_path / "logs" / "ns-limits.jsonl").read_text()
        assert "connection_read_timeout" in log
    finally:
        proc.terminate()
        proc.wait(10)
