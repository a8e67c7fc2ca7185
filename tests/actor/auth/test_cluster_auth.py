"""A controller-mode cluster with ACL 2.0 on, on the simulated network under MockClock: a
NameServer with an embedded controller (authenticationEnabled, its own super user) and a
controller-mode master/slave pair of broker-a (authentication and authorization on, the broker's
own calls signed with innerClientAuthenticationCredentials, the controller's role pushes too).

Signed clients (Producer, PushConsumer, MQAdmin, the ACL admin) work end to end; unsigned or
under-privileged ones are refused with NO_PERMISSION and a remark naming what is missing;
the NameServer's and controller's admin writes need their super user while routes stay open.
"""

from __future__ import annotations

import random
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.auth_admin import AuthAdmin, acl_body
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.controller_admin import ControllerAdmin
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.embedded import run_namesrv_with_controller
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.raft.node import run_inline
from rocketrio.protocol.acl_signature import RequestSigner, SessionCredentials
from rocketrio.protocol.auth_bodies import UserInfo
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.config import ConfigError, build_config
from rocketrio.protocol.headers import PutKVConfigRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from tests.harness.blocking import inline_blocking
from tests.harness.clients import Collector, wait_for
from tests.harness.clock import EPOCH_MS
from tests.harness.sim_disk import SimFileSystem
from tests.harness.sim_network import SimNetwork

NS_HOST, MASTER_HOST, SLAVE_HOST = "10.0.1.1", "10.0.2.1", "10.0.2.2"
NS_ADDR, CTRL_ADDR = f"{NS_HOST}:9876", f"{NS_HOST}:9878"
ROOT = SessionCredentials("root", "root-secret")
ALICE = SessionCredentials("alice", "alice-secret")
INIT_ROOT = '{"username":"root","password":"root-secret"}'
INNER = '{"accessKey":"inner","secretKey":"inner-secret"}'


async def start_control(net: SimNetwork, nursery: trio.Nursery) -> None:
    ns_cfg = NamesrvConfig(
        listenHost=NS_HOST,
        listenPort=9876,
        enableControllerInNamesrv=True,
        authenticationEnabled=True,
        initAuthenticationUser=INIT_ROOT,
    )
    ctrl_cfg = ControllerConfig(
        controllerDLegerGroup="group1",
        controllerDLegerPeers=f"n0-{CTRL_ADDR}",
        controllerDLegerSelfId="n0",
        controllerStorePath="/sim/namesrv/controller",
        authenticationEnabled=True,
        initAuthenticationUser=INIT_ROOT,
        innerClientAuthenticationCredentials=INNER,
    )
    run = partial(
        run_namesrv_with_controller, io_runner=run_inline, fs=SimFileSystem(random.Random(1))
    )
    await nursery.start(partial(run, ns_cfg, ctrl_cfg, net.transport(NS_HOST)))


async def start_broker(net: SimNetwork, nursery: trio.Nursery, host: str, seed: int) -> Broker:
    config = BrokerConfig(
        brokerName="broker-a",
        brokerIP1=host,
        namesrvAddr=NS_ADDR,
        storePathRootDir=f"/sim/{host}/store",
        mappedFileSizeCommitLog=64 * 1024,
        mappedFileSizeConsumeQueue=100 * 20,
        maxHashSlotNum=256,  # small index files: the sim disk holds whole files in memory
        maxIndexNum=1024,
        enableControllerMode=True,
        controllerAddr=CTRL_ADDR,
        authenticationEnabled=True,
        authorizationEnabled=True,
        initAuthenticationUser=INIT_ROOT,
        innerClientAuthenticationCredentials=INNER,
    )
    broker = Broker(
        config,
        net.transport(host),
        now_ms=lambda: EPOCH_MS + int(trio.current_time() * 1000),
        rng=random.Random(seed),
        run_blocking=inline_blocking,
        fs=SimFileSystem(random.Random(seed)),
    )
    await nursery.start(broker.run)
    assert broker.roles is not None
    with trio.fail_after(60):
        await broker.roles.role_taken.wait()
    return broker


