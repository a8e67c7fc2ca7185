"""The Controller actor (RIP-44): remoting API + Raft node + broker liveness + role notifications.

One `RemotingServer` on this replica's Raft peer address (its controllerDLegerPeers entry, which
is also the address brokers list in controllerAddr) serves both the Raft RPCs (RAFT_MESSAGE) and
the controller API. The replicated state is `ReplicasInfoManager`, driven exactly as its module
docstring says:

- only a *ready* leader (it applied its own term's first entry, so its state is complete) runs
  a handler; others answer CONTROLLER_NOT_LEADER "not leader, leader is <id> at <addr>";
- a handler that returns commands is a write: the commands are proposed as ONE Raft entry and the
  request is answered with `result.settle(outcomes)` once the entry is committed and applied
  here; a refusal at apply time (another entry moved an epoch first) re-runs the handler on the
  new state, at most electMasterMaxRetryCount times;
- a handler that returns no commands is a read: it is re-run after a Raft read barrier, so the
  answer reflects every write committed before the request arrived (linearizable); only
  CONTROLLER_GET_METADATA_INFO, BROKER_HEARTBEAT, GET_CONTROLLER_CONFIG,
  UPDATE_CONTROLLER_CONFIG (this replica's config only, as upstream: live_config.py) and
  CONTROLLER_CHECK_BROKER_ALIVE are answered locally by any replica.

Liveness and what the leader does with applied commands (logs, NOTIFY_BROKER_ROLE_CHANGED) are
`FailoverMixin` (failover.py); the controller-triggered re-election itself is here, in
`_reelect_dead_masters`, since it runs through `execute` like any request. Handlers get liveness
as a predicate: the local table, except for elections (controller-triggered, and
CONTROLLER_ELECT_MASTER without designateElect), where a recorded master that only this leader
finds dead counts as alive unless a majority of the controller group confirms its death
(upstream #4800; `FailoverMixin.election_liveness`, death_check.py). Every replica answers the
leader's CONTROLLER_CHECK_BROKER_ALIVE (1198, not an upstream code) from its own table.

Requests are decoded into `Call`s by calls.py (pure); the benchmark hook
(`CONTROLLER_BENCH_PROPOSE`, 1199) is bench_hook.py.

Embedded mode (`run_namesrv_with_controller`, `load_namesrv_configs`) lives in embedded.py.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import structlog
import trio
from prometheus_client.registry import Collector

from rocketrio.actors.auth.config import parse_credentials, parse_init_user
from rocketrio.actors.auth.gate import UserLookup, check_admin_write, server_users
from rocketrio.actors.controller.bench_hook import (
    BENCH_ENTRY_TAG,
    CONTROLLER_BENCH_PROPOSE,
    bench_propose,
)
from rocketrio.actors.controller.calls import Call, CallDecoder
from rocketrio.actors.controller.commands import Command, decode_commands, encode_commands
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.failover import FailoverMixin
from rocketrio.actors.controller.heartbeat_manager import BrokerHeartbeatManager, BrokerLiveInfo
from rocketrio.actors.controller.live_config import CONTROLLER_POLICY, apply_controller_changes
from rocketrio.actors.controller.metrics import ControllerCollector, ElectionCounts
from rocketrio.actors.controller.replicas_info import (
    ApplyOutcome,
    BrokerAlivePredicate,
    ControllerResult,
    ReplicasInfoManager,
)
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.live_update_service import ConfigUpdater
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingServer, RequestContext
from rocketrio.actors.kernel.runtime import every
from rocketrio.actors.kernel.server_limits import LogRateLimiter
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events as log_events
from rocketrio.actors.observe.metrics_exporter import (
    MetricsExporterType,
    exporter_addr,
    host_of,
    serve_metrics,
)
from rocketrio.actors.observe.rpc_metrics import RpcLatency, RpcLatencyCollector
from rocketrio.actors.raft.node import (
    IoRunner,
    LeaderPendingFull,
    NotLeader,
    ProposalDropped,
    RaftNode,
    store_dir,
)
from rocketrio.protocol.acl_signature import RequestSigner
from rocketrio.protocol.codes import RequestCode, ResponseCode, not_supported_remark, request_name
from rocketrio.protocol.config import dump_config
from rocketrio.protocol.controller_headers import (
    CONTROLLER_CHECK_BROKER_ALIVE,
    BrokerHeartbeatRequestHeader,
    GetMetaDataResponseHeader,
    RegisterBrokerToControllerRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.storage.fs import OS_FS, FileSystem

# DLedger answers a proposal that was not acknowledged within maxWaitAckTimeMs (2500) with an
# error; we wait a little longer than that, then say the outcome is unknown
PROPOSE_TIMEOUT_S = 3.0
READ_BARRIER_TIMEOUT_S = 3.0
# a freshly elected leader applies its no-op within a round trip; requests wait that long
LEADER_READY_WAIT_S = 1.0

RC = ResponseCode


class Refused(Exception):
    """The request cannot be served here (not leader, busy, no quorum): answer code + remark."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class ControllerStateMachine:
    """The Raft state machine: controller command batches applied to `ReplicasInfoManager`.

    `apply` returns one `ApplyOutcome` per command (what the proposer settles with) and tells the
    controller what was applied (for logs and role-change notifications on the leader).
    """

    def __init__(
        self,
        replicas: ReplicasInfoManager,
        on_applied: Callable[[Sequence[Command], Sequence[ApplyOutcome]], None] | None = None,
    ) -> None:
        self.replicas = replicas
        self.on_applied = on_applied

    def apply(self, data: bytes) -> list[ApplyOutcome] | None:
        if data[:2] == BENCH_ENTRY_TAG:
            return None
        # CommandDecodeError: a committed entry we cannot read is fatal
        batch = decode_commands(data)
        outcomes = self.replicas.apply_commands(batch)
        if self.on_applied is not None:
            self.on_applied(batch, outcomes)
        return outcomes

    def snapshot(self) -> bytes:
        return self.replicas.snapshot()

    def restore(self, data: bytes) -> None:
        self.replicas.restore(data)


