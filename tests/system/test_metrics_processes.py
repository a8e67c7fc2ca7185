"""System test with real processes: ``curl /metrics`` on each role (issue 10, item 4).

A NameServer, a controller and a broker run as `rocketrio` processes on loopback with
metricsExporterType=PROM. Each one's /metrics, fetched over real HTTP, is exposition text that
prometheus_client's parser reads, with upstream's names; after a message is sent through the
broker its counters show it, and the NameServer's rocketmq_rpc_latency counts the broker's
registrations.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.kernel.transport import TcpTransport
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.system import free_port_block, launch, send_one, stop_processes, wait_for_line

pytestmark = pytest.mark.system

Samples = dict[str, list[tuple[dict[str, str], float]]]


def fetch(port: int, timeout_s: float = 20) -> Samples:
    """GET http://127.0.0.1:port/metrics, parsed: sample name -> [(labels, value)]."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                assert r.status == 200
                assert r.headers["Content-Type"].startswith("text/plain; version=")
                text = r.read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


async def ask_metadata(addr: str) -> int:
    async with RemotingClient(TcpTransport()) as client:
        cmd = RemotingCommand(code=RequestCode.CONTROLLER_GET_METADATA_INFO)
        return (await client.invoke(addr, cmd, 5)).code


def total(got: Samples, name: str, **labels: str) -> float:
    return sum(v for ls, v in got.get(name, []) if labels.items() <= ls.items())


def test_each_role_serves_parseable_metrics_with_upstream_names(tmp_path: Path) -> None:
    configure_logging("test", "test", None, console=None)
    work = str(tmp_path)
    logs = str(tmp_path / "logs")
    base = free_port_block(3, extra=(1, 11, 21, 25))
    ns_port, ns_metrics = base, base + 1
    ctrl_port, ctrl_metrics = base + 10, base + 11
    broker_port, broker_metrics = base + 20, base + 25
    prom = {"metricsExporterType": "PROM", "logDir": logs}
    ns = f"127.0.0.1:{ns_port}"
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(
            launch("namesrv", "ns", {**prom, "listenPort": str(ns_port),
                                     "metricsPromExporterPort": str(ns_metrics)}, work)
        )  # fmt: skip
        procs.append(
            launch("controller", "n0", {
                **prom, "controllerDLegerGroup": "group1",
                "controllerDLegerPeers": f"n0-127.0.0.1:{ctrl_port}",
                "controllerDLegerSelfId": "n0", "controllerStorePath": str(tmp_path / "ctrl"),
                "metricsPromExporterPort": str(ctrl_metrics),
            }, work)
        )  # fmt: skip
        procs.append(
            launch("broker", "broker-a", {
                **prom, "namesrvAddr": ns, "brokerIP1": "127.0.0.1", "brokerName": "broker-a",
                "listenPort": str(broker_port), "storePathRootDir": str(tmp_path / "store"),
                "metricsPromExporterPort": str(broker_metrics),
            }, work)
        )  # fmt: skip
        for p in procs:
            wait_for_line(p, "boot success", 30)
        status = trio.run(send_one, ns, "MetricsTopic", f"127.0.0.1:{broker_port}")
        assert status.endswith("SEND_OK")

        broker = fetch(broker_metrics)
        node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
        topic = {**node, "topic": "MetricsTopic"}
        assert total(broker, "rocketmq_messages_in_total", **topic) == 1
        assert total(broker, "rocketmq_throughput_in_total", **topic) > len(b"still serving")
        assert total(broker, "rocketmq_storage_size", **node) > 0
        assert "rocketmq_confirm_offset" in broker
        sends = {**node, "protocol_type": "remoting", "response_code": "success"}
        assert total(broker, "rocketmq_rpc_latency_count", **sends) >= 1
        assert "rocketmq_rpc_latency_bucket" in broker and "rocketmq_topic_number" in broker

        namesrv = fetch(ns_metrics)
        register = {"node_type": "nameserver", "request_code": "register_broker"}
        assert total(namesrv, "rocketmq_rpc_latency_count", **register) >= 1
        assert total(namesrv, "rocketmq_rpc_latency_bucket", **register, le="+Inf") >= 1

        controller = fetch(ctrl_metrics)
        replica = {"address": f"127.0.0.1:{ctrl_port}", "group": "group1", "peer_id": "n0"}
        deadline = time.monotonic() + 10
        while total(controller, "role", **replica) != 3:  # a lone replica elects itself
            assert time.monotonic() < deadline, controller.get("role")
            time.sleep(0.2)
            controller = fetch(ctrl_metrics)
        assert trio.run(ask_metadata, f"127.0.0.1:{ctrl_port}") == ResponseCode.SUCCESS
        controller = fetch(ctrl_metrics)
        metadata = {"request_type": "CONTROLLER_GET_METADATA_INFO"}
        assert total(controller, "request_total", **replica, **metadata) == 1
        code = {"node_type": "controller", "request_code": "controller_get_metadata_info"}
        assert total(controller, "rocketmq_rpc_latency_count", **code) == 1
    finally:
        stop_processes(procs)
