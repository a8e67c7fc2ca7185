"""The controller's Prometheus collector (actors/controller/metrics.py): role, elections, brokers
and request counts.
"""

from __future__ import annotations

from rocketrio.actors.controller.metrics import ControllerCollector, ElectionCounts
from rocketrio.actors.observe.rpc_metrics import (
    Outcome,
    RpcLatency,
)
from rocketrio.actors.raft.state import Role
from rocketrio.protocol.codes import RequestCode, ResponseCode
from tests.harness.metrics import collect, pick


def test_controller_collector_role_elections_brokers_and_requests() -> None:
    role: list[Role | None] = [None]
    elections = ElectionCounts()
    lat = RpcLatency()
    brokers = {"DefaultCluster": {"broker-a": 2, "broker-b": 1}}
    collector = ControllerCollector(
        address="10.0.0.1:9878",
        group="g",
        peer_id="n0",
        role=lambda: role[0],
        elections=elections,
        active_brokers=lambda: brokers,
        rpc_latency=lat,
    )
    got = collect(collector)
    node = {"address": "10.0.0.1:9878", "group": "g", "peer_id": "n0"}
    assert pick(got, "role", **node) == 0
    assert not [k for k in got if k[0] == "election_total"]
    role[0] = Role.LEADER
    elections.record("DefaultCluster", "broker-a", ResponseCode.SUCCESS)
    elections.record("DefaultCluster", "broker-a", ResponseCode.SUCCESS)
    elections.record("DefaultCluster", "broker-a", ResponseCode.CONTROLLER_MASTER_STILL_EXIST)
    elections.record("DefaultCluster", "broker-b", ResponseCode.CONTROLLER_ELECT_MASTER_FAILED)
    elections.record("DefaultCluster", "broker-b", ResponseCode.CONTROLLER_NOT_LEADER)  # not one
    elect, heartbeat = RequestCode.CONTROLLER_ELECT_MASTER, RequestCode.BROKER_HEARTBEAT
    lat.observe(elect, ResponseCode.SUCCESS, Outcome.SUCCESS, 0.01)
    lat.observe(elect, ResponseCode.SYSTEM_ERROR, Outcome.SUCCESS, 3.0)
    lat.observe(heartbeat, ResponseCode.SUCCESS, Outcome.SUCCESS, 0)
    lat.observe(RequestCode.RAFT_MESSAGE, ResponseCode.SUCCESS, Outcome.ONEWAY, 0)
    got = collect(collector)
    assert pick(got, "role", **node) == 3
    a = {**node, "cluster": "DefaultCluster", "broker_set": "broker-a"}
    assert pick(got, "election_total", **a, election_result="new_master_elected") == 2
    assert pick(got, "election_total", **a, election_result="keep_current_master") == 1
    b = {"broker_set": "broker-b"}
    assert pick(got, "election_total", **b, election_result="no_master_elected") == 1
    assert len([k for k in got if k[0] == "election_total"]) == 3
    assert pick(got, "active_broker_num", **a) == 2
    assert pick(got, "active_broker_num", broker_set="broker-b") == 1
    em = {"request_type": "CONTROLLER_ELECT_MASTER"}
    assert pick(got, "request_total", **em, request_handle_status="success") == 1
    assert pick(got, "request_total", **em, request_handle_status="failed") == 1
    hb = {"request_type": "CONTROLLER_BROKER_HEARTBEAT", "request_handle_status": "success"}
    assert pick(got, "request_total", **hb) == 1
    assert len([k for k in got if k[0] == "request_total"]) == 3  # RAFT_MESSAGE is no type
