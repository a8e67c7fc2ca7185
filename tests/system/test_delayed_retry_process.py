"""System test with real processes: delayed retries through the delay levels (issue 11, item 1).

A NameServer and a broker (messageDelayLevel="1s 1s 2s 3s 4s", so a send-back waits 2 s, then
3 s: levels 3 + reconsumeTimes) run as OS processes. A push consumer's listener fails twice
and then succeeds: the message is delivered three times, the retries spaced by the levels'
delays (never earlier; late by at most the consumer's pull round trip), and once more never.
Then the broker is stopped and its delayOffset.json shows the levels it re-put from.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import ConsumeStatus, Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.observe.logs import configure_logging
from tests.harness.system import free_port_block, launch, stop_processes, wait_for_line

pytestmark = pytest.mark.system

TOPIC = "DelayedRetryTopic"
GROUP = "delayed_retry_group"
LEVEL_S = [1, 1, 2, 3, 4]


async def _consume(ns: str, broker_addr: str) -> list[tuple[float, int]]:
    """(monotonic time, reconsumeTimes) of each delivery of the one message."""
    seen: list[tuple[float, int]] = []
    done = trio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        for m in msgs:
            if m.body != b"retry me":
                continue
            seen.append((time.monotonic(), m.reconsume_times))
            if len(seen) < 3:
                return ConsumeStatus.RECONSUME_LATER
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    async with MQAdmin(ns) as admin:
        await admin.update_topic(TOPIC, broker_addr=broker_addr, read_queues=1, write_queues=1)
    consumer = PushConsumer(GROUP, ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    async with Producer("delayed_retry_producer", ns) as producer, consumer:
        for _ in range(100):  # the route appears after the broker's next registration
            try:
                await producer.send(Message(TOPIC, b"retry me"))
                break
            except Exception:
                await trio.sleep(0.2)
        with trio.move_on_after(60):
            await done.wait()
        await trio.sleep(6)  # a fourth delivery would come by now
    return seen


def test_a_failing_listener_gets_its_retries_spaced_by_the_levels(tmp_path: Any) -> None:
    configure_logging("test", "test", None, console=None)
    work = str(tmp_path)
    base = free_port_block(3)
    ns = f"127.0.0.1:{base}"
    logs = os.path.join(work, "logs")
    store = os.path.join(work, "store")
    procs = [launch("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, work)]
    try:
        wait_for_line(procs[0], "boot success")
        broker = launch(
            "broker",
            "broker-a",
            {
                "namesrvAddr": ns,
                "brokerIP1": "127.0.0.1",
                "logDir": logs,
                "brokerName": "broker-a",
                "listenPort": str(base + 10),
                "storePathRootDir": store,
                "messageDelayLevel": " ".join(f"{s}s" for s in LEVEL_S),
                "flushDelayOffsetInterval": "1000",
            },
            work,
        )
        procs.append(broker)
        wait_for_line(broker, "boot success")
        seen = trio.run(_consume, ns, f"127.0.0.1:{base + 10}")
        assert [r for _, r in seen] == [0, 1, 2], seen  # three deliveries, no fourth
        (t0, _), (t1, _), (t2, _) = seen
        # retry n waits at level 3 + (n - 1): 2 s, then 3 s (the consumer's send-back and
        # pull add a little; never less than the level)
        assert LEVEL_S[2] - 0.05 <= t1 - t0 <= LEVEL_S[2] + 1.5
        assert LEVEL_S[3] - 0.05 <= t2 - t1 <= LEVEL_S[3] + 1.5
        stop_processes([broker])
        with open(os.path.join(store, "config", "delayOffset.json"), encoding="utf-8") as f:
            offsets = json.load(f)["offsetTable"]
        assert offsets == {"3": 1, "4": 1}  # one re-put from level 3, one from level 4
    finally:
        stop_processes(procs)
