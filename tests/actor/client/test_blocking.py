"""The blocking facade from plain (non-async) test functions, over real TCP on loopback.

The NameServer and Broker run in their own Trio thread (hosted by the same `TrioThread`
the facade uses), so these tests exercise real sockets and real threads, in real time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.blocking import (
    BlockingOrderlyPushConsumer,
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    BlockingTransactionProducer,
    TrioThread,
)
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import ConsumeStatus, Message, SendStatus
from rocketrio.actors.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketrio.actors.client.queue_select import SelectMessageQueueByHash
from rocketrio.actors.client.request_reply import create_reply_message
from rocketrio.actors.client.transaction_producer import LocalTransactionState
from rocketrio.actors.kernel.transport import TcpTransport
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import run_namesrv
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.message import MessageExt
from tests.harness.system import free_port_block

TOPIC = "BlockingT"


@asynccontextmanager
async def tcp_cluster(root: Path) -> AsyncIterator[str]:
    # the broker's port, its HA port (+1) and the NameServer's (+10), below the ephemeral range:
    # a port a bind to 0 handed out was once taken by an outgoing connection before the broker
    # bound it (Address already in use)
    base = free_port_block(1, extra=(1, 10))
    async with trio.open_nursery() as n:
        ns = NamesrvConfig(listenHost="127.0.0.1", listenPort=base + 10)
        ns_addr = await n.start(run_namesrv, ns, TcpTransport())
        cfg = BrokerConfig(
            brokerIP1="127.0.0.1",
            listenPort=base,
            namesrvAddr=ns_addr,
            storePathRootDir=str(root / "store"),
            mappedFileSizeCommitLog=1 << 20,
            mappedFileSizeConsumeQueue=1000 * 20,
        )
        await n.start(Broker(cfg, TcpTransport()).run)
        async with MQAdmin(ns_addr) as admin:
            await admin.update_topic(TOPIC, cluster="DefaultCluster", read_queues=2, write_queues=2)
            await wait_for_route(admin, TOPIC)
        yield ns_addr
        n.cancel_scope.cancel()


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[str]:
    host: TrioThread[str] = TrioThread("test-cluster")
    addr = host.start(lambda: tcp_cluster(tmp_path))
    try:
        yield addr
    finally:
        host.stop()


def wait_until(pred: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_blocking_produce_and_push_consume(namesrv: str) -> None:
    got: list[bytes] = []
    threads: set[str] = set()
    lock = threading.Lock()

    def on_msgs(msgs: list[MessageExt]) -> ConsumeStatus:
        time.sleep(0.001)  # a blocking listener is fine: it runs in a worker thread
        with lock:
            got.extend(m.body for m in msgs)
            threads.add(threading.current_thread().name)
        return ConsumeStatus.CONSUME_SUCCESS

    with BlockingProducer("bp", namesrv) as p:
        results = [p.send(Message(TOPIC, f"b{i}".encode())) for i in range(30)]
        batch = p.send_batch([Message(TOPIC, f"batch{i}".encode()) for i in range(10)])
        p.send_oneway(Message(TOPIC, b"oneway"))
    assert {r.send_status for r in results} == {SendStatus.SEND_OK}
    assert len(batch) == 1 and len(batch[0].msg_id.split(",")) == 10

    consumer = BlockingPushConsumer(
        "bc", namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET", consume_concurrency=4
    )
    consumer.subscribe(TOPIC)
    consumer.register_listener(on_msgs)
    with consumer:
        wait_until(lambda: len(got) >= 41)
        assert len(consumer.assigned_queues()) >= 2
    assert sorted(got) == sorted(
        [f"b{i}".encode() for i in range(30)]
        + [f"batch{i}".encode() for i in range(10)]
        + [b"oneway"]
    )
    assert threading.current_thread().name not in threads


def test_blocking_orderly_consumer_keeps_each_keys_order(namesrv: str) -> None:
    got: dict[str, list[int]] = {"a": [], "b": []}
    busy: dict[int, int] = {0: 0, 1: 0}
    overlaps: list[int] = []
    lock = threading.Lock()

    def on_msgs(msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        q = ctx.message_queue.queueId
        with lock:
            busy[q] += 1
            if busy[q] > 1:
                overlaps.append(q)
        time.sleep(0.002)  # blocking is fine: a worker thread, one call per queue at a time
        with lock:
            for m in msgs:
                key, seq = m.body.decode().split(":")
                got[key].append(int(seq))
            busy[q] -= 1
        return ConsumeOrderlyStatus.SUCCESS

    with BlockingProducer("bop", namesrv) as p:
        for i in range(20):
            for key in ("a", "b"):
                p.send(Message(TOPIC, f"{key}:{i}".encode()), SelectMessageQueueByHash, key)
    consumer = BlockingOrderlyPushConsumer(
        "boc", namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET", consume_batch_size=3
    )
    consumer.subscribe(TOPIC)
    consumer.register_listener(on_msgs)
    with consumer:
        wait_until(lambda: len(got["a"]) + len(got["b"]) >= 40)
        assert len(consumer.assigned_queues()) >= 2
    assert got == {"a": list(range(20)), "b": list(range(20))}
    assert overlaps == []


def test_blocking_pull_consumer(namesrv: str) -> None:
    with BlockingProducer("bp2", namesrv) as p:
        for i in range(10):
            p.send(Message(TOPIC, f"p{i}".encode()))
    consumer = BlockingPullConsumer("bl", namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    mqs = [MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)]
    consumer.assign(mqs)
    got: list[MessageExt] = []
    with consumer:
        assert consumer.fetch_message_queues(TOPIC) == mqs
        while len(got) < 10:
            got.extend(consumer.poll(timeout=5))
        consumer.commit()
        assert sum(consumer.committed(mq) for mq in mqs) == 10
        assert consumer.offset_for_timestamp(mqs[0], 0) == 0
        consumer.pause(mqs)
        consumer.resume(mqs)
        consumer.seek(mqs[0], 0)
        again: list[MessageExt] = []
        while not again:
            again = consumer.poll(timeout=5)
    assert sorted(m.body for m in got) == sorted(f"p{i}".encode() for i in range(10))
    assert again[0].queue_offset == 0 and again[0].queue_id == 0


def test_blocking_request_reply_over_tcp(namesrv: str) -> None:
    with BlockingProducer("reply-pg", namesrv) as rp:

        def serve(msgs: list[MessageExt]) -> ConsumeStatus:  # in a worker thread
            for m in msgs:
                rp.send(create_reply_message(m, b"re:" + m.body))
            return ConsumeStatus.CONSUME_SUCCESS

        server = BlockingPushConsumer("rpc-server", namesrv)
        server.subscribe(TOPIC)
        server.register_listener(serve)
        with server, BlockingProducer("req-pg", namesrv) as p:
            wait_until(lambda: len(server.assigned_queues()) >= 2)
            replies = [p.request(Message(TOPIC, f"q{i}".encode()), timeout=10) for i in range(3)]
    assert [r.body for r in replies] == [b"re:q0", b"re:q1", b"re:q2"]


def test_start_errors_reach_the_caller(namesrv: str) -> None:
    consumer = BlockingPushConsumer("nolistener", namesrv)
    consumer.subscribe(TOPIC)
    with pytest.raises(MQClientError, match="listener"):
        consumer.start()
    producer = BlockingProducer("idle", namesrv)
    with pytest.raises(MQClientError, match="not started"):
        producer.send(Message(TOPIC, b"x"))


class _Orders:
    """A blocking transaction listener: commits bodies starting with b"ok"."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        time.sleep(0.001)  # may block: it runs in a worker thread
        self.threads.add(threading.current_thread().name)
        ok = msg.body.startswith(b"ok")
        return (
            LocalTransactionState.COMMIT_MESSAGE if ok else LocalTransactionState.ROLLBACK_MESSAGE
        )

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW


def test_blocking_transaction_producer_over_tcp(namesrv: str) -> None:
    orders = _Orders()
    with BlockingTransactionProducer("btp", namesrv, orders) as p:
        results = [
            p.send_message_in_transaction(Message(TOPIC, b)) for b in (b"ok1", b"no", b"ok2")
        ]
    assert [r.local_transaction_state for r in results] == [
        LocalTransactionState.COMMIT_MESSAGE,
        LocalTransactionState.ROLLBACK_MESSAGE,
        LocalTransactionState.COMMIT_MESSAGE,
    ]
    assert threading.current_thread().name not in orders.threads
    got: list[bytes] = []
    consumer = BlockingPushConsumer("btc", namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC)
    consumer.register_listener(lambda msgs: _collect(got, msgs))
    with consumer:
        wait_until(lambda: len(got) >= 2)
        time.sleep(1.0)  # room for a message that should not come
    assert sorted(got) == [b"ok1", b"ok2"]


def _collect(into: list[bytes], msgs: list[MessageExt]) -> ConsumeStatus:
    into.extend(m.body for m in msgs)
    return ConsumeStatus.CONSUME_SUCCESS
