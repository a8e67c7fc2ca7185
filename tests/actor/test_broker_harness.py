"""Broker test harness (a real NameServer + brokers on SimNetwork, raw RemotingClient) and the
boot / registration / dispatch tests. The other test_broker_* modules import the harness.

Blocking store work runs inline (`inline_blocking`) instead of in worker threads, so the
MockClock with autojump_threshold=0 never jumps while a real fsync is in progress; the
SYNC_FLUSH test injects a runner that also yields for a simulated fsync time.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig, FlushDiskType
from rocketrio.actors.broker.boot.outer_api import retry_delay
from rocketrio.actors.broker.broker import Broker, run_broker
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.kernel.transport import SimNetwork, TcpTransport
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

NAMESRV_HOST = "10.0.0.1"
BROKER_HOST = "10.0.0.2"
CLIENT_HOST = "10.0.0.9"
EPOCH_MS = 1_700_000_000_000
TIMEOUT_S = 30.0


async def inline_blocking(fn: Callable[[], Any]) -> Any:
    await trio.lowlevel.checkpoint()
    return fn()


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


# --------------------------------------------------------------------------- boot tests


async def test_boot_registers_prints_boot_line_and_keeps_route(
    tmp_path: Any, mock_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    async with harness(tmp_path) as h:
        out = capsys.readouterr().out
        assert (
            f"The broker[broker-a, {BROKER_HOST}:10911] boot success. serializeType=JSON "
            f"and name server is {h.namesrv_addr}" in out
        )
        route = await h.route("TBW102")
        assert route is not None
        assert route.brokerDatas[0].brokerAddrs == {0: h.addr}
        # the broker-name and cluster-name system topics are registered too
        assert await h.route("broker-a") is not None
        assert await h.route("DefaultCluster") is not None
        # BROKER_HEARTBEAT (1 s) keeps the registration past brokerNotActiveTimeoutMillis
        await trio.sleep(40)
        assert await h.route("TBW102") is not None


async def test_a_broker_started_before_its_namesrv_registers_within_seconds(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    """The first REGISTER_BROKER finds no NameServer; the broker retries after 1 s, then 2 s
    (not after registerNameServerPeriod, 30 s), so it is routable ~3 s after it started."""
    net = SimNetwork(seed=7)
    async with trio.open_nursery() as nursery:
        h = BrokerHarness(nursery, net, str(tmp_path))
        h.namesrv_addr = f"{NAMESRV_HOST}:9876"
        async with RemotingClient(net.transport(CLIENT_HOST)) as client:
            h.client = client
            started = trio.current_time()
            await h.start_broker()
            await trio.sleep(2.0)
            await nursery.start(
                run_namesrv, NamesrvConfig(listenHost=NAMESRV_HOST), net.transport(NAMESRV_HOST)
            )
            assert await h.route("TBW102") is None  # the retry at 1 s failed; next at 3 s
            await trio.sleep(started + 3.1 - trio.current_time())
            assert await h.route("TBW102") is not None
            await h.stop_broker()
        nursery.cancel_scope.cancel()


def test_register_retry_doubles_up_to_the_period() -> None:
    waits, prev = [], None
    for _ in range(7):
        prev = retry_delay(30.0, prev)
        waits.append(prev)
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert retry_delay(0.5, None) == 0.5


async def test_topic_created_later_is_registered_at_once(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        assert await h.route("AutoTopic") is None
        resp = await h.send("AutoTopic", b"x")
        assert resp.code == ResponseCode.SUCCESS
        await trio.sleep(0.5)  # well below registerNameServerPeriod (30 s)
        route = await h.route("AutoTopic")
        assert route is not None and route.queueDatas[0].writeQueueNums == 4


async def test_graceful_shutdown_unregisters(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        assert await h.route("TBW102") is not None
        await h.stop_broker()
        assert await h.route("TBW102") is None


async def test_unknown_code_is_answered_not_supported(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    async with harness(tmp_path) as h:
        # a broker-to-client code: no broker serves it
        resp = await h.invoke(RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert "CHECK_TRANSACTION_STATE" in (resp.remark or "")
        resp = await h.invoke(RemotingCommand(4242))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert "4242" in (resp.remark or "")
        # a header missing its required fields is a clear INVALID_PARAMETER, not a crash
        resp = await h.invoke(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields={"topic": "T"}))
        assert resp.code == ResponseCode.INVALID_PARAMETER
        assert "consumerGroup" in (resp.remark or "")


async def test_real_tcp_threads_and_sync_flush(tmp_path: Any) -> None:
    """The production wiring: TCP sockets, fsync in worker threads, SYNC_FLUSH, real clock."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = BrokerConfig(
        brokerIP1="127.0.0.1",
        listenPort=port,
        storePathRootDir=str(tmp_path / "store"),
        mappedFileSizeCommitLog=64 * 1024,
        flushDiskType=FlushDiskType.SYNC_FLUSH,
    )
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            broker: Broker = await nursery.start(run_broker, config, TcpTransport())
            async with RemotingClient(TcpTransport()) as client:
                h = BrokerHarness(nursery, SimNetwork(), str(tmp_path))
                h.client, h.broker = client, broker

                async def send(i: int) -> None:
                    resp = await h.send("Real", f"m{i}".encode() * 100, queue_id=0)
                    assert resp.code == ResponseCode.SUCCESS, resp.remark

                async with trio.open_nursery() as senders:
                    for i in range(100):
                        senders.start_soon(send, i)
                resp = await h.pull("Real", 0, 0, max_msgs=32)
                assert resp.code == ResponseCode.SUCCESS
                assert len(messages(resp)) == 32
                assert broker.store.actor.flusher.sync_flush_count <= 100
                assert (
                    broker.store.message_store.flushed_offset
                    == broker.store.message_store.get_commitlog_max_offset()
                )
            nursery.cancel_scope.cancel()
