"""The proxy's PullMessage, UpdateOffset, GetOffset and QueryOffset RPCs through a real gRPC
channel (grpcio client on loopback -> GrpcBridge -> ProxyService -> a real broker on the
simulated network): the pull stream's order (status, messages, next offset), offsets
stored and read back, BEGINNING / END / TIMESTAMP; bad input gets its status code and the
proxy serves the next good call. And AckMessage of many entries: one BATCH_ACK_MESSAGE to the
broker, yet every entry keeps its own status (a bad handle among good ones is refused alone),
and what was acknowledged is never delivered again while the rest is."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
import trio
from google.protobuf.duration_pb2 import Duration

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.proxy.grpc_bridge import GrpcBridge, serve_calls
from rocketrio.actors.proxy.service import ProxyConfig, ProxyService, overflow_response
from rocketrio.actors.proxy.telemetry import TelemetryRegistry
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc
from tests.harness.broker import BrokerHarness, harness
from tests.harness.clock import now_ms

TOPIC = "PullT"
GROUP = "PullG"
META = (("x-mq-client-id", "pull-client"),)


@asynccontextmanager
async def proxied(h: BrokerHarness) -> AsyncIterator[Callable[..., Any]]:
    """A proxy on loopback in front of the harness's broker; yields ``rpc(name, request)``,
    which calls MessagingService from a thread (a list for a streaming RPC)."""
    config = ClientConfig(clientIP="10.0.0.60", instanceName="proxy")
    async with (
        MQClientInstance(
            h.namesrv_addr, transport=h.net.transport("10.0.0.60"), config=config
        ) as client,
        GrpcBridge("127.0.0.1", 0, overflow_response) as bridge,
        trio.open_nursery() as nursery,
    ):
        service = ProxyService(
            ProxyConfig(h.namesrv_addr, host="127.0.0.1"), client, TelemetryRegistry(), now_ms
        )
        nursery.start_soon(serve_calls, bridge.calls, service.handle)
        channel = grpc.insecure_channel(f"127.0.0.1:{bridge.port}")
        stub = sgrpc.MessagingServiceStub(channel)

        async def rpc(name: str, request: Any) -> Any:
            def call() -> Any:
                answer = getattr(stub, name)(request, metadata=META, timeout=30)
                return list(answer) if name in ("PullMessage", "ReceiveMessage") else answer

            return await trio.to_thread.run_sync(call)

        rpc.channel = channel  # type: ignore[attr-defined]
        try:
            yield rpc
        finally:
            channel.close()
            nursery.cancel_scope.cancel()


def queue(broker: str, queue_id: int = 0, topic: str = TOPIC) -> pb.MessageQueue:
    return pb.MessageQueue(
        topic=pb.Resource(name=topic), id=queue_id, broker=pb.Broker(name=broker)
    )


def pull_req(mq: pb.MessageQueue, offset: int, batch: int = 32, tag: str = "*") -> Any:
    return spb.PullMessageRequest(
        group=pb.Resource(name=GROUP),
        message_queue=mq,
        offset=offset,
        batch_size=batch,
        filter_expression=pb.FilterExpression(type=pb.TAG, expression=tag),
        long_polling_timeout=Duration(seconds=0),
    )


def parts(stream: list[Any]) -> tuple[int, list[Any], int]:
    """(status code, messages, next offset) of a pull stream, checking its order."""
    kinds = [r.WhichOneof("content") for r in stream]
    assert kinds[0] == "status" and kinds[-1] == "next_offset", kinds
    assert set(kinds[1:-1]) <= {"message"}, kinds
    return stream[0].status.code, [r.message for r in stream[1:-1]], stream[-1].next_offset


async def fill(h: BrokerHarness, n: int) -> str:
    """``n`` messages into queue 0 of TOPIC, tags a / b alternating; the broker's name."""
    for i in range(n):
        r = await h.send(TOPIC, f"m{i}".encode(), tags="ab"[i % 2], queue_id=0)
        assert r.code == ResponseCode.SUCCESS
        await trio.sleep(0.02)  # distinct store times for the TIMESTAMP query
    route = await h.route(TOPIC)
    assert route is not None
    return route.brokerDatas[0].brokerName


