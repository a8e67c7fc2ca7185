"""Opt-in interop: Apache RocketMQ 5.2.0's mqadmin against a rocketrio NameServer and broker (real
processes). ``mqadmin queryCq`` reads a window of a consume queue (QUERY_CONSUME_QUEUE) with a
consumer group's subscription, and `rocketrio admin queryCq` prints the same lines; Java's
DefaultMQAdminExt.getConsumeStatus (the tools' GetConsumerStatusCommand, which 5.2.0's mqadmin
does not register) makes the broker ask a rocketrio push consumer for its offsets
(INVOKE_BROKER_TO_GET_CONSUMER_STATUS, then GET_CONSUMER_STATUS_FROM_CLIENT) and decodes the
answer. Skipped without the Java dist (RMQ_DIST, default /tmp/rocketmq-5.2.0/...; CI has none)
or a JDK.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from tests.harness.java_dist import DIST, JAVA_OPENS, java_classpath
from tests.harness.system import launch_ns_and_broker, rr, stop_processes

pytestmark = [pytest.mark.system, pytest.mark.long]  # a JVM or three: --long (docs/testing.md)

SOURCE = Path(__file__).parent / "java" / "ConsumerStatusInterop.java"
TOPIC, GROUP, COUNT = "QueryCqT", "query_cq_g", 8


def _java(cp: str, work: str, main: str, *argv: str) -> subprocess.CompletedProcess[str]:
    java = ["java", "-Xms128m", "-Xmx384m", *JAVA_OPENS, "-Duser.home=" + work]
    return subprocess.run(
        [*java, "-Drocketmq.client.logUseSlf4j=false", "-cp", cp, main, *argv],
        capture_output=True, text=True, timeout=120, check=False, cwd=DIST,
        env={**os.environ, "ROCKETMQ_HOME": DIST},
    )  # fmt: skip


async def _scenario(cp: str, ns: str, broker: str, work: str) -> dict[str, Any]:
    async with MQAdmin(ns) as admin:
        await admin.update_topic(TOPIC, broker_addr=broker, read_queues=2, write_queues=2)
    await trio.sleep(5)  # the route reaches the NameServer with the broker's next registration
    got: list[Any] = []
    consumer = PushConsumer(GROUP, ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "TagA || TagB")
    consumer.register_listener(lambda msgs: got.extend(msgs) or ConsumeStatus.CONSUME_SUCCESS)
    async with Producer("query_cq_pg", ns) as p, consumer:
        for i in range(COUNT):
            await p.send(Message(TOPIC, f"m{i}".encode(), tags="TagA"))
        with trio.fail_after(60):
            while len(got) < COUNT:
                await trio.sleep(0.2)
        cq = await trio.to_thread.run_sync(
            _java, f"conf:{cp}", work, "org.apache.rocketmq.tools.command.MQAdminStartup",
            "queryCq", "-n", ns, "-t", TOPIC, "-q", "0", "-i", "1", "-c", "2",
            "-g", GROUP,
        )  # fmt: skip
        ours = await trio.to_thread.run_sync(
            rr, "admin", "queryCq", "-n", ns, "-t", TOPIC, "-q", "0", "-i", "1", "-c", "2",
            "-g", GROUP,
        )  # fmt: skip
        classes = f"{work}/classes:{cp}"
        status = await trio.to_thread.run_sync(
            _java, classes, work, "ConsumerStatusInterop", ns, TOPIC, GROUP
        )
        return {"cq": cq, "ours": ours, "status": status, "cid": consumer.client.client_id}


def test_java_mqadmin_query_cq_and_get_consumer_status(tmp_path: Any) -> None:
    cp = java_classpath()
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", cp, str(SOURCE)], check=True)
    work = str(tmp_path)
    procs: list[subprocess.Popen[str]] = []
    try:
        ns, broker_addr = launch_ns_and_broker(work, procs)
        res = trio.run(_scenario, cp, ns, broker_addr, work)
        cq, status = res["cq"], res["status"]
        print(cq.stdout, status.stdout)
        assert cq.returncode == 0, cq.stdout + cq.stderr[-3000:]
        out = cq.stdout
        assert "Subscription data: \n{" in out and '"subString":"TagA || TagB"' in out, out
        assert "Filter data: \nnull\n" in out, out
        assert f"Queue data: \nmax: {COUNT // 2}, min: 0\n" in out, out
        assert re.search(r"idx: 1\nConsumeQueueData\{physicOffset=\d+, physicSize=\d+, "
                         r"tagsCode=\d+, extendDataJson='null', bitMap='null', eval=false, "
                         r"msg='null'\}", out), out  # fmt: skip
        assert "idx: 2\n" in out and "idx: 3\n" not in out, out
        # rocketrio's queryCq prints what Java's does, line for line
        assert res["ours"].returncode == 0, res["ours"].stderr[-3000:]
        java_lines = out[out.index("Subscription data: ") :]
        assert res["ours"].stdout == java_lines, (res["ours"].stdout, java_lines)
        assert status.returncode == 0, status.stdout + status.stderr[-3000:]
        rows = re.findall(rf"^{re.escape(res['cid'])} broker-a (\d) (\d+)$", status.stdout, re.M)
        assert sorted(rows) == [("0", str(COUNT // 2)), ("1", str(COUNT // 2))], status.stdout
    finally:
        stop_processes(procs)
