"""System test with real processes: a static topic through `rocketrio admin`.

`rocketrio up --mode 2m-noslave`; `rocketrio admin updateStaticTopic -qn 8 -c DefaultCluster`
spreads 8 logic queues over broker-a and broker-b; a Producer and a PushConsumer use them;
`rocketrio admin remappingStaticTopic -b broker-b` moves broker-a's four to broker-b while
messages flow. Every acknowledged message is consumed exactly once, the consumer sees the 8
logic queues throughout, and no process logs an error or a traceback.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
import trio

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from tests.system.cluster import log_problems, start_up

pytestmark = pytest.mark.system

TOPIC = "SysStatic"
TOTAL = 600
LQ = "__syslo__global__"


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketrio.cli.main", "admin", *args, "-n", namesrv],
        capture_output=True,
        text=True,
        timeout=120,
    )


async def _run(up: Any) -> tuple[Counter[str], set[str], list[int]]:
    r = await trio.to_thread.run_sync(
        admin, up.namesrv, "updateStaticTopic", "-t", TOPIC, "-qn", "8", "-c", "DefaultCluster"
    )
    assert r.returncode == 0, r.stderr
    consumed: Counter[str] = Counter()
    acked: set[str] = set()
    seen_queue_counts: list[int] = []

    def listener(msgs: list[Any]) -> ConsumeStatus:
        for m in msgs:
            consumed[m.body.decode()] += 1
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("sys_static", up.namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC, "*")
    c.register_listener(listener)
    async with Producer("sys_static_p", up.namesrv) as p, c:
        with trio.fail_after(60):
            while len(c.assigned_queues()) < 8:
                await trio.sleep(0.2)
        for i in range(TOTAL):
            if i == TOTAL // 3:
                r = await trio.to_thread.run_sync(
                    admin, up.namesrv, "remappingStaticTopic", "-t", TOPIC, "-b", "broker-b"
                )
                assert r.returncode == 0, r.stderr
            res = await p.send(Message(TOPIC, f"s{i}".encode()))
            assert res.message_queue.brokerName == LQ
            acked.add(f"s{i}")
            seen_queue_counts.append(len({q for q in c.assigned_queues() if q.topic == TOPIC}))
            await trio.sleep(0.01)
        with trio.fail_after(120):
            while not acked <= consumed.keys():
                await trio.sleep(0.2)
        await trio.sleep(3)  # a duplicate would show up by now
    return consumed, acked, seen_queue_counts


def test_static_topic_through_the_admin_tools(tmp_path: Any) -> None:
    base = str(tmp_path / "cluster")
    up = start_up(base, "2m-noslave", "--no-console")
    try:
        consumed, acked, counts = trio.run(_run, up)
        status = admin(up.namesrv, "topicStatus", "-t", TOPIC)
        assert status.returncode == 0, status.stderr
        assert status.stdout.count(LQ) == 8, status.stdout  # the logic queues, all led
    finally:
        up.stop()
    assert acked == consumed.keys()
    assert max(consumed.values()) == 1, [k for k, v in consumed.items() if v > 1][:10]
    assert set(counts) == {8}
    problems = log_problems(f"{base}/logs")
    assert not problems, "\n".join(problems[:20])
