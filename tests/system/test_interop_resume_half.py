"""Opt-in interop: Apache RocketMQ 5.2.0's transaction producer, MQAdminExt.resumeCheckHalfMessage
and a push consumer against a rocketrio NameServer and broker (real processes,
transactionCheckMax 1): a half whose producer answered UNKNOW is given up after one check; the
admin resumes its check by the half's offset message id (RESUME_CHECK_HALF_MESSAGE), the broker
checks again, the producer now answers COMMIT and the consumer gets the message once. Skipped
without the Java dist (RMQ_DIST, default /tmp/rocketmq-5.2.0/...; CI has none) or a JDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.harness.java_dist import java_interop

pytestmark = [pytest.mark.system, pytest.mark.long]  # a JVM or three: --long (docs/testing.md)

SOURCE = Path(__file__).parent / "java" / "ResumeHalfInterop.java"
TOPIC = "ResumeT"


def test_java_admin_resumes_a_given_up_half_and_the_commit_is_consumed_once(tmp_path: Any) -> None:
    with java_interop(
        SOURCE, tmp_path, TOPIC, 1,
        transactionCheckInterval="1000", transactionTimeOut="1000", transactionCheckMax="1",
    ) as j:  # fmt: skip
        res = j.run("ResumeHalfInterop", j.ns, TOPIC, timeout=170)
        assert res["resumed"] is True, res
        assert res["checks_before"] == 1, res  # given up after transactionCheckMax
        assert res["checks"] == 2, res  # asked once more after the resume
        assert res["got"] == ["tx0"], res
