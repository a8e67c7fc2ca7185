"""SQL92 filtering through the gRPC proxy with the official Python SDK (rocketmq-python-client
5.1.2, unchanged, in a child process: tests/harness/drivers/proxy_sql92_driver.py), on a real
NameServer and a broker serving its own proxy (`--enable-proxy`), with the property filter and
the filter bit-map on (enablePropertyFilter, enableCalcFilterBitMap, enableConsumeQueueExt).
A SimpleConsumer and a PushConsumer, each with ``FilterExpression(sql, FilterType.SQL)``,
receive exactly the messages their expressions match (a missing property is NULL), nothing
else; an expression that does not compile is refused to the SDK (ILLEGAL_FILTER_EXPRESSION)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from tests.harness.paths import DRIVERS
from tests.harness.system import free_port_block, log_problems, rr, stop_processes, wait_for_line

pytestmark = pytest.mark.system

DRIVER = str(DRIVERS / "proxy_sql92_driver.py")
COUNT = 40
TOPIC = "SqlProxyT"


def a_of(i: int) -> int | None:
    """The driver's property ``a`` of message i (None: missing) and its ``region``."""
    return None if i % 4 == 3 else i


def region_of(i: int) -> str:
    return ("eu", "us", "asia")[i % 3]


def start(
    role: str, name: str, conf: dict[str, str], work: Path, *flags: str
) -> subprocess.Popen[str]:
    path = work / f"{name}.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in conf.items()))
    cmd = [sys.executable, "-m", "rocketrio.cli.main", role, "-c", str(path), "--name", name]
    return subprocess.Popen(
        [*cmd, *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.long
def test_sdk_consumers_with_sql92_expressions_get_exactly_their_matches(tmp_path: Path) -> None:
    if importlib.util.find_spec("rocketmq") is None:  # not imported here: see the driver
        pytest.skip("rocketmq-python-client is not installed")
    simple_want = [
        f"m{i}"
        for i in range(COUNT)
        if (a_of(i) is not None and 4 <= i <= 9) or (region_of(i) == "asia" and a_of(i) is None)
    ]
    push_want = [f"m{i}" for i in range(COUNT) if region_of(i) == "us" and (a_of(i) or 0) > 10]
    base = free_port_block(3, extra=(11,))
    ns, grpc_port = f"127.0.0.1:{base}", base + 20
    logs = str(tmp_path / "logs")
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(start("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, tmp_path))
        conf = {
            "brokerIP1": "127.0.0.1",
            "namesrvAddr": ns,
            "logDir": logs,
            "brokerName": "broker-a",
            "listenPort": str(base + 10),
            "storePathRootDir": str(tmp_path / "a"),
            "grpcServerPort": str(grpc_port),
            "enablePropertyFilter": "true",
            "enableCalcFilterBitMap": "true",
            "enableConsumeQueueExt": "true",
        }
        procs.append(start("broker", "broker-a", conf, tmp_path, "--enable-proxy"))
        wait_for_line(procs[1], "boot success", 60)
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
        # by address: the boot line can come before the NameServer has the broker's registration
        r = rr("admin", "updateTopic", "-n", ns, "-t", TOPIC, "-b", f"127.0.0.1:{base + 10}",
               "-r", "1", "-w", "1")  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        run = subprocess.run(
            [sys.executable, DRIVER, f"127.0.0.1:{grpc_port}", TOPIC, str(COUNT),
             str(len(simple_want)), str(len(push_want))],
            capture_output=True,
            text=True,
            timeout=180,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-4000:]
        out = json.loads(run.stdout.strip().splitlines()[-1])
        assert sorted(out["simple"], key=lambda b: int(b[1:])) == simple_want
        assert sorted(out["push"], key=lambda b: int(b[1:])) == push_want
        # ILLEGAL_FILTER_EXPRESSION (40010) with the compiler's message, as upstream's proxy
        assert "40010" in out["bad"] and "ParseException" in out["bad"], out["bad"]
    finally:
        stop_processes(procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert not log_problems(logs), log_problems(logs)
