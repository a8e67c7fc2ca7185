"""Opt-in interop: Apache RocketMQ 5.2.0's MQAdminExt.updateAndGetGroupReadForbidden and a Java
push consumer against a rocketrio NameServer and broker (real processes): the answers are
upstream's GroupForbidden, a forbidden group's push consumer gets nothing (its pulls are refused
NO_PERMISSION), and once allowed it gets the message. Skipped without the Java dist (RMQ_DIST,
default /tmp/rocketmq-5.2.0/...; CI has none) or a JDK.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin
from tests.harness.java_dist import DIST, JAVA_OPENS, java_classpath
from tests.harness.system import free_port_block, launch, stop_processes, wait_for_line

pytestmark = [pytest.mark.system, pytest.mark.long]  # a JVM or three: --long (docs/testing.md)

SOURCE = Path(__file__).parent / "java" / "GroupForbiddenInterop.java"
TOPIC, GROUP = "ForbiddenT", "forbidden_g"


async def _create_topic(ns: str, broker: str) -> None:
    async with MQAdmin(ns) as admin:
        await admin.update_topic(TOPIC, broker_addr=broker, read_queues=1, write_queues=1)
    await trio.sleep(5)  # the route reaches the NameServer with the broker's next registration


def test_java_admin_forbids_a_group_and_its_push_consumer_gets_nothing(tmp_path: Any) -> None:
    cp = java_classpath()
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", cp, str(SOURCE)], check=True)
    work, base = str(tmp_path), free_port_block(3)
    ns, broker_addr = f"127.0.0.1:{base}", f"127.0.0.1:{base + 10}"
    logs = os.path.join(work, "logs")
    procs = [launch("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, work)]
    try:
        wait_for_line(procs[0], "boot success")
        conf = {
            "namesrvAddr": ns,
            "brokerIP1": "127.0.0.1",
            "logDir": logs,
            "brokerName": "broker-a",
            "listenPort": str(base + 10),
            "storePathRootDir": os.path.join(work, "store"),
            "registerNameServerPeriod": "3000",
        }
        procs.append(launch("broker", "broker-a", conf, work))
        wait_for_line(procs[1], "boot success")
        trio.run(_create_topic, ns, broker_addr)
        java = ["java", "-Xms128m", "-Xmx384m", *JAVA_OPENS, "-Duser.home=" + work]
        out = subprocess.run(
            [*java, "-Drocketmq.client.logUseSlf4j=false", "-cp", f"{classes}:{cp}",
             "GroupForbiddenInterop", ns, broker_addr, TOPIC, GROUP],
            capture_output=True, text=True, timeout=180, check=False, cwd=DIST,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        res = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(res))
        forbidden = {"group": GROUP, "topic": TOPIC, "readable": False}
        assert res["forbid"] == forbidden and res["read"] == forbidden, res
        assert res["allow"] == {**forbidden, "readable": True}, res
        assert res["while_forbidden"] == 0, res
        assert res["after"] == ["m0"], res
    finally:
        stop_processes(procs)
