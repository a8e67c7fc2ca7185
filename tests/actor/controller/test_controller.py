"""Controller actors on the simulated network, driven over the wire like brokers and mqadmin do.

Three controller replicas (or one, embedded in a NameServer) run on a seeded `SimNetwork` with
Trio's MockClock; brokers are raw `RemotingClient`s plus, where a push is expected, a
`RemotingServer` that records NOTIFY_BROKER_ROLE_CHANGED.
"""

from __future__ import annotations

import glob
import os
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.embedded import load_namesrv_configs, run_namesrv_with_controller
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.raft.node import run_inline
from rocketrio.protocol.bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.config import ConfigError, load_config
from rocketrio.protocol.controller_headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerReplicasInfo,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    SyncStateSet,
    encode_broker_names,
)
from rocketrio.protocol.headers import GetRouteInfoRequestHeader, RegisterBrokerRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext, to_json
from tests.harness.controller import (
    ADDRS,
    CLUSTER,
    HOSTS,
    IDS,
    PEERS,
    RC,
    Group,
    broker_addr,
    broker_set_with_notifications,
    call,
    group,
    heartbeat,
    keep_beating,
    register_new_broker,
)
from tests.harness.paths import REPO
from tests.harness.sim_network import SimNetwork

ROOT = REPO


