"""One broker and a NameServer on the simulated network, driven with a raw RemotingClient.

`harness` (a fixture-like async context) starts a real NameServer and gives a `BrokerHarness`
that starts, stops (gracefully) and crashes (like kill -9) one Broker on `SimNetwork`, with
blocking store work inline (`tests.harness.blocking`) so the MockClock never jumps during a
real fsync.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import run_namesrv
from rocketrio.protocol.bodies import TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from rocketrio.protocol.message import MessageExt, encode_properties, iter_stored
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_json, to_ext
from rocketrio.storage.fs import OS_FS, FileSystem
from tests.harness.blocking import inline_blocking
from tests.harness.clock import EPOCH_MS
from tests.harness.sim_network import SimNetwork

NAMESRV_HOST = "10.0.0.1"


BROKER_HOST = "10.0.0.2"


CLIENT_HOST = "10.0.0.9"


TIMEOUT_S = 30.0


class BrokerHarness:
    def __init__(self, nursery: trio.Nursery, net: SimNetwork, root: str) -> None:
        self.nursery = nursery
        self.net = net
        self.root = root
        self.namesrv_addr = ""
        self.client: RemotingClient
        self.broker: Broker | None = None
        self._broker_scope: trio.CancelScope | None = None
        self._broker_done = trio.Event()

    @property
    def addr(self) -> str:
        assert self.broker is not None
        return self.broker.addr

    def config(self, **overrides: Any) -> BrokerConfig:
        values: dict[str, Any] = {
            "brokerIP1": BROKER_HOST,
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": os.path.join(self.root, "store"),
            "mappedFileSizeCommitLog": 256 * 1024,
            "mappedFileSizeConsumeQueue": 1000 * 20,
        }
        values.update(overrides)
        return BrokerConfig(**values)

    async def start_broker(
        self,
        run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]] = inline_blocking,
        fs: FileSystem = OS_FS,
        **overrides: Any,
    ) -> Broker:
        broker = Broker(
            self.config(**overrides),
            self.net.transport(BROKER_HOST),
            now_ms=lambda: EPOCH_MS + int(trio.current_time() * 1000),
            run_blocking=run_blocking,
            fs=fs,
        )
        scope = trio.CancelScope()
        done = trio.Event()

        async def runner(*, task_status: trio.TaskStatus[Broker]) -> None:
            try:
                with scope:
                    await broker.run(task_status=task_status)
            finally:
                done.set()

        await self.nursery.start(runner)
        self.broker, self._broker_scope, self._broker_done = broker, scope, done
        return broker

    @property
    def running(self) -> bool:
        return self.broker is not None and not self._broker_done.is_set()

    async def stop_broker(self) -> None:
        """Graceful shutdown (what SIGTERM does); returns when the broker has stopped."""
        assert self._broker_scope is not None
        self._broker_scope.cancel()
        await self._broker_done.wait()

    async def crash_broker(self) -> None:
        """Like kill -9: no flush, no close, connections reset."""
        assert self.broker is not None
        self.broker.crash()
        self.net.crash(BROKER_HOST)
        await self._broker_done.wait()

    # -- raw protocol helpers
    async def invoke(self, cmd: RemotingCommand, addr: str | None = None) -> RemotingCommand:
        return await self.client.invoke(addr or self.addr, cmd, TIMEOUT_S)

    async def send(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str | None = None,
        keys: str | None = None,
        props: dict[str, str] | None = None,
        queue_id: int = -1,
        code: int = RequestCode.SEND_MESSAGE_V2,
        reconsume_times: int | None = None,
        max_reconsume_times: int | None = None,
    ) -> RemotingCommand:
        p = dict(props or {})
        if tags:
            p["TAGS"] = tags
        if keys:
            p["KEYS"] = keys
        v1 = SendMessageRequestHeader(
            producerGroup="PG",
            topic=topic,
            defaultTopic="TBW102",
            defaultTopicQueueNums=4,
            queueId=queue_id,
            sysFlag=0,
            bornTimestamp=EPOCH_MS,
            flag=0,
            properties=encode_properties(p),
            reconsumeTimes=reconsume_times,
            maxReconsumeTimes=max_reconsume_times,
        )
        header = v1 if code == RequestCode.SEND_MESSAGE else SendMessageRequestHeaderV2.from_v1(v1)
        return await self.invoke(RemotingCommand(code, ext_fields=to_ext(header), body=body))

    def pull_header(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        *,
        group: str = "CG",
        sub: str | None = "*",
        flags: int = PULL_FLAG_SUBSCRIPTION,
        suspend_ms: int = 0,
        max_msgs: int = 32,
        commit_offset: int = 0,
    ) -> PullMessageRequestHeader:
        return PullMessageRequestHeader(
            consumerGroup=group,
            topic=topic,
            queueId=queue_id,
            queueOffset=offset,
            maxMsgNums=max_msgs,
            sysFlag=flags | (PULL_FLAG_SUSPEND if suspend_ms else 0),
            commitOffset=commit_offset,
            suspendTimeoutMillis=suspend_ms,
            subVersion=0,
            subscription=sub,
        )

    async def pull(self, topic: str, queue_id: int, offset: int, **kw: Any) -> RemotingCommand:
        header = self.pull_header(topic, queue_id, offset, **kw)
        return await self.invoke(
            RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=to_ext(header))
        )

    async def route(self, topic: str) -> TopicRouteData | None:
        resp = await self.invoke(
            RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic}),
            self.namesrv_addr,
        )
        if resp.code != ResponseCode.SUCCESS:
            return None
        return from_json(TopicRouteData, resp.body)


def messages(resp: RemotingCommand) -> list[MessageExt]:
    return list(iter_stored(resp.body))


@asynccontextmanager
async def harness(
    tmp_path: Any, *, start: bool = True, **overrides: Any
) -> AsyncIterator[BrokerHarness]:
    net = SimNetwork(seed=7)
    async with trio.open_nursery() as nursery:
        h = BrokerHarness(nursery, net, str(tmp_path))
        h.namesrv_addr = await nursery.start(
            run_namesrv, NamesrvConfig(listenHost=NAMESRV_HOST), net.transport(NAMESRV_HOST)
        )
        async with RemotingClient(net.transport(CLIENT_HOST)) as client:
            h.client = client
            if start:
                await h.start_broker(**overrides)
            yield h
            if h.running:
                await h.stop_broker()
        nursery.cancel_scope.cancel()
