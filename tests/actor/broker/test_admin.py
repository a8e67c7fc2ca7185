"""Broker administration and bookkeeping on SimNetwork + MockClock: topics (create, delete,
auto-create, permissions), consumer offsets (rules, persistence across restarts), restart and
crash recovery, client heartbeats with NOTIFY_CONSUMER_IDS_CHANGED, queue locks, stats."""

from __future__ import annotations

import json
import os
from typing import Any

import trio
import trio.testing

from rocketrio.actors.kernel.remoting import RemotingClient, RequestContext
from rocketrio.protocol.bodies import (
    ConsumerConnection,
    ConsumerData,
    ConsumerIdList,
    ConsumerOffsetSerializeWrapper,
    ConsumeStats,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    SubscriptionData,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicStatsTable,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext, to_json
from tests.harness.broker import CLIENT_HOST, harness, messages


def create_topic_cmd(topic: str, queues: int = 4, perm: int = 6) -> RemotingCommand:
    header = CreateTopicRequestHeader(
        topic=topic,
        defaultTopic="TBW102",
        readQueueNums=queues,
        writeQueueNums=queues,
        perm=perm,
        topicFilterType="SINGLE_TAG",
    )
    return RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=to_ext(header))


# --------------------------------------------------------------------------- topics


async def test_create_and_delete_topic(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h:
        assert (await h.invoke(create_topic_cmd("Orders", queues=3))).code == ResponseCode.SUCCESS
        resp = await h.invoke(
            RemotingCommand(
                RequestCode.GET_TOPIC_CONFIG,
                ext_fields=to_ext(GetTopicConfigRequestHeader("Orders")),
            )
        )
        tc = from_json(TopicConfig, resp.body)
        assert (tc.readQueueNums, tc.writeQueueNums, tc.perm) == (3, 3, 6)
        # persisted before the answer
        with open(os.path.join(h.broker.config.storePathRootDir, "config", "topics.json")) as f:
            assert json.load(f)["topicConfigTable"]["Orders"]["readQueueNums"] == 3
        await trio.sleep(0.5)
        route = await h.route("Orders")
        assert route is not None and route.queueDatas[0].readQueueNums == 3

        await h.send("Orders", b"x", queue_id=2)
        resp = await h.invoke(
            RemotingCommand(
                RequestCode.DELETE_TOPIC_IN_BROKER,
                ext_fields=to_ext(DeleteTopicRequestHeader("Orders")),
            )
        )
        assert resp.code == ResponseCode.SUCCESS
        assert (await h.pull("Orders", 2, 0)).code == ResponseCode.TOPIC_NOT_EXIST
        assert h.broker.store.message_store.get_max_offset("Orders", 2) == 0
        assert "Orders" not in h.broker.tables.topics.snapshot().topicConfigTable


async def test_create_topic_validation(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h:
        cases = [
            (create_topic_cmd("bad topic"), "illegal characters"),
            (create_topic_cmd("x" * 128), "longer than topic max length"),
            (create_topic_cmd("TBW102"), "conflict with system topic"),
            (create_topic_cmd("DefaultCluster"), "conflict with system topic"),
            (create_topic_cmd("Fine", queues=0), "readQueueNums must be between 1 and 1024"),
            (create_topic_cmd("Fine", queues=1025), "between 1 and 1024"),
            (create_topic_cmd("Fine", perm=99), "not a valid permission"),
        ]
        for cmd, remark in cases:
            resp = await h.invoke(cmd)
            assert resp.code == ResponseCode.SYSTEM_ERROR, remark
            assert remark in (resp.remark or ""), (remark, resp.remark)
        system = RemotingCommand(
            RequestCode.DELETE_TOPIC_IN_BROKER,
            ext_fields=to_ext(DeleteTopicRequestHeader("TBW102")),
        )
        assert (await h.invoke(system)).code == ResponseCode.SYSTEM_ERROR


async def test_auto_create_off_refuses_unknown_topics(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path, autoCreateTopicEnable=False) as h:
        resp = await h.send("Unknown", b"x")
        assert resp.code == ResponseCode.TOPIC_NOT_EXIST
        assert "autoCreateTopicEnable=false" in (resp.remark or "")
        assert await h.route("TBW102") is None
        assert (await h.invoke(create_topic_cmd("Known"))).code == ResponseCode.SUCCESS
        assert (await h.send("Known", b"x")).code == ResponseCode.SUCCESS


async def test_permissions(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h:
        await h.invoke(create_topic_cmd("ReadOnly", perm=4))
        await h.invoke(create_topic_cmd("WriteOnly", perm=2))
        resp = await h.send("ReadOnly", b"x")
        assert (
            resp.code == ResponseCode.NO_PERMISSION
            and "sending message is forbidden" in resp.remark
        )
        assert (await h.send("WriteOnly", b"x", queue_id=0)).code == ResponseCode.SUCCESS
        resp = await h.pull("WriteOnly", 0, 0)
        assert (
            resp.code == ResponseCode.NO_PERMISSION
            and "pulling message is forbidden" in resp.remark
        )
        resp = await h.send("WriteOnly", b"x", queue_id=9)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "queueId[9] is illegal" in resp.remark
        resp = await h.send("SCHEDULE_TOPIC_XXXX", b"x")
        assert resp.code == ResponseCode.NO_PERMISSION
    async with harness(tmp_path / "ro", brokerPermission=4) as h:
        resp = await h.send("Any", b"x")
        assert resp.code == ResponseCode.NO_PERMISSION


# --------------------------------------------------------------------------- consumer offsets


async def test_consumer_offsets_rules_and_persistence(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("O", b"x", queue_id=0)

        async def query(group: str, zero: bool | None = None) -> RemotingCommand:
            header = QueryConsumerOffsetRequestHeader(group, "O", 0, zero)
            return await h.invoke(
                RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=to_ext(header))
            )

        # a new group on a queue whose data starts at 0 starts at 0, unless told otherwise
        assert (await query("G1")).ext_fields["offset"] == "0"
        assert (await query("G1", zero=False)).code == ResponseCode.QUERY_NOT_FOUND

        update = UpdateConsumerOffsetRequestHeader("G1", "O", 0, 1)
        cmd = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=to_ext(update))
        await h.client.invoke_oneway(h.addr, cmd)
        await trio.sleep(0.1)
        assert (await query("G1")).ext_fields["offset"] == "1"
        # a pull with COMMIT_OFFSET stores the offset too
        await h.pull("O", 0, 1, group="G2", flags=4 | 1, commit_offset=1)
        assert (await query("G2")).ext_fields["offset"] == "1"

        all_offsets = await h.invoke(RemotingCommand(RequestCode.GET_ALL_CONSUMER_OFFSET))
        table = from_json(ConsumerOffsetSerializeWrapper, all_offsets.body).offsetTable
        assert table == {"O@G1": {0: 1}, "O@G2": {0: 1}}

        # periodic persistence (flushConsumerOffsetInterval = 5 s)
        await trio.sleep(6)
        path = os.path.join(h.broker.config.storePathRootDir, "config", "consumerOffset.json")
        with open(path) as f:
            assert json.load(f)["offsetTable"]["O@G1"] == {"0": 1}

        update = UpdateConsumerOffsetRequestHeader("G1", "O", 0, 7)
        cmd = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=to_ext(update))
        assert (await h.invoke(cmd)).code == ResponseCode.SUCCESS
        await h.stop_broker()  # persists on shutdown, before the next period
        await h.start_broker()
        assert (await query("G1")).ext_fields["offset"] == "7"
        assert (await query("G2")).ext_fields["offset"] == "1"


# --------------------------------------------------------------------------- restart / crash


async def test_messages_survive_restart_and_crash(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        for i in range(20):
            assert (
                await h.send("P", f"m{i}".encode(), queue_id=i % 2)
            ).code == ResponseCode.SUCCESS
        await h.stop_broker()
        await h.start_broker()
        assert len(messages(await h.pull("P", 0, 0))) == 10
        for i in range(20, 40):
            await h.send("P", f"m{i}".encode(), queue_id=i % 2, keys=f"key{i}")
        # kill -9: no flush, no close; recovery re-dispatches from the last checkpoint
        await h.crash_broker()
        broker = await h.start_broker()
        assert broker.recovery is not None
        bodies = [m.body for q in (0, 1) for m in messages(await h.pull("P", q, 0))]
        assert sorted(bodies) == sorted(f"m{i}".encode() for i in range(40))
        msgs = messages(await h.pull("P", 1, 0))
        assert [m.queue_offset for m in msgs] == list(range(20))
        # new sends continue the queue offsets, the index still finds old keys
        resp = await h.send("P", b"after", queue_id=1)
        assert resp.ext_fields["queueOffset"] == "20"
        assert [m.body for m in broker.store.message_store.query_by_key("P", "key21")] == [b"m21"]


async def test_torn_commitlog_tail_is_truncated_on_restart(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        for i in range(5):
            await h.send("T", f"m{i}".encode(), queue_id=0)
        store_dir = h.broker.config.storePathRootDir
        await h.crash_broker()
        segment = os.path.join(store_dir, "commitlog", f"{0:020d}")
        size = os.path.getsize(segment)
        os.truncate(segment, size - 10)  # the last record is torn
        broker = await h.start_broker()
        report = broker.recovery
        assert report is not None and report.commitlog.truncated_at is not None
        assert [m.body for m in messages(await h.pull("T", 0, 0))] == [
            f"m{i}".encode() for i in range(4)
        ]
        assert (await h.send("T", b"next", queue_id=0)).ext_fields["queueOffset"] == "4"


# --------------------------------------------------------------------------- clients


def heartbeat_cmd(client_id: str, group: str = "CG", topic: str = "Topic") -> RemotingCommand:
    data = HeartbeatData(
        clientID=client_id,
        consumerDataSet=[
            ConsumerData(
                groupName=group,
                subscriptionDataSet=[
                    SubscriptionData(topic=topic, subString="a || b", tagsSet=["a", "b"])
                ],
            )
        ],
    )
    return RemotingCommand(RequestCode.HEART_BEAT, body=to_json(data))


async def test_heartbeat_consumer_list_and_notify(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        await h.send("Topic", b"a1", tags="a", queue_id=0)
        await h.send("Topic", b"c1", tags="c", queue_id=0)
        notified: list[tuple[str, str]] = []

        def push_listener(name: str) -> Any:
            async def processor(ctx: RequestContext) -> RemotingCommand | None:
                if ctx.cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
                    notified.append((name, ctx.cmd.ext_fields["consumerGroup"]))
                return None

            return processor

        async def consumer_ids() -> list[str]:
            header = GetConsumerListByGroupRequestHeader("CG")
            resp = await h.invoke(
                RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext_fields=to_ext(header))
            )
            return from_json(ConsumerIdList, resp.body).consumerIdList if resp.body else []

        async with (
            RemotingClient(h.net.transport(CLIENT_HOST), processor=push_listener("c1")) as c1,
            RemotingClient(h.net.transport("10.0.0.10"), processor=push_listener("c2")) as c2,
        ):
            assert (await c1.invoke(h.addr, heartbeat_cmd("c1@1"), 5)).code == ResponseCode.SUCCESS
            assert await consumer_ids() == ["c1@1"]
            await trio.sleep(0.1)
            assert notified == [("c1", "CG")]  # upstream tells every member, the new one too
            notified.clear()
            # the heartbeat registered the subscription: a pull without SUBSCRIPTION uses it
            resp = await h.pull("Topic", 0, 0, sub=None, flags=0)
            assert [m.body for m in messages(resp)] == [b"a1"]
            # and created the group's retry topic
            assert h.broker.tables.topics.select("%RETRY%CG") is not None
            # a second member: both members are told
            await c2.invoke(h.addr, heartbeat_cmd("c2@1"), 5)
            await trio.sleep(0.1)
            assert sorted(await consumer_ids()) == ["c1@1", "c2@1"]
            assert sorted(notified) == [("c1", "CG"), ("c2", "CG")]
            # a repeated heartbeat changes nothing and notifies nobody
            notified.clear()
            await c2.invoke(h.addr, heartbeat_cmd("c2@1"), 5)
            await trio.sleep(0.1)
            assert notified == []
            conns = await h.invoke(
                RemotingCommand(
                    RequestCode.GET_CONSUMER_CONNECTION_LIST, ext_fields={"consumerGroup": "CG"}
                )
            )
            assert from_json(ConsumerConnection, conns.body).client_ids() == ["c1@1", "c2@1"]
            # c2 leaves by closing its connection: c1 is told
            c2.close_connection(h.addr)
            await trio.sleep(0.1)
            assert await consumer_ids() == ["c1@1"]
            assert notified == [("c1", "CG")]
            # UNREGISTER_CLIENT removes c1
            header = UnregisterClientRequestHeader("c1@1", consumerGroup="CG")
            cmd = RemotingCommand(RequestCode.UNREGISTER_CLIENT, ext_fields=to_ext(header))
            await c1.invoke(h.addr, cmd, 5)
            assert await consumer_ids() == []


async def test_silent_client_expires(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h:
        await h.invoke(heartbeat_cmd("c1@1"))
        assert h.broker.clients.consumers.get("CG") is not None
        await trio.sleep(100)
        assert h.broker.clients.consumers.get("CG") is not None
        await trio.sleep(40)  # > 120 s without heartbeat
        assert h.broker.clients.consumers.get("CG") is None


async def test_lock_batch_mq(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h:
        mqs = [MessageQueue("Topic", "broker-a", 0), MessageQueue("Topic", "broker-a", 1)]

        async def lock(client: str, queues: list[MessageQueue]) -> list[MessageQueue]:
            body = to_json(LockBatchRequestBody("CG", client, False, queues))
            resp = await h.invoke(RemotingCommand(RequestCode.LOCK_BATCH_MQ, body=body))
            return from_json(LockBatchResponseBody, resp.body).lockOKMQSet

        assert await lock("A", mqs) == mqs
        assert await lock("B", mqs) == []
        assert await lock("B", [MessageQueue("Topic", "broker-a", 2)]) == [
            MessageQueue("Topic", "broker-a", 2)
        ]
        body = to_json(LockBatchRequestBody("CG", "A", False, mqs[:1]))
        await h.invoke(RemotingCommand(RequestCode.UNLOCK_BATCH_MQ, body=body))
        assert await lock("B", mqs) == mqs[:1]
        await trio.sleep(61)  # A's lock on queue 1 expired
        assert await lock("B", mqs) == mqs


# --------------------------------------------------------------------------- admin queries


async def test_stats_and_admin_queries(tmp_path: Any, mock_clock: trio.testing.MockClock) -> None:
    async with harness(tmp_path) as h:
        for i in range(3):
            await h.send("S", f"m{i}".encode(), queue_id=1)
        await h.pull("S", 1, 0, group="SG", flags=4 | 1, commit_offset=2)
        resp = await h.invoke(
            RemotingCommand(
                RequestCode.GET_TOPIC_STATS_INFO,
                ext_fields=to_ext(GetTopicStatsInfoRequestHeader("S")),
            )
        )
        table = from_json(TopicStatsTable, resp.body).offsetTable
        offsets = {mq.queueId: o for mq, o in table.items()}
        assert {(mq.topic, mq.brokerName) for mq in table} == {("S", "broker-a")}
        assert offsets[1].maxOffset == 3 and offsets[0].maxOffset == 0
        assert offsets[1].lastUpdateTimestamp > 0
        resp = await h.invoke(
            RemotingCommand(
                RequestCode.GET_CONSUME_STATS, ext_fields=to_ext(GetConsumeStatsRequestHeader("SG"))
            )
        )
        stats = {mq.queueId: o for mq, o in from_json(ConsumeStats, resp.body).offsetTable.items()}
        assert (stats[1].brokerOffset, stats[1].consumerOffset, stats[1].lag) == (3, 2, 1)
        assert stats[1].pullOffset == 3  # where the pull ended, ahead of the committed offset
        assert (stats[0].consumerOffset, stats[0].pullOffset, stats[0].lastTimestamp) == (0, 0, 0)
        await trio.sleep(3)
        resp = await h.invoke(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))
        table = from_json(KVTable, resp.body).table
        assert table["msgPutTotalTodayNow"] == "3"
        assert int(table["commitLogMaxOffset"]) > 0
        assert table["brokerVersionDesc"].startswith("V5")
        resp = await h.invoke(RemotingCommand(RequestCode.GET_BROKER_CONFIG))
        assert "brokerName=broker-a" in resp.body.decode()
        header = SearchOffsetRequestHeader("S", 1, 0)
        resp = await h.invoke(
            RemotingCommand(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext_fields=to_ext(header))
        )
        assert resp.ext_fields["offset"] == "0"
        sgc = SubscriptionGroupConfig("NewGroup", retryMaxTimes=3)
        resp = await h.invoke(
            RemotingCommand(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=to_json(sgc))
        )
        assert resp.code == ResponseCode.SUCCESS
        assert h.broker.tables.groups.table["NewGroup"].retryMaxTimes == 3
