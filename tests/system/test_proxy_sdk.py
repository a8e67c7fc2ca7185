"""The gRPC proxy that `rocketrio up --proxy` starts, used by the official RocketMQ 5 Python SDK
(rocketmq-python-client 5.1.2, unchanged; run by proxy_sdk_driver.py in its own process): a
Producer sends normal, FIFO, delayed and transactional messages; a SimpleConsumer receives
them, changes an invisible duration, acks. Then bad input from a raw gRPC client gets
upstream's status codes and the proxy keeps serving. Receipt handles survive a kill -9 of the
proxy (the SDK's run takes place against the restarted proxy, while that check waits out its
invisible time), and a second proxy authenticates. Real processes on loopback."""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc
from tests.harness.sdk import DRIVER, META
from tests.harness.system import free_port_block, log_problems, rr, start_up

pytestmark = pytest.mark.system


def check_sdk_run(out: dict[str, Any]) -> None:
    received = {m["id"]: m for m in out["received"]}
    assert set(received) == set(out["sent"])  # normal, delayed, committed; not rolled back
    bodies = {m["body"] for m in out["received"]}
    assert "tx-commit" in bodies and "tx-rollback" not in bodies and "delayed" in bodies
    # the delayed message (2 s) was not delivered before its time (the broker's timer)
    [delayed] = [m for m in out["received"] if m["body"] == "delayed"]
    assert delayed["delivery_ms"] and delayed["received_at_ms"] >= delayed["delivery_ms"] - 50
    normal = [m for m in out["received"] if m["body"].startswith("n")]
    assert len(normal) == 5
    for m in normal:
        assert m["tag"] == "tagA" and m["props"] == {"color": "red"}
        assert m["keys"] == [f"k{m['body'][1:]}"]
    # the postponed message came back once, as a second delivery; nothing after the acks
    assert [m["id"] for m in out["again"]] == [out["received"][0]["id"]]
    assert out["again"][0]["attempt"] == 2
    assert out["after_ack"] == []
    # one message group: one queue, and the group comes back on the received messages
    assert len(set(out["fifo_queues"])) == 1
    assert sorted(m["body"] for m in out["fifo"]) == ["f0", "f1", "f2", "f3"]
    assert {m["group"] for m in out["fifo"]} == {"order-7"}
    # PushConsumer: each message once, the failed one again after the backoff (attempt 2)
    push = sorted((m["body"], m["attempt"]) for m in out["push"])
    assert push == [("fail-p2", 1), ("fail-p2", 2), ("p0", 1), ("p1", 1), ("p3", 1)]


def check_bad_input(endpoint: str) -> None:
    with grpc.insecure_channel(endpoint) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        r = stub.QueryRoute(
            spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")), metadata=META
        )
        assert r.status.code == pb.TOPIC_NOT_FOUND
        big = pb.Message(
            topic=pb.Resource(name="ProxyT"),
            system_properties=pb.SystemProperties(message_id="X1", message_type=pb.NORMAL),
            body=b"x" * (4 * 1024 * 1024 + 1),
        )
        r = stub.SendMessage(spb.SendMessageRequest(messages=[big]), metadata=META)
        assert r.status.code == pb.MESSAGE_BODY_TOO_LARGE
        r = stub.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="ProxyG"),
                topic=pb.Resource(name="ProxyT"),
                entries=[spb.AckMessageEntry(message_id="X", receipt_handle="garbage")],
            ),
            metadata=META,
        )
        assert r.entries[0].status.code == pb.INVALID_RECEIPT_HANDLE
        r = stub.ReceiveMessage(
            spb.ReceiveMessageRequest(
                message_queue=pb.MessageQueue(topic=pb.Resource(name="ProxyT")), batch_size=1
            ),
            metadata=META,
        )
        assert [x.status.code for x in r] == [pb.ILLEGAL_CONSUMER_GROUP]  # empty group
        # bytes that are no protobuf: grpcio's server refuses them before any handler runs
        # (UNKNOWN, "Error parsing message"), and the proxy stays up
        raw = channel.unary_unary("/apache.rocketmq.v2.MessagingService/QueryRoute")
        with pytest.raises(grpc.RpcError) as err:
            raw(b"\xff\xff\xff\xff", metadata=META)
        assert err.value.code() == grpc.StatusCode.UNKNOWN
        assert "Error parsing message" in str(err.value.details())
        r = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="ProxyT")), metadata=META)
        assert r.status.code == pb.OK
        host, port = endpoint.split(":")
        assert {(a.host, a.port) for q in r.message_queues for a in q.broker.endpoints.addresses}
        assert all(
            a.host == host and a.port == int(port)
            for q in r.message_queues
            for a in q.broker.endpoints.addresses
        )


