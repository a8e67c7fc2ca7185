"""System test with real processes: Apache RocketMQ 5.2.0's own Java client against a rocketrio
NameServer and broker: lite pull (LITE_PULL_MESSAGE 361) and request-reply (SEND_REPLY_MESSAGE_V2
325, PUSH_REPLY_MESSAGE_TO_CLIENT 326, the broker's <cluster>_REPLY_TOPIC).

tests/system/java/LitePullReplyInterop.java is compiled against the distribution's jars and run
once per part:
- ``subscribe``: DefaultLitePullConsumer.subscribe + poll receives all 20 messages, commitSync
  stores 20 as the group's offsets (read back with committed());
- ``assign``: assign one queue, seek(mq, 5) then poll gives messages 5..9, seekToBegin then poll
  gives all 10 from the first;
- ``request``: DefaultMQProducer.request(msg, 10 s) answered by a push consumer that replies with
  MessageUtil.createReplyMessage: 10 of 10 replies, on DefaultCluster_REPLY_TOPIC;
- mixed: the project's Producer.request answered by the Java responder, and the Java requester
  answered by the project's PushConsumer + create_reply_message: 10 of 10 each way.

Skipped without the Java dist (RMQ_DIST, default /tmp/rocketmq-5.2.0/...; CI has none) or javac.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.message import ConsumeStatus, Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.client.request_reply import create_reply_message
from rocketrio.protocol.message import MessageExt
from tests.harness.paths import REPO
from tests.harness.system import free_port_block, launch, stop_processes, wait_for_line

pytestmark = [pytest.mark.system, pytest.mark.long]  # about a minute with the Java dist

DIST = os.environ.get("RMQ_DIST", "/tmp/rocketmq-5.2.0/rocketmq-all-5.2.0-bin-release")
CP_FILE = os.environ.get("RMQ_CP_FILE", "/tmp/rocketmq-5.2.0-home/cp2.txt")
SOURCE = Path(REPO) / "tests" / "system" / "java" / "LitePullReplyInterop.java"
TOPICS = {
    "InteropLiteSub": 2, "InteropLiteAssign": 1, "InteropRpc": 2, "InteropRpcPy": 2,
    "InteropRpcJava": 2,
}  # fmt: skip


def _skip_reason() -> str | None:
    if not (os.path.isdir(DIST) and os.path.exists(CP_FILE)):
        return f"Apache RocketMQ 5.2.0 dist absent ({DIST}, {CP_FILE}): see ../shared/tools"
    if shutil.which("javac") is None or shutil.which("java") is None:
        return "no JDK (javac/java) on PATH"
    return None


def _compile(work: str) -> str:
    with open(CP_FILE, encoding="utf-8") as f:
        cp = f.read().strip()
    classes = os.path.join(work, "classes")
    os.makedirs(classes)
    subprocess.run(
        ["javac", "-cp", cp, "-d", classes, str(SOURCE)],
        check=True, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    return f"{classes}:{DIST}/conf:{cp}"


def _java_cmd(cp: str, ns: str, part: str, work: str) -> list[str]:
    home = os.path.join(work, f"javahome-{part}")
    os.makedirs(home, exist_ok=True)
    return [
        "java", "-Xmx256m", f"-Duser.home={home}",
        f"-Drmq.logback.configurationFile={DIST}/conf/rmq.client.logback.xml",
        "-cp", cp, "LitePullReplyInterop", ns, part,
    ]  # fmt: skip


def _run_java(cp: str, ns: str, part: str, work: str) -> dict[str, Any]:
    out = subprocess.run(
        _java_cmd(cp, ns, part, work), capture_output=True, text=True, timeout=240,
        check=False, cwd=DIST, env={**os.environ, "ROCKETMQ_HOME": DIST},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)[part]
    return result


async def _create_topics(ns: str, broker: str) -> None:
    async with MQAdmin(ns) as admin:
        for topic, queues in TOPICS.items():
            await admin.update_topic(topic, broker_addr=broker, read_queues=queues,
                                     write_queues=queues)  # fmt: skip
        for topic in [*TOPICS, "DefaultCluster_REPLY_TOPIC"]:
            await wait_for_route(admin, topic)


async def _python_asks_java_serves(cp: str, ns: str, work: str) -> dict[str, Any]:
    """The project's Producer.request answered by a Java responder (MessageUtil)."""
    java = subprocess.Popen(
        _java_cmd(cp, ns, "serve", work), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, cwd=DIST, env={**os.environ, "ROCKETMQ_HOME": DIST},
    )  # fmt: skip
    try:
        assert java.stdout is not None
        first = await trio.to_thread.run_sync(java.stdout.readline)
        assert first.strip() == "ready", first
        ok, topics = 0, set()
        async with Producer("py_req_pg", ns) as p:
            for i in range(10):
                reply = await p.request(Message("InteropRpcPy", f"q{i}".encode()), timeout=15)
                ok += reply.body == f"re:q{i}".encode()
                topics.add(reply.topic)
        rest, _ = await trio.to_thread.run_sync(java.communicate, None, 180)
    finally:
        if java.poll() is None:
            java.kill()
    served: dict[str, Any] = json.loads(rest.strip().splitlines()[-1])["serve"]
    return {"replies": ok, "reply_topics": sorted(topics), **served}


