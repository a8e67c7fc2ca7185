"""FIFO consumption through the proxy with the official RocketMQ 5 Python SDK (5.1.2,
unchanged; fifo_sdk_driver.py in its own process): a group made FIFO with `rocketrio admin
updateSubGroup -o true`, a FIFO producer sending three message groups interleaved, a
PushConsumer that the proxy's settings switch to FIFO mode. Each group's messages are consumed
in send order, one at a time, the one whose listener failed again before any later one of its
group; each exactly once. Real processes on loopback."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.harness.paths import DRIVERS
from tests.harness.system import free_port_block, log_problems, rr, start_up

pytestmark = pytest.mark.system

DRIVER = str(DRIVERS / "fifo_sdk_driver.py")
TOPIC, GROUP, N, FAIL = "FifoSdkT", "FifoSdkG", 6, "g1:2"


def check_fifo_run(out: dict[str, Any]) -> None:
    assert out["fifo"] is True  # the proxy's settings answer switched the SDK to FIFO
    assert all(len(q) == 1 for q in out["queues"].values())  # a group keeps its queue
    calls = out["calls"]
    for g in ("g0", "g1", "g2"):
        mine = [c for c in calls if c["group"] == g]
        seq = [(c["body"], c["ok"]) for c in mine]
        want = [(f"{g}:{i}", True) for i in range(N)]
        if g == "g1":  # the failed call, then its retry, before g1:3
            want.insert(2, (FAIL, False))
        assert seq == want, seq
        # one call of a group at a time: each starts after the previous one ended
        for a, b in itertools.pairwise(mine):
            assert b["start"] >= a["end"] - 0.001, (a, b)


def test_fifo_push_consumer_through_the_proxy(tmp_path: Any) -> None:
    if importlib.util.find_spec("rocketmq") is None:  # not imported here: see the driver
        pytest.skip("rocketmq-python-client is not installed")
    grpc_port = free_port_block(1, extra=())
    up = start_up(str(tmp_path / "c"), "single", "--no-console", "--proxy",
                  "--proxy-port", str(grpc_port))  # fmt: skip
    endpoint = f"127.0.0.1:{grpc_port}"
    try:
        up.read_until(rf"proxy\s+gRPC {endpoint}", 5)
        r = rr("admin", "updateTopic", "-n", up.namesrv, "-t", TOPIC, "-r", "2", "-w", "2")
        assert r.returncode == 0, r.stdout + r.stderr
        r = rr("admin", "updateSubGroup", "-n", up.namesrv, "-c", "DefaultCluster",
               "-g", GROUP, "-o", "true")  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        run = subprocess.run(
            [sys.executable, DRIVER, endpoint, TOPIC, GROUP, str(N), FAIL],
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert run.returncode == 0, run.stderr[-4000:]
        check_fifo_run(json.loads(run.stdout.strip().splitlines()[-1]))
    finally:
        up.stop()
    problems = [p for p in log_problems(os.path.join(up.base_dir, "logs")) if "proxy" in p]
    assert not problems, problems
