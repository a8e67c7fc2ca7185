"""Opt-in interop: ordered POP (FIFO) through Apache RocketMQ 5.2.0's own client calls, the
ones its proxy makes for a FIFO group (`MQClientAPIImpl.popMessageAsync` with order=true and
`ackMessageAsync`), against a rocketrio NameServer and broker (real processes). Java parses the
answer (startOffsetInfo, msgOffsetInfo, orderCountInfo) into each message's POP_CK and
reconsumeTimes, acknowledges with that POP_CK, and the broker keeps the queue's order: a batch
in flight holds the queue, an acknowledged batch moves it on, an unacknowledged one comes back
whole at its invisible time with reconsumeTimes 1. Skipped without the Java dist (RMQ_DIST) or a
JDK (CI has neither).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.harness.java_dist import java_interop

pytestmark = [pytest.mark.system, pytest.mark.long]  # a JVM: --long (docs/testing.md)

SOURCE = Path(__file__).parent / "java" / "OrderPopInterop.java"
TOPIC, GROUP, COUNT = "OrderPopT", "order_pop_g", 6


def test_java_ordered_pop_keeps_the_queue_order_and_reads_the_order_counts(
    tmp_path: Any,
) -> None:
    with java_interop(SOURCE, tmp_path, TOPIC, 2) as j:
        res = j.run("OrderPopInterop", j.ns, TOPIC, GROUP, str(COUNT))
    first, held, second, again = res["pops"]
    assert first == ["FOUND", [["q0-0", 0], ["q0-1", 0], ["q0-2", 0]]], res
    assert held[0] in ("POLLING_NOT_FOUND", "NO_NEW_MSG") and held[1] == [], res
    assert res["acks"] == ["OK", "OK", "OK"], res
    assert second == ["FOUND", [["q0-3", 0], ["q0-4", 0], ["q0-5", 0]]], res
    assert again == ["FOUND", [["q0-3", 1], ["q0-4", 1], ["q0-5", 1]]], res
