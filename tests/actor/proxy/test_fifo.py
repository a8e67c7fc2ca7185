"""The proxy's FIFO consumption against a real broker on SimNetwork + MockClock (ProxyService
called directly, no gRPC): `rocketrio admin updateSubGroup -o true` makes a group FIFO, its
clients' Telemetry settings say ``subscription.fifo``, a PushConsumer is assigned each queue,
and ReceiveMessage pops in order (the next batch of a message group's queue only after the last
one is acked or forwarded to the DLQ; the same messages again, with a higher delivery attempt,
after the invisible time); a group without consumeMessageOrderly keeps the unordered receive."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import structlog.testing
import trio
import trio.testing
from google.protobuf.duration_pb2 import Duration

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.proxy.service import ProxyConfig, ProxyService
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from tests.harness.broker import BrokerHarness, harness

TOPIC = "FifoProxyT"
META = {"x-mq-client-id": "fifo-client"}


@attrs.define
class FakeCall:
    """What ProxyService's handlers read of a gRPC call."""

    method: str
    request: Any
    metadata: dict[str, str] = attrs.field(factory=lambda: dict(META))
    push: Any = None


@asynccontextmanager
async def proxy(h: BrokerHarness) -> AsyncIterator[ProxyService]:
    transport = h.net.transport("10.0.0.60")
    config = ClientConfig(clientIP="10.0.0.60", instanceName="proxy")
    async with MQClientInstance(h.namesrv_addr, transport=transport, config=config) as client:
        yield ProxyService(
            ProxyConfig(h.namesrv_addr, host="10.0.0.60"), client, TelemetryRegistry()
        )


async def admin(h: BrokerHarness, *args: str) -> None:
    with structlog.testing.capture_logs():
        code = await main_async(
            ["admin", *args, "-n", h.namesrv_addr], Wiring(h.net.transport("10.0.0.61"))
        )
    assert code == 0


def receive_req(group: str, attempt: str = "", batch: int = 3) -> spb.ReceiveMessageRequest:
    return spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(
            topic=pb.Resource(name=TOPIC), id=0, broker=pb.Broker(name="broker-a")
        ),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=batch,
        invisible_duration=Duration(seconds=10),
        long_polling_timeout=Duration(seconds=0),
        attempt_id=attempt,
    )


async def receive(svc: ProxyService, group: str, attempt: str = "") -> list[pb.Message]:
    out = await svc.handle(FakeCall("ReceiveMessage", receive_req(group, attempt)))
    return [r.message for r in out if r.HasField("message")]


async def ack(svc: ProxyService, group: str, msgs: list[pb.Message]) -> None:
    req = spb.AckMessageRequest(
        group=pb.Resource(name=group),
        topic=pb.Resource(name=TOPIC),
        entries=[
            spb.AckMessageEntry(
                message_id=m.system_properties.message_id,
                receipt_handle=m.system_properties.receipt_handle,
            )
            for m in msgs
        ],
    )
    resp = await svc.handle(FakeCall("AckMessage", req))
    assert resp.status.code == pb.OK, resp


def bodies(msgs: list[pb.Message]) -> list[str]:
    return [m.body.decode() for m in msgs]


async def settings_of(svc: ProxyService, group: str) -> pb.Settings:
    cmd = spb.TelemetryCommand(
        settings=pb.Settings(
            client_type=pb.PUSH_CONSUMER,
            subscription=pb.Subscription(group=pb.Resource(name=group)),
        )
    )
    out = await svc.handle(FakeCall("Telemetry", cmd))
    assert out.status.code == pb.OK
    return out.settings


async def test_a_consume_message_orderly_group_receives_in_order_through_the_proxy(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h, proxy(h) as svc:
        await admin(h, "updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2")
        await admin(h, "updateSubGroup", "-c", "DefaultCluster", "-g", "FifoG", "-o", "true")
        await admin(h, "updateSubGroup", "-c", "DefaultCluster", "-g", "PlainG")
        for i in range(5):
            r = await h.send(TOPIC, f"m{i}".encode(), queue_id=1)
            assert r.code == ResponseCode.SUCCESS
        # the settings answer and the assignments follow the group's config
        assert (await settings_of(svc, "FifoG")).subscription.fifo
        assert not (await settings_of(svc, "PlainG")).subscription.fifo
        req = spb.QueryAssignmentRequest(
            topic=pb.Resource(name=TOPIC), group=pb.Resource(name="FifoG")
        )
        out = await svc.handle(FakeCall("QueryAssignment", req))
        assert [a.message_queue.id for a in out.assignments] == [0, 1]
        req.group.name = "PlainG"
        out = await svc.handle(FakeCall("QueryAssignment", req))
        assert [a.message_queue.id for a in out.assignments] == [-1]
        # FIFO: one batch at a time, the next only after the last is acked
        first = await receive(svc, "FifoG", attempt="r1")
        assert bodies(first) == ["m0", "m1", "m2"]
        assert all(m.system_properties.message_group == "" for m in first)  # no SHARDING_KEY
        assert await receive(svc, "FifoG", attempt="r2") == []
        retried = await receive(svc, "FifoG", attempt="r1")  # a lost answer, asked again
        assert bodies(retried) == ["m0", "m1", "m2"]
        await ack(svc, "FifoG", retried[:1])  # the retried receive's receipts are the ones
        assert await receive(svc, "FifoG", attempt="r3") == []
        await trio.sleep(10.5)  # m1, m2 were not acked: they come again first
        again = await receive(svc, "FifoG", attempt="r4")
        assert bodies(again) == ["m1", "m2", "m3"]
        assert [m.system_properties.delivery_attempt for m in again] == [2, 2, 1]
        # a message the client gives up on goes to the DLQ, which acks it: the queue moves on
        dlq = again[0]
        req = spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name="FifoG"),
            topic=pb.Resource(name=TOPIC),
            receipt_handle=dlq.system_properties.receipt_handle,
            message_id=dlq.system_properties.message_id,
            delivery_attempt=2,
            max_delivery_attempts=2,
        )
        assert (
            await svc.handle(FakeCall("ForwardMessageToDeadLetterQueue", req))
        ).status.code == pb.OK
        await ack(svc, "FifoG", again[1:])
        assert bodies(await receive(svc, "FifoG", attempt="r5")) == ["m4"]
        # a plain group on the same topic: unordered POP, everything at once
        plain = await receive(svc, "PlainG")
        assert bodies(plain) == ["m0", "m1", "m2"]
        assert bodies(await receive(svc, "PlainG")) == ["m3", "m4"]
