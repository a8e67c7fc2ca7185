"""`rocketrio admin` group, connection and topic-list commands (cli/admin_groups.py) in-process
against a NameServer, a controller and a broker on the simulated network (MockClock), with a
live producer and push consumer: what mqadmin's consumerConnection, producerConnection,
brokerConsumeStats, topicList, topicClusterList, updateSubGroup and deleteSubGroup show."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.protocol.bodies import SubscriptionGroupConfig
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetSubscriptionGroupConfigRequestHeader
from rocketrio.protocol.serde import from_json
from tests.harness.admin_cli import HOST, Capture, admin, start_broker_node
from tests.harness.replication import cluster


async def test_group_and_connection_commands(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 31) as c:
        await start_broker_node(c)
        ns = c.namesrv_addr
        broker = "10.0.2.1:10911"
        async with MQAdmin(ns, c.net.transport(HOST)) as mq:
            await mq.update_topic("T", cluster="DefaultCluster", read_queues=2, write_queues=2)
            await wait_for_route(mq, "T")
        pkw: dict[str, Any] = {
            "transport": c.net.transport("10.0.9.8"),
            "client_config": ClientConfig(clientIP="10.0.9.8", instanceName="p"),
        }
        got: list[Any] = []

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
        async with Producer("PG", ns, **pkw) as p, consumer:
            for i in range(6):
                await p.send(Message("T", f"m{i}".encode(), tags="TagA"))
            with trio.fail_after(60):
                while len(got) < 6:
                    await trio.sleep(0.1)
            await trio.sleep(12)  # offsets committed and persisted; GROUP_GET_NUMS sampled
            async with MQAdmin(ns, c.net.transport(HOST)) as mq:
                stats = await mq.consume_stats(broker, "G", "T")
            assert stats.consumeTps > 0  # the group's pulls over the last minute
            assert sum(w.consumerOffset for w in stats.offsetTable.values()) == 6

            code, out, err = await admin(capsys, c, "consumerConnection", "-n", ns, "-g", "G")
            assert code == 0, err
            assert consumer.client.client_id in out and " 10.0.9.9 " in out and "PYTHON" in out, out
            assert re.search(r"^T\s+TagA \|\| TagB$", out, re.M), out
            assert "MessageModel: CLUSTERING" in out and "ConsumeType: CONSUME_PASSIVELY" in out
            assert "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET" in out

            code, out, err = await admin(
                capsys, c, "producerConnection", "-n", ns, "-g", "PG", "-t", "T"
            )
            assert code == 0 and p.client.client_id in out and "10.0.9.8" in out, (out, err)

            # the producer sends more while the consumer is stopped below: a lag to show
        await trio.sleep(1)
        async with Producer("PG", ns, **pkw) as p:
            for i in range(4):
                await p.send(Message("T", f"late{i}".encode(), tags="TagA"))

        code, out, err = await admin(capsys, c, "brokerConsumeStats", "-n", ns, "-b", broker)
        assert code == 0, err
        rows = [ln.split() for ln in out.splitlines() if ln.startswith("T ")]
        assert {int(r[3]) for r in rows} == {0, 1} and all(r[1] == "G" for r in rows), out
        assert sum(int(r[6]) for r in rows) == 4 and "Diff Total: 4" in out
        code, out, _ = await admin(
            capsys, c, "brokerConsumeStats", "-n", ns, "-b", broker, "-l", "3", "--json"
        )
        view = json.loads(out)
        assert all(r["diff"] >= 3 for r in view["rows"]) and view["totalDiff"] == 4

        code, out, _ = await admin(capsys, c, "topicList", "-n", ns)
        assert code == 0 and "T" in out.split() and "%RETRY%G" in out.split()
        code, out, _ = await admin(capsys, c, "topicList", "-n", ns, "-c")
        assert code == 0 and re.search(r"^DefaultCluster\s+T\s+G$", out, re.M), out
        code, out, _ = await admin(capsys, c, "topicClusterList", "-n", ns, "-t", "T")
        assert code == 0 and out.split() == ["DefaultCluster"]

        # updateSubGroup: flags and attributes land in the broker's group config
        code, out, err = await admin(
            capsys, c, "updateSubGroup", "-n", ns, "-c", "DefaultCluster", "-g", "G2",
            "-r", "3", "-s", "false", "--attributes", "+a=1,+b=2",
        )  # fmt: skip
        assert code == 0 and f"create subscription group to {broker} success." in out, err
        code, out, err = await admin(
            capsys, c, "updateSubGroup", "-n", ns, "-b", broker, "-g", "G2", "-r", "3",
            "-s", "false", "--attributes=-a",
        )  # fmt: skip
        assert code == 0, err
        async with MQAdmin(ns, c.net.transport(HOST)) as mq:
            resp = await mq.api.call(
                broker,
                RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                GetSubscriptionGroupConfigRequestHeader("G2"),
            )
            sgc = from_json(SubscriptionGroupConfig, resp.body)
            assert (sgc.retryMaxTimes, sgc.consumeEnable, sgc.attributes) == (3, False, {"b": "2"})
            code, out, err = await admin(
                capsys, c, "updateSubGroup", "-n", ns, "-b", broker, "-g", "G2",
                "--attributes=-nothere",
            )  # fmt: skip
            assert code == 1 and "attribute nothere to remove is not set" in err

            # deleteSubGroup -r true: the group, its offsets and its retry topic are gone
            code, out, err = await admin(
                capsys, c, "deleteSubGroup", "-n", ns, "-c", "DefaultCluster", "-g", "G",
                "-r", "true",
            )  # fmt: skip
            assert code == 0, err
            assert f"delete subscription group [G] from broker [{broker}]" in out
            resp = await mq.api.call(
                broker,
                RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG,
                GetSubscriptionGroupConfigRequestHeader("G"),
                ok=(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,),
            )
            stats = await mq.consume_stats(broker, "G", "T")
            assert all(w.consumerOffset == 0 for w in stats.offsetTable.values())
            assert "%RETRY%G" not in await mq.topic_list()
