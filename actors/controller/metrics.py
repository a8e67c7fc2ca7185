"""The controller's Prometheus metrics (metricsExporterType=PROM), with upstream's names and labels
(ControllerMetricsConstant, ControllerMetricsManager). Upstream's controller names carry no
``rocketmq_`` prefix, and every series carries the replica's ``address``, ``group`` and
``peer_id`` (its Raft peer address, controllerDLegerGroup, controllerDLegerSelfId):

- ``role``: this replica's Raft role, upstream's encoding: 0 unknown (not started), 1 candidate,
  2 follower, 3 leader;
- ``election_total``: master elections this replica ran as leader (CONTROLLER_ELECT_MASTER
  from a broker or an admin, and its own re-elections of dead masters), labels ``cluster``,
  ``broker_set`` and ``election_result``: ``new_master_elected`` (answered SUCCESS),
  ``keep_current_master`` (CONTROLLER_MASTER_STILL_EXIST) or ``no_master_elected``
  (CONTROLLER_MASTER_NOT_AVAILABLE / CONTROLLER_ELECT_MASTER_FAILED); an election refused
  before it ran (not leader, no quorum) is not one, as upstream;
- ``active_broker_num``: live broker replicas by ``cluster`` and ``broker_set`` in this
  replica's heartbeat table;
- ``request_total``: controller requests answered, labels ``request_type`` (upstream's
  RequestType names) and ``request_handle_status`` (``success``; ``failed`` for a SYSTEM_ERROR
  answer, which is what a failed or timed-out handler gives here). Not counted again: read from
  the rocketmq_rpc_latency counts of the controller's server at scrape time.

Upstream's request_latency, dledger_op_total/latency and dledger_disk_usage are not exported;
rocketmq_rpc_latency (rpc_metrics.py) covers the controller's request latency.

`ElectionCounts` is the pure counter the controller feeds; `ControllerCollector` reads it, the
Raft role and the heartbeat table when Prometheus scrapes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from rocketrio.actors.observe.rpc_metrics import RpcLatency
from rocketrio.actors.raft.state import Role
from rocketrio.protocol.codes import RequestCode, ResponseCode

CONTROLLER_LABELS = ("address", "group", "peer_id")

# MemberState.Role -> ControllerMetricsManager.getRoleValue
ROLE_VALUES: dict[Role | None, int] = {
    None: 0,
    Role.CANDIDATE: 1,
    Role.FOLLOWER: 2,
    Role.LEADER: 3,
}

_ELECTION_RESULTS: dict[int, str] = {
    ResponseCode.SUCCESS: "new_master_elected",
    ResponseCode.CONTROLLER_MASTER_STILL_EXIST: "keep_current_master",
    ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE: "no_master_elected",
    ResponseCode.CONTROLLER_ELECT_MASTER_FAILED: "no_master_elected",
}

_RC = RequestCode
# ControllerMetricsConstant.RequestType: the request codes counted in request_total, by name
REQUEST_TYPES: dict[int, str] = {
    _RC.CONTROLLER_ALTER_SYNC_STATE_SET: "CONTROLLER_ALTER_SYNC_STATE_SET",
    _RC.CONTROLLER_ELECT_MASTER: "CONTROLLER_ELECT_MASTER",
    _RC.CONTROLLER_REGISTER_BROKER: "CONTROLLER_REGISTER_BROKER",
    _RC.CONTROLLER_GET_REPLICA_INFO: "CONTROLLER_GET_REPLICA_INFO",
    _RC.CONTROLLER_GET_METADATA_INFO: "CONTROLLER_GET_METADATA_INFO",
    _RC.CONTROLLER_GET_SYNC_STATE_DATA: "CONTROLLER_GET_SYNC_STATE_DATA",
    _RC.GET_BROKER_EPOCH_CACHE: "CONTROLLER_GET_BROKER_EPOCH_CACHE",
    _RC.NOTIFY_BROKER_ROLE_CHANGED: "CONTROLLER_NOTIFY_BROKER_ROLE_CHANGED",
    _RC.BROKER_HEARTBEAT: "CONTROLLER_BROKER_HEARTBEAT",
    _RC.UPDATE_CONTROLLER_CONFIG: "CONTROLLER_UPDATE_CONTROLLER_CONFIG",
    _RC.GET_CONTROLLER_CONFIG: "CONTROLLER_GET_CONTROLLER_CONFIG",
    _RC.CLEAN_BROKER_DATA: "CONTROLLER_CLEAN_BROKER_DATA",
    _RC.CONTROLLER_GET_NEXT_BROKER_ID: "CONTROLLER_GET_NEXT_BROKER_ID",
    _RC.CONTROLLER_APPLY_BROKER_ID: "CONTROLLER_APPLY_BROKER_ID",
}


class ElectionCounts:
    """election_total by (cluster, broker_set, election_result)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str, str], int] = {}

    def record(self, cluster: str, broker_set: str, response_code: int) -> None:
        """One election that ran and was answered ``response_code`` (other codes: not one)."""
        result = _ELECTION_RESULTS.get(response_code)
        if result is None:
            return
        key = (cluster, broker_set, result)
        self.counts[key] = self.counts.get(key, 0) + 1


def request_totals(latency: RpcLatency) -> dict[tuple[str, str], int]:
    """(request_type, request_handle_status) -> answers, from the server's latency counts."""
    out: dict[tuple[str, str], int] = {}
    for s in latency.series():
        name = REQUEST_TYPES.get(s.request_code)
        if name is None:
            continue
        status = "failed" if s.response_code == ResponseCode.SYSTEM_ERROR else "success"
        out[(name, status)] = out.get((name, status), 0) + s.count
    return out


class ControllerCollector(Collector):
    """Reads one replica's state at scrape time (see the module docstring)."""

    def __init__(
        self,
        *,
        address: str,
        group: str,
        peer_id: str,
        role: Callable[[], Role | None],
        elections: ElectionCounts,
        active_brokers: Callable[[], Mapping[str, Mapping[str, int]]],
        rpc_latency: RpcLatency,
    ) -> None:
        self.node = (address, group, peer_id)
        self.role = role
        self.elections = elections
        self.active_brokers = active_brokers
        self.rpc_latency = rpc_latency

    def collect(self) -> Iterator[Metric]:
        node = list(self.node)
        labels = list(CONTROLLER_LABELS)
        role = GaugeMetricFamily(
            "role",
            "Role of this controller replica: 0 unknown, 1 candidate, 2 follower, 3 leader.",
            labels=labels,
        )
        role.add_metric(node, ROLE_VALUES[self.role()])
        elections = CounterMetricFamily(
            "election",
            "Master elections run by this replica as leader.",
            labels=[*labels, "cluster", "broker_set", "election_result"],
        )
        for (cluster, broker_set, result), n in sorted(self.elections.counts.items()):
            elections.add_metric([*node, cluster, broker_set, result], n)
        active = GaugeMetricFamily(
            "active_broker_num",
            "Live broker replicas by cluster and broker set.",
            labels=[*labels, "cluster", "broker_set"],
        )
        for cluster, sets in sorted(self.active_brokers().items()):
            for broker_set, n in sorted(sets.items()):
                active.add_metric([*node, cluster, broker_set], n)
        requests = CounterMetricFamily(
            "request",
            "Controller requests answered, by type and status.",
            labels=[*labels, "request_type", "request_handle_status"],
        )
        for (request_type, status), n in sorted(request_totals(self.rpc_latency).items()):
            requests.add_metric([*node, request_type, status], n)
        yield from (role, elections, active, requests)
