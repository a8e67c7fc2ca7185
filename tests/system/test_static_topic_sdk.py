"""System test with real processes (issue 30 item 1): the official RocketMQ 5 Python SDK
(rocketmq-python-client, unchanged; tests/harness/drivers/static_topic_sdk_driver.py in its own
process) sends to and receives from a static topic through the gRPC proxy while
`rocketrio admin remappingStaticTopic` moves broker-a's logic queues to broker-c between its
two phases. A NameServer, three brokers and the proxy run as OS processes. Every message is
received and acked; an acked message never comes back; one left unacked comes back after its
invisible time (a revive, on the broker that popped it)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.harness.paths import DRIVERS
from tests.harness.system import (
    free_port_block,
    launch,
    log_problems,
    stop_processes,
    wait_for_line,
)

pytestmark = [pytest.mark.system, pytest.mark.long]  # about 3 min: kept to --long

TOPIC = "SdkStatic"
N = 50


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketrio.cli.main", "admin", *args, "-n", namesrv],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def broker_conf(name: str, port: int, ns: str, work: str) -> dict[str, str]:
    return {
        "namesrvAddr": ns, "brokerIP1": "127.0.0.1", "brokerName": name,
        "brokerClusterName": "DefaultCluster", "listenPort": str(port),
        "storePathRootDir": os.path.join(work, name), "logDir": os.path.join(work, "logs"),
    }  # fmt: skip


def wait_for_port(port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on {port}")


def test_the_sdk_through_the_proxy_on_a_static_topic_through_a_remapping(tmp_path: Any) -> None:
    work = str(tmp_path)
    base = free_port_block(5)
    ns = f"127.0.0.1:{base}"
    ports = [base + 10, base + 20, base + 30]
    grpc_port = base + 40
    logs = os.path.join(work, "logs")
    procs: dict[str, Any] = {
        "ns": launch("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, work)
    }
    driver = None
    try:
        wait_for_line(procs["ns"], "boot success")
        for name, port in zip(("broker-a", "broker-b", "broker-c"), ports, strict=True):
            procs[name] = launch("broker", name, broker_conf(name, port, ns, work), work)
            wait_for_line(procs[name], "boot success")
        r = admin(
            ns, "updateStaticTopic", "-t", TOPIC, "-qn", "8", "-b", "broker-a,broker-b",
            "--mapDir", work,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        procs["proxy"] = subprocess.Popen(
            [sys.executable, "-m", "rocketrio.cli.main", "proxy", "-n", ns,
             "--grpc-port", str(grpc_port), "--host", "127.0.0.1", "--log-dir", logs],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for_port(grpc_port)
        driver = subprocess.Popen(
            [sys.executable, str(DRIVERS / "static_topic_sdk_driver.py"),
             f"127.0.0.1:{grpc_port}", TOPIC, str(N)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        wait_for_line(driver, "PHASE1 DONE", timeout_s=240)
        r = admin(
            ns, "remappingStaticTopic", "-t", TOPIC, "-b", "broker-b,broker-c", "--mapDir", work
        )
        assert r.returncode == 0, r.stderr
        assert driver.stdin is not None
        driver.stdin.write("go\n")
        driver.stdin.flush()
        out, err = driver.communicate(timeout=400)
        assert driver.returncode == 0, err[-3000:]
        res = json.loads(out.strip().splitlines()[-1])
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
        stop_processes(list(procs.values()))
    everything = {f"{p}{i}" for p in "ab" for i in range(N)}
    assert set(res["acked"]) == everything, sorted(everything - set(res["acked"]))[:10]
    assert len(res["acked"]) == len(everything)  # an acked message never came back
    assert res["after"] == []
    held = set(res["held_back"])
    assert held  # left unacked once: delivered again, then acked
    again = {b for b in res["deliveries"] if res["deliveries"].count(b) > 1}
    assert again == held, (again, held)
    assert not log_problems(logs), log_problems(logs)
