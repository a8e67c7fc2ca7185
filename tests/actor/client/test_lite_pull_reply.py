"""Lite pull (LITE_PULL_MESSAGE, 361) and request-reply (324/325 -> 326) with the project's own
clients against a real NameServer and Broker (SimNetwork, MockClock)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.client.admin import wait_for_route
from rocketrio.actors.client.config_admin import update_broker_config
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.message import ConsumeStatus, Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.pull_consumer import LitePullConsumer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.client.request_reply import (
    CreateReplyError,
    RequestFutures,
    RequestTimeout,
    create_reply_message,
)
from rocketrio.actors.kernel.remoting import RemotingClient, RequestContext
from rocketrio.protocol.bodies import HeartbeatData, MessageQueue, ProducerData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_LITE_PULL,
    PULL_FLAG_SUBSCRIPTION,
    PullMessageRequestHeader,
)
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.reply import (
    PROPERTY_CORRELATION_ID,
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_MESSAGE_TTL,
    PROPERTY_PUSH_REPLY_TIME,
)
from rocketrio.protocol.serde import to_ext, to_json
from tests.harness.clients import Cluster, cluster, create_topic, send_all, wait_for
from tests.harness.static_topic import T as ST
from tests.harness.static_topic import leaders, route_until, static_topic

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


async def poll_until(pc: LitePullConsumer, n: int, limit_s: float = 120) -> list[MessageExt]:
    """Poll until ``n`` messages came (a failure after ``limit_s`` of mock time)."""
    got: list[MessageExt] = []
    with trio.fail_after(limit_s):
        while len(got) < n:
            got.extend(await pc.poll(timeout=10))
    return got


async def _lite_pull(c: Cluster, topic: str, offset: int) -> RemotingCommand:
    """One raw LITE_PULL_MESSAGE as the Java DefaultLitePullConsumer sends it."""
    h = PullMessageRequestHeader(
        consumerGroup="raw",
        topic=topic,
        queueId=0,
        queueOffset=offset,
        maxMsgNums=32,
        sysFlag=PULL_FLAG_SUBSCRIPTION | PULL_FLAG_LITE_PULL,
        commitOffset=0,
        suspendTimeoutMillis=0,
        subVersion=0,
        subscription="*",
        expressionType="TAG",
    )
    cmd = RemotingCommand(code=RequestCode.LITE_PULL_MESSAGE, ext_fields=to_ext(h))
    async with RemotingClient(c.net.transport(c.client_host())) as rc:
        return await rc.invoke(c.addr("broker-a"), cmd, 5.0)


async def test_lite_pull_message_is_served_like_pull(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=1)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, "T", [f"m{i}".encode() for i in range(5)])
        resp = await _lite_pull(c, "T", 0)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert resp.ext_fields["nextBeginOffset"] == "5"
        assert resp.remark == "FOUND"


async def test_lite_pull_refused_when_disabled_and_the_consumer_gets_nothing(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        await c.start_broker("broker-a", "10.0.1.1", litePullMessageEnable=False)
        await create_topic(c, "T", queues=1)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, "T", [b"x"])
        resp = await _lite_pull(c, "T", 0)
        assert resp.code == ResponseCode.NO_PERMISSION
        assert resp.remark == "the broker[10.0.1.1] for lite pull consumer is forbidden"
        # the project's lite pull consumer sends 361 too, so it is refused like the Java one;
        # the push consumer (PULL_MESSAGE) is not
        pc = LitePullConsumer(
            "lg", c.ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **c.kwargs()
        )
        pc.assign([MessageQueue("T", "broker-a", 0)])
        async with pc:
            assert await pc.poll(timeout=10) == []
        got: list[bytes] = []

        def listener(msgs: list[MessageExt]) -> ConsumeStatus:
            got.extend(m.body for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        push = PushConsumer(
            "pushg", c.ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **c.kwargs()
        )
        push.subscribe("T", "*")
        push.register_listener(listener)
        async with push:
            await wait_for(lambda: got == [b"x"])
        # a live key (UPDATE_BROKER_CONFIG): served from the next request on
        async with c.admin() as admin:
            await update_broker_config(admin, c.addr("broker-a"), {"litePullMessageEnable": "true"})
        assert (await _lite_pull(c, "T", 0)).code == ResponseCode.SUCCESS


async def test_lite_pull_subscribe_poll_commit_and_resume(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        bodies = [f"s{i}".encode() for i in range(40)]
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, "T", bodies)
        kw = {"consume_from_where": "CONSUME_FROM_FIRST_OFFSET", "auto_commit": False}
        first = LitePullConsumer("sg", c.ns_addr, **kw, **c.kwargs())  # type: ignore[arg-type]
        first.subscribe("T", "*")
        async with first:
            got = [m.body for m in await poll_until(first, 40)]
            await first.commit()
            mqs = await first.fetch_message_queues("T")
            committed = [await first.committed(mq) for mq in mqs]
        assert sorted(got) == sorted(bodies)
        assert sum(committed) == 40
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, "T", [b"late"])
        again = LitePullConsumer("sg", c.ns_addr, **kw, **c.kwargs())  # type: ignore[arg-type]
        again.subscribe("T", "*")
        async with again:
            rest: list[bytes] = []
            with trio.move_on_after(15):
                while True:
                    rest.extend(m.body for m in await again.poll(timeout=1))
        assert rest == [b"late"]  # resumed at the committed offsets: nothing twice


async def test_lite_pull_assign_and_seek(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=1)
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, "T", [f"a{i}".encode() for i in range(10)])
        mq = MessageQueue("T", "broker-a", 0)
        pc = LitePullConsumer(
            "ag", c.ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **c.kwargs()
        )
        pc.assign([mq])
        async with pc:
            await pc.seek(mq, 7)
            got = [m.body for m in await poll_until(pc, 3)]
            assert got == [b"a7", b"a8", b"a9"]
            await pc.seek_to_begin(mq)
            again = [m.body for m in await poll_until(pc, 10)]
            assert again == [f"a{i}".encode() for i in range(10)]
            with pytest.raises(MQClientError, match="outside"):
                await pc.seek(mq, 11)


def _responder(c: Cluster, producer: Producer, topic: str = "Rpc") -> PushConsumer:
    async def answer(msgs: list[MessageExt]) -> ConsumeStatus:
        for m in msgs:
            await producer.send(create_reply_message(m, b"re:" + m.body))
        return ConsumeStatus.CONSUME_SUCCESS

    pc = PushConsumer("responders", c.ns_addr, **c.kwargs())
    pc.subscribe(topic, "*")
    pc.register_listener(answer)
    return pc


async def test_request_gets_its_reply_pushed_and_stored(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "Rpc", queues=2)
        async with c.admin() as admin:
            route = await wait_for_route(admin, REPLY_TOPIC)  # created by the broker itself
        assert [q.readQueueNums for q in route.queueDatas] == [1]
        async with (
            Producer("reply-pg", c.ns_addr, **c.kwargs()) as rp,
            _responder(c, rp),
            Producer("req-pg", c.ns_addr, **c.kwargs()) as p,
        ):
            replies: dict[int, MessageExt] = {}

            async def ask(i: int) -> None:
                replies[i] = await p.request(Message("Rpc", f"q{i}".encode()), timeout=30)

            async with trio.open_nursery() as n:
                for i in range(10):
                    n.start_soon(ask, i)
            assert RequestFutures.of(p.client).table == {}
        assert {i: r.body for i, r in replies.items()} == {
            i: f"re:q{i}".encode() for i in range(10)
        }
        r = replies[0]
        assert r.topic == REPLY_TOPIC
        assert r.properties["MSG_TYPE"] == "reply"
        assert r.properties[PROPERTY_MESSAGE_REPLY_TO_CLIENT] == p.client.client_id
        assert r.properties[PROPERTY_MESSAGE_TTL] == "30000"
        assert PROPERTY_PUSH_REPLY_TIME in r.properties
        ids = {m.properties[PROPERTY_CORRELATION_ID] for m in replies.values()}
        assert len(ids) == 10
        view = c.brokers["broker-a"].store.view
        assert view.get_max_offset(REPLY_TOPIC, 0) == 10  # storeReplyMessageEnable=true


async def test_reply_not_stored_when_disabled(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        await c.start_broker("broker-a", "10.0.1.1", storeReplyMessageEnable=False)
        await create_topic(c, "Rpc", queues=1)
        async with (
            Producer("reply-pg", c.ns_addr, **c.kwargs()) as rp,
            _responder(c, rp),
            Producer("req-pg", c.ns_addr, **c.kwargs()) as p,
        ):
            reply = await p.request(Message("Rpc", b"q"), timeout=30)
            to_queue = await p.request(
                Message("Rpc", b"q0"), timeout=30, queue=MessageQueue("Rpc", "broker-a", 0)
            )
        assert reply.body == b"re:q"
        assert to_queue.body == b"re:q0"
        assert c.brokers["broker-a"].store.view.get_max_offset(REPLY_TOPIC, 0) == 0


async def test_request_without_responder_times_out_as_upstream(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "Rpc", queues=1)
        async with Producer("req-pg", c.ns_addr, **c.kwargs()) as p:
            started = trio.current_time()
            with pytest.raises(RequestTimeout, match="OK, but wait reply message timeout, 3000 ms"):
                await p.request(Message("Rpc", b"q"), timeout=3)
            assert 3 - 1e-6 <= trio.current_time() - started <= 3 + 1e-6
            assert RequestFutures.of(p.client).table == {}
            # the late reply: the broker pushes it, the client acknowledges and drops it
            async with Producer("reply-pg", c.ns_addr, **c.kwargs()) as rp, _responder(c, rp):
                await trio.sleep(20)
        assert c.brokers["broker-a"].store.view.get_max_offset(REPLY_TOPIC, 0) == 1


async def test_failed_request_send_fails_at_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        await c.start_broker("broker-a", "10.0.1.1", autoCreateTopicEnable=False)
        async with Producer("req-pg", c.ns_addr, **c.kwargs()) as p:
            started = trio.current_time()
            with pytest.raises(MQClientError, match="send request message to <Nope> fail"):
                await p.request(Message("Nope", b"q"), timeout=3)
            assert trio.current_time() - started <= 3


async def test_reply_for_an_unknown_client_is_refused_with_upstreams_remark(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        request = MessageExt(
            "Rpc",
            b"q",
            properties={
                "CLUSTER": "DefaultCluster",
                PROPERTY_CORRELATION_ID: "c-1",
                PROPERTY_MESSAGE_REPLY_TO_CLIENT: "10.9.9.9@ghost",
                PROPERTY_MESSAGE_TTL: "3000",
            },
        )
        async with Producer("reply-pg", c.ns_addr, **c.kwargs()) as rp:
            with pytest.raises(MQClientError) as err:  # SYSTEM_ERROR is retried, as upstream
                await rp.send(create_reply_message(request, b"a"))
        cause = err.value.__cause__
        assert isinstance(cause, MQBrokerError)
        assert cause.code == ResponseCode.SYSTEM_ERROR
        assert cause.remark == "push reply message fail, channel of <10.9.9.9@ghost> not found."
        with pytest.raises(CreateReplyError, match=r"property\[CLUSTER\] is null"):
            create_reply_message(MessageExt("Rpc", b"q"), b"a")


async def test_lite_pull_pause_resume_commit_offsets_and_offset_for_timestamp(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=1)
        mq = MessageQueue("T", "broker-a", 0)
        pc = LitePullConsumer(
            "pg2", c.ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", auto_commit=False,
            **c.kwargs(),
        )  # fmt: skip
        pc.assign([mq])
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p, pc:
            await send_all(p, "T", [f"a{i}".encode() for i in range(5)])
            assert len(await poll_until(pc, 5)) == 5
            pc.pause([mq])
            assert pc.is_paused(mq)
            await trio.sleep(60)  # the pull held at the broker comes back empty meanwhile
            await send_all(p, "T", [f"b{i}".encode() for i in range(5)])
            assert await pc.poll(timeout=10) == []
            pc.resume([mq])
            later = [m.body for m in await poll_until(pc, 5)]
            assert later == [f"b{i}".encode() for i in range(5)]
            await pc.commit({mq: 3})
            assert await pc.committed(mq) == 3
            assert await pc.offset_for_timestamp(mq, 0) == 0


async def test_a_requester_that_does_not_take_the_push_fails_the_reply_after_10_s(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:

        async def never_answers(ctx: RequestContext) -> RemotingCommand | None:
            await trio.sleep_forever()
            return None

        slow = "10.0.9.99@slow"
        request = MessageExt(
            "Rpc", b"q", properties={"CLUSTER": "DefaultCluster", PROPERTY_CORRELATION_ID: "c-1",
                                     PROPERTY_MESSAGE_REPLY_TO_CLIENT: slow},
        )  # fmt: skip
        reply = create_reply_message(request, b"a")
        async with RemotingClient(c.net.transport("10.0.9.99"), processor=never_answers) as rc:
            hb = HeartbeatData(clientID=slow, producerDataSet=[ProducerData("slow-pg")])
            cmd = RemotingCommand(code=RequestCode.HEART_BEAT, body=to_json(hb))
            assert (await rc.invoke(c.addr("broker-a"), cmd, 5.0)).code == ResponseCode.SUCCESS
            async with Producer("reply-pg", c.ns_addr, **c.kwargs()) as rp:
                started = trio.current_time()
                with pytest.raises(MQClientError) as err:
                    await rp.send(reply, timeout=60)
                took = trio.current_time() - started
        cause = err.value.__cause__
        assert isinstance(cause, MQBrokerError)
        assert (cause.code, cause.remark) == (
            ResponseCode.SYSTEM_ERROR, f"push reply message to {slow}fail.",
        )  # fmt: skip
        assert 30 <= took < 31  # three attempts (SYSTEM_ERROR is retried), 10 s push timeout each


async def test_replies_reach_the_requester_through_either_broker(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The request topic on broker-a only, no auto-create: the responder's replies go round
    robin to both brokers' reply topics, and both must know the requester."""
    async with cluster(tmp_path, ()) as c:
        for i, name in enumerate(("broker-a", "broker-b")):
            await c.start_broker(name, f"10.0.1.{i + 1}", autoCreateTopicEnable=False)
        async with c.admin() as admin:
            await admin.update_topic(
                "Rpc", broker_addr=c.addr("broker-a"), read_queues=1, write_queues=1
            )
            await wait_for_route(admin, "Rpc")
            route = await wait_for_route(admin, REPLY_TOPIC)
        assert sorted(b.brokerName for b in route.brokerDatas) == ["broker-a", "broker-b"]
        async with (
            Producer("reply-pg", c.ns_addr, **c.kwargs()) as rp,
            _responder(c, rp),
            Producer("req-pg", c.ns_addr, **c.kwargs()) as p,
        ):
            for i in range(6):
                reply = await p.request(Message("Rpc", f"q{i}".encode()), timeout=30)
                assert reply.body == f"re:q{i}".encode()
        views = [c.brokers[n].store.view for n in ("broker-a", "broker-b")]
        assert [v.get_max_offset(REPLY_TOPIC, 0) for v in views] == [3, 3]


async def test_lite_pull_reads_a_static_topics_logic_queues(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """361 goes through the static-topic wrapper like 11: logic queues, logic offsets."""
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        await route_until(admin, lambda r: len(leaders(r)) == 8)
        bodies = [f"st{i}".encode() for i in range(40)]
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            await send_all(p, ST, bodies)
        pc = LitePullConsumer(
            "stg", c.ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **c.kwargs()
        )
        pc.subscribe(ST, "*")
        async with pc:
            got = await poll_until(pc, 40)
        assert sorted(m.body for m in got) == sorted(bodies)
        per_queue: dict[int, list[int]] = {}
        for m in got:
            per_queue.setdefault(m.queue_id, []).append(m.queue_offset)
        assert sorted(per_queue) == list(range(8))  # logic queue ids, each from offset 0 on
        assert all(sorted(o) == list(range(len(o))) for o in per_queue.values())
