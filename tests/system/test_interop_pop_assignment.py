"""Opt-in interop: Apache RocketMQ 5.2.0's own tools and client against a rocketrio NameServer and
broker (real processes). Java's `mqadmin setConsumeMode -b ... -m POP` sets the group's mode on
the broker (SET_MESSAGE_REQUEST_MODE); a Java push consumer with clientRebalance=false then asks
the broker for its queues (QUERY_ASSIGNMENT), is given the whole broker as queue -1 in POP mode,
and pops every message sent (POP_MESSAGE, ACK_MESSAGE), pulling from no queue of the topic.
Skipped without the Java dist (RMQ_DIST, default /tmp/rocketmq-5.2.0/...; CI has none) or a JDK.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.harness.java_dist import DIST, JAVA_OPENS, java_interop

pytestmark = [pytest.mark.system, pytest.mark.long]  # a JVM or three: --long (docs/testing.md)

SOURCE = Path(__file__).parent / "java" / "PopModeInterop.java"
TOPIC, GROUP, COUNT = "PopModeT", "pop_mode_g", 12


def test_java_mqadmin_sets_pop_mode_and_a_java_push_consumer_pops(tmp_path: Any) -> None:
    with java_interop(SOURCE, tmp_path, TOPIC, 4) as j:
        ns, broker_addr = j.ns, j.broker
        java = ["java", "-Xms128m", "-Xmx384m", *JAVA_OPENS, "-Duser.home=" + j.work]
        admin = subprocess.run(
            [*java, "-cp", f"conf:{j.cp}", "org.apache.rocketmq.tools.command.MQAdminStartup",
             "setConsumeMode", "-n", ns, "-b", broker_addr, "-t", TOPIC, "-g", GROUP,
             "-m", "POP", "-q", "0"],
            capture_output=True, text=True, timeout=120, check=False, cwd=DIST,
            env={**os.environ, "ROCKETMQ_HOME": DIST},
        )  # fmt: skip
        assert admin.returncode == 0, admin.stdout + admin.stderr[-3000:]
        assert f"set consume mode to {broker_addr} success." in admin.stdout, admin.stdout
        assert f"topic[{TOPIC}] group[{GROUP}] consume mode[POP]" in admin.stdout, admin.stdout
        res = j.run("PopModeInterop", ns, TOPIC, GROUP, str(COUNT))
        assert sorted(res["received"]) == sorted(f"m{i}" for i in range(COUNT)), res
        assert res["pop_queues"] == [f"{TOPIC}/broker-a/-1"], res
        assert res["pull_queues"] == 0, res
