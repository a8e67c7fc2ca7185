"""Opt-in interop: Apache RocketMQ 5.2.0's `mqadmin cleanUnusedTopic -b` against a rocketrio
broker (real processes). A topic whose config is gone from topics.json (the broker stopped, the
file edited, the broker started again) still has its ConsumeQueues; mqadmin's CLEAN_UNUSED_TOPIC
removes them and prints ``success``, and a configured topic keeps its queues and its message.
Skipped without the Java dist (RMQ_DIST, default /tmp/rocketmq-5.2.0/...; CI has none) or java.
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
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from tests.harness.java_dist import DIST, JAVA_OPENS, java_classpath
from tests.harness.system import free_port_block, launch, stop_processes, wait_for_line

pytestmark = [pytest.mark.system, pytest.mark.long]  # a JVM or three: --long (docs/testing.md)


async def _fill(ns: str, broker: str) -> None:
    async with MQAdmin(ns) as admin:
        for topic in ("KeptT", "OrphanT"):
            await admin.update_topic(topic, broker_addr=broker, read_queues=1, write_queues=1)
    await trio.sleep(5)  # the routes reach the NameServer with the broker's next registration
    async with Producer("interop_pg", ns) as p:
        for topic in ("KeptT", "OrphanT"):
            await p.send(Message(topic, f"{topic}-body".encode()))


def test_java_mqadmin_clean_unused_topic(tmp_path: Any) -> None:
    cp = java_classpath(javac=False)
    work, base = str(tmp_path), free_port_block(3)
    ns, broker_addr = f"127.0.0.1:{base}", f"127.0.0.1:{base + 10}"
    logs, store = os.path.join(work, "logs"), os.path.join(work, "store")
    conf = {
        "namesrvAddr": ns,
        "brokerIP1": "127.0.0.1",
        "logDir": logs,
        "brokerName": "broker-a",
        "listenPort": str(base + 10),
        "storePathRootDir": store,
        "registerNameServerPeriod": "3000",
    }
    procs = [launch("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, work)]
    try:
        wait_for_line(procs[0], "boot success")
        procs.append(launch("broker", "broker-a", conf, work))
        wait_for_line(procs[1], "boot success")
        trio.run(_fill, ns, broker_addr)
        stop_processes(procs[1:])
        topics = Path(store) / "config" / "topics.json"
        table = json.loads(topics.read_text(encoding="utf-8"))
        del table["topicConfigTable"]["OrphanT"]
        topics.write_text(json.dumps(table), encoding="utf-8")
        procs[1] = launch("broker", "broker-a", conf, work)
        wait_for_line(procs[1], "boot success")
        cq = Path(store) / "consumequeue"
        assert (cq / "OrphanT").is_dir() and (cq / "KeptT").is_dir()
        java = ["java", "-Xms128m", "-Xmx384m", *JAVA_OPENS, "-Duser.home=" + work]
        admin = subprocess.run(
            [*java, "-cp", f"conf:{cp}", "org.apache.rocketmq.tools.command.MQAdminStartup",
             "cleanUnusedTopic", "-n", ns, "-b", broker_addr],
            capture_output=True, text=True, timeout=120, check=False, cwd=DIST,
            env={**os.environ, "ROCKETMQ_HOME": DIST},
        )  # fmt: skip
        assert admin.returncode == 0, admin.stdout + admin.stderr[-3000:]
        assert admin.stdout.strip().endswith("success"), admin.stdout
        assert not (cq / "OrphanT").exists()
        assert (cq / "KeptT").is_dir()
    finally:
        stop_processes(procs)
