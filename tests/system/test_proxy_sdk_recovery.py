"""The proxy when things are left hanging, with real processes (`rocketrio up --proxy`):

- an orphaned transaction: the official SDK's TransactionProducer sends a half message and
  never ends it; the broker's check is relayed through the proxy's Telemetry to the SDK's
  TransactionChecker, which commits, and the message is consumed;
- a long job: the SDK's PushConsumer (auto_renew) holds a message longer than the proxy's
  invisible time; the proxy renews it and it is delivered once (the proxy is configured with a
  10 s invisible time, renewals due 4 s ahead, checked every second: a 16 s hold spans the
  first expiry and sixteen renewal rounds, where upstream's defaults, 60 s / 10 s / 5 s, would
  need a hold of more than a minute to prove the same);
- a proxy killed -9 and restarted under load: raw gRPC producers keep sending (retrying what
  fails), a consumer keeps receiving and acking; every acknowledged send is consumed, and
  handles received before the restart ack after it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc
from tests.harness.sdk import DRIVER, META
from tests.harness.system import free_port_block, launch, log_problems, rr, start_up, stop_processes

pytestmark = pytest.mark.system
# a receive in flight when the proxy is killed pops messages the client never sees: they come
# back after this, so the final drain lasts longer
INVISIBLE_S = 20


def check_orphan(out: dict[str, Any]) -> None:
    assert [c["id"] for c in out["checked"]] == [out["sent"]], out
    assert out["checked"][0]["body"] == "orphan-tx"
    assert [(m["id"], m["body"]) for m in out["received"]] == [(out["sent"], "orphan-tx")]


# the long job's proxy: upstream's renew keys, scaled down from 60 s / 10 s / 5 s
RENEW_CONF = {
    "defaultInvisibleTimeMills": "10000",
    "renewAheadTimeMillis": "4000",
    "renewSchedulePeriodMillis": "1000",
}
HOLD_S = 16  # > the 10 s invisible time: without a renewal it comes back during the hold
AFTER_S = 5  # then a redelivery (an ack that did not take) would show up


def check_long(out: dict[str, Any]) -> None:
    [only] = out["deliveries"]  # held 16 s > 10 s invisible: still delivered once
    assert only["body"] == "slow" and only["attempt"] == 1, out
    assert out["hold_s"] > int(RENEW_CONF["defaultInvisibleTimeMills"]) / 1000


def test_sdk_orphaned_transaction_and_auto_renew(tmp_path: Any) -> None:
    if importlib.util.find_spec("rocketmq") is None:
        pytest.skip("rocketmq-python-client is not installed")
    grpc_port = free_port_block(1, extra=())
    up = start_up(str(tmp_path / "c"), "single", "--no-console")
    endpoint = f"127.0.0.1:{grpc_port}"
    logs = os.path.join(up.base_dir, "logs")
    conf = {"namesrvAddr": up.namesrv, "grpcServerPort": str(grpc_port),
            "proxyHost": "127.0.0.1", "logDir": logs, **RENEW_CONF}  # fmt: skip
    proxy = launch("proxy", "proxy", conf, str(tmp_path))
    try:
        with grpc.insecure_channel(endpoint) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
        r = rr("admin", "updateBrokerConfig", "-n", up.namesrv, "-c", "DefaultCluster",
               "-k", "transactionCheckInterval", "-v", "2000")  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        for topic in ("ProxyTx", "ProxyLong"):
            r = rr("admin", "updateTopic", "-n", up.namesrv, "-t", topic, "-r", "2", "-w", "2")
            assert r.returncode == 0, r.stdout + r.stderr
        runs = {
            mode: subprocess.Popen(
                [sys.executable, DRIVER, endpoint, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for mode, args in (
                ("orphan", ["orphan"]),
                ("long", ["long", str(HOLD_S), str(AFTER_S)]),
            )
        }
        outs = {mode: p.communicate(timeout=240) for mode, p in runs.items()}
        for mode, p in runs.items():
            assert p.returncode == 0, (mode, outs[mode][1][-4000:])
        check_orphan(json.loads(outs["orphan"][0].strip().splitlines()[-1]))
        check_long(json.loads(outs["long"][0].strip().splitlines()[-1]))
    finally:
        stop_processes([proxy])
        up.stop()
    problems = [p for p in log_problems(os.path.join(up.base_dir, "logs")) if "proxy" in p]
    assert not problems, problems


class Load:
    """Raw gRPC load through the proxy: ``senders`` send numbered messages, retrying each until
    it is answered OK; one consumer receives and acks, keeping ``held`` messages unacked across
    the restart to ack them after it."""

    def __init__(self, endpoint: str, topic: str, senders: int = 2) -> None:
        self.endpoint, self.topic, self.senders = endpoint, topic, senders
        self.stop = threading.Event()
        self.acked_sends: set[str] = set()
        self.consumed: set[str] = set()
        self.held: list[pb.Message] = []
        self.hold = threading.Event()  # set: keep what is received, unacked
        self.lock = threading.Lock()
        self.errors = 0
        self.ack_failures: list[list[int]] = []  # checked by the test's thread

    def send_loop(self, n: int) -> None:
        with grpc.insecure_channel(self.endpoint) as channel:
            stub = sgrpc.MessagingServiceStub(channel)
            i = 0
            while not self.stop.is_set():
                msg_id = f"S{n}-{i}"
                m = pb.Message(
                    topic=pb.Resource(name=self.topic),
                    system_properties=pb.SystemProperties(
                        message_id=msg_id, message_type=pb.NORMAL
                    ),
                    body=msg_id.encode(),
                )
                try:
                    r = stub.SendMessage(
                        spb.SendMessageRequest(messages=[m]), metadata=META, timeout=5
                    )
                    ok = r.status.code == pb.OK
                except grpc.RpcError:
                    ok = False
                if ok:
                    with self.lock:
                        self.acked_sends.add(msg_id)
                    i += 1
                else:
                    with self.lock:
                        self.errors += 1
                    time.sleep(0.2)  # the same message again
                time.sleep(0.02)

    def receive(self, stub: Any) -> list[pb.Message]:
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name="LoadG"),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=self.topic)),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            batch_size=16,
            invisible_duration=Duration(seconds=INVISIBLE_S),
            long_polling_timeout=Duration(seconds=1),
        )
        out = list(stub.ReceiveMessage(req, metadata=META, timeout=10))
        return [r.message for r in out if r.HasField("message")]

    @staticmethod
    def ack(stub: Any, topic: str, msgs: list[pb.Message]) -> list[int]:
        req = spb.AckMessageRequest(
            group=pb.Resource(name="LoadG"),
            topic=pb.Resource(name=topic),
            entries=[
                spb.AckMessageEntry(
                    message_id=m.system_properties.message_id,
                    receipt_handle=m.system_properties.receipt_handle,
                )
                for m in msgs
            ],
        )
        r = stub.AckMessage(req, metadata=META, timeout=10)
        return [e.status.code for e in r.entries]

    def consume_loop(self) -> None:
        with grpc.insecure_channel(self.endpoint) as channel:
            stub = sgrpc.MessagingServiceStub(channel)
            pending: list[pb.Message] = []  # received, ack not yet answered
            while not self.stop.is_set() or pending:
                try:
                    if pending:
                        codes = self.ack(stub, self.topic, pending)
                        if codes != [pb.OK] * len(pending):
                            with self.lock:
                                self.ack_failures.append(codes)
                        pending = []
                    if self.stop.is_set():
                        continue
                    got = self.receive(stub)
                except grpc.RpcError:
                    time.sleep(0.2)
                    continue
                with self.lock:
                    self.consumed.update(m.system_properties.message_id for m in got)
                    if self.hold.is_set():
                        self.held += got
                        continue
                pending = got


def wait_until(done: Callable[[], bool], timeout_s: float, load: Load) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        with load.lock:
            state = f"{len(load.acked_sends)} acked sends, {len(load.consumed)} consumed"
        assert time.monotonic() < deadline, f"the load did not go on: {state}"
        time.sleep(0.05)


def test_proxy_killed_and_restarted_under_load(tmp_path: Any) -> None:
    grpc_port = free_port_block(1, extra=())
    up = start_up(str(tmp_path / "c"), "single", "--no-console", "--proxy",
                  "--proxy-port", str(grpc_port))  # fmt: skip
    endpoint = f"127.0.0.1:{grpc_port}"
    try:
        up.read_until(rf"proxy\s+gRPC {endpoint}", 5)
        r = rr("admin", "updateTopic", "-n", up.namesrv, "-t", "ProxyLoad", "-r", "4", "-w", "4")
        assert r.returncode == 0, r.stdout + r.stderr
        load = Load(endpoint, "ProxyLoad")
        threads = [threading.Thread(target=load.send_loop, args=(n,)) for n in range(2)]
        threads.append(threading.Thread(target=load.consume_loop))
        for t in threads:
            t.start()
        # the load is flowing: sends acknowledged and messages consumed
        wait_until(lambda: len(load.acked_sends) >= 30 and len(load.consumed) >= 10, 30, load)
        load.hold.set()  # what arrives now stays unacked over the restart
        deadline = time.monotonic() + 20
        while not load.held and time.monotonic() < deadline:
            time.sleep(0.1)
        mark = len(up.lines)
        os.kill(up.pid_of("proxy"), signal.SIGKILL)
        up.read_until(r"proxy exited with status", 10, mark)
        up.read_until(r"proxy\s+\S+\s+pid \d+", 20, mark)
        with grpc.insecure_channel(endpoint) as channel:
            grpc.channel_ready_future(channel).result(timeout=20)
            stub = sgrpc.MessagingServiceStub(channel)
            with load.lock:
                held, load.held = list(load.held), []
                load.hold.clear()
            assert held, "nothing was received before the restart"
            # handles handed out by the killed proxy ack through the new one
            assert Load.ack(stub, "ProxyLoad", held) == [pb.OK] * len(held)
        # the load goes on after the restart: more sends acknowledged and consumed
        sent, consumed = len(load.acked_sends), len(load.consumed)
        wait_until(
            lambda: len(load.acked_sends) >= sent + 30 and len(load.consumed) >= consumed + 10,
            30,
            load,
        )
        load.stop.set()
        for t in threads:
            t.join(60)
            assert not t.is_alive()
        with grpc.insecure_channel(endpoint) as channel:
            stub = sgrpc.MessagingServiceStub(channel)
            deadline = time.monotonic() + 3 * INVISIBLE_S  # drain what is left
            while not load.acked_sends <= load.consumed and time.monotonic() < deadline:
                got = load.receive(stub)
                load.consumed.update(m.system_properties.message_id for m in got)
                if got:
                    Load.ack(stub, "ProxyLoad", got)
        assert len(load.acked_sends) >= 60  # 30 before the kill, 30 after the restart
        assert load.errors > 0  # the restart was felt: some sends failed and were retried
        assert load.ack_failures == []
        missing = load.acked_sends - load.consumed
        assert not missing, sorted(missing)[:20]
    finally:
        up.stop()