def admin_users(config: ControllerConfig) -> UserLookup | None:
    """The super users of a controller with authenticationEnabled (None without):
    initAuthenticationUser (admins) and the inner credentials, which brokers share to sign their
    own CONTROLLER_ELECT_MASTER (a slave finding no master)."""
    if not config.authenticationEnabled:
        return None
    inner = parse_credentials(config.innerClientAuthenticationCredentials)
    return server_users(
        parse_init_user(config.initAuthenticationUser),
        *([(inner.access_key, inner.secret_key)] if inner is not None else []),
    )


class Controller(FailoverMixin):
    """One controller replica. Run with `await nursery.start(controller.run)`."""

    def __init__(
        self,
        config: ControllerConfig,
        transport: Transport,
        *,
        rng: random.Random | None = None,
        io_runner: IoRunner | None = None,
        raft_overrides: dict[str, int] | None = None,
        fs: FileSystem = OS_FS,
        export_metrics: bool = True,
    ) -> None:
        self.config = config
        self.transport = transport
        self.raft_config = config.to_raft_config(**(raft_overrides or {}))
        self.self_id = config.controllerDLegerSelfId
        self.addr = config.self_address()
        self.replicas = ReplicasInfoManager(
            enable_elect_unclean_master=config.enableElectUncleanMaster
        )
        self.heartbeats = BrokerHeartbeatManager()
        self.node = RaftNode(
            self.raft_config,
            store_dir(config.store_path(), self.self_id),
            ControllerStateMachine(self.replicas, self._on_applied),
            transport,
            rng=rng,
            io_runner=io_runner,
            fs=fs,
        )
        self.node.on_role_change = self._on_role_change
        prom = config.metricsExporterType is MetricsExporterType.PROM
        # metricsExporterType=PROM: /metrics (controller/metrics.py), served here unless an
        # embedding NameServer serves it (``export_metrics=False``)
        self.rpc_latency = RpcLatency() if prom else None
        self.elections = ElectionCounts()
        self._export_metrics = prom and export_metrics
        self.metrics_addr = ""  # where /metrics is served, once it is
        self.server = RemotingServer(
            transport,
            self.addr,
            self.process,
            on_connect=self.watch,
            limits=config.server_limits(),
            rpc_latency=self.rpc_latency,
        )
        self.bound_addr: str | None = None
        self.log = structlog.get_logger("controller").bind(actor="controller")
        self._nursery: trio.Nursery | None = None
        self._client: RemotingClient | None = None
        self._reelect_lock = trio.Lock()
        self._in_flight = 0  # requests being answered by a task of their own (`start_answer`)
        self._busy_log = LogRateLimiter()
        self._elect_reasons: dict[str, str] = {}
        self._elect_candidates: dict[str, list[int]] = {}
        self._admin_users = admin_users(config)
        # UPDATE_CONTROLLER_CONFIG: live keys only, this replica only (live_config.py)
        self.config_updater = ConfigUpdater(
            config,
            CONTROLLER_POLICY,
            config_path=lambda: self.config.configStorePath or None,
            apply=lambda changes: apply_controller_changes(self, changes),
            io_runner=io_runner,
            fs=fs,
            log=self.log,
        )
        self._liveness_changed = trio.Event()  # set (and replaced) when a broker connection dies
        self.calls = CallDecoder(self.replicas, self._live_info)

    # ------------------------------------------------------------------ lifecycle

    async def run(
        self, *, task_status: trio.TaskStatus[Controller] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Open the Raft store, listen on the peer address, serve until cancelled."""
        try:
            creds = parse_credentials(self.config.innerClientAuthenticationCredentials)
            signer = None if creds is None else RequestSigner(creds)  # signs pushes to brokers
            async with (
                RemotingClient(self.transport, request_hook=signer) as client,
                trio.open_nursery() as nursery,
            ):
                self._client, self._nursery = client, nursery
                # a starting replica has heard nobody: it answers peers' death checks UNKNOWN
                # until it has listened for one timeout
                self.heartbeats.reset(monotonic_ms())
                await nursery.start(self.node.run)
                self.bound_addr = await nursery.start(self.server.run)
                cfg = self.config
                if self._export_metrics:
                    self.metrics_addr = await nursery.start(
                        serve_metrics,
                        self.transport,
                        exporter_addr(
                            cfg.metricsPromExporterHost,
                            cfg.metricsPromExporterPort,
                            host_of(self.bound_addr),
                        ),
                        [RpcLatencyCollector([self.rpc_source()]), *self.metrics_collectors()],
                        self.log,
                    )
                nursery.start_soon(every, cfg.scanNotActiveBrokerInterval / 1000, self._scan)
                nursery.start_soon(
                    every, cfg.scanInactiveMasterInterval / 1000, self._scan_inactive_masters
                )
                print(
                    f"The controller[{self.self_id}, {self.bound_addr}] boot success. "
                    f"group={self.raft_config.group}, peers={cfg.controllerDLegerPeers}",
                    flush=True,
                )
                log_events.emit(
                    self.log,
                    log_events.ControllerBoot(
                        addr=self.bound_addr,
                        peers=cfg.controllerDLegerPeers,
                        self_id=self.self_id,
                        group=self.raft_config.group,
                    ),
                )
                task_status.started(self)
        finally:
            self._nursery = self._client = None

    def rpc_source(self) -> tuple[dict[str, str], RpcLatency]:
        """This replica's rocketmq_rpc_latency source (only with metricsExporterType=PROM)."""
        assert self.rpc_latency is not None, "metricsExporterType is not PROM"
        return {"node_type": "controller", "node_id": self.addr}, self.rpc_latency

    def metrics_collectors(self) -> list[Collector]:
        """The controller's own metrics (only with metricsExporterType=PROM)."""
        assert self.rpc_latency is not None, "metricsExporterType is not PROM"
        node = self.node
        return [
            ControllerCollector(
                address=self.addr,
                group=self.raft_config.group,
                peer_id=self.self_id,
                role=lambda: node.role if node.started else None,
                elections=self.elections,
                active_brokers=lambda: self.heartbeats.active_brokers_num(monotonic_ms()),
                rpc_latency=self.rpc_latency,
            )
        ]

    # ------------------------------------------------------------------ request dispatch

    async def process(self, ctx: RequestContext) -> RemotingCommand | None:
        """The server's processor: Raft RPCs, local answers, and Raft-backed handlers."""
        code = ctx.cmd.code
        if self._admin_users is not None:  # authenticationEnabled: admin writes need a super user
            denied = check_admin_write(ctx.cmd, self._admin_users)
            if denied is not None:
                log_events.emit(
                    self.log, log_events.AuthRefused(code=request_name(code), remark=denied.remark)
                )
                return ctx.cmd.make_response(RC.NO_PERMISSION, denied.remark)
        if code == RequestCode.RAFT_MESSAGE:
            self.node.deliver(ctx.cmd.body)
            return None
        if code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            return self._metadata(ctx)
        if code == RequestCode.BROKER_HEARTBEAT:
            return self._broker_heartbeat(ctx)
        if code == RequestCode.GET_CONTROLLER_CONFIG:
            return ctx.cmd.make_response(RC.SUCCESS, body=dump_config(self.config).encode())
        if code == RequestCode.UPDATE_CONTROLLER_CONFIG:
            return await self.config_updater.handle(ctx)
        if code == CONTROLLER_BENCH_PROPOSE:
            return bench_propose(self.node, ctx, self.not_leader_remark)
        if code == CONTROLLER_CHECK_BROKER_ALIVE:
            return self.check_broker_alive(ctx)  # HeaderError -> INVALID_PARAMETER
        if code == RequestCode.CONTROLLER_REGISTER_BROKER:
            call = self._register_broker(ctx)
        elif (decode := self.calls.decoders.get(code)) is not None:
            call = decode(ctx.cmd)  # HeaderError -> INVALID_PARAMETER, answered by the connection
        else:
            return ctx.cmd.make_response(
                RC.REQUEST_CODE_NOT_SUPPORTED,
                not_supported_remark(code, "the controller"),
            )
        if self._nursery is None:
            return ctx.cmd.make_response(RC.SYSTEM_BUSY, "the controller is shutting down")
        return self.start_answer(ctx, self._answer, ctx, call)

    def start_answer(
        self, ctx: RequestContext, answer: Callable[..., Awaitable[None]], *args: Any
    ) -> RemotingCommand | None:
        """Start a task that answers ``ctx`` later, within the in-flight bound
        (controllerRequestThreadPoolQueueCapacity); over it, the SYSTEM_BUSY answer, now."""
        assert self._nursery is not None
        limit = self.config.controllerRequestThreadPoolQueueCapacity
        if self._in_flight >= limit:
            return self._refuse_busy(ctx, limit)
        self._in_flight += 1
        self._nursery.start_soon(self._counted, answer, *args)
        return None

    async def _counted(self, answer: Callable[..., Awaitable[None]], *args: Any) -> None:
        try:
            await answer(*args)
        finally:
            self._in_flight -= 1

    def _refuse_busy(self, ctx: RequestContext, limit: int) -> RemotingCommand:
        """Over the in-flight bound: answer at once instead of queueing without bound."""
        name = request_name(ctx.cmd.code)
        suppressed = self._busy_log.admit(trio.current_time())
        if suppressed is not None:
            log_events.emit(
                self.log,
                log_events.RequestRefusedBusy(
                    code=name,
                    remote=ctx.remote,
                    in_flight=self._in_flight,
                    limit=limit,
                    suppressed=suppressed,
                ),
            )
        return ctx.cmd.make_response(
            RC.SYSTEM_BUSY,
            f"[OVERLOAD] controller busy: {self._in_flight} requests are being answered "
            f"(controllerRequestThreadPoolQueueCapacity={limit}); retry {name} later",
        )

    def _note_election(self, name: str, reason: str, is_alive: BrokerAlivePredicate) -> None:
        """What the elect_master line of this election will say: why, and which replicas of
        the set were alive to choose from."""
        self._elect_reasons[name] = reason
        replica = self.replicas.replica_info(name)
        if replica is not None:
            self._elect_candidates[name] = sorted(
                b for b in replica.broker_id_info if is_alive(replica.cluster_name, name, b)
            )

    async def _answer(self, ctx: RequestContext, call: Call) -> None:
        try:
            is_alive: BrokerAlivePredicate = self._is_alive
            if call.elect_reason is not None:
                name, reason = call.elect_reason
                if call.confirm_master_death and self.node.is_ready_leader:
                    is_alive = await self.election_liveness(name, reason)
                self._note_election(name, reason, is_alive)
            result = await self.execute(lambda: call.compute(is_alive))
        except Refused as e:
            ctx.respond(ctx.cmd.make_response(e.code, e.remark))
            return
        except Exception as e:
            # a handler bug must not take the controller down; the request still gets an answer
            name = request_name(ctx.cmd.code)
            log_events.emit(
                self.log, log_events.RequestFailed(code=name, remote=ctx.remote), exc_info=e
            )
            ctx.respond_code(RC.SYSTEM_ERROR, f"{name} failed: {type(e).__name__}: {e}")
            return
        if call.election is not None:
            self._count_election(call.election, result.response_code)
        ctx.respond(_response(ctx.cmd, result))

    def _count_election(self, broker_set: str, response_code: int) -> None:
        replica = self.replicas.replica_info(broker_set)
        cluster = "" if replica is None else replica.cluster_name
        self.elections.record(cluster, broker_set, response_code)

    async def execute(self, compute: Callable[[], ControllerResult]) -> ControllerResult:
        """Run a handler on the ready leader: writes through the log, reads after a barrier."""
        barrier_done = False
        retries = 0
        while True:
            await self._require_ready_leader()
            result = compute()
            if not result.commands:
                if barrier_done:
                    return result
                await self._read_barrier()
                barrier_done = True
                continue  # recompute on the state the barrier vouches for
            outcomes = await self._propose(encode_commands(result.commands))
            settled = result.settle(outcomes)
            if settled.ok or retries >= self.config.electMasterMaxRetryCount:
                return settled
            retries += 1

    async def _require_ready_leader(self) -> None:
        node = self.node
        if node.is_ready_leader:
            return
        if node.is_leader and await node.wait_leader_ready(LEADER_READY_WAIT_S):
            return
        raise Refused(RC.CONTROLLER_NOT_LEADER, self.not_leader_remark())

    def not_leader_remark(self) -> str:
        node = self.node
        if node.is_leader:
            return (
                f"not ready: {self.self_id} was just elected leader in term {node.term} and is "
                f"still applying the log; retry"
            )
        if node.leader_id is None:
            return "not leader, no leader elected yet"
        return f"not leader, leader is {node.leader_id} at {node.leader_addr}"

    async def _propose(self, data: bytes) -> list[ApplyOutcome]:
        try:
            outcomes: list[ApplyOutcome] = await self.node.propose(data, PROPOSE_TIMEOUT_S)
        except NotLeader:
            raise Refused(RC.CONTROLLER_NOT_LEADER, self.not_leader_remark()) from None
        except LeaderPendingFull as e:
            raise Refused(RC.SYSTEM_BUSY, f"controller busy: {e}") from None
        except ProposalDropped as e:
            raise Refused(
                RC.CONTROLLER_NOT_LEADER,
                f"leadership changed before the request committed ({e}); retry against the "
                f"new leader ({self.not_leader_remark()})",
            ) from None
        except trio.TooSlowError:
            raise Refused(
                RC.SYSTEM_ERROR,
                f"not committed within {PROPOSE_TIMEOUT_S}s, outcome unknown: is a majority of "
                f"the controllers {self.config.controllerDLegerPeers} up?",
            ) from None
        return outcomes

    async def _read_barrier(self) -> None:
        try:
            await self.node.read_barrier(READ_BARRIER_TIMEOUT_S)
        except (NotLeader, ProposalDropped):
            raise Refused(RC.CONTROLLER_NOT_LEADER, self.not_leader_remark()) from None
        except trio.TooSlowError:
            raise Refused(
                RC.SYSTEM_ERROR,
                f"leadership not confirmed within {READ_BARRIER_TIMEOUT_S}s: is a majority of "
                f"the controllers {self.config.controllerDLegerPeers} up?",
            ) from None

    # ------------------------------------------------------------------ handlers (decode only)

    def _is_alive(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        return self.heartbeats.is_alive(cluster, broker_name, broker_id, monotonic_ms())

    def _live_info(self, cluster: str, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.heartbeats.live_info(cluster, broker_name, broker_id)

    def _register_broker(self, ctx: RequestContext) -> Call:
        h = from_ext(RegisterBrokerToControllerRequestHeader, ctx.cmd.ext_fields)
        # a registration is a heartbeat (ReplicasInfoManager.register_broker's contract)
        who = (h.clusterName, h.brokerName, h.brokerId, h.brokerAddress)
        self.heartbeats.on_heartbeat(*who, monotonic_ms(), not_electable=h.notElectable)
        self.remember_broker_addr(ctx.conn, h.brokerAddress)
        return self.calls.register_broker(h)

    # ------------------------------------------------------------------ local answers

    def _metadata(self, ctx: RequestContext) -> RemotingCommand:
        node = self.node
        header = GetMetaDataResponseHeader(
            group=self.raft_config.group,
            controllerLeaderId=node.leader_id,
            controllerLeaderAddress=node.leader_addr,
            isLeader=node.is_leader,
            peers=self.config.controllerDLegerPeers,
            raftSelfId=node.self_id,
            raftRole=node.role.name.lower(),
            raftTerm=node.term,
            raftCommitIndex=node.commit_index,
        )
        return ctx.cmd.make_response(RC.SUCCESS, None, to_ext(header))

    def _broker_heartbeat(self, ctx: RequestContext) -> RemotingCommand:
        h = from_ext(BrokerHeartbeatRequestHeader, ctx.cmd.ext_fields)
        if h.brokerId is None:
            return ctx.cmd.make_response(
                RC.CONTROLLER_INVALID_REQUEST,
                f"BROKER_HEARTBEAT from {h.brokerName}@{h.brokerAddr} has no brokerId: the "
                f"controller keys liveness by brokerName:brokerId",
            )
        self.observe_heartbeat(h)
        self.remember_broker_addr(ctx.conn, h.brokerAddr)
        return ctx.cmd.make_response(RC.SUCCESS)

    # ------------------------------------------------------------------ re-election

    async def _reelect_dead_masters(self, reason: str, only: frozenset[str] | None = None) -> None:
        """Controller-triggered ElectMaster, through the log, for every set without a master
        (``only``: just these sets; a master that only this leader finds dead is kept:
        `unconfirmed_master_deaths`)."""
        async with self._reelect_lock:
            names = [
                n
                for n in self.replicas.scan_need_reelect_broker_sets(
                    self._is_alive, self._live_info
                )
                if only is None or n in only
            ]
            kept = await self.unconfirmed_master_deaths(names, reason) if names else set()
            for name in names:
                if name in kept:
                    continue
                self._note_election(name, reason, self._is_alive)
                try:
                    result = await self.execute(
                        lambda name=name: self.replicas.elect_master(
                            name, self._is_alive, self._live_info
                        )
                    )
                except Refused as e:
                    log_events.emit(
                        self.log, log_events.ElectMasterFailed(error=e.remark), broker=name
                    )
                    return
                self._count_election(name, result.response_code)
                if not result.ok and result.response_code != RC.CONTROLLER_MASTER_STILL_EXIST:
                    log_events.emit(
                        self.log,
                        log_events.ElectMasterFailed(
                            code=result.response_code, remark=result.remark
                        ),
                        broker=name,
                    )


def _response(cmd: RemotingCommand, result: ControllerResult) -> RemotingCommand:
    ext = to_ext(result.header) if result.header is not None else {}
    return cmd.make_response(result.response_code, result.remark, ext, result.body_bytes() or b"")


async def run_controller(
    config: ControllerConfig,
    transport: Transport,
    *,
    task_status: trio.TaskStatus[Controller] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Start a standalone controller replica; `task_status.started(the Controller)`."""
    await Controller(config, transport).run(task_status=task_status)