async def test_metadata_from_any_replica(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with group(tmp_path, 1) as g, RemotingClient(g.net.transport("10.0.9.1")) as client:
        leader = await g.leader()
        answers = []
        for nid in IDS:
            r = await call(client, ADDRS[nid], RequestCode.CONTROLLER_GET_METADATA_INFO)
            assert r.code == RC.SUCCESS
            answers.append(r.ext_fields)
        assert {a["controllerLeaderId"] for a in answers} == {leader.self_id}
        assert {a["controllerLeaderAddress"] for a in answers} == {ADDRS[leader.self_id]}
        assert [a["isLeader"] for a in answers].count("true") == 1
        assert all(a["peers"] == PEERS and a["group"] == "group1" for a in answers)
        r = await call(client, ADDRS["n1"], RequestCode.GET_CONTROLLER_CONFIG)
        assert "controllerDLegerSelfId=n1" in r.body.decode()


async def test_broker_id_flow_and_non_leader_refusals(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with group(tmp_path, 2) as g, RemotingClient(g.net.transport("10.0.9.1")) as client:
        leader = await g.leader()
        at = ADDRS[leader.self_id]
        follower = next(n for n in IDS if n != leader.self_id)
        # writes and linearizable reads are refused by a follower, which names the leader
        for code, header in (
            (
                RequestCode.CONTROLLER_APPLY_BROKER_ID,
                ApplyBrokerIdRequestHeader(CLUSTER, "broker-a", 1, f"{broker_addr(1)};1"),
            ),
            (RequestCode.CONTROLLER_GET_REPLICA_INFO, GetReplicaInfoRequestHeader("broker-a")),
        ):
            r = await call(client, ADDRS[follower], code, header)
            assert r.code == RC.CONTROLLER_NOT_LEADER
            assert r.remark == f"not leader, leader is {leader.self_id} at {at}"

        id1, reg1 = await register_new_broker(client, at, "broker-a", broker_addr(1))
        assert id1 == 1
        # the first broker of a set becomes its master, in masterEpoch 1
        assert reg1.ext_fields["masterBrokerId"] == "1"
        assert reg1.ext_fields["masterAddress"] == broker_addr(1)
        assert reg1.ext_fields["masterEpoch"] == "1"
        id2, reg2 = await register_new_broker(client, at, "broker-a", broker_addr(2))
        assert id2 == 2 and reg2.ext_fields["masterBrokerId"] == "1"

        # ApplyBrokerId is a CAS: a taken id with another registerCheckCode is refused ...
        r = await call(
            client,
            at,
            RequestCode.CONTROLLER_APPLY_BROKER_ID,
            ApplyBrokerIdRequestHeader(CLUSTER, "broker-a", 2, f"{broker_addr(3)};5"),
        )
        assert r.code == RC.CONTROLLER_BROKER_ID_INVALID and "next brokerId is 3" in r.remark
        # ... while a resend with the same code (crash before broker.meta) is accepted
        r = await call(
            client,
            at,
            RequestCode.CONTROLLER_APPLY_BROKER_ID,
            ApplyBrokerIdRequestHeader(CLUSTER, "broker-a", 2, f"{broker_addr(2)};1700000000000"),
        )
        assert r.code == RC.SUCCESS

        # the master grows its SyncStateSet; a stale epoch is fenced
        alter = AlterSyncStateSetRequestHeader("broker-a", masterBrokerId=1, masterEpoch=1)
        await call(
            client, at, RequestCode.BROKER_HEARTBEAT, heartbeat("broker-a", broker_addr(2), 2)
        )
        r = await call(
            client,
            at,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            alter,
            to_json(SyncStateSet([1, 2], 1)),
        )
        assert r.code == RC.SUCCESS, r.remark
        assert r.ext_fields["newSyncStateSetEpoch"] == "2"
        r = await call(
            client,
            at,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
            alter,
            to_json(SyncStateSet([1], 1)),
        )
        assert r.code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH

        r = await call(
            client,
            at,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
            body=encode_broker_names(["broker-a", "unknown"]),
        )
        info = from_json(BrokerReplicasInfo, r.body).replicasInfoTable
        assert list(info) == ["broker-a"]
        assert [m.brokerId for m in info["broker-a"].inSyncReplicas] == [1, 2]
        assert info["broker-a"].syncStateSetEpoch == 2

        # every replica applied the same state
        await trio.sleep(1)
        views = {n: g.controllers[n].replicas.describe() for n in IDS}
        assert views[follower] == views[leader.self_id]
        assert views[follower]["broker-a"]["syncStateSet"] == [1, 2]


async def test_dead_master_is_replaced_and_brokers_are_notified(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with group(tmp_path, 3) as g, RemotingClient(g.net.transport("10.0.9.1")) as client:
        leader, fakes, ids = await broker_set_with_notifications(g, client, "broker-a", 1)
        at = ADDRS[leader.self_id]
        async with trio.open_nursery() as beats:
            beats.start_soon(keep_beating, client, at, "broker-a", broker_addr(1), ids[0])
            beats.start_soon(keep_beating, client, at, "broker-a", broker_addr(2), ids[1])
            # the master stays while it beats, even past the new leader's listening window
            await trio.sleep(15)
            assert leader.replicas.sync_state_info("broker-a").master_broker_id == ids[0]
            assert not fakes[1].notifications
            told_master = len(fakes[0].notifications)  # it was told when it became master
            beats.cancel_scope.cancel()
        async with trio.open_nursery() as beats:
            beats.start_soon(keep_beating, client, at, "broker-a", broker_addr(2), ids[1])
            with trio.fail_after(12):  # 3 s heartbeat timeout + a 5 s scan period
                await fakes[1].got.wait()
            beats.cancel_scope.cancel()
        header, sss = fakes[1].notifications[-1]
        assert header.masterBrokerId == ids[1] and header.masterAddress == broker_addr(2)
        assert header.masterEpoch == 2 and sss.syncStateSet == [ids[1]]
        assert len(fakes[0].notifications) == told_master  # the dead master is not told
        r = await call(
            client,
            at,
            RequestCode.CONTROLLER_GET_REPLICA_INFO,
            GetReplicaInfoRequestHeader("broker-a"),
        )
        assert (r.ext_fields["masterBrokerId"], r.ext_fields["masterEpoch"]) == (str(ids[1]), "2")


async def test_closed_master_connection_triggers_election_at_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with group(tmp_path, 4) as g, RemotingClient(g.net.transport("10.0.9.1")) as admin:
        leader, fakes, ids = await broker_set_with_notifications(g, admin, "broker-b", 5)
        at = ADDRS[leader.self_id]
        await trio.sleep(11)  # past the fresh leader's listening window
        async with trio.open_nursery() as beats:
            beats.start_soon(keep_beating, admin, at, "broker-b", broker_addr(6), ids[1])
            async with RemotingClient(g.net.transport("10.0.2.5")) as master_client:
                r = await call(
                    master_client,
                    at,
                    RequestCode.BROKER_HEARTBEAT,
                    heartbeat("broker-b", broker_addr(5), ids[0], timeout_ms=60_000),
                )
                assert r.code == RC.SUCCESS
            closed_at = trio.current_time()  # the master's connection is gone now
            with trio.fail_after(30):
                await fakes[1].got.wait()
            beats.cancel_scope.cancel()
        # far sooner than its 60 s heartbeat timeout: the channel close was enough
        assert trio.current_time() - closed_at < 1
        assert fakes[1].notifications[-1][0].masterBrokerId == ids[1]


async def test_admin_elect_master_and_clean_broker_data(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with group(tmp_path, 5) as g, RemotingClient(g.net.transport("10.0.9.1")) as client:
        leader, fakes, ids = await broker_set_with_notifications(g, client, "broker-c", 10)
        at = ADDRS[leader.self_id]
        r = await call(
            client,
            at,
            RequestCode.CONTROLLER_ELECT_MASTER,
            ElectMasterRequestHeader.of_admin_trigger(CLUSTER, "broker-c", ids[1]),
        )
        assert r.code == RC.SUCCESS, r.remark
        assert r.ext_fields["masterBrokerId"] == str(ids[1])
        with trio.fail_after(5):
            await fakes[1].got.wait()
            await fakes[0].got.wait()  # both live members hear of the switch
        r = await call(
            client,
            at,
            RequestCode.CLEAN_BROKER_DATA,
            CleanControllerBrokerDataRequestHeader("broker-c", CLUSTER, str(ids[0])),
        )
        assert r.code == RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA and "alive" in r.remark
        r = await call(
            client,
            at,
            RequestCode.CLEAN_BROKER_DATA,
            CleanControllerBrokerDataRequestHeader(
                "broker-c", CLUSTER, str(ids[0]), isCleanLivingBroker=True
            ),
        )
        assert r.code == RC.SUCCESS, r.remark
        assert leader.replicas.replica_info("broker-c").broker_id_table() == {
            ids[1]: broker_addr(11)
        }


async def test_controller_leader_crash_keeps_metadata(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with group(tmp_path, 6) as g, RemotingClient(g.net.transport("10.0.9.1")) as client:
        old = await g.leader()
        for k in (1, 2):
            await register_new_broker(client, ADDRS[old.self_id], "broker-a", broker_addr(k))
        await register_new_broker(client, ADDRS[old.self_id], "broker-b", broker_addr(3))
        before = old.replicas.describe()
        g.crash(old.self_id)
        survivors = tuple(n for n in IDS if n != old.self_id)
        new = await g.leader(among=survivors)
        at = ADDRS[new.self_id]
        assert new.replicas.describe() == before
        r = await call(
            client,
            at,
            RequestCode.CONTROLLER_GET_REPLICA_INFO,
            GetReplicaInfoRequestHeader("broker-a"),
        )
        assert r.code == RC.SUCCESS and r.ext_fields["masterBrokerId"] == "1"
        # the new leader takes writes: a third broker joins broker-a
        broker_id, _ = await register_new_broker(client, at, "broker-a", broker_addr(4))
        assert broker_id == 3
        # the old leader restarts from its store and catches up
        restarted = await g.start(old.self_id)
        with trio.fail_after(10):
            while restarted.replicas.describe() != new.replicas.describe():
                await trio.sleep(0.1)
        r = await call(client, ADDRS[old.self_id], RequestCode.CONTROLLER_GET_METADATA_INFO)
        assert r.ext_fields["controllerLeaderId"] == new.self_id


async def test_embedded_controller_learns_liveness_from_namesrv_heartbeats(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    net = SimNetwork(7)
    ns_cfg = NamesrvConfig(listenHost="10.0.0.1", listenPort=9876, enableControllerInNamesrv=True)
    ctrl_cfg = ControllerConfig(
        controllerDLegerGroup="group1",
        controllerDLegerPeers="n0-10.0.0.1:9878",
        controllerDLegerSelfId="n0",
        controllerStorePath=str(tmp_path),
    )
    ns_addr, ctrl_addr = "10.0.0.1:9876", "10.0.0.1:9878"
    async with trio.open_nursery() as nursery, RemotingClient(net.transport("10.0.9.1")) as client:
        _, ctrl = await nursery.start(
            partial(run_namesrv_with_controller, io_runner=run_inline),
            ns_cfg,
            ctrl_cfg,
            net.transport("10.0.0.1"),
        )
        g = Group(net, nursery, tmp_path, peers="n0-10.0.0.1:9878", controllers={"n0": ctrl})
        _, fakes, ids = await broker_set_with_notifications(g, client, "broker-a", 1)
        async with trio.open_nursery() as beats:
            # heartbeats go to the NameServer only
            for k, broker_id in zip((1, 2), ids, strict=True):
                beats.start_soon(
                    keep_beating, client, ns_addr, "broker-a", broker_addr(k), broker_id
                )
            await trio.sleep(20)
            assert ctrl.heartbeats.is_alive(
                CLUSTER, "broker-a", ids[0], int(trio.current_time() * 1000)
            )
            assert not fakes[1].notifications
            beats.cancel_scope.cancel()
        async with trio.open_nursery() as beats:
            beats.start_soon(keep_beating, client, ns_addr, "broker-a", broker_addr(2), ids[1])
            with trio.fail_after(12):
                await fakes[1].got.wait()
            beats.cancel_scope.cancel()
        assert fakes[1].notifications[-1][0].masterBrokerId == ids[1]
        r = await call(client, ctrl_addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
        assert r.ext_fields["isLeader"] == "true"
        nursery.cancel_scope.cancel()


def _register_in_namesrv(name: str, addr: str) -> RemotingCommand:
    wrapper = TopicConfigSerializeWrapper(
        topicConfigTable={t: TopicConfig(t, 4, 4) for t in ("TopicA", "TopicB")},
        dataVersion=DataVersion(0, 1000, 1),
    )
    h = RegisterBrokerRequestHeader(
        brokerName=name,
        brokerAddr=addr,
        clusterName=CLUSTER,
        haServerAddr=addr,
        brokerId=0,
    )
    body = to_json(RegisterBrokerBody(topicConfigSerializeWrapper=wrapper))
    return RemotingCommand(code=RequestCode.REGISTER_BROKER, ext_fields=to_ext(h), body=body)


async def test_namesrv_routes_work_while_the_controller_majority_is_down(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    net = SimNetwork(8)
    ns_cfg = NamesrvConfig(listenHost="10.0.0.1", listenPort=9876, enableControllerInNamesrv=True)
    # this NameServer embeds replica n0; n1 and n2 (the majority) never come up
    ctrl_cfg = ControllerConfig(
        controllerDLegerGroup="group1",
        controllerDLegerPeers=PEERS,
        controllerDLegerSelfId="n0",
        controllerStorePath=str(tmp_path),
    )
    async with trio.open_nursery() as nursery, RemotingClient(net.transport("10.0.9.1")) as client:
        await nursery.start(
            run_namesrv_with_controller, ns_cfg, ctrl_cfg, net.transport("10.0.0.1")
        )
        await trio.sleep(5)
        r = await client.invoke("10.0.0.1:9876", _register_in_namesrv("broker-a", broker_addr(1)))
        assert r.code == RC.SUCCESS
        r = await call(
            client,
            "10.0.0.1:9876",
            RequestCode.GET_ROUTEINFO_BY_TOPIC,
            GetRouteInfoRequestHeader(topic="TopicA"),
        )
        assert r.code == RC.SUCCESS and b"broker-a" in r.body
        r = await call(
            client,
            ADDRS["n0"],
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
            GetNextBrokerIdRequestHeader(CLUSTER, "broker-a"),
        )
        assert r.code == RC.CONTROLLER_NOT_LEADER
        assert r.remark == "not leader, no leader elected yet"
        nursery.cancel_scope.cancel()


def test_namesrv_conf_carries_the_controller_keys(tmp_path: Path) -> None:
    conf = tmp_path / "namesrv.conf"
    conf.write_text(
        "listenPort=9876\nenableControllerInNamesrv=true\ncontrollerDLegerGroup=g\n"
        "controllerDLegerPeers=n0-127.0.0.1:9878\ncontrollerDLegerSelfId=n0\n"
        "scanNotActiveBrokerInterval=3000\n"
    )
    ns, ctrl = load_namesrv_configs(str(conf))
    assert ns.enableControllerInNamesrv and ctrl is not None
    assert ctrl.self_address() == "127.0.0.1:9878"
    assert ns.scanNotActiveBrokerInterval == ctrl.scanNotActiveBrokerInterval == 3000
    conf.write_text("listenPort=9876\ncontrollerDLegerSelfId=n0\n")
    assert load_namesrv_configs(str(conf))[1] is None  # controller keys inert when switched off
    conf.write_text("enableControllerInNamesrv=true\ncontrollerDLegerPeers=n0-h:1\nbogusKey=1\n")
    with pytest.raises(ConfigError, match="unknown key bogusKey"):
        load_namesrv_configs(str(conf))
    conf.write_text(
        "enableControllerInNamesrv=true\ncontrollerDLegerGroup=g\n"
        "controllerDLegerPeers=n0-h:1\ncontrollerDLegerSelfId=n9\n"
    )
    with pytest.raises(ConfigError, match="n9"):
        load_namesrv_configs(str(conf))


@pytest.mark.parametrize(
    "path",
    sorted(glob.glob(os.path.join(ROOT, "deploy", "controller-*", "*.conf"))),
    ids=lambda p: os.path.relpath(p, ROOT),
)
def test_controller_deploy_configs_load(path: str) -> None:
    name = os.path.basename(path)
    if name.startswith("controller"):
        cfg = load_config(ControllerConfig, path)
        assert cfg.self_address().startswith("127.0.0.1:")
    elif name.startswith("broker"):
        bcfg = load_config(BrokerConfig, path)
        assert bcfg.enableControllerMode and bcfg.controllerAddr
    else:
        _ns, ctrl = load_namesrv_configs(path)
        assert (ctrl is not None) == ("embedded" in path)


async def test_isolated_leader_does_not_answer_reads(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with group(tmp_path, 9) as g, RemotingClient(g.net.transport("10.0.9.1")) as client:
        leader = await g.leader()
        at = ADDRS[leader.self_id]
        await register_new_broker(client, at, "broker-a", broker_addr(1))
        others = [HOSTS[n] for n in IDS if n != leader.self_id]
        g.net.isolate(HOSTS[leader.self_id], others)  # the client still reaches it
        # a read needs a majority to vouch for the leader (a read barrier): without one the
        # answer could be stale once the others elect a new leader, so none is given
        r = await call(
            client,
            at,
            RequestCode.CONTROLLER_GET_REPLICA_INFO,
            GetReplicaInfoRequestHeader("broker-a"),
        )
        assert r.code in (RC.CONTROLLER_NOT_LEADER, RC.SYSTEM_ERROR), r
        assert "masterBrokerId" not in r.ext_fields
