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
import subprocess
import sys
import time
from typing import Any

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.observe.logs import configure_logging
from tests.system.cluster import free_port_block, stop_processes

pytestmark = pytest.mark.system


def launch(role: str, name: str, conf: dict[str, str], work: str) -> subprocess.Popen[str]:
    path = os.path.join(work, f"{name}.conf")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{k}={v}\n" for k, v in conf.items()))
    cmd = [sys.executable, "-m", "rocketrio.cli.main", role, "-c", path, "--name", name]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(proc: subprocess.Popen[str], text: str, timeout_s: float = 60) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if text in line:
            return
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"{text!r} not printed (exit {proc.poll()})")


def json_events(work: str, name: str) -> list[dict[str, Any]]:
    with open(os.path.join(work, "logs", f"{name}.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


async def send_one(ns: str, topic: str, broker_addr: str) -> str:
    async with MQAdmin(ns) as admin:
        await admin.update_topic(topic, broker_addr=broker_addr, read_queues=1, write_queues=1)
    async with Producer("lock_test_producer", ns) as producer:
        for _ in range(100):  # the route appears after the broker's next registration
            try:
                result = await producer.send(Message(topic, b"still serving"))
                return str(result.send_status)
            except Exception:
                await trio.sleep(0.2)
    raise AssertionError("the first broker stopped serving")


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
