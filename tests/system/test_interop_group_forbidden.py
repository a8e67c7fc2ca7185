"""Opt-in interop: Apache RocketMQ 5.2.0's MQAdminExt.updateAndGetGroupReadForbidden and a Java
push consumer against a rocketrio NameServer and broker (real processes): the answers are
upstream's GroupForbidden, a forbidden group's push consumer gets nothing (its pulls are refused
NO_PERMISSION), and once allowed it gets the message. Skipped without the Java dist (RMQ_DIST,
default /tmp/rocketmq-5.2.0/...; CI has none) or a JDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.harness.java_dist import java_interop

pytestmark = [pytest.mark.system, pytest.mark.long]  # a JVM or three: --long (docs/testing.md)

SOURCE = Path(__file__).parent / "java" / "GroupForbiddenInterop.java"
TOPIC, GROUP = "ForbiddenT", "forbidden_g"


def test_java_admin_forbids_a_group_and_its_push_consumer_gets_nothing(tmp_path: Any) -> None:
    with java_interop(SOURCE, tmp_path, TOPIC, 1) as j:
        res = j.run("GroupForbiddenInterop", j.ns, j.broker, TOPIC, GROUP)
        forbidden = {"group": GROUP, "topic": TOPIC, "readable": False}
        assert res["forbid"] == forbidden and res["read"] == forbidden, res
        assert res["allow"] == {**forbidden, "readable": True}, res
        assert res["while_forbidden"] == 0, res
        assert res["after"] == ["m0"], res
