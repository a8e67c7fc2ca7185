"""Opt-in interop: Apache RocketMQ 5.2.0's MQAdminExt.updateAndGetGroupReadForbidden and a Java
push consumer against a rocketrio NameServer and broker (real processes): the answers are
upstream's GroupForbidden, a forbidden group's push consumer gets nothing (its pulls are refused
NO_PERMISSION), and once allowed it gets the message. Skipped without the Java dist (RMQ_DIST,
default /tmp/rocketmq-5.2.0/...; CI has none) or a JDK.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.harness.java_dist import compile_driver, java_classpath, run_driver
from tests.harness.system import create_topic_settled, launch_ns_and_broker, stop_processes

pytestmark = [pytest.mark.system, pytest.mark.long]  # a JVM or three: --long (docs/testing.md)

SOURCE = Path(__file__).parent / "java" / "GroupForbiddenInterop.java"
TOPIC, GROUP = "ForbiddenT", "forbidden_g"


def test_java_admin_forbids_a_group_and_its_push_consumer_gets_nothing(tmp_path: Any) -> None:
    cp = java_classpath()
    classes = compile_driver(SOURCE, tmp_path, cp)
    work = str(tmp_path)
    procs: list[subprocess.Popen[str]] = []
    try:
        ns, broker_addr = launch_ns_and_broker(work, procs)
        trio.run(create_topic_settled, ns, broker_addr, TOPIC, 1)
        res = run_driver(classes, cp, work, "GroupForbiddenInterop", ns, broker_addr, TOPIC, GROUP)
        forbidden = {"group": GROUP, "topic": TOPIC, "readable": False}
        assert res["forbid"] == forbidden and res["read"] == forbidden, res
        assert res["allow"] == {**forbidden, "readable": True}, res
        assert res["while_forbidden"] == 0, res
        assert res["after"] == ["m0"], res
    finally:
        stop_processes(procs)
