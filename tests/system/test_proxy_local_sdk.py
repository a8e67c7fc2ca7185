"""Local mode with real processes: a NameServer and two brokers, each running the gRPC proxy in
its own process (`rocketrio broker --enable-proxy`, and `enableProxy=true` in the other's
file). The official Python SDK (rocketmq-python-client 5.1.2, in a child process) is given
broker-a's gRPC port; routes send it to each queue's own broker's proxy, so its messages land on
the broker of the queue it chose, and a SimpleConsumer receives and acks each from there.
Both brokers stop cleanly on SIGINT, their proxies with them. And `rocketrio up --proxy-mode
local` starts brokers that each serve their own proxy."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import grpc
import pytest

from rocketrio.actors.proxy.receipt import decode_receipt
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc
from tests.harness.paths import DRIVERS
from tests.harness.system import (
    free_port_block,
    log_problems,
    rr,
    start_up,
    stop_processes,
    wait_for_line,
)

pytestmark = pytest.mark.system

DRIVER = str(DRIVERS / "proxy_local_driver.py")
META = (("x-mq-client-id", "local-system-test"),)
COUNT = 12


def start(
    role: str, name: str, conf: dict[str, str], work: Path, *flags: str
) -> subprocess.Popen[str]:
    path = work / f"{name}.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    cmd = [sys.executable, "-m", "rocketrio.cli.main", role, "-c", str(path), "--name", name]
    return subprocess.Popen(
        [*cmd, *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def route_endpoints(port: int, topic: str) -> set[tuple[str, str, int]]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        req = spb.QueryRouteRequest(topic=pb.Resource(name=topic))
        r = stub.QueryRoute(req, metadata=META, timeout=10)
    assert r.status.code == pb.OK, r
    return {
        (q.broker.name, a.host, a.port)
        for q in r.message_queues
        for a in q.broker.endpoints.addresses
    }


def test_sdk_through_local_proxies_of_two_brokers(tmp_path: Path) -> None:
    if importlib.util.find_spec("rocketmq") is None:  # not imported here: see the driver
        pytest.skip("rocketmq-python-client is not installed")
    base = free_port_block(5, extra=(11, 21))
    ns = f"127.0.0.1:{base}"
    grpc_a, grpc_b = base + 30, base + 40
    logs = str(tmp_path / "logs")
    common = {"brokerIP1": "127.0.0.1", "namesrvAddr": ns, "logDir": logs}
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(start("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, tmp_path))
        conf_a = {
            **common,
            "brokerName": "broker-a",
            "listenPort": str(base + 10),
            "storePathRootDir": str(tmp_path / "a"),
            "grpcServerPort": str(grpc_a),
        }
        conf_b = {
            **common,
            "brokerName": "broker-b",
            "listenPort": str(base + 20),
            "storePathRootDir": str(tmp_path / "b"),
            "grpcServerPort": str(grpc_b),
            "enableProxy": "true",
        }
        procs.append(start("broker", "broker-a", conf_a, tmp_path, "--enable-proxy"))
        procs.append(start("broker", "broker-b", conf_b, tmp_path))
        for p in procs[1:]:
            wait_for_line(p, "boot success", 60)
        for port in (grpc_a, grpc_b):
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                grpc.channel_ready_future(channel).result(timeout=30)
        # on each broker by address: `-c DefaultCluster` would create it only on the brokers
        # whose registration the NameServer already has (the boot line can come first)
        for port in (base + 10, base + 20):
            r = rr("admin", "updateTopic", "-n", ns, "-t", "LocalT", "-b", f"127.0.0.1:{port}",
                   "-r", "2", "-w", "2")  # fmt: skip
            assert r.returncode == 0, r.stdout + r.stderr
        want = {("broker-a", "127.0.0.1", grpc_a), ("broker-b", "127.0.0.1", grpc_b)}
        deadline = time.monotonic() + 20
        while route_endpoints(grpc_a, "LocalT") != want and time.monotonic() < deadline:
            time.sleep(0.3)
        # each broker's queues point at its own proxy, whichever proxy is asked
        assert route_endpoints(grpc_a, "LocalT") == want
        assert route_endpoints(grpc_b, "LocalT") == want

        run = subprocess.run(
            [sys.executable, DRIVER, f"127.0.0.1:{grpc_a}", "LocalT", str(COUNT)],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert run.returncode == 0, run.stderr[-4000:]
        out = json.loads(run.stdout.strip().splitlines()[-1])
        chosen = Counter(out["sent"].values())
        assert set(chosen) == {"broker-a", "broker-b"}, chosen  # the SDK used both proxies
        # every message came back, from the broker set of the queue the SDK sent it to: the
        # proxy the SDK reached for that queue was that broker's own
        popped_from = {
            m["id"]: decode_receipt(m["receipt"]).extra.broker_name for m in out["received"]
        }
        assert popped_from == out["sent"]
        assert len(out["received"]) == COUNT
    finally:
        stop_processes(procs)
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert not log_problems(logs), log_problems(logs)


def test_up_with_local_proxies(tmp_path: Path) -> None:
    """`rocketrio up --mode 2m-noslave --proxy-mode local`: each broker process serves gRPC on
    its own port, and routes name it for that broker's queues."""
    port = free_port_block(2, step=1, extra=())
    up = start_up(str(tmp_path / "c"), "2m-noslave", "--no-console", "--proxy-mode", "local",
                  "--proxy-port", str(port))  # fmt: skip
    try:
        up.read_until(rf"proxy\s+gRPC 127.0.0.1:{port + 1}\s+\(in broker-b", 5)
        r = rr("admin", "updateTopic", "-n", up.namesrv, "-t", "UpT", "-c", "DefaultCluster",
               "-r", "2", "-w", "2")  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        want = {("broker-a", "127.0.0.1", port), ("broker-b", "127.0.0.1", port + 1)}
        deadline = time.monotonic() + 20
        while route_endpoints(port + 1, "UpT") != want and time.monotonic() < deadline:
            time.sleep(0.3)
        assert route_endpoints(port + 1, "UpT") == want
        assert route_endpoints(port, "UpT") == want
    finally:
        up.stop()
    assert up.proc.returncode == 0
    assert not log_problems(os.path.join(up.base_dir, "logs"))
