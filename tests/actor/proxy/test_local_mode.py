"""Local mode in one Trio run: a NameServer and two brokers on the simulated network, each broker
started by `run_broker_with_proxy` (its gRPC proxy in the same run), driven by a real gRPC client
on loopback. The proxy reaches its own broker in-process (no simulated connection from the
broker's host to itself, a connection the broker sees as "in-process"); routes point each
broker set's queues at its own broker's proxy; a call for the other broker's queue is forwarded
over the network; a broker that stops takes its proxy down. Real clock: grpcio runs on its own
thread, which a MockClock cannot see."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import grpc
import trio
from google.protobuf.duration_pb2 import Duration

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import NameServer
from rocketrio.actors.proxy.in_process import IN_PROCESS_PEER
from rocketrio.actors.proxy.local import run_broker_with_proxy
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc
from tests.harness.sim_network import SimNetwork
from tests.harness.system import free_port_block

NS_HOST = "10.0.0.1"
HOSTS = {"broker-a": "10.0.1.1", "broker-b": "10.0.1.2"}
META = (("x-mq-client-id", "local-test"),)


@attrs.define
class Local:
    net: SimNetwork
    brokers: dict[str, Broker]
    ports: dict[str, int]
    scopes: dict[str, trio.CancelScope]
    done: dict[str, trio.Event]

    async def call(self, broker: str, method: str, request: Any) -> Any:
        def run() -> Any:
            with grpc.insecure_channel(f"127.0.0.1:{self.ports[broker]}") as channel:
                rpc = getattr(sgrpc.MessagingServiceStub(channel), method)
                out = rpc(request, metadata=META, timeout=30)
                return list(out) if method == "ReceiveMessage" else out

        return await trio.to_thread.run_sync(run)


@asynccontextmanager
async def local_cluster(tmp_path: Path) -> AsyncIterator[Local]:
    net = SimNetwork(seed=3)
    base = free_port_block(2, step=1, extra=())
    ports = {"broker-a": base, "broker-b": base + 1}
    async with trio.open_nursery() as n:
        ns = NameServer(NamesrvConfig(listenHost=NS_HOST, listenPort=9876), net.transport(NS_HOST))
        ns_addr = await n.start(ns.run)
        c = Local(net, {}, ports, {}, {})
        for name, host in HOSTS.items():
            cfg = BrokerConfig(
                brokerName=name,
                brokerIP1=host,
                listenPort=10911,
                namesrvAddr=ns_addr,
                storePathRootDir=str(tmp_path / name),
                mappedFileSizeCommitLog=1 << 20,
                mappedFileSizeConsumeQueue=1000 * 20,
                enableProxy=True,
                grpcServerPort=ports[name],
            )
            c.scopes[name], c.done[name] = trio.CancelScope(), trio.Event()

            async def run(
                cfg: BrokerConfig = cfg, name: str = name, *, task_status: trio.TaskStatus[Any]
            ) -> None:
                try:
                    with c.scopes[name]:
                        await run_broker_with_proxy(
                            cfg, net.transport(cfg.brokerIP1), task_status=task_status
                        )
                finally:
                    c.done[name].set()

            c.brokers[name] = await n.start(run)
        async with MQAdmin(ns_addr, net.transport("10.0.9.1")) as admin:
            await admin.update_topic("T", cluster="DefaultCluster", read_queues=2, write_queues=2)
            with trio.fail_after(20):
                while len((await admin.topic_route("T")).queueDatas) < 2:
                    await trio.sleep(0.1)
        yield c
        n.cancel_scope.cancel()


def send(body: bytes, msg_id: str) -> spb.SendMessageRequest:
    m = pb.Message(
        topic=pb.Resource(name="T"),
        system_properties=pb.SystemProperties(message_id=msg_id, message_type=pb.NORMAL),
        body=body,
    )
    return spb.SendMessageRequest(messages=[m])


def receive(broker: str) -> spb.ReceiveMessageRequest:
    return spb.ReceiveMessageRequest(
        group=pb.Resource(name="G"),
        message_queue=pb.MessageQueue(
            topic=pb.Resource(name="T"), id=-1, broker=pb.Broker(name=broker)
        ),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
        batch_size=16,
        invisible_duration=Duration(seconds=30),
        long_polling_timeout=Duration(seconds=1),
    )


def bodies(responses: list[spb.ReceiveMessageResponse]) -> list[bytes]:
    return sorted(r.message.body for r in responses if r.HasField("message"))


def self_links(net: SimNetwork) -> list[str]:
    """Simulated connections from a broker's host to that same host (a socket to itself)."""
    return [s.local_host for s in net._streams if s.local_host == s.remote_host]