async def test_pull_streams_status_then_messages_then_next_offset(tmp_path: Any) -> None:
    async with harness(tmp_path) as h, proxied(h) as rpc:
        broker = await fill(h, 4)
        code, msgs, nxt = parts(await rpc("PullMessage", pull_req(queue(broker), 0)))
        assert code == pb.OK and nxt == 4
        assert [m.body for m in msgs] == [b"m0", b"m1", b"m2", b"m3"]
        assert [m.system_properties.queue_offset for m in msgs] == [0, 1, 2, 3]
        # a batch of one from offset 1: the next offset is the one after it
        code, msgs, nxt = parts(await rpc("PullMessage", pull_req(queue(broker), 1, batch=1)))
        assert (code, [m.body for m in msgs], nxt) == (pb.OK, [b"m1"], 2)
        # the tag filter keeps the matching ones; the next offset passes the others too
        code, msgs, nxt = parts(await rpc("PullMessage", pull_req(queue(broker), 0, tag="b")))
        assert (code, [m.body for m in msgs], nxt) == (pb.OK, [b"m1", b"m3"], 4)
        # caught up: nothing yet, and where to go on
        code, msgs, nxt = parts(await rpc("PullMessage", pull_req(queue(broker), 4)))
        assert (code, msgs, nxt) == (pb.MESSAGE_NOT_FOUND, [], 4)
        # far past the end of the queue: ILLEGAL_OFFSET with the broker's correction (upstream's
        # store: the min offset when it is 0)
        code, msgs, nxt = parts(await rpc("PullMessage", pull_req(queue(broker), 100)))
        assert (code, msgs, nxt) == (pb.ILLEGAL_OFFSET, [], 0)


async def test_offsets_stored_read_back_and_queried_by_policy(tmp_path: Any) -> None:
    async with harness(tmp_path) as h, proxied(h) as rpc:
        broker = await fill(h, 3)
        mq = queue(broker)
        group = pb.Resource(name=GROUP)
        # none stored yet: the broker answers 0 while the queue still starts at 0 (upstream's
        # ConsumerManageProcessor)
        r = await rpc("GetOffset", spb.GetOffsetRequest(group=group, message_queue=mq))
        assert (r.status.code, r.offset) == (pb.OK, 0)
        r = await rpc(
            "UpdateOffset", spb.UpdateOffsetRequest(group=group, message_queue=mq, offset=2)
        )
        assert r.status.code == pb.OK
        r = await rpc("GetOffset", spb.GetOffsetRequest(group=group, message_queue=mq))
        assert (r.status.code, r.offset) == (pb.OK, 2)

        async def query(policy: int, **kw: Any) -> tuple[int, int]:
            req = spb.QueryOffsetRequest(message_queue=mq, query_offset_policy=policy, **kw)
            r = await rpc("QueryOffset", req)
            return r.status.code, r.offset

        assert await query(pb.BEGINNING) == (pb.OK, 0)
        assert await query(pb.END) == (pb.OK, 3)
        _, msgs, _ = parts(await rpc("PullMessage", pull_req(mq, 0)))
        stamp = msgs[1].system_properties.store_timestamp
        assert await query(pb.TIMESTAMP, timestamp=stamp) == (pb.OK, 1)
        assert (await query(pb.TIMESTAMP))[0] == pb.BAD_REQUEST  # no timestamp given


async def test_bad_input_gets_its_status_and_the_next_good_call_is_served(tmp_path: Any) -> None:
    async with harness(tmp_path) as h, proxied(h) as rpc:
        broker = await fill(h, 1)
        group = pb.Resource(name=GROUP)
        good = spb.GetOffsetRequest(group=group, message_queue=queue(broker))
        bad: list[tuple[str, Any, int]] = [
            ("PullMessage", pull_req(queue(broker, topic="NoSuchTopic"), 0), pb.TOPIC_NOT_FOUND),
            ("PullMessage", pull_req(queue(""), 0), pb.BAD_REQUEST),
            ("PullMessage", pull_req(queue(broker), -1), pb.ILLEGAL_OFFSET),
            (
                "PullMessage",
                spb.PullMessageRequest(message_queue=queue(broker), offset=0),
                pb.ILLEGAL_CONSUMER_GROUP,
            ),
            (
                "UpdateOffset",
                spb.UpdateOffsetRequest(message_queue=queue(broker), offset=1),
                pb.ILLEGAL_CONSUMER_GROUP,
            ),
            (
                "ReceiveMessage",
                spb.ReceiveMessageRequest(message_queue=queue(broker), batch_size=1),
                pb.ILLEGAL_CONSUMER_GROUP,
            ),
            (
                "AckMessage",
                spb.AckMessageRequest(
                    topic=pb.Resource(name=TOPIC),
                    entries=[spb.AckMessageEntry(message_id="X", receipt_handle="x")],
                ),
                pb.ILLEGAL_CONSUMER_GROUP,
            ),
            (
                "ChangeInvisibleDuration",
                spb.ChangeInvisibleDurationRequest(
                    group=group,
                    topic=pb.Resource(name=TOPIC),
                    receipt_handle="not-a-handle",
                    invisible_duration=Duration(seconds=5),
                ),
                pb.INVALID_RECEIPT_HANDLE,
            ),
            (
                "QueryOffset",
                spb.QueryOffsetRequest(message_queue=queue(broker, topic="")),
                pb.ILLEGAL_TOPIC,
            ),
        ]
        for name, request, want in bad:
            answer = await rpc(name, request)
            got = (answer[0] if isinstance(answer, list) else answer).status.code
            assert got == want, (name, got, want)
            assert (await rpc("GetOffset", good)).status.code == pb.OK
        # bytes that are no protobuf, to a streaming and a unary method: grpcio refuses them
        # before any handler (UNKNOWN), and the proxy goes on serving
        channel = rpc.channel  # type: ignore[attr-defined]
        for method, stream in (("PullMessage", True), ("GetOffset", False)):
            path = f"/apache.rocketmq.v2.MessagingService/{method}"
            raw = channel.unary_stream(path) if stream else channel.unary_unary(path)

            def garbage(raw: Any = raw, stream: bool = stream) -> grpc.StatusCode:
                try:
                    answer = raw(b"\xff\xff\xff\xff", metadata=META, timeout=30)
                    if stream:
                        list(answer)
                except grpc.RpcError as e:
                    return e.code()
                return grpc.StatusCode.OK

            assert await trio.to_thread.run_sync(garbage) == grpc.StatusCode.UNKNOWN
            assert (await rpc("GetOffset", good)).status.code == pb.OK


