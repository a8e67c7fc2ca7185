"""SendMessage and one-entry AckMessage without a Trio task (`ProxyService.start_nowait`,
`GrpcBridge.fast`), through a real gRPC channel (grpcio client on loopback -> GrpcBridge ->
ProxyService -> a real broker on the simulated network): once the route is known, sends are
started from the bridge and answered from the broker's response; each answer's offset is where
the broker stored that message; a refusal is answered on that path too; a broker that does not
answer fails the send at its deadline and the proxy goes on. Acks of one entry each take the
same path, and what they acked is never delivered again while the rest is; a bad handle still
gets its own status (task path)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import grpc
import trio
from google.protobuf.duration_pb2 import Duration

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.proxy.grpc_bridge import Call, GrpcBridge, serve_calls
from rocketrio.actors.proxy.service import ProxyConfig, ProxyService, overflow_response
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc
from rocketrio.protocol.message import UNIQ_KEY
from tests.harness.broker import BROKER_HOST, BrokerHarness, harness, messages
from tests.harness.clock import now_ms

TOPIC = "FastT"
PROXY_HOST = "10.0.0.60"
META = (("x-mq-client-id", "fast-client"),)


@attrs.define
class Proxied:
    service: ProxyService
    stub: Any
    fast_taken: list[str] = attrs.Factory(list)  # calls the task-free path took

    async def send(self, i: int, body: bytes = b"x") -> Any:
        msg = pb.Message(
            topic=pb.Resource(name=TOPIC),
            system_properties=pb.SystemProperties(message_id=f"FAST{i:04d}"),
            body=body,
        )
        req = spb.SendMessageRequest(messages=[msg])
        return await trio.to_thread.run_sync(
            lambda: self.stub.SendMessage(req, metadata=META, timeout=30)
        )

    async def receive(self, group: str, n: int, invisible_s: int) -> list[Any]:
        req = spb.ReceiveMessageRequest(
            group=pb.Resource(name=group),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            batch_size=n,
            invisible_duration=Duration(seconds=invisible_s),
            long_polling_timeout=Duration(seconds=1),
        )
        stream = await trio.to_thread.run_sync(
            lambda: list(self.stub.ReceiveMessage(req, metadata=META, timeout=30))
        )
        return [r.message for r in stream if r.WhichOneof("content") == "message"]

    async def ack(self, group: str, message_id: str, handle: str) -> Any:
        entry = spb.AckMessageEntry(message_id=message_id, receipt_handle=handle)
        req = spb.AckMessageRequest(
            group=pb.Resource(name=group), topic=pb.Resource(name=TOPIC), entries=[entry]
        )
        return await trio.to_thread.run_sync(
            lambda: self.stub.AckMessage(req, metadata=META, timeout=30)
        )


@asynccontextmanager
async def proxied(h: BrokerHarness, max_body_size: int = 4 << 20) -> AsyncIterator[Proxied]:
    """A proxy wired as run_proxy wires it (the bridge's fast path, the late-send expiry)."""
    config = ClientConfig(clientIP=PROXY_HOST, instanceName="proxy")
    proxy_config = ProxyConfig(h.namesrv_addr, host="127.0.0.1", max_body_size=max_body_size)
    async with (
        MQClientInstance(h.namesrv_addr, transport=h.net.transport(PROXY_HOST), config=config) as c,
        GrpcBridge("127.0.0.1", 0, overflow_response) as bridge,
        trio.open_nursery() as nursery,
    ):
        service = ProxyService(proxy_config, c, TelemetryRegistry(), now_ms)
        channel = grpc.insecure_channel(f"127.0.0.1:{bridge.port}")
        p = Proxied(service, sgrpc.MessagingServiceStub(channel))

        def fast(call: Call) -> bool:
            taken = service.start_nowait(call)
            if taken:
                p.fast_taken.append(call.method)
            return taken

        bridge.fast = fast
        nursery.start_soon(serve_calls, bridge.calls, service.handle)
        nursery.start_soon(service.sends.expire_late)
        try:
            yield p
        finally:
            channel.close()
            nursery.cancel_scope.cancel()


async def stored(h: BrokerHarness) -> dict[str, tuple[int, int]]:
    """UNIQ_KEY -> (queue id, queue offset) of every message of TOPIC in the broker."""
    out: dict[str, tuple[int, int]] = {}
    route = await h.route(TOPIC)
    assert route is not None
    for qd in route.queueDatas:
        for qid in range(qd.writeQueueNums):
            resp = await h.pull(TOPIC, qid, 0)
            if resp.code == ResponseCode.SUCCESS:
                for m in messages(resp):
                    out[m.properties.get(UNIQ_KEY, "")] = (m.queue_id, m.queue_offset)
    return out


async def topic_with_route(h: BrokerHarness) -> None:
    assert (await h.send(TOPIC, b"first", queue_id=0)).code == ResponseCode.SUCCESS
    with trio.fail_after(30):
        while await h.route(TOPIC) is None:
            await trio.sleep(0.05)


async def test_sends_go_task_free_once_the_route_is_known_and_offsets_are_stored_ones(
    tmp_path: Any,
) -> None:
    async with harness(tmp_path) as h:
        await topic_with_route(h)
        async with proxied(h) as p:
            answers = [await p.send(i) for i in range(12)]
            assert [a.status.code for a in answers] == [pb.OK] * 12
            # the first send found no cached route (task path); the others were task-free
            assert p.fast_taken == ["SendMessage"] * 11
            where = await stored(h)
            for i, a in enumerate(answers):
                [entry] = a.entries
                assert entry.message_id == f"FAST{i:04d}"
                assert entry.offset == where[entry.message_id][1]
            # round robin over the queues, as on the task path
            assert len({where[f"FAST{i:04d}"][0] for i in range(12)}) > 1


async def test_a_refused_send_is_answered_task_free_and_the_next_is_served(
    tmp_path: Any,
) -> None:
    async with harness(tmp_path) as h:
        await topic_with_route(h)
        async with proxied(h, max_body_size=2048) as p:
            assert (await p.send(0)).status.code == pb.OK  # caches the route
            big = await p.send(1, b"x" * 4096)
            assert big.status.code == pb.MESSAGE_BODY_TOO_LARGE
            assert p.fast_taken == ["SendMessage"]
            assert (await p.send(2)).status.code == pb.OK
            assert "FAST0001" not in await stored(h)


async def test_an_unanswered_send_fails_at_its_deadline_and_the_proxy_goes_on(
    tmp_path: Any,
) -> None:
    async with harness(tmp_path) as h:
        await topic_with_route(h)
        async with proxied(h) as p:
            p.service.sends.timeout_s = 0.5
            assert (await p.send(0)).status.code == pb.OK
            h.net.partition([PROXY_HOST], [BROKER_HOST])  # bytes held: no answer comes
            t0 = trio.current_time()
            late = await p.send(1)
            waited = trio.current_time() - t0
            assert late.status.code == pb.INTERNAL_SERVER_ERROR, late.status
            assert "timed out" in late.status.message
            assert 0.5 <= waited < 5.0
            assert p.fast_taken == ["SendMessage"]  # the first found no route cached
            assert len(p.service.sends.requests) == 0  # nothing left waiting
            h.net.heal()
            assert (await p.send(2)).status.code == pb.OK


async def test_acks_of_one_entry_go_task_free_and_only_the_unacked_comes_back(
    tmp_path: Any,
) -> None:
    async with harness(tmp_path) as h:
        for i in range(4):
            assert (await h.send(TOPIC, b"m%d" % i, queue_id=0)).code == ResponseCode.SUCCESS
        async with proxied(h) as p:
            got: list[Any] = []
            with trio.fail_after(60):
                while len(got) < 4:
                    got += await p.receive("AckG", 4, invisible_s=3)
            assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2", b"m3"]
            for m in got:
                if m.body != b"m2":
                    sp = m.system_properties
                    r = await p.ack("AckG", sp.message_id, sp.receipt_handle)
                    assert r.status.code == pb.OK and r.entries[0].status.code == pb.OK, r
                    assert r.entries[0].message_id == sp.message_id
            assert p.fast_taken == ["AckMessage"] * 3
            bad = await p.ack("AckG", "X", "not-a-handle")  # the task path: its own status
            assert bad.entries[0].status.code == pb.INVALID_RECEIPT_HANDLE
            assert p.fast_taken == ["AckMessage"] * 3
            again: list[Any] = []
            with trio.fail_after(60):
                while not again:
                    await trio.sleep(1)
                    again = await p.receive("AckG", 4, invisible_s=30)
            assert [m.body for m in again] == [b"m2"]
