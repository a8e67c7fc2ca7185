"""Opt-in interop: Apache RocketMQ 5.2.0's own remoting client and header classes (what its
MQClientAPIExt.notification and proxy use) against a rocketrio NameServer and broker (real
processes): a NOTIFICATION on an empty queue is held and answered hasMsg=false at its pollTime;
one held again is answered hasMsg=true as soon as a Java producer sends to the queue; two
PEEK_MESSAGEs return the same messages (nothing popped) with restNum; a PEEK of an unknown topic
is TOPIC_NOT_EXIST; POLLING_INFO counts a held POP_MESSAGE of its queue and no other.
Skipped without the Java dist (RMQ_DIST, default /tmp/rocketmq-5.2.0/...; CI has none) or a JDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.harness.java_dist import java_interop

pytestmark = [pytest.mark.system, pytest.mark.long]  # a JVM or three: --long (docs/testing.md)

SOURCE = Path(__file__).parent / "java" / "ProbeInterop.java"
TOPIC, GROUP = "ProbeT", "probe_g"


def test_java_notification_peek_and_polling_info(tmp_path: Any) -> None:
    with java_interop(SOURCE, tmp_path, TOPIC, 4) as j:
        res = j.run("ProbeInterop", j.ns, j.broker, TOPIC, GROUP)
        assert res["timed_out"] == "false" and 1900 <= res["timed_out_ms"] < 6000, res
        assert res["held"] == "true" and res["woken_ms"] < 5000, res  # not its 20 s pollTime
        for peek in (res["peek1"], res["peek2"]):  # the second finds the same: nothing popped
            assert peek == {"code": 0, "remark": "FOUND", "rest": 2, "bodies": ["p0", "p1"]}
        assert res["peek_bad"]["code"] == 17, res  # TOPIC_NOT_EXIST
        assert res["polling"] == [1, 0, 0], res  # the held POP of queue 1, then none
        assert res["popped"] == "0 FOUND", res
