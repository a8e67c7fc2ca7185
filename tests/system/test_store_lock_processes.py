"""System test with real processes: one broker per store (issue 7, item 4).

A broker process holds ``<storePathRootDir>/lock``. A second broker process on the same store
exits non-zero at once, with one stderr line naming the running broker (name and pid) and a
``startup_failed`` ERROR line (role, error, traceback) in its JSON log, while the first keeps
serving sends. After kill -9 of the first, the kernel has dropped its lock: a broker starts on
the store again (recovering it as an unclean shutdown).
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
import trio

from rocketrio.actors.observe.logs import configure_logging
from tests.harness.system import free_port_block, launch, send_one, stop_processes, wait_for_line

pytestmark = pytest.mark.system


def json_events(work: str, name: str) -> list[dict[str, Any]]:
    with open(os.path.join(work, "logs", f"{name}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_a_second_broker_on_a_store_is_refused_and_the_first_keeps_serving(tmp_path: Any) -> None:
    configure_logging("test", "test", None, console=None)
    work = str(tmp_path)
    base = free_port_block(3)
    ns = f"127.0.0.1:{base}"
    logs = os.path.join(work, "logs")
    procs = [launch("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, work)]
    try:
        store = os.path.join(work, "store")
        common = {"namesrvAddr": ns, "brokerIP1": "127.0.0.1", "logDir": logs}
        first = launch("broker", "first", {**common, "brokerName": "broker-a",
                                           "listenPort": str(base + 10),
                                           "storePathRootDir": store}, work)  # fmt: skip
        procs.append(first)
        wait_for_line(first, "boot success")
        second = launch("broker", "second", {**common, "brokerName": "broker-b",
                                             "listenPort": str(base + 20),
                                             "storePathRootDir": store}, work)  # fmt: skip
        procs.append(second)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 1
        last = err.strip().splitlines()[-1]
        assert last.startswith("rocketrio broker second: start-up failed: StoreLocked: Lock failed")
        assert f"broker broker-a (pid {first.pid}, started " in last
        [failed] = [e for e in json_events(work, "second") if e["event"] == "startup_failed"]
        assert failed["level"] == "error" and failed["role"] == "broker"
        assert "StoreLocked" in failed["error"] and "Traceback" in failed["traceback"]
        # the first broker was not disturbed
        assert first.poll() is None
        status = trio.run(send_one, ns, "LockTopic", f"127.0.0.1:{base + 10}")
        assert status.endswith("SEND_OK")
        # kill -9: the kernel drops the lock with the process; the store opens again
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        third = launch("broker", "third", {**common, "brokerName": "broker-a",
                                           "listenPort": str(base + 10),
                                           "storePathRootDir": store}, work)  # fmt: skip
        procs.append(third)
        wait_for_line(third, "boot success")
        [rec] = [e for e in json_events(work, "third") if e["event"] == "commitlog_recovered"]
        assert rec["unclean_shutdown"] is True
    finally:
        stop_processes(procs)