async def test_sql92_filter_expression_on_pull_and_receive(tmp_path: Any) -> None:
    """A SQL FilterExpression reaches the broker as a SQL92 subscription (PullMessage and
    ReceiveMessage); one that does not compile is ILLEGAL_FILTER_EXPRESSION, by name."""
    async with harness(tmp_path, enablePropertyFilter=True) as h, proxied(h) as rpc:
        for i in range(6):
            r = await h.send(TOPIC, f"m{i}".encode(), props={"n": str(i)}, queue_id=0)
            assert r.code == ResponseCode.SUCCESS
        route = await h.route(TOPIC)
        assert route is not None
        broker = route.brokerDatas[0].brokerName
        req = pull_req(queue(broker), 0)
        req.filter_expression.CopyFrom(pb.FilterExpression(type=pb.SQL, expression="n >= 3"))
        code, msgs, nxt = parts(await rpc("PullMessage", req))
        assert (code, [m.body for m in msgs], nxt) == (pb.OK, [b"m3", b"m4", b"m5"], 6)
        req.filter_expression.expression = "n >"
        answer = await rpc("PullMessage", req)
        assert answer[0].status.code == pb.ILLEGAL_FILTER_EXPRESSION
        assert "ParseException" in answer[0].status.message
        receive = spb.ReceiveMessageRequest(
            group=pb.Resource(name=GROUP),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
            filter_expression=pb.FilterExpression(type=pb.SQL, expression="n < 2"),
            batch_size=16,
            invisible_duration=Duration(seconds=30),
            long_polling_timeout=Duration(seconds=0),
        )
        got = [
            r.message.body for r in await rpc("ReceiveMessage", receive) if r.HasField("message")
        ]
        assert got == [b"m0", b"m1"]


def receive_req_of(batch: int, invisible_s: int) -> Any:
    return spb.ReceiveMessageRequest(
        group=pb.Resource(name=GROUP),
        message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=batch,
        invisible_duration=Duration(seconds=invisible_s),
        long_polling_timeout=Duration(seconds=1),
    )


def messages_of(stream: list[Any]) -> list[Any]:
    return [r.message for r in stream if r.WhichOneof("content") == "message"]


async def test_many_entries_one_batch_each_entry_its_own_status(tmp_path: Any) -> None:
    async with harness(tmp_path) as h, proxied(h) as rpc:
        await fill(h, 4)
        got = messages_of(await rpc("ReceiveMessage", receive_req_of(4, 8)))
        assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2", b"m3"]
        keep = next(m for m in got if m.body == b"m2")  # not acknowledged: comes back
        entries = [
            spb.AckMessageEntry(
                message_id=m.system_properties.message_id,
                receipt_handle=m.system_properties.receipt_handle,
            )
            for m in got
            if m is not keep
        ]
        entries.insert(1, spb.AckMessageEntry(message_id="bad", receipt_handle="not-a-handle"))
        r = await rpc(
            "AckMessage",
            spb.AckMessageRequest(
                group=pb.Resource(name=GROUP), topic=pb.Resource(name=TOPIC), entries=entries
            ),
        )
        codes = [e.status.code for e in r.entries]
        assert codes == [pb.OK, pb.INVALID_RECEIPT_HANDLE, pb.OK, pb.OK], r
        assert [e.message_id for e in r.entries] == [e.message_id for e in entries]
        assert r.status.code == pb.MULTIPLE_RESULTS
        # once the invisible time is over, only the unacknowledged one is delivered again
        await trio.sleep(8)
        again: list[Any] = []
        for _ in range(30):
            again += messages_of(await rpc("ReceiveMessage", receive_req_of(4, 20)))
            if again:
                break
            await trio.sleep(1)
        assert [m.body for m in again] == [b"m2"]
