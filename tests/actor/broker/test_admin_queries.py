"""The broker's read-only admin queries on the simulated network (MockClock): a topic with three
messages on queue 0, a group G heartbeating a TAG subscription and two groups' committed offsets.

- GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305) lists TBW102, SCHEDULE_TOPIC_XXXX and the cluster-
  and broker-name topics, without brokerAddr;
- QUERY_TOPICS_BY_CONSUMER (343) answers the topics of G's offsets with the broker's address;
- QUERY_SUBSCRIPTION_BY_CONSUMER (345) answers G's subscription (none for an unknown group);
- QUERY_CORRECTION_OFFSET (308) answers the least offset per queue, filter groups left out,
  and leaves the offset table as it was;
- QUERY_CONSUME_QUEUE (321) through `rocketrio admin queryCq` prints mqadmin's lines; an index
  past the end is SUCCESS without a body and its remark; a queue without messages is
  SYSTEM_ERROR "<queueId>@<topic> is not exist!"; a header without topic is INVALID_PARAMETER;
- a slave answers from its own store, as its master does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import ConsumerData, HeartbeatData, SubscriptionData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import UpdateConsumerOffsetRequestHeader
from rocketrio.protocol.query_bodies import (
    QueryConsumeQueueRequestHeader,
    QueryCorrectionOffsetHeader,
    QuerySubscriptionByConsumerRequestHeader,
    QueryTopicsByConsumerRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext, to_json
from tests.harness.admin_cli import Capture, admin, make_topic, start_broker_node
from tests.harness.replication import (
    TOPIC,
    awaits_true,
    cluster,
    pair,
    send,
    send_many,
    wait_until,
)

RC = ResponseCode


async def ask(rc: RemotingClient, addr: str, code: int, header: Any = None) -> RemotingCommand:
    ext = {} if header is None else to_ext(header)
    return await rc.invoke(addr, RemotingCommand(code, ext_fields=ext), 5)


async def commit(rc: RemotingClient, addr: str, group: str, queue_id: int, offset: int) -> None:
    header = UpdateConsumerOffsetRequestHeader(group, "T", queue_id, offset)
    resp = await ask(rc, addr, RequestCode.UPDATE_CONSUMER_OFFSET, header)
    assert resp.code == RC.SUCCESS, resp.remark


async def test_the_read_only_queries_of_a_broker(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, 62) as c:
        node = await start_broker_node(c)
        addr = node.b.addr
        await make_topic(c, "T", 2)
        for i in range(3):
            assert (await send(c, node, f"m{i}".encode(), 0, topic="T")).code == RC.SUCCESS
        async with RemotingClient(c.net.transport("10.0.9.21")) as rc:
            sub = SubscriptionData("T", "a || b", tagsSet=["a", "b"], codeSet=[97, 98])
            beat = HeartbeatData(
                "c1", consumerDataSet=[ConsumerData("G", subscriptionDataSet=[sub])]
            )
            cmd = RemotingCommand(RequestCode.HEART_BEAT, body=to_json(beat))
            assert (await rc.invoke(addr, cmd, 5)).code == RC.SUCCESS
            await commit(rc, addr, "G", 0, 2)
            await commit(rc, addr, "G2", 0, 1)
            await commit(rc, addr, "G2", 1, 0)

            resp = await ask(rc, addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
            system = fastjson.loads(resp.body)
            assert set(system) == {"topicList"}
            assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", "broker-a"} <= set(
                system["topicList"]
            )
            assert "T" not in system["topicList"]

            header = QueryTopicsByConsumerRequestHeader("G")
            resp = await ask(rc, addr, RequestCode.QUERY_TOPICS_BY_CONSUMER, header)
            assert fastjson.loads(resp.body) == {"brokerAddr": addr, "topicList": ["T"]}

            header2 = QuerySubscriptionByConsumerRequestHeader("G", "T")
            resp = await ask(rc, addr, RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER, header2)
            got = fastjson.loads(resp.body)
            assert (got["group"], got["topic"]) == ("G", "T")
            assert got["subscriptionData"]["subString"] == "a || b"
            header2 = QuerySubscriptionByConsumerRequestHeader("NoGroup", "T")
            resp = await ask(rc, addr, RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER, header2)
            assert resp.body == b'{"group":"NoGroup","topic":"T"}'

            header3 = QueryCorrectionOffsetHeader("G", "T")
            resp = await ask(rc, addr, RequestCode.QUERY_CORRECTION_OFFSET, header3)
            assert resp.body == b'{"correctionOffsets":{0:1,1:0}}'
            header3 = QueryCorrectionOffsetHeader("G", "T", filterGroups="G2")
            resp = await ask(rc, addr, RequestCode.QUERY_CORRECTION_OFFSET, header3)
            assert resp.body == b'{"correctionOffsets":{0:2}}'
            assert node.b.tables.offsets.queue_offsets("G2", "T") == {0: 1, 1: 0}  # untouched

            argv = ["queryCq", "-n", c.namesrv_addr, "-t", "T", "-q", "0", "-i", "1"]
            code, out, err = await admin(capsys, c, *argv, "-g", "G")
            assert code == 0, err
            lines = out.splitlines()
            rule = "=" * 38
            assert lines[0] == "Subscription data: "
            assert '\t"subString":"a || b",' in lines
            at = lines.index("Filter data: ")
            assert lines[at:] == [
                "Filter data: ", "null", rule,
                "Queue data: ", "max: 3, min: 0", rule,
                "idx: 1", lines[at + 7], rule,
                "idx: 2", lines[at + 10], rule,
            ]  # fmt: skip
            for line in (lines[at + 7], lines[at + 10]):
                assert line.startswith("ConsumeQueueData{physicOffset=")
                assert line.endswith(
                    ", extendDataJson='null', bitMap='null', eval=false, msg='null'}"
                )

            code, out, err = await admin(capsys, c, *argv[:-1], "3", "-b", addr)
            assert code == 1
            assert "Index 3 of 0@T is not exist!" in err
            h = QueryConsumeQueueRequestHeader("T", 0, 3, 10)
            resp = await ask(rc, addr, RequestCode.QUERY_CONSUME_QUEUE, h)
            assert (resp.code, resp.body, resp.remark) == (
                RC.SUCCESS, b"", "Index 3 of 0@T is not exist!"
            )  # fmt: skip
            h = QueryConsumeQueueRequestHeader("T", 1, 0, 10)
            resp = await ask(rc, addr, RequestCode.QUERY_CONSUME_QUEUE, h)
            assert (resp.code, resp.remark) == (RC.SYSTEM_ERROR, "1@T is not exist!")
            cmd = RemotingCommand(RequestCode.QUERY_CONSUME_QUEUE, ext_fields={"queueId": "0"})
            resp = await rc.invoke(addr, cmd, 5)
            assert resp.code == RC.INVALID_PARAMETER
            assert "topic" in (resp.remark or "")


async def test_a_slave_answers_from_its_own_store(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Every role serves the queries (upstream registers them on every broker): a slave's
    QUERY_CONSUME_QUEUE answers the entries it replicated, the same as its master's."""
    async with cluster(tmp_path, 64) as c:
        a, b = await pair(c)
        assert await send_many(c, a, 8, "m", {}) == 8
        view = b.b.store.view
        await wait_until(lambda: awaits_true(view.get_max_offset(TOPIC, 0) == 2), "replicated")
        answers = []
        for node in (a, b):
            h = QueryConsumeQueueRequestHeader(TOPIC, 0, 0, 10)
            resp = await ask(c.client, node.b.addr, RequestCode.QUERY_CONSUME_QUEUE, h)
            assert resp.code == RC.SUCCESS, resp.remark
            answers.append(fastjson.loads(resp.body))
        assert answers[0] == answers[1]
        assert (answers[1]["minQueueIndex"], answers[1]["maxQueueIndex"]) == (0, 2)
        assert len(answers[1]["queueData"]) == 2
        resp = await ask(c.client, b.b.addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        assert "TBW102" in fastjson.loads(resp.body)["topicList"]