def raw_send(stub: sgrpc.MessagingServiceStub, topic: str, body: bytes, msg_id: str) -> None:
    m = pb.Message(
        topic=pb.Resource(name=topic),
        system_properties=pb.SystemProperties(message_id=msg_id, message_type=pb.NORMAL),
        body=body,
    )
    r = stub.SendMessage(spb.SendMessageRequest(messages=[m]), metadata=META, timeout=10)
    assert r.status.code == pb.OK, r


def raw_receive(
    stub: sgrpc.MessagingServiceStub, topic: str, invisible_s: int, poll_s: int
) -> tuple[int, list[pb.Message]]:
    req = spb.ReceiveMessageRequest(
        group=pb.Resource(name="RG"),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=topic)),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=16,
        invisible_duration=mp_duration(invisible_s),
        long_polling_timeout=mp_duration(poll_s),
    )
    out = list(stub.ReceiveMessage(req, metadata=META, timeout=poll_s + 10))
    msgs = [r.message for r in out if r.HasField("message")]
    return out[-1].status.code, msgs


def mp_duration(seconds: int) -> Any:
    from google.protobuf.duration_pb2 import Duration

    return Duration(seconds=seconds)


def check_receipts_survive_a_proxy_restart(
    up: Any, endpoint: str, meanwhile: Callable[[], None]
) -> None:
    """Receipt handles carry their broker and checkpoint: a restarted proxy acks with them and
    forwards to the DLQ with them; neither message comes back. ``meanwhile`` runs in a thread
    (against the restarted proxy) while this waits out the invisible time; it must not use
    ProxyR or the group RG. Its failure is raised after this check's own."""
    r = rr("admin", "updateTopic", "-n", up.namesrv, "-t", "ProxyR", "-r", "2", "-w", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    with grpc.insecure_channel(endpoint) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        raw_send(stub, "ProxyR", b"ack-me", "R1")
        raw_send(stub, "ProxyR", b"dlq-me", "R2")
        got: list[pb.Message] = []
        popped_at = time.monotonic()
        while len(got) < 2 and time.monotonic() - popped_at < 10:
            _, msgs = raw_receive(stub, "ProxyR", 15, 2)
            got += msgs
        assert sorted(m.body for m in got) == [b"ack-me", b"dlq-me"]
    mark = len(up.lines)
    os.kill(up.pid_of("proxy"), signal.SIGKILL)
    up.read_until(r"proxy exited with status", 10, mark)
    up.read_until(r"proxy\s+\S+\s+pid \d+", 20, mark)
    with grpc.insecure_channel(endpoint) as channel:
        grpc.channel_ready_future(channel).result(timeout=20)
        stub = sgrpc.MessagingServiceStub(channel)
        by_body = {m.body: m for m in got}
        ack = by_body[b"ack-me"]
        r = stub.AckMessage(
            spb.AckMessageRequest(
                group=pb.Resource(name="RG"),
                topic=pb.Resource(name="ProxyR"),
                entries=[
                    spb.AckMessageEntry(
                        message_id=ack.system_properties.message_id,
                        receipt_handle=ack.system_properties.receipt_handle,
                    )
                ],
            ),
            metadata=META,
            timeout=10,
        )
        assert r.status.code == pb.OK, r
        dlq = by_body[b"dlq-me"]
        r = stub.ForwardMessageToDeadLetterQueue(
            spb.ForwardMessageToDeadLetterQueueRequest(
                group=pb.Resource(name="RG"),
                topic=pb.Resource(name="ProxyR"),
                receipt_handle=dlq.system_properties.receipt_handle,
                message_id=dlq.system_properties.message_id,
                delivery_attempt=1,
                max_delivery_attempts=16,
            ),
            metadata=META,
            timeout=10,
        )
        assert r.status.code == pb.OK, r
        with ThreadPoolExecutor(1) as pool:
            other = pool.submit(meanwhile)
            # past the invisible time: nothing is delivered again
            while time.monotonic() - popped_at < 19:
                code, msgs = raw_receive(stub, "ProxyR", 15, 3)
                assert msgs == [] and code == pb.MESSAGE_NOT_FOUND
            r = rr("admin", "topicStatus", "-n", up.namesrv, "-t", "%DLQ%RG")
            assert r.returncode == 0 and "total messages: 1" in r.stdout, r.stdout + r.stderr
            other.result()


def signed(ak: str, sk: str) -> tuple[tuple[str, str], ...]:
    """Metadata signed as the official SDK signs it (MQv2-HMAC-SHA1 of x-mq-date-time)."""
    date = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    sig = hmac.new(sk.encode(), date.encode(), hashlib.sha1).hexdigest()
    auth = f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}"
    return (("x-mq-client-id", "auth-test"), ("x-mq-date-time", date), ("authorization", auth))


