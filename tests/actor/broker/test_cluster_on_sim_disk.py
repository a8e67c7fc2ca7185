"""A controller-mode cluster whose processes keep every file on their own simulated disk.

A NameServer with an embedded controller (one Raft replica, KV config file on) and a
controller-mode SYNC_FLUSH broker run on a seeded `SimNetwork` under MockClock, each process
given its own `SimFileSystem` through the constructors (`run_namesrv_with_controller(fs=...)`,
`Broker(fs=...)`). Every file lands on those disks; then both processes are killed and both
disks lose power keeping nothing unsynced, and after a restart on the same disks the broker has
its id, role and epoch back and the acknowledged message is still there.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig, FlushDiskType
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.embedded import run_namesrv_with_controller
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.raft.node import run_inline
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    PutKVConfigRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from tests.harness.blocking import inline_blocking
from tests.harness.clock import EPOCH_MS
from tests.harness.sim_disk import SimFileSystem
from tests.harness.sim_network import SimNetwork

NS_HOST, BROKER_HOST, CLIENT_HOST = "10.0.1.1", "10.0.2.1", "10.0.9.1"
NS_ADDR, CTRL_ADDR = f"{NS_HOST}:9876", f"{NS_HOST}:9878"
STORE = "/sim/broker-a-0/store"


class Process:
    """One process run in its own cancel scope, killable like kill -9."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.scope = trio.CancelScope()
        self.done = trio.Event()

    async def start(self, run: Callable[..., Any]) -> Any:
        async def runner(*, task_status: trio.TaskStatus[Any]) -> None:
            try:
                with self.scope:
                    async with trio.open_nursery() as n:
                        task_status.started(await n.start(run))
            finally:
                self.done.set()

        return await self.nursery.start(runner)

    async def kill(self) -> None:
        self.scope.cancel()
        await self.done.wait()


async def start_namesrv(net: SimNetwork, fs: SimFileSystem, nursery: trio.Nursery) -> Process:
    ns_cfg = NamesrvConfig(
        listenHost=NS_HOST,
        listenPort=9876,
        enableControllerInNamesrv=True,
        kvConfigPath="/sim/namesrv/kvConfig.json",
    )
    ctrl_cfg = ControllerConfig(
        controllerDLegerGroup="group1",
        controllerDLegerPeers=f"n0-{CTRL_ADDR}",
        controllerDLegerSelfId="n0",
        controllerStorePath="/sim/namesrv/controller",
    )
    proc = Process(nursery)
    run = partial(run_namesrv_with_controller, io_runner=run_inline, fs=fs)
    await proc.start(partial(run, ns_cfg, ctrl_cfg, net.transport(NS_HOST)))
    return proc


async def start_broker(
    net: SimNetwork, fs: SimFileSystem, nursery: trio.Nursery
) -> tuple[Process, Broker]:
    config = BrokerConfig(
        brokerName="broker-a",
        brokerIP1=BROKER_HOST,
        namesrvAddr=NS_ADDR,
        storePathRootDir=STORE,
        mappedFileSizeCommitLog=64 * 1024,
        mappedFileSizeConsumeQueue=100 * 20,
        maxHashSlotNum=256,  # small index files: the sim disk holds whole files in memory
        maxIndexNum=1024,
        enableControllerMode=True,
        controllerAddr=CTRL_ADDR,
        flushDiskType=FlushDiskType.SYNC_FLUSH,
    )
    broker = Broker(
        config,
        net.transport(BROKER_HOST),
        now_ms=lambda: EPOCH_MS + int(trio.current_time() * 1000),
        rng=random.Random(1),
        run_blocking=inline_blocking,
        fs=fs,
    )
    proc = Process(nursery)
    await proc.start(broker.run)
    assert broker.roles is not None
    with trio.fail_after(60):
        await broker.roles.role_taken.wait()
    return proc, broker


def send(body: bytes) -> RemotingCommand:
    v1 = SendMessageRequestHeader(
        producerGroup="PG", topic="T", defaultTopic="TBW102", defaultTopicQueueNums=4,
        queueId=0, sysFlag=0, bornTimestamp=EPOCH_MS, flag=0,
    )  # fmt: skip
    header = to_ext(SendMessageRequestHeaderV2.from_v1(v1))
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=header, body=body)


async def test_cluster_files_live_on_the_simulated_disks_and_survive_power_loss(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(11)
    ns_disk, broker_disk = SimFileSystem(random.Random(1)), SimFileSystem(random.Random(2))
    async with trio.open_nursery() as nursery, RemotingClient(net.transport(CLIENT_HOST)) as c:
        namesrv = await start_namesrv(net, ns_disk, nursery)
        proc, broker = await start_broker(net, broker_disk, nursery)
        broker_id = broker.config.brokerId
        assert broker.store.message_store.epochs is not None
        epochs = broker.store.message_store.epochs.records
        assert epochs, "the master recorded its epoch"
        kv = PutKVConfigRequestHeader(namespace="ns", key="k", value="v")
        put_kv = RemotingCommand(RequestCode.PUT_KV_CONFIG, ext_fields=to_ext(kv))
        assert (await c.invoke(NS_ADDR, put_kv, 5)).code == ResponseCode.SUCCESS
        assert (await c.invoke(broker.addr, send(b"acked"), 5)).code == ResponseCode.SUCCESS

        broker_files = broker_disk.files("/")
        for name in ("commitlog/00000000000000000000", "consumequeue/T/0/00000000000000000000",
                     "config/topics.json", "epochFileCheckpoint", "broker.meta"):  # fmt: skip
            assert f"{STORE}/{name}" in broker_files, name
        ns_files = ns_disk.files("/")
        assert "/sim/namesrv/kvConfig.json" in ns_files
        assert any(f.startswith("/sim/namesrv/controller/n0/0000") for f in ns_files)

        # kill -9 both processes, and both disks lose everything not yet fsynced
        broker.crash()
        net.crash(BROKER_HOST)
        await proc.kill()
        await namesrv.kill()
        net.crash(NS_HOST)
        ns_disk.crash(lose_unsynced=True)
        broker_disk.crash(lose_unsynced=True)

        namesrv = await start_namesrv(net, ns_disk, nursery)
        proc, broker = await start_broker(net, broker_disk, nursery)
        assert broker.config.brokerId == broker_id
        assert broker.store.message_store.epochs is not None
        assert broker.store.message_store.epochs.records[: len(epochs)] == epochs
        res = broker.store.message_store.get_messages("T", 0, 0, 10, 1 << 20)
        assert [m.body for m in iter_stored(res.body)] == [b"acked"]
        nursery.cancel_scope.cancel()
