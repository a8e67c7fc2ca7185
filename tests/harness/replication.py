"""A controller-mode cluster on the simulated network, and replication helpers.

`cluster` starts three controllers (Raft), a NameServer and broker `Node`s that can be
started, crashed at a chosen storage call (`CrashAt`) and restarted; `pair` makes a master and
a slave of one broker set; `send`/`send_many` record what was acknowledged (`Acked`), so a test
can check that no acknowledged message is lost across a failover.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.boot.fault_sites import NO_FAULTS, FaultSites
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.controller import Controller
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import run_namesrv
from rocketrio.actors.raft.node import run_inline
from rocketrio.protocol.bodies import ClusterInfo
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import (
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext
from rocketrio.storage.broker_identity import BrokerIdentityStore
from tests.harness.blocking import inline_blocking
from tests.harness.clock import EPOCH_MS
from tests.harness.sim_network import SimNetwork

NS_HOST = "10.0.1.1"


CLIENT_HOST = "10.0.9.1"


CTRL_IDS = ("n0", "n1", "n2")


CTRL_HOSTS = {nid: f"10.0.0.{k + 1}" for k, nid in enumerate(CTRL_IDS)}


CLUSTER = "DefaultCluster"


WAIT_S = 60.0  # mock seconds


@attrs.define
class CrashAt:
    """Crash the broker (kill -9) the first time the flow reaches `site`."""

    site: str
    node: Node | None = None
    hit: bool = False

    async def reach(self, site: str) -> None:
        if site != self.site or self.hit:
            return
        self.hit = True
        assert self.node is not None
        self.node.crash_now()
        await trio.sleep_forever()


@attrs.define
class Node:
    """One broker process: its host, store and the current incarnation."""

    cluster: Cluster
    host: str
    root: str
    broker_name: str = "broker-a"
    broker: Broker | None = None
    scope: trio.CancelScope | None = None
    done: trio.Event = attrs.field(factory=trio.Event)

    @property
    def b(self) -> Broker:
        assert self.broker is not None
        return self.broker

    @property
    def rm(self) -> Any:
        assert self.b.roles is not None
        return self.b.roles

    @property
    def identity(self) -> BrokerIdentityStore:
        return BrokerIdentityStore(self.root)

    async def start(
        self, port: int = 10911, faults: FaultSites = NO_FAULTS, **overrides: Any
    ) -> Node:
        c = self.cluster
        values: dict[str, Any] = {
            "brokerClusterName": CLUSTER,
            "brokerName": self.broker_name,
            "brokerIP1": self.host,
            "listenPort": port,
            "namesrvAddr": c.namesrv_addr,
            "storePathRootDir": self.root,
            "mappedFileSizeCommitLog": 64 * 1024,
            "mappedFileSizeConsumeQueue": 100 * 20,
            "enableControllerMode": True,
            "controllerAddr": c.controller_addr,
        }
        values.update(overrides)
        config = BrokerConfig(**values)
        broker = Broker(
            config,
            c.net.transport(self.host),
            now_ms=lambda: EPOCH_MS + int(trio.current_time() * 1000),
            rng=random.Random(port),
            run_blocking=inline_blocking,
            faults=faults,
        )
        if isinstance(faults, CrashAt):
            faults.node = self
        scope, done = trio.CancelScope(), trio.Event()

        async def runner(*, task_status: trio.TaskStatus[None]) -> None:
            try:
                with scope:
                    await broker.run(task_status=task_status)
            finally:
                done.set()

        self.broker, self.scope, self.done = broker, scope, done
        await c.nursery.start(runner)
        return self

    async def wait_role(self) -> Node:
        with trio.fail_after(WAIT_S):
            await self.rm.role_taken.wait()
        return self

    def crash_now(self) -> None:
        self.b.crash()
        self.cluster.net.crash(self.host)

    async def crash(self) -> None:
        self.crash_now()
        await self.done.wait()

    async def stop(self) -> None:
        assert self.scope is not None
        self.scope.cancel()
        await self.done.wait()


@attrs.define
class Cluster:
    net: SimNetwork
    nursery: trio.Nursery
    tmp: Path
    controller_ids: tuple[str, ...]
    controllers: dict[str, Controller] = attrs.field(factory=dict)
    ctrl_scopes: dict[str, trio.CancelScope] = attrs.field(factory=dict)
    namesrv_addr: str = ""
    client: RemotingClient | None = None
    nodes: int = 0
    # ControllerConfig keys every controller of the cluster gets (metricsExporterType, say)
    controller_overrides: dict[str, Any] = attrs.field(factory=dict)

    @property
    def peers(self) -> str:
        return ";".join(f"{n}-{CTRL_HOSTS[n]}:9878" for n in self.controller_ids)

    @property
    def controller_addr(self) -> str:
        return ";".join(f"{CTRL_HOSTS[n]}:9878" for n in self.controller_ids)

    async def start_controller(self, nid: str) -> Controller:
        cfg = ControllerConfig(
            controllerDLegerGroup="group1",
            controllerDLegerPeers=self.peers,
            controllerDLegerSelfId=nid,
            controllerStorePath=str(self.tmp / "ctrl"),
            **self.controller_overrides,
        )
        ctrl = Controller(
            cfg,
            self.net.transport(CTRL_HOSTS[nid]),
            rng=random.Random(len(self.controllers) + 1),
            io_runner=run_inline,
        )
        scope = trio.CancelScope()

        async def runner(*, task_status: trio.TaskStatus[None]) -> None:
            with scope:
                async with trio.open_nursery() as n:
                    await n.start(ctrl.run)
                    task_status.started()

        await self.nursery.start(runner)
        self.controllers[nid], self.ctrl_scopes[nid] = ctrl, scope
        return ctrl

    def crash_controller(self, nid: str) -> None:
        self.net.crash(CTRL_HOSTS[nid])
        self.ctrl_scopes[nid].cancel()

    async def leader(self) -> Controller:
        with trio.fail_after(WAIT_S):
            while True:
                for nid, c in self.controllers.items():
                    if not self.ctrl_scopes[nid].cancel_called and c.node.is_ready_leader:
                        return c
                await trio.sleep(0.05)

    def node(self, broker_name: str = "broker-a") -> Node:
        self.nodes += 1
        host = f"10.0.2.{self.nodes}"
        return Node(self, host, str(self.tmp / f"broker-{self.nodes}"), broker_name)

    async def id_table(self, broker_name: str = "broker-a") -> dict[int, str]:
        info = (await self.leader()).replicas.replica_info(broker_name)
        return {} if info is None else info.broker_id_table()

    async def sync_state(self, broker_name: str = "broker-a") -> Any:
        return (await self.leader()).replicas.sync_state_info(broker_name)

    async def sync_state_set(self, broker_name: str = "broker-a") -> set[int]:
        info = await self.sync_state(broker_name)
        return set() if info is None else set(info.sync_state_set)

    async def cluster_info(self) -> ClusterInfo:
        assert self.client is not None
        resp = await self.client.invoke(
            self.namesrv_addr, RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO), 5
        )
        return from_json(ClusterInfo, resp.body)

    async def namesrv_ids(self, broker_name: str = "broker-a") -> dict[int, str]:
        bd = (await self.cluster_info()).brokerAddrTable.get(broker_name)
        return {} if bd is None else dict(bd.brokerAddrs)

    async def send(self, node: Node, topic: str = "T") -> RemotingCommand:
        assert self.client is not None
        v1 = SendMessageRequestHeader(
            producerGroup="PG",
            topic=topic,
            defaultTopic="TBW102",
            defaultTopicQueueNums=4,
            queueId=0,
            sysFlag=0,
            bornTimestamp=EPOCH_MS,
            flag=0,
        )
        header = SendMessageRequestHeaderV2.from_v1(v1)
        cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=to_ext(header), body=b"m")
        return await self.client.invoke(node.b.addr, cmd, 5)


@asynccontextmanager
async def cluster(
    tmp: Path,
    seed: int,
    controller_ids: tuple[str, ...] = ("n0",),
    *,
    controller_overrides: dict[str, Any] | None = None,
    namesrv_overrides: dict[str, Any] | None = None,
) -> AsyncIterator[Cluster]:
    async with trio.open_nursery() as nursery:
        c = Cluster(
            SimNetwork(seed),
            nursery,
            tmp,
            controller_ids,
            controller_overrides=dict(controller_overrides or {}),
        )
        for nid in controller_ids:
            await c.start_controller(nid)
        await c.leader()
        ns_config = NamesrvConfig(listenHost=NS_HOST, **(namesrv_overrides or {}))
        c.namesrv_addr = await nursery.start(run_namesrv, ns_config, c.net.transport(NS_HOST))
        async with RemotingClient(c.net.transport(CLIENT_HOST)) as client:
            c.client = client
            yield c
        nursery.cancel_scope.cancel()


async def wait_until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    with trio.fail_after(WAIT_S):
        while not await check():
            await trio.sleep(0.1)


async def awaits_equal(value: Awaitable[Any], expected: Any) -> bool:
    """For `wait_until`: an awaited value compared (``lambda: awaits_equal(c.x(), 3)``)."""
    return await value == expected


async def awaits_true(value: bool) -> bool:
    """For `wait_until` with a plain condition (``lambda: awaits_true(node.is_master)``)."""
    return value


TOPIC = "HA"


QUEUES = 4


Acked = dict[bytes, tuple[int, int]]  # body -> (queue id, queue offset)


async def send(
    c: Cluster, node: Node, body: bytes, queue_id: int, topic: str = TOPIC
) -> RemotingCommand:
    assert c.client is not None
    v1 = SendMessageRequestHeader(
        producerGroup="PG", topic=topic, defaultTopic="TBW102", defaultTopicQueueNums=QUEUES,
        queueId=queue_id, sysFlag=0, bornTimestamp=EPOCH_MS, flag=0,
    )  # fmt: skip
    header = SendMessageRequestHeaderV2.from_v1(v1)
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=to_ext(header), body=body)
    return await c.client.invoke(node.b.addr, cmd, 10)


async def send_many(c: Cluster, node: Node, n: int, tag: str, acked: Acked) -> int:
    ok = 0
    for i in range(n):
        body = f"{tag}-{i}".encode()
        resp = await send(c, node, body, i % QUEUES)
        if resp.code == RC.SUCCESS:
            h = from_ext(SendMessageResponseHeader, resp.ext_fields)
            acked[body] = (h.queueId, h.queueOffset)
            ok += 1
    return ok


async def routed_topic(c: Cluster, topic: str, queues: int = 4) -> None:
    """``topic`` created on the cluster (``queues`` read and write queues) and in the routes."""
    from rocketrio.actors.client.admin import MQAdmin, wait_for_route

    async with MQAdmin(c.namesrv_addr, c.net.transport(CLIENT_HOST)) as admin:
        await admin.update_topic(topic, cluster=CLUSTER, read_queues=queues, write_queues=queues)
        await wait_for_route(admin, topic)


async def pair(c: Cluster, **overrides: object) -> tuple[Node, Node]:
    """broker-a with two replicas, both in the SyncStateSet, A master."""
    a, b = c.node(), c.node()
    await (await a.start(**overrides)).wait_role()
    await (await b.start(**overrides)).wait_role()
    assert a.rm.serving_as_master() and b.rm.role is BrokerRole.SLAVE
    await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "B joined the SyncStateSet")
    return a, b
