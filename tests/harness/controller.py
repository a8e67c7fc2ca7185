"""A group of controllers (Raft) on the simulated network, called with a raw RemotingClient:
`group` starts them, `call` sends one request, `register_new_broker` and `keep_beating` play a
broker's part of the BrokerId and heartbeat protocol.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.controller import Controller
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingServer, RequestContext
from rocketrio.actors.raft.node import run_inline
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.controller_headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    GetNextBrokerIdRequestHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    SyncStateSet,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext, to_json
from tests.harness.sim_network import SimNetwork

IDS = ("n0", "n1", "n2")


HOSTS = {nid: f"10.0.0.{k + 1}" for k, nid in enumerate(IDS)}


PEERS = ";".join(f"{nid}-{HOSTS[nid]}:9878" for nid in IDS)


ADDRS = {nid: f"{HOSTS[nid]}:9878" for nid in IDS}


CLUSTER = "DefaultCluster"


RC = ResponseCode


def broker_addr(k: int) -> str:
    return f"10.0.2.{k}:10911"


@attrs.define
class Group:
    net: SimNetwork
    nursery: trio.Nursery
    tmp: Path
    peers: str = PEERS
    controllers: dict[str, Controller] = attrs.field(factory=dict)
    scopes: dict[str, trio.CancelScope] = attrs.field(factory=dict)
    starts: int = 0

    async def start(self, nid: str) -> Controller:
        cfg = ControllerConfig(
            controllerDLegerGroup="group1",
            controllerDLegerPeers=self.peers,
            controllerDLegerSelfId=nid,
            controllerStorePath=str(self.tmp / "ctrl"),
        )
        self.starts += 1
        ctrl = Controller(
            cfg,
            self.net.transport(HOSTS[nid]),
            rng=random.Random(self.starts),
            io_runner=run_inline,
        )
        self.controllers[nid] = ctrl
        self.scopes[nid] = await self.nursery.start(_scoped, ctrl.run)
        return ctrl

    def crash(self, nid: str) -> None:
        self.net.crash(HOSTS[nid])
        self.scopes[nid].cancel()

    async def leader(self, among: tuple[str, ...] = IDS) -> Controller:
        with trio.fail_after(10):
            while True:
                for nid in among:
                    c = self.controllers.get(nid)
                    if c is not None and c.node.started and c.node.is_ready_leader:
                        return c
                await trio.sleep(0.02)


async def _scoped(run: Any, *, task_status: trio.TaskStatus[trio.CancelScope]) -> None:
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as n:
            await n.start(run)
            task_status.started(scope)


@asynccontextmanager
async def group(tmp: Path, seed: int, ids: tuple[str, ...] = IDS) -> AsyncIterator[Group]:
    async with trio.open_nursery() as nursery:
        g = Group(SimNetwork(seed), nursery, tmp)
        for nid in ids:
            await g.start(nid)
        yield g
        nursery.cancel_scope.cancel()


async def call(
    client: RemotingClient, addr: str, code: int, header: Any = None, body: bytes = b""
) -> RemotingCommand:
    ext = to_ext(header) if header is not None else {}
    return await client.invoke(addr, RemotingCommand(code=code, ext_fields=ext, body=body), 5)


async def register_new_broker(
    client: RemotingClient, ctrl_addr: str, name: str, addr: str
) -> tuple[int, RemotingCommand]:
    """The persistent-BrokerId first start: GetNextBrokerId -> ApplyBrokerId -> Register."""
    r = await call(
        client,
        ctrl_addr,
        RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
        GetNextBrokerIdRequestHeader(CLUSTER, name),
    )
    assert r.code == RC.SUCCESS, r.remark
    broker_id = int(r.ext_fields["nextBrokerId"])
    r = await call(
        client,
        ctrl_addr,
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        ApplyBrokerIdRequestHeader(CLUSTER, name, broker_id, f"{addr};1700000000000"),
    )
    assert r.code == RC.SUCCESS, r.remark
    r = await call(
        client,
        ctrl_addr,
        RequestCode.CONTROLLER_REGISTER_BROKER,
        RegisterBrokerToControllerRequestHeader(CLUSTER, name, broker_id, addr),
    )
    assert r.code == RC.SUCCESS, r.remark
    return broker_id, r


def heartbeat(name: str, addr: str, broker_id: int, timeout_ms: int = 3000) -> Any:
    return BrokerHeartbeatRequestHeader(
        clusterName=CLUSTER,
        brokerAddr=addr,
        brokerName=name,
        brokerId=broker_id,
        epoch=1,
        maxOffset=100,
        heartbeatTimeoutMills=timeout_ms,
    )


async def keep_beating(
    client: RemotingClient, to: str, name: str, addr: str, broker_id: int
) -> None:
    while True:
        try:
            await call(client, to, RequestCode.BROKER_HEARTBEAT, heartbeat(name, addr, broker_id))
        except Exception:
            pass  # a missed heartbeat is what the controller must tolerate
        await trio.sleep(1)


@attrs.define
class FakeBroker:
    """Listens at a broker address and records the controller's role-change pushes."""

    notifications: list[tuple[NotifyBrokerRoleChangedRequestHeader, SyncStateSet]] = attrs.field(
        factory=list
    )
    got: trio.Event = attrs.field(factory=trio.Event)

    async def process(self, ctx: RequestContext) -> RemotingCommand | None:
        assert ctx.cmd.code == RequestCode.NOTIFY_BROKER_ROLE_CHANGED
        assert ctx.cmd.is_oneway
        h = from_ext(NotifyBrokerRoleChangedRequestHeader, ctx.cmd.ext_fields)
        self.notifications.append((h, from_json(SyncStateSet, ctx.cmd.body)))
        self.got.set()
        return None


async def broker_set_with_notifications(
    g: Group, client: RemotingClient, name: str, first_host: int
) -> tuple[Controller, list[FakeBroker], list[int]]:
    """Two brokers of `name` registered and in the SyncStateSet, each listening for pushes."""
    leader = await g.leader()
    at = ADDRS[leader.self_id]
    fakes = []
    ids = []
    for k in (first_host, first_host + 1):
        fake = FakeBroker()
        addr = broker_addr(k)
        server = RemotingServer(g.net.transport(addr.split(":")[0]), addr, fake.process)
        await g.nursery.start(server.run)
        broker_id, _ = await register_new_broker(client, at, name, addr)
        fakes.append(fake)
        ids.append(broker_id)
    for k, broker_id in zip((first_host, first_host + 1), ids, strict=True):
        await call(
            client, at, RequestCode.BROKER_HEARTBEAT, heartbeat(name, broker_addr(k), broker_id)
        )
    r = await call(
        client,
        at,
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        AlterSyncStateSetRequestHeader(name, masterBrokerId=ids[0], masterEpoch=1),
        to_json(SyncStateSet(ids, 1)),
    )
    assert r.code == RC.SUCCESS, r.remark
    return leader, fakes, ids
