"""The NameServer's and the controller's Prometheus endpoints (metricsExporterType=PROM), on the
simulated network with MockClock: GET /metrics is exposition text with upstream's names and
labels, and the figures move with traffic (rocketmq_rpc_latency counts requests, the
controller's election_total counts a failover's election, active_broker_num follows
heartbeats); an embedded controller's metrics come out of its NameServer's endpoint; nothing is
served by default."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.controller import Controller
from rocketrio.actors.controller.embedded import run_namesrv_with_controller
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.namesrv.namesrv import NameServer
from rocketrio.actors.observe.metrics_exporter import MetricsExporterType
from rocketrio.actors.raft.node import run_inline
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.controller import (
    CLUSTER,
    Group,
    broker_addr,
    broker_set_with_notifications,
    call,
    keep_beating,
)
from tests.harness.metrics import CLIENT, Samples, one, scrape
from tests.harness.sim_network import SimNetwork

PROM = MetricsExporterType.PROM


def count_of(got: Samples, **labels: str) -> float:
    return sum(
        v
        for (n, ls), v in got.items()
        if n == "rocketmq_rpc_latency_count" and labels.items() <= dict(ls).items()
    )


async def test_namesrv_metrics_count_its_requests(
    mock_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    net = SimNetwork(seed=11)
    cfg = NamesrvConfig(
        listenHost="10.0.0.1", metricsExporterType=PROM, metricsPromExporterPort=5558
    )
    ns = NameServer(cfg, net.transport("10.0.0.1"))
    await nursery.start(ns.run)
    assert ns.metrics_addr == "10.0.0.1:5558"
    route = {
        "node_type": "nameserver",
        "node_id": "10.0.0.1:9876",
        "protocol_type": "remoting",
        "request_code": "get_routeinfo_by_topic",
        "response_code": "topic_not_exist",
        "is_long_polling": "false",
        "result": "success",
    }
    before = await scrape(net, ns.metrics_addr)
    assert count_of(before, **route) == 0
    async with RemotingClient(net.transport(CLIENT)) as client:
        for _ in range(5):
            cmd = RequestCode.GET_ROUTEINFO_BY_TOPIC
            await client.invoke(ns.addr, _cmd(cmd, topic="Nope"))
    after = await scrape(net, ns.metrics_addr)
    assert one(after, "rocketmq_rpc_latency_count", **route) == 5
    assert one(after, "rocketmq_rpc_latency_bucket", **route, le="1.0") == 5
    assert one(after, "rocketmq_rpc_latency_bucket", **route, le="+Inf") == 5


async def test_no_metrics_endpoint_by_default(
    mock_clock: trio.testing.MockClock, nursery: trio.Nursery, tmp_path: Path
) -> None:
    net = SimNetwork(seed=12)
    ns = NameServer(NamesrvConfig(listenHost="10.0.0.1"), net.transport("10.0.0.1"))
    await nursery.start(ns.run)
    ctrl = Controller(_ctrl_config(tmp_path, PROM_OFF), net.transport("10.0.0.1"))
    await nursery.start(ctrl.run)
    assert ns.metrics_addr == "" and ctrl.metrics_addr == ""
    assert ns.server.side.rpc_latency is None and ctrl.server.side.rpc_latency is None
    with pytest.raises(OSError):
        await net.transport(CLIENT).connect("10.0.0.1:5557")


async def test_controller_metrics_move_with_a_failover(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    net = SimNetwork(seed=13)
    async with trio.open_nursery() as nursery, RemotingClient(net.transport(CLIENT)) as client:
        ctrl = Controller(
            _ctrl_config(tmp_path, PROM), net.transport("10.0.0.1"), io_runner=run_inline
        )
        await nursery.start(ctrl.run)
        assert ctrl.metrics_addr == "10.0.0.1:5559"
        node = {"address": "10.0.0.1:9878", "group": "group1", "peer_id": "n0"}
        g = Group(net, nursery, tmp_path, peers="n0-10.0.0.1:9878", controllers={"n0": ctrl})
        _, fakes, ids = await broker_set_with_notifications(g, client, "broker-a", 1)
        at = "10.0.0.1:9878"
        broker_a = {**node, "cluster": CLUSTER, "broker_set": "broker-a"}
        async with trio.open_nursery() as beats:
            for k, broker_id in zip((1, 2), ids, strict=True):
                beats.start_soon(keep_beating, client, at, "broker-a", broker_addr(k), broker_id)
            await trio.sleep(12)
            got = await scrape(net, ctrl.metrics_addr)
            assert one(got, "role", **node) == 3  # leader
            assert one(got, "active_broker_num", **broker_a) == 2
            # the set's first master came with its registration: no ElectMaster ran
            assert not [k for k in got if k[0] == "election_total"]
            register = {"request_type": "CONTROLLER_REGISTER_BROKER"}
            assert one(got, "request_total", **register, request_handle_status="success") == 2
            beats_before = one(
                got,
                "request_total",
                request_type="CONTROLLER_BROKER_HEARTBEAT",
                request_handle_status="success",
            )
            assert beats_before >= 2 * 10
            ctrl_beat = {"node_type": "controller", "request_code": "broker_heartbeat"}
            assert count_of(got, **ctrl_beat) == beats_before
            beats.cancel_scope.cancel()
        async with trio.open_nursery() as beats:  # the master stops beating: a failover
            beats.start_soon(keep_beating, client, at, "broker-a", broker_addr(2), ids[1])
            with trio.fail_after(12):
                await fakes[1].got.wait()
            await trio.sleep(2)
            got = await scrape(net, ctrl.metrics_addr)
            beats.cancel_scope.cancel()
        elected = {**broker_a, "election_result": "new_master_elected"}
        assert one(got, "election_total", **elected) == 1
        assert one(got, "active_broker_num", **broker_a) == 1
        assert one(got, "request_total", request_type="CONTROLLER_BROKER_HEARTBEAT") > (
            beats_before
        )
        nursery.cancel_scope.cancel()


async def test_embedded_controller_metrics_come_from_the_namesrv_endpoint(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    net = SimNetwork(seed=14)
    ns_cfg = NamesrvConfig(
        listenHost="10.0.0.1",
        enableControllerInNamesrv=True,
        metricsExporterType=PROM,
        metricsPromExporterPort=5559,
    )
    async with trio.open_nursery() as nursery, RemotingClient(net.transport(CLIENT)) as client:
        ns, ctrl = await nursery.start(
            partial(run_namesrv_with_controller, io_runner=run_inline),
            ns_cfg,
            _ctrl_config(tmp_path, PROM),
            net.transport("10.0.0.1"),
        )
        assert ns.metrics_addr == "10.0.0.1:5559" and ctrl.metrics_addr == ""
        await call(client, "10.0.0.1:9878", RequestCode.CONTROLLER_GET_METADATA_INFO)
        await client.invoke(ns.addr, _cmd(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="T"))
        got = await scrape(net, ns.metrics_addr)
        assert count_of(got, node_type="nameserver", request_code="get_routeinfo_by_topic") == 1
        metadata = {"node_type": "controller", "request_code": "controller_get_metadata_info"}
        assert count_of(got, **metadata) == 1
        assert one(got, "role", peer_id="n0") in (1, 3)  # candidate, then leader
        nursery.cancel_scope.cancel()


PROM_OFF = MetricsExporterType.DISABLE


def _ctrl_config(tmp_path: Path, exporter: MetricsExporterType) -> ControllerConfig:
    return ControllerConfig(
        controllerDLegerGroup="group1",
        controllerDLegerPeers="n0-10.0.0.1:9878",
        controllerDLegerSelfId="n0",
        controllerStorePath=str(tmp_path / "ctrl"),
        metricsExporterType=exporter,
        metricsPromExporterPort=5559,
    )


def _cmd(code: int, **ext: str) -> RemotingCommand:
    return RemotingCommand(code=code, ext_fields=ext)
