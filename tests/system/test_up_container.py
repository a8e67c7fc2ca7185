"""System test with real processes: `rocketrio up --mode container-2m-2s` (two broker
containers, each holding one group's master and the other group's slave).

Messages produced through both groups are consumed; then container-2 (broker-b's master and
broker-a's slave) is killed with kill -9. container-1 keeps broker-a writable, and broker-b's
slave inside container-1 keeps serving broker-b's messages to a new consumer group: every
acknowledged message is consumed, none lost. `up` is told to wait 30 s before restarting the
dead container, so the reads are served by the slave alone.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from tests.harness.system import UpProcess, start_up

pytestmark = pytest.mark.system

TOPIC = "ContainerTopic"
COUNT = 200


async def _max_offsets(admin: MQAdmin, addr: str) -> int:
    stats = await admin.topic_stats(addr, TOPIC)
    return sum(o.maxOffset for o in stats.offsetTable.values())


async def _consume(up: UpProcess, group: str, want: set[str], timeout_s: float) -> set[str]:
    got: set[str] = set()
    done = trio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        got.update(m.body.decode() for m in msgs)
        if want <= got:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, up.namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    async with consumer:
        with trio.move_on_after(timeout_s):
            await done.wait()
    return got


async def _run(up: UpProcess) -> None:
    async with MQAdmin(up.namesrv) as admin:
        await admin.update_topic(TOPIC, cluster="DefaultCluster", read_queues=4, write_queues=4)
        table = (await admin.cluster_info()).brokerAddrTable
        masters = {name: table[name].brokerAddrs[0] for name in ("broker-a", "broker-b")}
        slave_b = table["broker-b"].brokerAddrs[1]
        acked: dict[str, str] = {}  # body -> brokerName
        async with Producer("container_producer", up.namesrv) as producer:
            for i in range(COUNT):
                r = await producer.send(Message(TOPIC, f"m{i}".encode()))
                acked[f"m{i}"] = r.message_queue.brokerName
        assert set(acked.values()) == {"broker-a", "broker-b"}, "both groups take writes"
        assert await _consume(up, "before_kill", set(acked), 15) >= set(acked)
        # broker-b's slave (in container-1) has all of broker-b's log before the kill
        with trio.fail_after(10):
            while await _max_offsets(admin, slave_b) < await _max_offsets(
                admin, masters["broker-b"]
            ):
                await trio.sleep(0.1)

        os.kill(up.pid_of("container-2"), signal.SIGKILL)
        up.read_until(r"container-2 exited with status -9", 5)

        # broker-a's master (container-1) still takes writes
        async with Producer("container_producer_2", up.namesrv) as producer:
            for i in range(COUNT, COUNT + 20):
                r = await producer.send(Message(TOPIC, f"m{i}".encode()))
                acked[f"m{i}"] = r.message_queue.brokerName
        assert {acked[f"m{i}"] for i in range(COUNT, COUNT + 20)} == {"broker-a"}
        # a new group reads everything: broker-b's messages from its slave alone
        got = await _consume(up, "after_kill", set(acked), 20)
        missing = set(acked) - got
        assert not missing, (
            f"{len(missing)} acknowledged messages not read, e.g. {sorted(missing)[:5]}"
        )


def test_container_mode_slave_serves_reads_after_kill9(tmp_path: Any) -> None:
    up = start_up(
        str(tmp_path / "cluster"),
        "container-2m-2s",
        "--no-console",
        "--restart-backoff",
        "30",
    )
    try:
        assert up.pid_of("container-1") != up.pid_of("container-2")
        trio.run(_run, up)
    finally:
        up.stop()
