"""MQAdmin against a real NameServer and two Brokers (SimNetwork, MockClock)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.errors import MQClientError, NotFound, TopicRouteNotFound
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.kernel.remoting import RemotingError
from tests.harness.clients import Collector, cluster, consumer, wait_for


async def test_topic_lifecycle_and_status(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        addrs = await admin.update_topic(
            "Orders", cluster="DefaultCluster", read_queues=3, write_queues=3
        )
        assert sorted(addrs) == ["10.0.1.1:10911", "10.0.1.2:10911"]
        route = await wait_for_route(admin, "Orders")
        assert sorted(q.brokerName for q in route.queueDatas) == ["broker-a", "broker-b"]
        assert {q.writeQueueNums for q in route.queueDatas} == {3}

        only_b = await admin.update_topic("Solo", broker_addr="10.0.1.2:10911", perm=4)
        assert only_b == ["10.0.1.2:10911"]
        solo = await wait_for_route(admin, "Solo")
        assert [(q.brokerName, q.perm) for q in solo.queueDatas] == [("broker-b", 4)]

        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            for i in range(12):
                await p.send(Message("Orders", f"o{i}".encode(), keys=f"order-{i}"))
        status = await admin.topic_status("Orders")
        assert len(status) == 6
        assert sum(o.maxOffset - o.minOffset for o in status) == 12
        assert all(o.lastUpdateTimestamp > 0 for o in status if o.maxOffset)

        with pytest.raises(MQClientError, match="exactly one"):
            await admin.update_topic("X")
        with pytest.raises(MQClientError, match="unknown"):
            await admin.update_topic("X", cluster="NoSuchCluster")

        deleted = await admin.delete_topic("Orders", cluster="DefaultCluster")
        assert sorted(deleted) == ["10.0.1.1:10911", "10.0.1.2:10911"]
        with pytest.raises(TopicRouteNotFound):
            await admin.topic_route("Orders")


async def test_cluster_list_broker_status_and_config(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    admin_host = "10.0.8.1"
    async with (
        cluster(tmp_path, ("broker-a", "broker-b")) as c,
        MQAdmin(c.ns_addr, c.net.transport(admin_host)) as admin,
    ):
        info = await admin.cluster_info()
        assert sorted(info.clusterAddrTable["DefaultCluster"]) == ["broker-a", "broker-b"]
        rows = await admin.cluster_list()
        assert [(r["brokerName"], r["brokerId"], r["addr"]) for r in rows] == [
            ("broker-a", 0, "10.0.1.1:10911"),
            ("broker-b", 0, "10.0.1.2:10911"),
        ]
        assert all(r["version"] and "error" not in r for r in rows)
        status = await admin.broker_status("10.0.1.1:10911")
        assert status["brokerName"] == "broker-a"
        assert int(status["commitLogMaxOffset"]) >= 0
        conf = await admin.get_broker_config("10.0.1.2:10911")
        assert conf["brokerName"] == "broker-b"
        assert conf["listenPort"] == "10911"
        # broker-b stays registered but cannot be reached from this admin
        c.net.partition([admin_host], [c.hosts["broker-b"]])
        rows = await admin.cluster_list()
        assert "error" in rows[1] and "error" not in rows[0]
        assert rows[1]["brokerName"] == "broker-b"


async def test_consumer_progress_and_message_queries(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c, c.admin() as admin:
        await admin.update_topic("T", cluster="DefaultCluster", read_queues=2, write_queues=2)
        await wait_for_route(admin, "T")
        async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
            sent = [
                await p.send(Message("T", f"m{i}".encode(), keys=f"k{i} common")) for i in range(10)
            ]

        # a group no broker has heard of (no subscription group, offset or member) is unknown
        with pytest.raises(NotFound, match="consumer group nobody is unknown"):
            await admin.consumer_progress("nobody", "T")

        listener = Collector()
        m = consumer(c, "cg", listener, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        async with m:
            await wait_for(lambda: len(listener.msgs) >= 10)
            await trio.sleep(6)  # offsets persisted
            progress = await admin.consumer_progress("cg")
            assert progress.clients == [m.client.client_id]
        rows = [o for o in progress.offsets if o.topic == "T"]
        assert [(o.queueId, o.brokerOffset, o.consumerOffset) for o in rows] == [
            (0, 5, 5),
            (1, 5, 5),
        ]
        assert progress.total_lag == 0

        by_offset_id = await admin.query_msg_by_id(sent[3].offset_msg_id)
        assert by_offset_id.body == b"m3"
        by_uniq = await admin.query_msg_by_id(sent[4].msg_id, topic="T")
        assert by_uniq.body == b"m4"
        with pytest.raises(MQClientError, match="give the topic"):
            await admin.query_msg_by_id(sent[4].msg_id)
        keyed = await admin.query_msg_by_key("T", "k7")
        assert [x.body for x in keyed] == [b"m7"]
        common = await admin.query_msg_by_key("T", "common", max_num=4)
        assert len(common) == 4


async def test_unreachable_name_server_is_skipped_then_avoided(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        host = "10.0.8.2"
        c.net.partition([host], ["10.0.0.99"])  # connects to the dead name server hang
        async with MQAdmin(f"10.0.0.99:9876;{c.ns_addr}", c.net.transport(host)) as admin:
            t0 = trio.current_time()
            info = await admin.cluster_info()
            first = trio.current_time() - t0
            assert "broker-a" in info.brokerAddrTable
            t1 = trio.current_time()
            await admin.update_topic("T", cluster="DefaultCluster")
            await wait_for_route(admin, "T")
            assert first >= 3.0  # one connect timeout on the dead one
            assert trio.current_time() - t1 < 1.0  # then the live one is asked first
        async with MQAdmin("10.0.0.99:9876", c.net.transport(host)) as admin:
            with pytest.raises(RemotingError, match="no name server answered"):
                await admin.cluster_info()
