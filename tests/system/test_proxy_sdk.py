"""The gRPC proxy that `rocketrio up --proxy` starts, used by the official RocketMQ 5 Python SDK
(rocketmq-python-client 5.1.2, unchanged; run by proxy_sdk_driver.py in its own process): a
Producer sends normal, FIFO, delayed and transactional messages; a SimpleConsumer receives
them, changes an invisible duration, acks. Then bad input from a raw gRPC client gets
upstream's status codes and the proxy keeps serving. Real processes on loopback."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

import grpc
import pytest

from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc
from tests.system.cluster import free_port_block, log_problems, start_up

pytestmark = pytest.mark.system

DRIVER = os.path.join(os.path.dirname(__file__), "proxy_sdk_driver.py")
META = (("x-mq-client-id", "raw-test-client"),)


def rr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rocketrio.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def check_sdk_run(out: dict[str, Any]) -> None:
    received = {m["id"]: m for m in out["received"]}
    assert set(received) == set(out["sent"])  # normal, delayed, committed; not rolled back
    bodies = {m["body"] for m in out["received"]}
    assert "tx-commit" in bodies and "tx-rollback" not in bodies and "delayed" in bodies
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


def test_official_sdk_through_the_proxy(tmp_path: Any) -> None:
    if importlib.util.find_spec("rocketmq") is None:  # not imported here: see the driver
        pytest.skip("rocketmq-python-client is not installed")
    grpc_port = free_port_block(1, extra=())
    up = start_up(str(tmp_path / "c"), "single", "--no-console", "--proxy",
                  "--proxy-port", str(grpc_port))  # fmt: skip
    endpoint = f"127.0.0.1:{grpc_port}"
    try:
        up.read_until(rf"proxy\s+gRPC {endpoint}", 5)
        for topic in ("ProxyT", "ProxyFifo"):
            r = rr("admin", "updateTopic", "-n", up.namesrv, "-t", topic, "-r", "4", "-w", "4")
            assert r.returncode == 0, r.stdout + r.stderr
        run = subprocess.run(
            [sys.executable, DRIVER, endpoint], capture_output=True, text=True, timeout=240
        )
        assert run.returncode == 0, run.stderr[-4000:]
        check_sdk_run(json.loads(run.stdout.strip().splitlines()[-1]))
        check_bad_input(endpoint)
    finally:
        up.stop()
    problems = [p for p in log_problems(os.path.join(up.base_dir, "logs")) if "proxy" in p]
    assert not problems, problems
