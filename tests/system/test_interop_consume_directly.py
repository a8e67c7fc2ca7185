"""System test with real processes: Apache RocketMQ 5.2.0's own mqadmin runs
`queryMsgByUniqueKey -g -d` against a rocketrio cluster (`up --mode single`) and a rocketrio push
consumer: it reads the client's running info (307, forwarded by the broker), finds the message by
its unique key, sends CONSUME_MESSAGE_DIRECTLY (309) with the message's offset id to the broker
that stored it, the broker passes it to the consumer, whose listener consumes it once more, and
mqadmin prints the ConsumeMessageDirectlyResult it decoded. Skipped without the Java dist (RMQ_DIST,
default /tmp/rocketmq-5.2.0/...; CI has none)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.protocol.message import MessageExt
from tests.harness.java_dist import CP_FILE, DIST, JAVA_OPENS
from tests.harness.system import start_up

pytestmark = pytest.mark.system


def mqadmin(*args: str) -> list[str]:
    with open(CP_FILE, encoding="utf-8") as f:
        classpath = "conf:" + f.read().strip()
    return [
        "java", "-Xms256m", "-Xmx512m", *JAVA_OPENS, "-Duser.home=/tmp/rmq-java-home",
        "-cp", classpath, f"-Drmq.logback.configurationFile={DIST}/conf/rmq.tools.logback.xml",
        "org.apache.rocketmq.tools.command.MQAdminStartup", *args,
    ]  # fmt: skip


def test_java_mqadmin_has_a_rocketrio_consumer_consume_a_message_directly(
    tmp_path: Path,
) -> None:
    if not (os.path.isdir(DIST) and os.path.exists(CP_FILE)):
        pytest.skip(f"Apache RocketMQ 5.2.0 dist absent ({DIST}): see ../shared/tools/")
    up = start_up(str(tmp_path / "cluster"), "single", "--no-console", "--no-metrics")
    try:
        trio.run(_scenario, up.namesrv)
    finally:
        up.stop()


async def _scenario(ns: str) -> None:
    got: list[MessageExt] = []

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("GJava", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe("TJava")
    consumer.register_listener(listener)
    async with Producer("PJava", ns) as producer, consumer:
        sent = None
        with trio.fail_after(60):  # the topic is auto-created at the first send
            while sent is None:
                try:
                    sent = await producer.send(Message("TJava", b"java asks", keys="jk"))
                except Exception:
                    await trio.sleep(0.5)
        with trio.fail_after(60):
            while not got:
                await trio.sleep(0.1)
        argv = ["queryMsgByUniqueKey", "-n", ns, "-t", "TJava", "-i", sent.msg_id]
        argv += ["-g", "GJava", "-d", consumer.client.client_id]
        done = await trio.run_process(
            mqadmin(*argv), cwd=DIST, capture_stdout=True, capture_stderr=True, check=False,
            env={**os.environ, "ROCKETMQ_HOME": DIST},
        )  # fmt: skip
        out = done.stdout.decode()
        assert done.returncode == 0, out + done.stderr.decode()
        assert "ConsumeMessageDirectlyResult [order=false, autoCommit=true, " in out, out
        assert "consumeResult=CR_SUCCESS, remark=null, spentTimeMills=" in out, out
        assert len(got) == 2 and got[1].msg_id == sent.msg_id and got[1].body == b"java asks"
