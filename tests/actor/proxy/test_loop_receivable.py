"""What the Trio path tells the gRPC loop (`ProxyService.loop_receivable`, loop_receive.py)
against a real broker on SimNetwork + MockClock: after a receive that was one unordered POP
of the broker set the request names, the loop may take the (group, topic)'s receives for the
group config cache's time; never a FIFO group's (ordered POPs with attempt ids), an auto-renew
receive's (the renewer tracks its handles), a SQL filter's, or one that names no broker set."""

from __future__ import annotations

from typing import Any

import attrs
import structlog.testing
import trio
import trio.testing
from google.protobuf.duration_pb2 import Duration

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.proxy.group_config import TTL_S
from rocketrio.actors.proxy.service import ProxyConfig, ProxyService
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from tests.harness.broker import BrokerHarness, harness

TOPIC = "LoopRecvT"


@attrs.define
class FakeCall:
    """What ProxyService's handlers read of a gRPC call."""

    method: str
    request: Any
    metadata: dict[str, str] = attrs.field(factory=lambda: {"x-mq-client-id": "c1"})
    push: Any = None


async def admin(h: BrokerHarness, *args: str) -> None:
    with structlog.testing.capture_logs():
        code = await main_async(
            ["admin", *args, "-n", h.namesrv_addr], Wiring(h.net.transport("10.0.0.61"))
        )
    assert code == 0


def receive_req(group: str, attempt: str = "") -> spb.ReceiveMessageRequest:
    return spb.ReceiveMessageRequest(
        group=pb.Resource(name=group),
        message_queue=pb.MessageQueue(
            topic=pb.Resource(name=TOPIC), id=0, broker=pb.Broker(name="broker-a")
        ),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=3,
        invisible_duration=Duration(seconds=10),
        long_polling_timeout=Duration(seconds=0),
        attempt_id=attempt,
    )


async def test_trio_allows_the_loop_unordered_pops_of_a_named_set_only(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    transport_host = "10.0.0.60"
    config = ClientConfig(clientIP=transport_host, instanceName="proxy")
    async with (
        harness(tmp_path) as h,
        MQClientInstance(
            h.namesrv_addr, transport=h.net.transport(transport_host), config=config
        ) as client,
    ):
        svc = ProxyService(
            ProxyConfig(h.namesrv_addr, host=transport_host), client, TelemetryRegistry()
        )
        await admin(h, "updateTopic", "-c", "DefaultCluster", "-t", TOPIC, "-r", "2", "-w", "2")
        await admin(h, "updateSubGroup", "-c", "DefaultCluster", "-g", "FifoG", "-o", "true")
        await admin(h, "updateSubGroup", "-c", "DefaultCluster", "-g", "PlainG")
        for i in range(4):
            assert (await h.send(TOPIC, f"m{i}".encode(), queue_id=1)).code == ResponseCode.SUCCESS
        allowed: list[tuple[str, str, int]] = []
        svc.loop_receivable = lambda g, t, until: allowed.append((g, t, until))

        async def receive(req: Any) -> list[int]:
            out = await svc.handle(FakeCall("ReceiveMessage", req))
            return [r.status.code for r in out if r.HasField("status")]

        assert await receive(receive_req("FifoG", attempt="a1")) == [pb.OK]
        sql = receive_req("PlainG")
        sql.filter_expression.type, sql.filter_expression.expression = pb.SQL, "TRUE"
        unnamed = receive_req("PlainG")
        unnamed.message_queue.ClearField("broker")
        renewing = receive_req("PlainG")
        renewing.auto_renew = True
        for req in (sql, unnamed, renewing):
            await receive(req)
        assert allowed == []  # FIFO, SQL, no broker set, auto renewal: Trio's own
        before = svc.now_ms()
        await receive(receive_req("PlainG"))
        [(group, topic, until)] = allowed
        assert (group, topic) == ("PlainG", TOPIC)
        assert before + TTL_S * 1000 <= until <= svc.now_ms() + TTL_S * 1000
