"""Opt-in interop: Apache RocketMQ 5.2.0's Java client (`MessageSelector.bySql`) against a
rocketrio NameServer and broker (real processes, enablePropertyFilter=true): the Java consumer
starts (CHECK_CLIENT_CONFIG answered), receives exactly the messages its selector matches, and a
consumer whose selector does not compile fails start() with SUBSCRIPTION_PARSE_FAILED (23); the
same with the filter bit-map on (enableCalcFilterBitMap, enableConsumeQueueExt: the Java client's
heartbeat filter is the one whose bits the broker's pulls read).
Skipped without the Java dist (RMQ_DIST, default /tmp/rocketmq-5.2.0/...; CI has none) or a JDK.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.harness.java_dist import java_interop

pytestmark = [pytest.mark.system]

SOURCE = Path(__file__).parent / "java" / "SqlInterop.java"
TOPIC = "SqlInteropT"


@pytest.mark.parametrize(
    "bitmap", [False, pytest.param(True, marks=pytest.mark.long)], ids=["judged", "bitmap"]
)
def test_java_consumer_by_sql(tmp_path: Any, bitmap: bool) -> None:
    with java_interop(
        SOURCE, tmp_path, TOPIC, 2, settle_s=12,
        enablePropertyFilter="true",
        enableCalcFilterBitMap=str(bitmap).lower(),
        enableConsumeQueueExt=str(bitmap).lower(),
    ) as j:  # fmt: skip
        res = j.run(
            "SqlInterop", j.ns, TOPIC, "n BETWEEN 5 AND 9 OR n = 15", "n BETWEEN 9 AND 5", "6"
        )
        assert sorted(res["received"]) == sorted(f"m{i}" for i in (5, 6, 7, 8, 9, 15)), res
        assert res["bad_start"].startswith("23 "), res
        assert "Illegal values of between" in res["bad_start"], res