async def _java_asks_python_serves(cp: str, ns: str, work: str) -> dict[str, Any]:
    """The Java DefaultMQProducer.request answered by the project's consumer and producer."""
    async with Producer("py_reply_pg", ns) as rp:

        async def answer(msgs: list[MessageExt]) -> ConsumeStatus:
            for m in msgs:
                await rp.send(create_reply_message(m, b"re:" + m.body))
            return ConsumeStatus.CONSUME_SUCCESS

        server = PushConsumer("py_rpc_server", ns)
        server.subscribe("InteropRpcJava", "*")
        server.register_listener(answer)
        async with server:
            return await trio.to_thread.run_sync(_run_java, cp, ns, "ask", work)


def test_java_lite_pull_and_request_reply_against_rocketrio(tmp_path: Any) -> None:
    reason = _skip_reason()
    if reason is not None:
        pytest.skip(reason)
    work = str(tmp_path)
    cp = _compile(work)
    base = free_port_block(3)
    ns = f"127.0.0.1:{base}"
    logs = os.path.join(work, "logs")
    procs = [launch("namesrv", "ns", {"listenPort": str(base), "logDir": logs}, work)]
    try:
        wait_for_line(procs[0], "boot success")
        broker = launch("broker", "broker-a", {
            "namesrvAddr": ns, "brokerIP1": "127.0.0.1", "logDir": logs,
            "brokerName": "broker-a", "listenPort": str(base + 10),
            "storePathRootDir": os.path.join(work, "store"),
        }, work)  # fmt: skip
        procs.append(broker)
        wait_for_line(broker, "boot success")
        trio.run(_create_topics, ns, f"127.0.0.1:{base + 10}")
        sub = _run_java(cp, ns, "subscribe", work)
        assign = _run_java(cp, ns, "assign", work)
        req = _run_java(cp, ns, "request", work)
        py_asks = trio.run(_python_asks_java_serves, cp, ns, work)
        java_asks = trio.run(_java_asks_python_serves, cp, ns, work)
        print(json.dumps({"subscribe": sub, "assign": assign, "request": req,
                          "python_asks_java": py_asks, "java_asks_python": java_asks}))  # fmt: skip
        assert sub == {"received": 20, "committed": 20}, sub
        assert assign == {"after_seek": "a5,a6,a7,a8,a9", "from_begin": 10, "first": "a0"}, assign
        assert req["replies"] == 10, req
        assert req["reply_topic"] == "DefaultCluster_REPLY_TOPIC", req
        assert py_asks == {"replies": 10, "reply_topics": ["DefaultCluster_REPLY_TOPIC"],
                           "replied": 10}, py_asks  # fmt: skip
        assert java_asks["replies"] == 10, java_asks
    finally:
        stop_processes(procs)
