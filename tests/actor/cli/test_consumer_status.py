"""`rocketrio admin consumerStatus` in-process against a NameServer, a controller and a broker on
the simulated network (MockClock), with a live push consumer under load: the broker passes
GET_CONSUMER_RUNNING_INFO (307) on to the consumer and returns its ConsumerRunningInfo (queues
with their commit offsets, consume TPS), QUERY_CONSUME_TIME_SPAN (303) through MQAdmin, and the
refusals: a client id that is not online, a client that never answers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.orderly import ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import OrderlyPushConsumer
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.kernel.remoting import RemotingClient, RequestContext
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.running_info import PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE
from tests.harness.admin_cli import HOST, Capture, admin, start_broker_node
from tests.harness.replication import cluster

BROKER = "10.0.2.1:10911"
SENT = 120


def _consumer(ns: str, c: Any, got: list[Any]) -> PushConsumer:
    def listener(msgs: list[Any]) -> ConsumeStatus:
        got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "G", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        transport=c.net.transport("10.0.9.9"),
        client_config=ClientConfig(clientIP="10.0.9.9", instanceName="c"),
    )  # fmt: skip
    consumer.subscribe("T", "TagA || TagB")
    consumer.register_listener(listener)
    return consumer


async def test_consumer_status_of_a_push_consumer_under_load(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 41) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        async with MQAdmin(ns, c.net.transport(HOST)) as mq:
            await mq.update_topic("T", cluster="DefaultCluster", read_queues=2, write_queues=2)
            await wait_for_route(mq, "T")
        got: list[Any] = []
        consumer = _consumer(ns, c, got)
        pkw: dict[str, Any] = {
            "transport": c.net.transport("10.0.9.8"),
            "client_config": ClientConfig(clientIP="10.0.9.8", instanceName="p"),
        }
        async with Producer("PG", ns, **pkw) as p, consumer:
            for i in range(SENT):  # 5 a second for 24 s: the minute window sees the load
                await p.send(Message("T", f"m{i}".encode(), tags="TagA"))
                await trio.sleep(0.2)
            with trio.fail_after(60):
                while len(got) < SENT:
                    await trio.sleep(0.1)
            await trio.sleep(10)  # a stats sample after the last consumption
            cid = consumer.client.client_id
            async with MQAdmin(ns, c.net.transport(HOST)) as mq:
                stats = await mq.topic_stats(BROKER, "T")
                spans = await mq.query_consume_time_span("T", "G")
            max_offsets = {mq.queueId: o.maxOffset for mq, o in stats.offsetTable.items()}
            assert sum(max_offsets.values()) == SENT

            code, out, err = await admin(
                capsys, c, "consumerStatus", "-n", ns, "-g", "G", "-i", cid, "--json"
            )
            assert code == 0, err
            r = json.loads(out)
            info = r["runningInfo"]
            assert info["properties"][PROP_CONSUME_TYPE] == "CONSUME_PASSIVELY"
            assert info["properties"]["consumeThreadMax"] == "20"
            queues = {q["messageQueue"]["queueId"]: q for q in info["mqTable"]
                      if q["messageQueue"]["topic"] == "T"}  # fmt: skip
            assert {q: v["commitOffset"] for q, v in queues.items()} == max_offsets
            assert all(v["lastConsumeTimestamp"] > 0 and v["cachedMsgCount"] == 0
                       for v in queues.values())  # fmt: skip
            status = info["statusTable"]["T"]
            assert status["consumeOKTPS"] > 0 and status["pullTPS"] > 0, status
            assert status["consumeFailedMsgs"] == 0
            assert [s["topic"] for s in info["subscriptionSet"]] == ["%RETRY%G", "T"]
            # 303 through MQAdmin and in the command's output: the group consumed everything
            assert len(spans) == 2 and all(s.delayTime == 0 for s in spans)
            assert {s.messageQueue.queueId: s.consumeTimeStamp for s in spans} == {
                s.messageQueue.queueId: s.maxTimeStamp for s in spans
            }
            assert len(r["consumeTimeSpan"]) == 2

            code, out, err = await admin(
                capsys, c, "consumerStatus", "-n", ns, "-g", "G", "-i", cid
            )
            assert code == 0, err
            for qid, offset in max_offsets.items():
                assert re.search(rf"^T\s+broker-a\s+{qid}\s+{offset}\s+0\s+-\s", out, re.M), out
            row = re.search(r"^T\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s", out, re.M)
            assert row is not None and float(row.group(4)) > 0, out  # consume OK TPS
            assert "#Consume Time Span#" in out

            code, out, err = await admin(capsys, c, "consumerStatus", "-n", ns, "-g", "G")
            assert code == 0, err
            assert re.search(rf"^1\s+{re.escape(cid)}\s+V5_2_0\s+ok$", out, re.M), out
            assert "Same subscription in the same group of consumer" in out
            assert f"===== {cid} =====" in out

            code, out, err = await admin(
                capsys, c, "consumerStatus", "-n", ns, "-g", "G", "-i", cid, "-s"
            )
            assert code == 0, err
            assert "#Consumer jstack#" in out and "not a JVM jstack" in out

            code, out, err = await admin(
                capsys, c, "consumerStatus", "-n", ns, "-g", "G", "-i", "10.0.9.9@nobody"
            )
            assert code == 1 and out == ""
            assert "The Consumer <G> <10.0.9.9@nobody> not online" in err, err


async def test_a_client_that_does_not_answer_is_a_timeout(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The broker waits upstream's 10 s for the client, then answers CONSUME_MSG_TIMEOUT; the
    admin's connection is served meanwhile."""
    async with cluster(tmp_path, 42) as c:
        await start_broker_node(c)
        held: list[RequestContext] = []

        async def silent(ctx: RequestContext) -> RemotingCommand | None:
            held.append(ctx)  # never answered
            return None

        sub = SubscriptionData("T")
        hb = HeartbeatData(clientID="10.0.9.5@mute", consumerDataSet=[
            ConsumerData(groupName="G", subscriptionDataSet=[sub])])  # fmt: skip
        async with (
            RemotingClient(c.net.transport("10.0.9.5"), processor=silent) as client,
            MQAdmin(c.namesrv_addr, c.net.transport(HOST)) as mq,
        ):
            resp = await client.invoke(
                BROKER, RemotingCommand(RequestCode.HEART_BEAT, body=fastjson.encode(hb))
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            began = trio.current_time()
            served_meanwhile = False
            async with trio.open_nursery() as n:

                async def ask() -> None:
                    try:
                        await mq.consumer_running_info("G", "10.0.9.5@mute", addr=BROKER)
                    except MQBrokerError as e:
                        assert e.code == ResponseCode.CONSUME_MSG_TIMEOUT
                        assert "consumer <G> <10.0.9.5@mute> Timeout" in str(e)
                        n.cancel_scope.deadline = trio.current_time()  # done
                        return
                    raise AssertionError("the mute client's running info came back")

                n.start_soon(ask)
                await trio.sleep(1)
                # meanwhile the admin's connection to the broker is still served
                with trio.fail_after(1):
                    await mq.broker_status(BROKER)
                served_meanwhile = True
                asked = [h for h in held if h.cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO]
                assert len(asked) == 1 and asked[0].cmd.ext_fields["clientId"] == "10.0.9.5@mute"
                await trio.sleep(30)
                raise AssertionError("no answer")
            assert served_meanwhile
            assert 10 <= trio.current_time() - began < 11


async def test_consumer_status_shows_an_orderly_consumers_queue_locks(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 43) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        async with MQAdmin(ns, c.net.transport(HOST)) as mq:
            await mq.update_topic("T", cluster="DefaultCluster", read_queues=2, write_queues=2)
            await wait_for_route(mq, "T")
        consumer = OrderlyPushConsumer(
            "OG", ns, transport=c.net.transport("10.0.9.7"),
            client_config=ClientConfig(clientIP="10.0.9.7", instanceName="o"),
        )  # fmt: skip
        consumer.subscribe("T")
        consumer.register_listener(lambda msgs, ctx: ConsumeOrderlyStatus.SUCCESS)
        async with consumer:
            with trio.fail_after(30):
                while len([q for q in consumer.assigned_queues() if q.topic == "T"]) < 2:
                    await trio.sleep(0.1)
            cid = consumer.client.client_id
            code, out, err = await admin(
                capsys, c, "consumerStatus", "-n", ns, "-g", "OG", "-i", cid, "--json"
            )
            assert code == 0, err
            info = json.loads(out)["runningInfo"]
            assert info["properties"][PROP_CONSUME_ORDERLY] == "true"
            t_queues = [q for q in info["mqTable"] if q["messageQueue"]["topic"] == "T"]
            assert len(t_queues) == 2
            assert all(q["locked"] and q["lastLockTimestamp"] > 0 for q in t_queues)
            code, out, err = await admin(
                capsys, c, "consumerStatus", "-n", ns, "-g", "OG", "-i", cid
            )
            assert code == 0, err
            assert re.search(r"\blocked\s+last lock\s*$", out, re.M), out
            assert len(re.findall(r"^T\s+broker-a\s+\d.*\byes\s+\d{4}-", out, re.M)) == 2, out
