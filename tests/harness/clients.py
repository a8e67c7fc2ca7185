"""Harness for the client actor tests: a real NameServer and Brokers on the simulated network
with a MockClock, plus listeners and wait helpers. The test_client_* modules import it.

`Cluster.start_broker` adds a broker while the cluster runs: a slave of a broker set, or a new
master of a set on another host (how the failover tests stand in for replication, which the
brokers do not do yet)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.message import ConsumeStatus, Message, SendResult
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import NameServer
from rocketrio.protocol.message import MessageExt
from tests.harness.blocking import inline_blocking
from tests.harness.clock import now_ms
from tests.harness.sim_network import SimNetwork

NS_HOST = "10.0.0.1"


@attrs.define
class Cluster:
    net: SimNetwork
    ns_addr: str
    brokers: dict[str, Any]
    scopes: dict[str, trio.CancelScope]
    hosts: dict[str, str]
    _client_seq: int = 0
    tmp_path: Path = Path(".")
    nursery: trio.Nursery | None = None
    namesrv: NameServer | None = None

    def client_host(self) -> str:
        self._client_seq += 1
        return f"10.0.9.{self._client_seq}"

    def kwargs(self, host: str | None = None) -> dict[str, Any]:
        host = host or self.client_host()
        return {
            "transport": self.net.transport(host),
            "client_config": ClientConfig(clientIP=host, instanceName="c"),
        }

    def admin(self) -> MQAdmin:
        return MQAdmin(self.ns_addr, self.net.transport(self.client_host()))

    def crash_broker(self, name: str) -> None:
        """Like kill -9: no flush, no unregister, every connection reset."""
        self.brokers[name].crash()
        self.net.crash(self.hosts[name])

    def addr(self, key: str) -> str:
        return str(self.brokers[key].addr)

    def on_namesrv_request(self, code: int, hook: Callable[[RequestContext], None]) -> None:
        """Call ``hook`` once the NameServer has handled each request with this code."""
        assert self.namesrv is not None
        replaced: dict[int, Any] = {}

        async def handler(ctx: RequestContext) -> Any:
            resp = await replaced[code](ctx)
            hook(ctx)
            return resp

        replaced.update(self.namesrv.register_processor([code], handler))

    async def start_broker(
        self,
        key: str,
        host: str,
        *,
        broker_name: str | None = None,
        broker_id: int = 0,
        role: BrokerRole = BrokerRole.ASYNC_MASTER,
        topics_from: str | None = None,
        **overrides: Any,
    ) -> Broker:
        """Start a broker (store ``tmp_path/key``) and return once it has registered with the
        NameServer. ``topics_from``: copy that broker's topics.json first (same topic config,
        fresh store), like a slave that replicated the master's metadata. ``overrides``: more
        BrokerConfig keys (``autoCreateTopicEnable=False``)."""
        assert self.nursery is not None
        store = self.tmp_path / key
        if topics_from is not None:
            src = self.tmp_path / topics_from / "config" / "topics.json"
            (store / "config").mkdir(parents=True, exist_ok=True)
            shutil.copy(src, store / "config" / "topics.json")
        values: dict[str, Any] = {
            "mappedFileSizeCommitLog": 1 << 20,
            "mappedFileSizeConsumeQueue": 1000 * 20,
            **overrides,
        }
        cfg = BrokerConfig(
            brokerName=broker_name or key,
            brokerId=broker_id,
            brokerRole=role,
            brokerIP1=host,
            listenPort=10911,
            namesrvAddr=self.ns_addr,
            storePathRootDir=str(store),
            **values,
        )
        broker = Broker(cfg, self.net.transport(host), now_ms=now_ms, run_blocking=inline_blocking)
        scope = trio.CancelScope()

        async def run(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await broker.run(task_status=task_status)

        await self.nursery.start(run)
        self.brokers[key] = broker
        self.scopes[key] = scope
        self.hosts[key] = host
        return broker


@asynccontextmanager
async def cluster(
    tmp_path: Path, broker_names: tuple[str, ...] = ("broker-a",)
) -> AsyncIterator[Cluster]:
    net = SimNetwork(seed=7)
    async with trio.open_nursery() as n:
        # file calls inline: a worker thread the MockClock cannot see lets it jump past a
        # request's timeout (UPDATE_NAMESRV_CONFIG timed out that way on a loaded machine)
        ns = NameServer(
            NamesrvConfig(listenHost=NS_HOST, listenPort=9876),
            net.transport(NS_HOST),
            io_runner=inline_blocking,
        )
        ns_addr = await n.start(ns.run)
        c = Cluster(net, ns_addr, {}, {}, {}, tmp_path=tmp_path, nursery=n, namesrv=ns)
        for i, name in enumerate(broker_names):
            await c.start_broker(name, f"10.0.1.{i + 1}")
        yield c
        n.cancel_scope.cancel()


class Collector:
    """A listener that records what it gets; ``fail`` bodies are answered RECONSUME_LATER."""

    def __init__(self, fail: frozenset[bytes] = frozenset()) -> None:
        self.msgs: list[MessageExt] = []
        self.fail = fail

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        self.msgs.extend(msgs)
        if any(m.body in self.fail for m in msgs):
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> list[bytes]:
        return [m.body for m in self.msgs]


async def wait_for(pred: Callable[[], bool], timeout: float = 120.0) -> None:
    with trio.fail_after(timeout):
        while not pred():
            await trio.sleep(0.05)


async def create_topic(c: Cluster, topic: str, queues: int = 4) -> None:
    async with c.admin() as admin:
        await admin.update_topic(
            topic, cluster="DefaultCluster", read_queues=queues, write_queues=queues
        )
        await wait_for_route(admin, topic)


def consumer(
    c: Cluster, group: str, listener: Collector, topic: str = "T", expr: str = "*", **kw: Any
) -> PushConsumer:
    pc = PushConsumer(group, c.ns_addr, **c.kwargs(), **kw)
    pc.subscribe(topic, expr)
    pc.register_listener(listener)
    return pc


def balanced(members: list[PushConsumer], topic: str, total: int) -> bool:
    owned = [[mq for mq in m.assigned_queues() if mq.topic == topic] for m in members]
    flat = [mq for o in owned for mq in o]
    return len(flat) == total == len(set(flat)) and all(owned)


async def send_all(p: Producer, topic: str, bodies: list[bytes]) -> list[SendResult]:
    """Everything in flight at once through send_async (one connection)."""
    futs = [await p.send_async(Message(topic, b, tags="t")) for b in bodies]
    return [await f.wait() for f in futs]