def client_kwargs(net: SimNetwork, host: str, creds: SessionCredentials | None) -> dict[str, Any]:
    ak, sk = (creds.access_key, creds.secret_key) if creds else ("", "")
    cfg = ClientConfig(clientIP=host, instanceName="c", accessKey=ak, secretKey=sk)
    return {"transport": net.transport(host), "client_config": cfg}


async def test_cluster_with_auth_produces_and_consumes_with_signed_clients(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(23)
    async with trio.open_nursery() as nursery:
        await start_control(net, nursery)
        master = await start_broker(net, nursery, MASTER_HOST, 1)
        count_notifications(master)
        slave = await start_broker(net, nursery, SLAVE_HOST, 2)
        count_notifications(slave)
        await wait_for(
            lambda: master.roles.serving_as_master() and not slave.roles.serving_as_master()
        )

        # the super user sets the cluster up: a topic, a user, her rights (every broker)
        root_hook = RequestSigner(ROOT)
        async with MQAdmin(NS_ADDR, net.transport("10.0.9.1"), request_hook=root_hook) as admin:
            await admin.update_topic("Orders", cluster="DefaultCluster", read_queues=2,
                                     write_queues=2)  # fmt: skip
            await wait_for_route(admin, "Orders")
            auth = AuthAdmin(admin)
            brokers = await auth.brokers(None, "DefaultCluster")
            assert sorted(brokers) == [f"{MASTER_HOST}:10911", f"{SLAVE_HOST}:10911"]
            await auth.create_user(brokers, UserInfo("alice", "alice-secret"))
            acl = acl_body("User:alice", ["Topic:Orders", "Group:cg"], ["Pub", "Sub"])
            await auth.create_acl(brokers, acl)
            listed = await auth.list_users(brokers, "ali")
            assert all([u.username for u in v] == ["alice"] for v in listed.values())

        # alice produces (sync and async) and consumes with signed clients
        async with Producer("pg", NS_ADDR, **client_kwargs(net, "10.0.9.2", ALICE)) as p:
            for i in range(3):
                await p.send(Message("Orders", f"m{i}".encode()))
            futs = [await p.send_async(Message("Orders", f"a{i}".encode())) for i in range(3)]
            for f in futs:
                await f.wait()
        got = Collector()
        pc = PushConsumer("cg", NS_ADDR, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                          **client_kwargs(net, "10.0.9.3", ALICE))  # fmt: skip
        pc.subscribe("Orders", "*")
        pc.register_listener(got)
        async with pc:
            await wait_for(lambda: len(got.msgs) >= 6)
        assert sorted(got.bodies()) == sorted([b"m0", b"m1", b"m2", b"a0", b"a1", b"a2"])
        # every request of the signed clients (and of the brokers, the controller) passed the gate
        # at the first attempt (a refused send would have been retried and hidden)
        assert master.requests.gate is not None and master.requests.gate.refused == 0
        assert slave.requests.gate is not None and slave.requests.gate.refused == 0

        # an unsigned producer is refused by the broker, naming the reason
        async with Producer("pg", NS_ADDR, retries=0, **client_kwargs(net, "10.0.9.4", None)) as p:
            with pytest.raises(MQClientError) as err:
                await p.send(Message("Orders", b"anonymous"))
        assert "NO_PERMISSION (16)" in str(err.value) and "not signed" in str(err.value)
        # alice may not publish elsewhere
        async with Producer("pg", NS_ADDR, retries=0, **client_kwargs(net, "10.0.9.5", ALICE)) as p:
            with pytest.raises(MQClientError) as err:
                await p.send(Message("Other", b"x"))
        assert "User:alice has no Pub on Topic:Other" in str(err.value)

        # NameServer: routes are open, admin writes need the super user
        async with RemotingClient(net.transport("10.0.9.6")) as rc:
            route = RemotingCommand(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "Orders"}
            )
            assert (await rc.invoke(NS_ADDR, route)).code == ResponseCode.SUCCESS
            kv = to_ext(PutKVConfigRequestHeader("ns", "k", "v"))
            for hook, expect in (
                (None, "not signed"),
                (RequestSigner(ALICE), "User:alice is not found"),
                (RequestSigner(SessionCredentials("root", "wrong")), "check signature failed"),
            ):
                rc.request_hook = hook
                resp = await rc.invoke(
                    NS_ADDR, RemotingCommand(RequestCode.PUT_KV_CONFIG, ext_fields=dict(kv))
                )
                assert resp.code == ResponseCode.NO_PERMISSION and expect in (resp.remark or "")
            rc.request_hook = RequestSigner(ROOT)
            resp = await rc.invoke(
                NS_ADDR, RemotingCommand(RequestCode.PUT_KV_CONFIG, ext_fields=dict(kv))
            )
            assert resp.code == ResponseCode.SUCCESS, resp.remark

        # controller: electMaster unsigned is refused; signed by root it reaches the controller
        async with ControllerAdmin(CTRL_ADDR, NS_ADDR, net.transport("10.0.9.7")) as ca:
            with pytest.raises(MQBrokerError) as err:
                await ca.elect_master("DefaultCluster", "broker-a", 1)
            assert err.value.code == ResponseCode.NO_PERMISSION
        hook = RequestSigner(ROOT)
        async with ControllerAdmin(
            CTRL_ADDR, NS_ADDR, net.transport("10.0.9.8"), request_hook=hook
        ) as ca:
            try:
                await ca.elect_master("DefaultCluster", "broker-a", 1)
            except MQBrokerError as e:
                assert e.code != ResponseCode.NO_PERMISSION, e
        # a broker's own election request (a slave finding no master) is signed with the inner
        # credentials, which the controller knows as a super user
        inner = SessionCredentials("inner", "inner-secret")
        hook = RequestSigner(inner)
        async with ControllerAdmin(
            CTRL_ADDR, NS_ADDR, net.transport("10.0.9.9"), request_hook=hook
        ) as ca:
            try:
                await ca.elect_master("DefaultCluster", "broker-a", 1)
            except MQBrokerError as e:
                assert e.code != ResponseCode.NO_PERMISSION, e
        # the brokers' calls to each other and the controller's pushes were all signed
        for b in (master, slave):
            assert b.requests.gate is not None
            assert set(b.requests.gate.refused_by_code) <= {
                RequestCode.SEND_MESSAGE_V2,
                RequestCode.HEART_BEAT,
                RequestCode.UNREGISTER_CLIENT,
            }
        assert notified(master) + notified(slave) > 0
        nursery.cancel_scope.cancel()