def check_authentication(up: Any, tmp: Any) -> None:
    """A second proxy with authenticationEnabled: a user of the brokers' ACL passes, a wrong
    signature, an unknown user or no signature is UNAUTHORIZED."""
    r = rr("admin", "createUser", "-n", up.namesrv, "-c", "DefaultCluster", "-u", "alice",
           "-p", "s3cret")  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    port = free_port_block(1, extra=())
    conf = tmp / "proxy-auth.conf"
    conf.write_text(
        f"namesrvAddr={up.namesrv}\ngrpcServerPort={port}\nproxyHost=127.0.0.1\n"
        f"authenticationEnabled=true\nlogDir={tmp / 'auth-logs'}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "rocketrio.cli.main", "proxy", "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            stub = sgrpc.MessagingServiceStub(channel)
            req = spb.QueryRouteRequest(topic=pb.Resource(name="ProxyT"))
            assert stub.QueryRoute(req, metadata=signed("alice", "s3cret")).status.code == pb.OK
            for md in (signed("alice", "wrong"), signed("mallory", "s3cret"), META):
                assert stub.QueryRoute(req, metadata=md).status.code == pb.UNAUTHORIZED
                # and the next good call is served
                assert stub.QueryRoute(req, metadata=signed("alice", "s3cret")).status.code == pb.OK
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def test_official_sdk_through_the_proxy(tmp_path: Any) -> None:
    if importlib.util.find_spec("rocketmq") is None:  # not imported here: see the driver
        pytest.skip("rocketmq-python-client is not installed")
    grpc_port = free_port_block(1, extra=())
    up = start_up(str(tmp_path / "c"), "single", "--no-console", "--proxy",
                  "--proxy-port", str(grpc_port))  # fmt: skip
    endpoint = f"127.0.0.1:{grpc_port}"
    try:
        up.read_until(rf"proxy\s+gRPC {endpoint}", 5)
        for topic in ("ProxyT", "ProxyFifo", "ProxyP"):
            r = rr("admin", "updateTopic", "-n", up.namesrv, "-t", topic, "-r", "4", "-w", "4")
            assert r.returncode == 0, r.stdout + r.stderr

        def sdk_bad_input_and_authentication() -> None:
            run = subprocess.run(
                [sys.executable, DRIVER, endpoint], capture_output=True, text=True, timeout=240
            )
            assert run.returncode == 0, run.stderr[-4000:]
            check_sdk_run(json.loads(run.stdout.strip().splitlines()[-1]))
            check_bad_input(endpoint)
            check_authentication(up, tmp_path)

        # the SDK's run, the bad input and the second proxy take the 15 s that the receipt
        # check waits for its invisible time to pass (a restarted proxy serves them all)
        check_receipts_survive_a_proxy_restart(up, endpoint, sdk_bad_input_and_authentication)
    finally:
        up.stop()
    problems = [p for p in log_problems(os.path.join(up.base_dir, "logs")) if "proxy" in p]
    assert not problems, problems
