"""`rocketrio admin getConsumerStatus` in-process on the simulated network (MockClock): a push
consumer of G consumes six messages on two queues; INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223)
makes the broker ask it (GET_CONSUMER_STATUS_FROM_CLIENT, 221) and the command prints its
offsets as mqadmin does. ``-i`` with another client id asks nobody (title lines only); a group
with no member online and a member older than V3_0_7_SNAPSHOT are refused with upstream's
remarks; a lite pull consumer answers an empty table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.pull_consumer import LitePullConsumer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import ConsumerData, HeartbeatData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.consumer_status import GetConsumerStatusRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext, to_json
from tests.harness.admin_cli import HOST, Capture, admin, client_kwargs, start_broker_node
from tests.harness.replication import cluster

TITLE = f"{'#clientId':<50}  {'#brokerName':<15}  {'#queueId':<15}  {'#offset':<20}"


async def test_get_consumer_status_of_a_push_consumer(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 63) as c:
        node = await start_broker_node(c)
        ns = c.namesrv_addr
        async with MQAdmin(ns, c.net.transport(HOST)) as mq:
            await mq.update_topic("T", cluster="DefaultCluster", read_queues=2, write_queues=2)
            await wait_for_route(mq, "T")
        got: list[Any] = []

        def listener(msgs: list[Any]) -> ConsumeStatus:
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            "G",
            ns,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            **client_kwargs(c, "10.0.9.9", "c"),
        )
        consumer.subscribe("T", "*")
        consumer.register_listener(listener)
        async with Producer("PG", ns, **client_kwargs(c, "10.0.9.8", "p")) as p, consumer:
            for i in range(6):
                await p.send(Message("T", f"m{i}".encode()))
            with trio.fail_after(60):
                while len(got) < 6:
                    await trio.sleep(0.1)
            await trio.sleep(1)
            cid = consumer.client.client_id

            code, out, err = await admin(
                capsys, c, "getConsumerStatus", "-n", ns, "-g", "G", "-t", "T"
            )
            assert code == 0, err
            lines = out.splitlines()
            assert lines[:2] == [
                "get consumer status from client. group=G, topic=T, originClientId=",
                TITLE,
            ]
            rows = sorted(line.split() for line in lines[2:])
            assert rows == [[cid, "broker-a", "0", "3"], [cid, "broker-a", "1", "3"]]

            argv = ["getConsumerStatus", "-n", ns, "-g", "G", "-t", "T", "-i", "other@1"]
            code, out, err = await admin(capsys, c, *argv)
            assert code == 0, err
            assert out.splitlines()[2:] == []

            code, out, err = await admin(
                capsys, c, "getConsumerStatus", "-n", ns, "-g", "NoGroup", "-t", "T"
            )
            assert code == 1
            assert "No Any Consumer online in the consumer group: [NoGroup]" in err

            async with LitePullConsumer("L", ns, **client_kwargs(c, "10.0.9.10", "l")) as lite:
                lite.subscribe("T", "*")
                await lite.poll(timeout=3.0)
                header = GetConsumerStatusRequestHeader("T", "L")
                cmd = RemotingCommand(
                    RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, ext_fields=to_ext(header)
                )
                resp = await c.client.invoke(node.b.addr, cmd, 30)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                table = fastjson.loads(resp.body)["consumerTable"]
                assert table == {lite.client.client_id: {}}

        async with RemotingClient(c.net.transport("10.0.9.21")) as rc:
            beat = HeartbeatData("old@1", consumerDataSet=[ConsumerData("OldG")])
            cmd = RemotingCommand(RequestCode.HEART_BEAT, body=to_json(beat), version=27)
            assert (await rc.invoke(node.b.addr, cmd, 5)).code == ResponseCode.SUCCESS
            code, out, err = await admin(
                capsys, c, "getConsumerStatus", "-n", ns, "-g", "OldG", "-t", "T"
            )
            assert code == 1
            assert "the client does not support this feature. version=V3_0_6" in err