NOTIFIED: dict[str, int] = {}


def count_notifications(broker: Broker) -> None:
    """Count the NOTIFY_BROKER_ROLE_CHANGED pushes that get past the broker's gate."""
    code = RequestCode.NOTIFY_BROKER_ROLE_CHANGED
    handler = broker.requests.handlers[code]
    NOTIFIED[broker.addr] = 0

    async def counted(ctx: Any) -> Any:
        NOTIFIED[broker.addr] += 1
        return await handler(ctx)

    # the table is read-only; the test swaps in a copy with a counting handler
    broker.requests.handlers = {**broker.requests.handlers, code: counted}


def notified(broker: Broker) -> int:
    return NOTIFIED[broker.addr]


def test_namesrv_and_controller_auth_keys_are_checked_at_start_up() -> None:
    with pytest.raises(ConfigError, match="authenticationEnabled=true on the name server needs"):
        build_config(NamesrvConfig, {"authenticationEnabled": "true"}, "namesrv.conf")
    with pytest.raises(ConfigError, match=r"namesrv\.conf: initAuthenticationUser is not valid"):
        build_config(NamesrvConfig, {"initAuthenticationUser": "root:pw"}, "namesrv.conf")
    with pytest.raises(ConfigError, match="authenticationEnabled=true on the controller needs"):
        build_config(ControllerConfig, {"authenticationEnabled": "true"}, "controller.conf")