async def test_local_proxies_serve_their_own_broker_in_process(tmp_path: Path) -> None:
    async with local_cluster(tmp_path) as c:
        route = await c.call(
            "broker-a", "QueryRoute", spb.QueryRouteRequest(topic=pb.Resource(name="T"))
        )
        assert route.status.code == pb.OK
        where = {
            (q.broker.name, a.host, a.port)
            for q in route.message_queues
            for a in q.broker.endpoints.addresses
        }
        assert where == {
            ("broker-a", HOSTS["broker-a"], c.ports["broker-a"]),
            ("broker-b", HOSTS["broker-b"], c.ports["broker-b"]),
        }
        assignment = await c.call(
            "broker-b",
            "QueryAssignment",
            spb.QueryAssignmentRequest(topic=pb.Resource(name="T"), group=pb.Resource(name="G")),
        )
        assert {
            (a.message_queue.broker.name, a.message_queue.broker.endpoints.addresses[0].port)
            for a in assignment.assignments
        } == {("broker-a", c.ports["broker-a"]), ("broker-b", c.ports["broker-b"])}

        # each proxy's sends land on its own broker (in-process), both brokers get messages
        for i in range(3):
            r = await c.call("broker-a", "SendMessage", send(b"a%d" % i, f"A{i}"))
            assert r.status.code == pb.OK, r
            r = await c.call("broker-b", "SendMessage", send(b"b%d" % i, f"B{i}"))
            assert r.status.code == pb.OK, r
        got_a = await c.call("broker-a", "ReceiveMessage", receive("broker-a"))
        assert bodies(got_a) == [b"a0", b"a1", b"a2"]
        # a queue of the other broker: proxy a forwards over the network to broker-b
        got_b = await c.call("broker-a", "ReceiveMessage", receive("broker-b"))
        assert bodies(got_b) == [b"b0", b"b1", b"b2"]

        # the in-process path: no simulated socket from a broker's host to itself, and each
        # broker serves one connection whose peer is its proxy in the same process
        assert self_links(c.net) == []
        for name, broker in c.brokers.items():
            peers = [conn.remote for conn in broker.server.connections]
            assert IN_PROCESS_PEER in peers, (name, peers)
        # broker-b also serves proxy a's forwarded calls, from broker-a's host
        b_peers = {conn.remote for conn in c.brokers["broker-b"].server.connections}
        assert HOSTS["broker-a"] in b_peers


async def test_a_stopping_broker_takes_its_proxy_down(tmp_path: Path) -> None:
    async with local_cluster(tmp_path) as c:
        req = spb.QueryRouteRequest(topic=pb.Resource(name="T"))
        assert (await c.call("broker-a", "QueryRoute", req)).status.code == pb.OK
        c.brokers["broker-a"].crash()  # the broker stops by itself (like a fatal error)
        with trio.fail_after(20):
            await c.done["broker-a"].wait()
        try:
            await c.call("broker-a", "QueryRoute", req)
            raise AssertionError("the proxy of a stopped broker still answers")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE
        # a cancelled broker (SIGINT) stops with its proxy, promptly
        c.scopes["broker-b"].cancel()
        with trio.fail_after(20):
            await c.done["broker-b"].wait()
        try:
            await c.call("broker-b", "QueryRoute", req)
            raise AssertionError("the proxy of a stopped broker still answers")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE
