"""A classic (pre-controller) master/slave pair on the simulated network: `classic` starts a
NameServer, a master `M` and a slave `S` with fixed roles; `until` polls a condition under the
MockClock with a deadline. With ``sim_disk=True`` every broker host has its own seeded
`SimFileSystem` and `crash` is a power cut of that host (unsynced writes may be lost or torn).
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

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import run_namesrv
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext
from tests.harness.blocking import inline_blocking
from tests.harness.clock import EPOCH_MS
from tests.harness.sim_disk import SimFileSystem
from tests.harness.sim_network import SimNetwork

NS, M, S, CLIENT = "10.3.0.1", "10.3.0.2", "10.3.0.3", "10.3.0.9"


TOPIC = "C"


@attrs.define
class Classic:
    net: SimNetwork
    nursery: trio.Nursery
    tmp: Path
    ns: str = ""
    client: RemotingClient | None = None
    brokers: dict[str, Broker] = attrs.field(factory=dict)
    scopes: dict[str, trio.CancelScope] = attrs.field(factory=dict)
    disks: dict[str, SimFileSystem] | None = None
    seed: int = 0
    power_cut: dict[str, bool] = attrs.field(factory=dict)  # host -> lose unsynced writes

    async def start(self, host: str, role: BrokerRole, broker_id: int, **kw: Any) -> Broker:
        config = BrokerConfig(
            brokerName=kw.pop("brokerName", "broker-a"), brokerId=broker_id, brokerRole=role,
            brokerIP1=host,
            namesrvAddr=self.ns, storePathRootDir=str(self.tmp / host),
            mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=100 * 20,
            syncFlushTimeout=2000, **kw,
        )  # fmt: skip
        fs: dict[str, Any] = {}
        if self.disks is not None:
            disk = self.disks.get(host)
            if disk is None:
                disk = self.disks[host] = SimFileSystem(random.Random(f"{self.seed}{host}"))
            fs["fs"] = disk
        broker = Broker(
            config,
            self.net.transport(host),
            now_ms=lambda: EPOCH_MS + int(trio.current_time() * 1000),
            rng=random.Random(broker_id),
            run_blocking=inline_blocking,
            **fs,
        )
        scope = trio.CancelScope()

        async def runner(*, task_status: trio.TaskStatus[None]) -> None:
            with scope:
                await broker.run(task_status=task_status)
            if self.disks is not None and host in self.power_cut:
                # the process is gone; with a power cut a random prefix of the unsynced writes
                # survives, with a kill -9 the page cache keeps them
                cut = self.power_cut.pop(host)
                self.disks[host].crash(keep_unsynced=not cut)

        await self.nursery.start(runner)
        self.brokers[host], self.scopes[host] = broker, scope
        return broker

    def crash(self, host: str, *, power_cut: bool = True) -> None:
        """The broker process dies (its connections reset); on simulated disks the host also
        loses power unless ``power_cut`` is false (kill -9)."""
        self.brokers[host].crash()
        self.net.crash(host)
        self.power_cut[host] = power_cut

    async def send(self, host: str, body: bytes) -> RemotingCommand:
        assert self.client is not None
        v1 = SendMessageRequestHeader(
            producerGroup="PG", topic=TOPIC, defaultTopic="TBW102", defaultTopicQueueNums=1,
            queueId=0, sysFlag=0, bornTimestamp=EPOCH_MS, flag=0,
        )  # fmt: skip
        cmd = RemotingCommand(
            RequestCode.SEND_MESSAGE_V2,
            ext_fields=to_ext(SendMessageRequestHeaderV2.from_v1(v1)),
            body=body,
        )
        return await self.client.invoke(f"{host}:10911", cmd, 10)

    async def pull(self, host: str, offset: int) -> RemotingCommand:
        assert self.client is not None
        header = PullMessageRequestHeader(
            consumerGroup="G", topic=TOPIC, queueId=0, queueOffset=offset, maxMsgNums=64,
            sysFlag=PULL_FLAG_SUBSCRIPTION, commitOffset=0, suspendTimeoutMillis=0,
            subscription="*", subVersion=0,
        )  # fmt: skip
        cmd = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=to_ext(header))
        return await self.client.invoke(f"{host}:10911", cmd, 10)


@asynccontextmanager
async def classic(
    tmp: Path, seed: int, *, sim_disk: bool = False, **ns_kw: Any
) -> AsyncIterator[Classic]:
    """``ns_kw``: NameServer keys (supportActingMaster, notifyMinBrokerIdChanged, ...)."""
    async with trio.open_nursery() as nursery:
        c = Classic(SimNetwork(seed), nursery, tmp, disks={} if sim_disk else None, seed=seed)
        ns_config = NamesrvConfig(listenHost=NS, **ns_kw)
        c.ns = await nursery.start(run_namesrv, ns_config, c.net.transport(NS))
        async with RemotingClient(c.net.transport(CLIENT)) as client:
            c.client = client
            yield c
        nursery.cancel_scope.cancel()


async def until(cond: Any, timeout: float = 30) -> None:
    with trio.fail_after(timeout):
        while not cond():
            await trio.sleep(0.05)
