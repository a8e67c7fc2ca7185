"""Broker test harness (a real NameServer + brokers on SimNetwork, raw RemotingClient) and the
boot / registration / dispatch tests. The other test_broker_* modules import the harness.

Blocking store work runs inline (`inline_blocking`) instead of in worker threads, so the
MockClock with autojump_threshold=0 never jumps while a real fsync is in progress; the
SYNC_FLUSH test injects a runner that also yields for a simulated fsync time.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig, FlushDiskType
from rocketrio.actors.broker.boot.outer_api import retry_delay
from rocketrio.actors.broker.broker import Broker, run_broker
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.kernel.transport import TcpTransport
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import run_namesrv
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.broker import (
    BROKER_HOST,
    CLIENT_HOST,
    NAMESRV_HOST,
    BrokerHarness,
    harness,
    messages,
)
from tests.harness.sim_network import SimNetwork
from tests.harness.system import free_port_block

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
    port = free_port_block(1, extra=(1,))  # and its HA port, below the ephemeral range
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
