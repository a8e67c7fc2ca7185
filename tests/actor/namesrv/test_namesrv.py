"""NameServer actor on the simulated network: registration, routes, liveness, KV, robustness."""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
import trio.testing

from rocketrio.actors.kernel.remoting import RemotingClient, RemotingServer, RequestContext
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import NameServer, run_namesrv
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import (
    ClusterInfo,
    DataVersion,
    GetBrokerMemberGroupResponseBody,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    BrokerHeartbeatRequestHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext, to_json
from tests.harness.sim_network import SimNetwork

NS = "10.0.0.1"
NS_ADDR = f"{NS}:9876"
CLUSTER = "DefaultCluster"
TOPICS = {"TopicA": 4, "TopicB": 8}


def register_cmd(
    name: str,
    bid: int,
    addr: str,
    *,
    timeout: int | None = None,
    acting: bool | None = False,
    counter: int = 1,
    **header: Any,
) -> RemotingCommand:
    w = TopicConfigSerializeWrapper(
        topicConfigTable={t: TopicConfig(t, q, q) for t, q in TOPICS.items()},
        dataVersion=DataVersion(0, 1000, counter),
    )
    h = RegisterBrokerRequestHeader(
        brokerName=name,
        brokerAddr=addr,
        clusterName=CLUSTER,
        haServerAddr=addr.replace(":10911", ":10912"),
        brokerId=bid,
        heartbeatTimeoutMillis=timeout,
        enableActingMaster=acting,
        **header,
    )
    body = to_json(RegisterBrokerBody(topicConfigSerializeWrapper=w))
    return RemotingCommand(code=RequestCode.REGISTER_BROKER, ext_fields=to_ext(h), body=body)


def heartbeat_cmd(name: str, addr: str) -> RemotingCommand:
    h = BrokerHeartbeatRequestHeader(clusterName=CLUSTER, brokerAddr=addr, brokerName=name)
    return RemotingCommand(code=RequestCode.BROKER_HEARTBEAT, ext_fields=to_ext(h))


def cmd(code: int, body: bytes = b"", **ext: str) -> RemotingCommand:
    return RemotingCommand(code=code, ext_fields=ext, body=body)


async def route(
    client: RemotingClient, topic: str = "TopicA", ns: str = NS_ADDR
) -> RemotingCommand:
    return await client.invoke(ns, cmd(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic=topic), 3)


@asynccontextmanager
async def namesrv(net: SimNetwork, host: str = NS, **config: Any) -> AsyncIterator[NameServer]:
    ns = NameServer(NamesrvConfig(listenHost=host, **config), net.transport(host))
    async with trio.open_nursery() as nursery:
        await nursery.start(ns.run)
        yield ns
        nursery.cancel_scope.cancel()


async def test_register_route_heartbeat_and_expiry(
    mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    net = SimNetwork(seed=1)
    with structlog.testing.capture_logs() as logs:
        async with (
            namesrv(net),
            RemotingClient(net.transport("10.0.0.2")) as broker,
            RemotingClient(net.transport("10.0.0.3")) as tool,
        ):
            assert "The Name Server boot success. serializeType=JSON, address 10.0.0.1:9876" in (
                capsys.readouterr().out
            )
            resp = await broker.invoke(
                NS_ADDR, register_cmd("a", 0, "10.0.0.2:10911", timeout=10_000)
            )
            assert resp.code == ResponseCode.SUCCESS
            assert from_json(KVTable, resp.body) == KVTable()
            broker_conn = await broker.get_connection(NS_ADDR)

            resp = await route(tool)
            assert resp.code == ResponseCode.SUCCESS
            assert b'"brokerAddrs":{"0":"10.0.0.2:10911"}' in resp.body  # standard JSON keys
            r = from_json(TopicRouteData, resp.body)
            assert [(q.brokerName, q.writeQueueNums, q.perm) for q in r.queueDatas] == [("a", 4, 6)]

            for _ in range(4):  # 32 s of heartbeats every 8 s: well past the 10 s timeout
                await trio.sleep(8)
                await broker.invoke_oneway(NS_ADDR, heartbeat_cmd("a", "10.0.0.2:10911"))
                assert (await route(tool)).code == ResponseCode.SUCCESS
            last_beat = trio.current_time()

            await trio.sleep(9.9)
            assert (await route(tool)).code == ResponseCode.SUCCESS
            with trio.fail_after(30):
                while (resp := await route(tool)).code == ResponseCode.SUCCESS:
                    await trio.sleep(0.25)
            gone_after = trio.current_time() - last_beat
            assert 10 < gone_after <= 15.5  # timeout, then at most one scan interval
            assert resp.code == ResponseCode.TOPIC_NOT_EXIST
            assert resp.remark == "No topic route info in name server for the topic: TopicA"
            await trio.sleep(0.1)
            assert broker_conn.closed  # a silent broker's connection is closed, like upstream
    names = [e["event"] for e in logs]
    assert events.NamesrvBoot.NAME in names and events.BrokerRegistered.NAME in names
    expired = next(e for e in logs if e["event"] == events.BrokerExpired.NAME)
    assert expired["broker"] == "a" and expired["silent_ms"] > 10_000
    unreg = [e for e in logs if e["event"] == events.BrokerUnregistered.NAME]
    assert [e["reason"] for e in unreg] == ["expired"]


async def test_connection_close_unregisters(mock_clock: trio.testing.MockClock) -> None:
    net = SimNetwork(seed=2)
    with structlog.testing.capture_logs() as logs:
        async with namesrv(net), RemotingClient(net.transport("10.0.0.3")) as tool:
            async with RemotingClient(net.transport("10.0.0.2")) as broker:
                resp = await broker.invoke(NS_ADDR, register_cmd("a", 0, "10.0.0.2:10911"))
                assert resp.code == ResponseCode.SUCCESS
                assert (await route(tool)).code == ResponseCode.SUCCESS
            t0 = trio.current_time()  # the broker's client (and its connection) is gone
            with trio.fail_after(30):
                while (await route(tool)).code == ResponseCode.SUCCESS:
                    await trio.sleep(0.01)
            assert trio.current_time() - t0 < 0.5  # at once, not after the 120 s timeout
    unreg = [e for e in logs if e["event"] == events.BrokerUnregistered.NAME]
    assert [(e["broker"], e["reason"]) for e in unreg] == [("a", "connection_closed")]


async def test_two_nameservers_are_independent(mock_clock: trio.testing.MockClock) -> None:
    net = SimNetwork(seed=3)
    other = "10.0.0.4:9876"
    with structlog.testing.capture_logs() as logs:
        # the broker outlives both NameServers: their shutdown must not look like broker loss
        async with RemotingClient(net.transport("10.0.0.2")) as broker:
            async with namesrv(net) as ns1, namesrv(net, host="10.0.0.4") as ns2:
                assert ns1.routes is not ns2.routes
                for addr in (NS_ADDR, other):
                    resp = await broker.invoke(addr, register_cmd("a", 0, "10.0.0.2:10911"))
                    assert resp.code == ResponseCode.SUCCESS
                for addr in (NS_ADDR, other):
                    assert (await route(broker, ns=addr)).code == ResponseCode.SUCCESS
                h = UnRegisterBrokerRequestHeader("a", "10.0.0.2:10911", CLUSTER, 0)
                unreg = RemotingCommand(code=RequestCode.UNREGISTER_BROKER, ext_fields=to_ext(h))
                assert (await broker.invoke(other, unreg)).code == ResponseCode.SUCCESS
                assert (await route(broker, ns=other)).code == ResponseCode.TOPIC_NOT_EXIST
                assert (await route(broker, ns=NS_ADDR)).code == ResponseCode.SUCCESS
    unreg_logs = [e for e in logs if e["event"] == events.BrokerUnregistered.NAME]
    assert [(e["broker"], e["reason"]) for e in unreg_logs] == [("a", "request")]


GARBAGE = {
    "length below 4": b"\x00\x00\x00\x02xx",
    "length above the frame limit": b"\x7f\xff\xff\xff",
    "header is not JSON": b"\x00\x00\x00\x08\x00\x00\x00\x04{{{{",
    "unknown serialize type": b"\x00\x00\x00\x06\x09\x00\x00\x02{}",
}


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE)
async def test_garbage_closes_only_that_connection(
    mock_clock: trio.testing.MockClock, garbage: bytes
) -> None:
    net = SimNetwork(seed=4)
    async with namesrv(net), RemotingClient(net.transport("10.0.0.2")) as broker:
        assert (await broker.invoke(NS_ADDR, register_cmd("a", 0, "10.0.0.2:10911"))).code == 0
        evil = await net.transport("10.0.0.9").connect(NS_ADDR)
        await evil.send_all(garbage)
        with trio.fail_after(2):
            try:
                while await evil.receive_some(1024):
                    pass
            except trio.BrokenResourceError:
                pass
        # the other connection, and the broker registered through it, are untouched
        assert (await route(broker)).code == ResponseCode.SUCCESS
        async with RemotingClient(net.transport("10.0.0.8")) as fresh:
            assert (await route(fresh)).code == ResponseCode.SUCCESS


async def test_master_slave_cluster_info_and_member_group(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(seed=5)
    async with namesrv(net), RemotingClient(net.transport("10.0.0.2")) as client:
        await client.invoke(NS_ADDR, register_cmd("a", 0, "10.0.0.2:10911"))
        resp = await client.invoke(NS_ADDR, register_cmd("a", 1, "10.0.0.3:10911"))
        assert resp.code == ResponseCode.SUCCESS
        assert resp.ext_fields == {"masterAddr": "10.0.0.2:10911", "haServerAddr": "10.0.0.2:10912"}
        r = from_json(TopicRouteData, (await route(client)).body)
        assert r.brokerDatas[0].brokerAddrs == {0: "10.0.0.2:10911", 1: "10.0.0.3:10911"}
        assert [q.brokerName for q in r.queueDatas] == ["a"]

        info = from_json(
            ClusterInfo,
            (await client.invoke(NS_ADDR, cmd(RequestCode.GET_BROKER_CLUSTER_INFO))).body,
        )
        assert info.clusterAddrTable == {CLUSTER: ["a"]}
        assert info.brokerAddrTable["a"].brokerAddrs == {0: "10.0.0.2:10911", 1: "10.0.0.3:10911"}

        resp = await client.invoke(
            NS_ADDR, cmd(RequestCode.GET_BROKER_MEMBER_GROUP, clusterName=CLUSTER, brokerName="a")
        )
        group = from_json(GetBrokerMemberGroupResponseBody, resp.body).brokerMemberGroup
        assert (group.cluster, group.brokerName) == (CLUSTER, "a")
        assert group.brokerAddrs == {0: "10.0.0.2:10911", 1: "10.0.0.3:10911"}


async def test_bad_requests_get_clear_answers(mock_clock: trio.testing.MockClock) -> None:
    net = SimNetwork(seed=6)
    async with namesrv(net), RemotingClient(net.transport("10.0.0.2")) as client:
        resp = await client.invoke(NS_ADDR, register_cmd("a", 0, "10.0.0.2:10911", compressed=True))
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert "compressedRegister=false" in (resp.remark or "")

        good = register_cmd("a", 0, "10.0.0.2:10911")
        bad_crc = register_cmd("a", 0, "10.0.0.2:10911", bodyCrc32=12345)
        resp = await client.invoke(NS_ADDR, bad_crc)
        assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
        right_crc = register_cmd(
            "a", 0, "10.0.0.2:10911", bodyCrc32=zlib.crc32(good.body) & 0x7FFFFFFF
        )
        assert (await client.invoke(NS_ADDR, right_crc)).code == ResponseCode.SUCCESS

        no_name = cmd(RequestCode.REGISTER_BROKER, brokerAddr="x:1", clusterName=CLUSTER)
        resp = await client.invoke(NS_ADDR, no_name)
        assert resp.code == ResponseCode.INVALID_PARAMETER and "brokerName" in (resp.remark or "")

        resp = await client.invoke(NS_ADDR, cmd(4242))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert "4242" in (resp.remark or "")
        resp = await client.invoke(NS_ADDR, cmd(RequestCode.SEND_MESSAGE))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert "SEND_MESSAGE" in (resp.remark or "")

        hb = await client.invoke(NS_ADDR, heartbeat_cmd("ghost", "10.0.0.7:10911"))
        assert hb.code == ResponseCode.SUCCESS and "not registered" in (hb.remark or "")


async def test_topic_admin_and_data_version(mock_clock: trio.testing.MockClock) -> None:
    net = SimNetwork(seed=7)
    async with namesrv(net), RemotingClient(net.transport("10.0.0.2")) as client:

        async def call(code: int, body: bytes = b"", **ext: str) -> RemotingCommand:
            return await client.invoke(NS_ADDR, cmd(code, body, **ext))

        await client.invoke(NS_ADDR, register_cmd("a", 0, "10.0.0.2:10911"))
        resp = await call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, brokerName="a")
        assert resp.ext_fields == {"wipeTopicCount": "2"}
        assert from_json(TopicRouteData, (await route(client)).body).queueDatas[0].perm == 4
        resp = await call(RequestCode.ADD_WRITE_PERM_OF_BROKER, brokerName="a")
        assert resp.ext_fields == {"addTopicCount": "2"}

        new_route = to_json(TopicRouteData(queueDatas=[QueueData("a", 2, 2, 6)]))
        assert (await call(RequestCode.REGISTER_TOPIC_IN_NAMESRV, new_route, topic="New")).code == 0
        topics = from_json(
            TopicList, (await call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body
        )
        assert topics.topicList == ["New", "TopicA", "TopicB"]
        assert (await call(RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="TopicB")).code == 0
        by_cluster = await call(RequestCode.GET_TOPICS_BY_CLUSTER, cluster=CLUSTER)
        assert from_json(TopicList, by_cluster.body).topicList == ["New", "TopicA"]
        system = from_json(TopicList, (await call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body)
        assert system.topicList == [CLUSTER, "a"] and system.brokerAddr == "10.0.0.2:10911"

        ident = {"brokerName": "a", "brokerAddr": "10.0.0.2:10911", "clusterName": CLUSTER}
        same = to_json(DataVersion(0, 1000, 1))
        resp = await call(RequestCode.QUERY_DATA_VERSION, same, brokerId="0", **ident)
        assert resp.ext_fields == {"changed": "false"}
        assert from_json(DataVersion, resp.body) == DataVersion(0, 1000, 1)
        newer = to_json(DataVersion(0, 2000, 2))
        resp = await call(RequestCode.QUERY_DATA_VERSION, newer, brokerId="0", **ident)
        assert resp.ext_fields == {"changed": "true"}
        resp = await call(RequestCode.QUERY_DATA_VERSION, brokerId="0", **ident)
        assert resp.code == ResponseCode.INVALID_PARAMETER

        conf = (await call(RequestCode.GET_NAMESRV_CONFIG)).body.decode()
        assert "scanNotActiveBrokerInterval=5000\n" in conf and "listenHost=10.0.0.1\n" in conf


async def test_topic_lists_can_be_disabled(mock_clock: trio.testing.MockClock) -> None:
    net = SimNetwork(seed=8)
    async with (
        namesrv(net, enableAllTopicList=False, enableTopicList=False),
        RemotingClient(net.transport("10.0.0.2")) as client,
    ):
        for c, ext in (
            (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}),
            (RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": CLUSTER}),
        ):
            resp = await client.invoke(NS_ADDR, cmd(c, **ext))
            assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "disable")


async def test_register_processor_adds_and_chains(mock_clock: trio.testing.MockClock) -> None:
    net = SimNetwork(seed=9)
    seen: list[int] = []
    async with namesrv(net) as ns, RemotingClient(net.transport("10.0.0.2")) as client:

        async def custom(ctx: RequestContext) -> RemotingCommand:
            return ctx.cmd.make_response(0, "controller says hi")

        replaced = ns.register_processor([RequestCode.CONTROLLER_GET_METADATA_INFO], custom)
        assert replaced == {}
        resp = await client.invoke(NS_ADDR, cmd(RequestCode.CONTROLLER_GET_METADATA_INFO))
        assert (resp.code, resp.remark) == (0, "controller says hi")

        async def spy(ctx: RequestContext) -> RemotingCommand | None:
            seen.append(ctx.cmd.code)
            return await previous[RequestCode.BROKER_HEARTBEAT](ctx)

        previous = ns.register_processor([RequestCode.BROKER_HEARTBEAT], spy)
        await client.invoke(NS_ADDR, register_cmd("a", 0, "10.0.0.2:10911", timeout=10_000))
        for _ in range(3):
            await trio.sleep(8)
            resp = await client.invoke(NS_ADDR, heartbeat_cmd("a", "10.0.0.2:10911"))
            assert (resp.code, resp.remark) == (ResponseCode.SUCCESS, None)
        assert seen == [RequestCode.BROKER_HEARTBEAT] * 3
        assert (await route(client)).code == ResponseCode.SUCCESS  # the chained handler ran


async def test_min_broker_id_change_is_pushed_to_the_group(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(seed=10)
    got: dict[str, list[RemotingCommand]] = {"10.0.0.2": [], "10.0.0.3": []}

    def fake_broker(host: str) -> RemotingServer:
        async def on_request(ctx: RequestContext) -> None:
            got[host].append(ctx.cmd)

        return RemotingServer(net.transport(host), f"{host}:10911", on_request)

    async with trio.open_nursery() as nursery:
        for host in got:
            await nursery.start(fake_broker(host).run)
        async with (
            namesrv(net, notifyMinBrokerIdChanged=True),
            RemotingClient(net.transport("10.0.0.5")) as client,
        ):
            await client.invoke(NS_ADDR, register_cmd("a", 1, "10.0.0.2:10911", acting=True))
            await client.invoke(NS_ADDR, register_cmd("a", 2, "10.0.0.3:10911", acting=True))
            assert got == {"10.0.0.2": [], "10.0.0.3": []}
            await client.invoke(NS_ADDR, register_cmd("a", 0, "10.0.0.5:10911", acting=True))
            with trio.fail_after(2):
                while not all(got.values()):
                    await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    for cmds in got.values():
        assert len(cmds) == 1 and cmds[0].code == RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE
        assert cmds[0].is_oneway
        assert cmds[0].ext_fields["minBrokerId"] == "0"
        assert cmds[0].ext_fields["minBrokerAddr"] == "10.0.0.5:10911"
        assert cmds[0].ext_fields["brokerName"] == "a"


async def test_kv_config_persists_and_feeds_order_config(tmp_path: Path) -> None:
    """Real clock here: the file writes run in a worker thread, which a MockClock would skip."""
    net = SimNetwork(seed=11)
    path = str(tmp_path / "namesrv" / "kvConfig.json")
    ns_conf = {"kvConfigPath": path, "orderMessageEnable": True}
    async with namesrv(net, **ns_conf), RemotingClient(net.transport("10.0.0.2")) as client:

        async def call(code: int, **ext: str) -> RemotingCommand:
            return await client.invoke(NS_ADDR, cmd(code, **ext))

        ns_ = "ORDER_TOPIC_CONFIG"
        assert (
            await call(RequestCode.PUT_KV_CONFIG, namespace=ns_, key="TopicA", value="a:4")
        ).code == 0
        await call(RequestCode.PUT_KV_CONFIG, namespace="other", key="k", value="v")
        await call(RequestCode.PUT_KV_CONFIG, namespace="other", key="gone", value="x")
        assert (await call(RequestCode.DELETE_KV_CONFIG, namespace="other", key="gone")).code == 0
        resp = await call(RequestCode.GET_KV_CONFIG, namespace="other", key="k")
        assert (resp.code, resp.ext_fields) == (0, {"value": "v"})
        resp = await call(RequestCode.GET_KV_CONFIG, namespace="other", key="gone")
        assert resp.code == ResponseCode.QUERY_NOT_FOUND
        assert resp.remark == "No config item, Namespace: other Key: gone"
        resp = await call(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace=ns_)
        assert from_json(KVTable, resp.body).table == {"TopicA": "a:4"}
        resp = await call(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="nope")
        assert resp.code == ResponseCode.QUERY_NOT_FOUND

        resp = await client.invoke(NS_ADDR, register_cmd("a", 0, "10.0.0.2:10911"))
        assert from_json(KVTable, resp.body).table == {"TopicA": "a:4"}
        assert from_json(TopicRouteData, (await route(client)).body).orderTopicConf == "a:4"

    on_disk = json.loads(Path(path).read_text())
    assert on_disk == {"configTable": {ns_: {"TopicA": "a:4"}, "other": {"k": "v"}}}
    async with namesrv(net, **ns_conf), RemotingClient(net.transport("10.0.0.2")) as client:
        resp = await client.invoke(
            NS_ADDR, cmd(RequestCode.GET_KV_CONFIG, namespace="other", key="k")
        )
        assert resp.ext_fields == {"value": "v"}


async def test_damaged_kv_file_stops_startup_with_a_clear_error(tmp_path: Path) -> None:
    from rocketrio.protocol.config import ConfigError

    path = tmp_path / "kvConfig.json"
    path.write_text("{not json")
    config = NamesrvConfig(listenHost=NS, kvConfigPath=str(path))
    with pytest.raises(ConfigError, match=r"kvConfig\.json"):
        await run_namesrv(config, SimNetwork().transport(NS))
