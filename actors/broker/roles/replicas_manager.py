"""ReplicasManager (RIP-44): the broker's role in controller mode, the shell of `RoleCore`
(role_core.py) and the controller-mode `RoleService` (role_service.py).

Runs only with enableControllerMode=true. Start-up, in order:
1. find the active controller: any replica of controllerAddr (``;``-separated) answers
   CONTROLLER_GET_METADATA_INFO and names the leader (re-checked every
   syncControllerMetadataPeriod, and at once when a call meets CONTROLLER_NOT_LEADER);
2. the persistent BrokerId (broker_id_flow.py);
3. CONTROLLER_REGISTER_BROKER with the current address (the controller updates a moved broker)
   and feed the answer to the role core.

Then, while the broker runs: BROKER_HEARTBEAT (oneway) to every controller replica every
brokerHeartbeatInterval with the last epoch of the epoch file, the CommitLog end, the
confirmOffset, controllerHeartBeatTimeoutMills and brokerElectionPriority;
CONTROLLER_GET_REPLICA_INFO every syncBrokerMetadataPeriod (a lost NOTIFY_BROKER_ROLE_CHANGED
heals here; it is also the linearizable read that renews a master's lease and tells the
replication gate the controller's SyncStateSet); NOTIFY_BROKER_ROLE_CHANGED is acted on at once.

Every controller fact becomes a `ControllerView`; the role core decides (one lock serialises
decisions) and this shell carries the decision out (role_decisions.py): through the
`AutoSwitchHAService` (ha/service.py: store role, replication gate, HA connections), then the
broker's role (brokerId 0 and SYNC_MASTER for the master, its own id for a slave: the
NameServers hear it at once, with the masterEpoch as DataVersion stateVersion, #6316). The
replication gate sends its SyncStateSet changes through `alter_sync_state_set`
(CONTROLLER_ALTER_SYNC_STATE_SET, fenced by masterEpoch and syncStateSetEpoch; the answer says
applied, refused or unknown).
"""

from __future__ import annotations

from typing import Any, Final

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.actors.broker.boot.fault_sites import Fault
from rocketrio.actors.broker.dispatch.answers import answer_json
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.ha.group_transfer import (
    AlterAccepted,
    AlterRefused,
    AlterResult,
    AlterUnknown,
)
from rocketrio.actors.broker.ha.service import AutoSwitchHAService, resolve_ha_addr
from rocketrio.actors.broker.roles.broker_id_flow import BrokerIdFlow
from rocketrio.actors.broker.roles.controller_calls import (
    CallHealth,
    ControllerCalls,
    IdForgotten,
    StepFailed,
    replica_view,
    sync_body,
)
from rocketrio.actors.broker.roles.role_core import ControllerView, LiftFence, Role, RoleCore
from rocketrio.actors.broker.roles.role_decisions import RoleDecisions
from rocketrio.actors.broker.roles.role_service import RoleDeps
from rocketrio.actors.broker.store.disk_guard import WriteGate
from rocketrio.actors.client.controller_admin import ControllerUnavailable
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.remoting import RemotingClient, RequestContext
from rocketrio.actors.kernel.runtime import every
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode, response_name
from rocketrio.protocol.controller_headers import (
    AlterSyncStateSetRequestHeader,
    BrokerHeartbeatRequestHeader,
    EpochEntry,
    EpochEntryCache,
    GetReplicaInfoResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    SyncStateSet,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, from_json, to_json
from rocketrio.storage.catch_up_fence import clear_fence, load_fence

RC = ResponseCode
# upstream retries a failed start-up step every 5 s plus up to 1 s of jitter (two brokers of a
# set racing for the same id then rarely collide twice); we start at 1 s and double up to 10 s,
# so a controller that is merely electing is retried soon and a lasting refusal is not spammed
RETRY_INTERVAL_S: Final = 1.0
RETRY_INTERVAL_MAX_S: Final = 10.0
RETRY_JITTER_S: Final = 1.0
_RETRYABLE = (StepFailed, ControllerUnavailable, HeaderError)
_ROLES = {Role.MASTER: BrokerRole.SYNC_MASTER, Role.SLAVE: BrokerRole.SLAVE}


class ReplicasManager:
    """The controller-mode role service. Run with `nursery.start(rm.run, client)`."""

    def __init__(self, deps: RoleDeps) -> None:
        self.deps = deps
        self.config = deps.config
        self.store = deps.store
        self.rng = deps.io.rng
        self.log = structlog.get_logger("broker.replicas").bind(
            actor="replicas_manager", broker=self.config.brokerName
        )
        self.id_flow = BrokerIdFlow(
            self.config,
            fs=deps.io.fs,
            run_blocking=deps.io.run_blocking,
            rng=deps.io.rng,
            faults=deps.faults,
            wall_now_ms=deps.io.now_ms,
            addr=deps.addr,
        )
        self.health = CallHealth(self.log)
        self.calls: ControllerCalls | None = None
        self.broker_controller_id: int | None = None
        self.core: RoleCore | None = None
        self.decisions: RoleDecisions | None = None
        self.role_taken = trio.Event()  # set once the first role is taken
        self._nursery: trio.Nursery | None = None
        self._client: RemotingClient | None = None
        self._refreshing = False

    # ------------------------------------------------------------------ the RoleService

    def serving_as_master(self) -> bool:
        return self.core is not None and self.core.is_master

    def acting_master(self) -> bool:
        return False  # controller mode elects a master instead (README: acting master)

    def special_services_on(self) -> bool:
        return self.serving_as_master()

    def group_members(self) -> dict[int, str]:
        return {}  # the controller's SyncStateSet governs this mode

    @property
    def role_known(self) -> bool:
        return self.role is not None

    @property
    def ha(self) -> AutoSwitchHAService | None:
        return None if self.decisions is None else self.decisions.ha

    @property
    def boot_broker_id(self) -> int | None:
        return None  # the controller assigns it (broker_id_flow.py)

    @property
    def role(self) -> BrokerRole | None:
        return None if self.core is None or self.core.role is None else _ROLES[self.core.role]

    @property
    def master_epoch(self) -> int:
        return 0 if self.core is None else self.core.master_epoch

    @property
    def master_broker_id(self) -> int | None:
        return None if self.core is None else self.core.master_id

    @property
    def master_address(self) -> str | None:
        return None if self.core is None else self.core.master_addr

    @property
    def sync_state_set(self) -> frozenset[int]:
        return frozenset() if self.core is None else self.core.sync_state_set

    def may_follow(self) -> bool:
        return True  # the controller may make this broker a slave at any time

    def master_to_sync(self) -> str | None:
        return self.master_address if self.role is BrokerRole.SLAVE else None

    def write_refusal(self) -> Refusal | None:
        """Why this broker may not take writes now (None for the master): the send path's
        gate."""
        core = self.core
        if core is not None and core.is_master:  # every send asks: nothing else first
            return None
        cfg, addr = self.config, self.deps.addr()
        if core is not None and core.role is None and core.fence is not None:
            return Refusal(
                RC.SERVICE_NOT_AVAILABLE,
                f"broker {cfg.brokerName} at {addr} cut its CommitLog at "
                f"{core.fence.lost_offset} after a lost page and takes no writes until it has "
                "caught up from a master elected since (see its catch_up_fence_holds log line)",
            )
        if core is None or core.role is None:
            return Refusal(
                RC.SERVICE_NOT_AVAILABLE,
                f"broker {cfg.brokerName} at {addr} has no role yet: it is registering "
                f"with the controllers {cfg.controllerAddr} or waiting for an election",
            )
        return Refusal(
            RC.SERVICE_NOT_AVAILABLE,
            f"broker {cfg.brokerName} brokerId {self.broker_controller_id} at {addr} is a "
            f"SLAVE (controller mode, masterEpoch {core.master_epoch}): send to the master, "
            f"brokerId {core.master_id} at {core.master_addr}",
        )

    def write_gates(self) -> tuple[WriteGate, ...]:
        return (self,)  # a slave, or a broker without a role, refuses sends

    def runtime_extras(self) -> dict[str, str]:
        """What the web console shows per replica: the masterEpoch and the confirmOffset."""
        return {
            "masterEpoch": str(self.master_epoch),
            "confirmOffset": str(self.store.confirm_offset()),
        }

    def epoch_entry_cache(self) -> EpochEntryCache:
        """GET_BROKER_EPOCH_CACHE: the epoch file with end offsets, and the CommitLog end."""
        cfg, store = self.config, self.store
        records = store.epoch_records()
        end = store.log_end_offset()
        entries = []
        for i, r in enumerate(records):
            nxt = records[i + 1].start_offset if i + 1 < len(records) else end
            entries.append(EpochEntry(r.epoch, r.start_offset, nxt))
        return EpochEntryCache(
            clusterName=cfg.brokerClusterName,
            brokerName=cfg.brokerName,
            brokerId=cfg.brokerId,
            epochList=entries,
            maxOffset=end,
        )

    def handlers(self) -> Handlers:
        """NOTIFY_BROKER_ROLE_CHANGED (1008, a oneway push from the controller leader) and
        GET_BROKER_EPOCH_CACHE (1007, the epoch file, for mqadmin getBrokerEpoch)."""

        async def role_change_notified(ctx: RequestContext) -> RemotingCommand:
            cmd = ctx.cmd
            h = from_ext(NotifyBrokerRoleChangedRequestHeader, cmd.ext_fields)
            sync = from_json(SyncStateSet, cmd.body) if cmd.body else None
            self.on_role_change_notified(h, sync)
            return cmd.make_response(RC.SUCCESS)

        async def epoch_cache(ctx: RequestContext) -> RemotingCommand:
            return answer_json(ctx.cmd, self.epoch_entry_cache())

        return {
            RequestCode.NOTIFY_BROKER_ROLE_CHANGED: role_change_notified,
            RequestCode.GET_BROKER_EPOCH_CACHE: epoch_cache,
        }

    # ------------------------------------------------------------------ lifecycle

    async def run(
        self,
        client: RemotingClient,
        *,
        task_status: trio.TaskStatus[ReplicasManager] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Start-up flow in the background, then the periodic tasks; until cancelled."""
        self.calls = ControllerCalls(self.config, client, self.health)
        self._client = client
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                ha = AutoSwitchHAService(
                    self.config,
                    store=self.store,
                    master_service=self.deps.ha_master,
                    transport=self.deps.io.transport,
                    resolve_ha_addr=self._resolve_ha_addr,
                    rng=self.rng,
                    alter=self.alter_sync_state_set,
                    lease_valid=self._lease_valid,
                    on_refresh_needed=self._refresh_soon,
                )
                self.decisions = RoleDecisions(
                    self.config,
                    ha,
                    on_role_change=self.deps.on_role_change,
                    elect=self.elect,
                    replica_info_view=self.replica_info_view,
                    health=self.health,
                    rng=self.rng,
                    log=self.log,
                    role_taken=self.role_taken,
                    lift_fence=self._lift_fence,
                )
                self.decisions.start(nursery)
                await nursery.start(ha.run)
                task_status.started(self)
                await self._start_up(nursery)
        finally:
            self._nursery = None

    async def _start_up(self, nursery: trio.Nursery) -> None:
        cfg, calls = self.config, self.calls
        assert calls is not None
        await self._until_done("find_controller_leader", calls.find_leader)
        nursery.start_soon(
            every, cfg.syncControllerMetadataPeriod / 1000, self._sync_controller_metadata
        )
        meta = await self._until_done("apply_broker_id", lambda: self.id_flow.obtain(calls))
        self.broker_controller_id = meta.broker_id
        records = self.store.epoch_records()
        io = self.deps.io
        fence = await io.run_blocking(lambda: load_fence(cfg.storePathRootDir, fs=io.fs))
        self.core = RoleCore(
            meta.broker_id,
            boot_last_epoch=records[-1].epoch if records else -1,
            lease_ms=cfg.masterLeaseTimeMillis,
            needs_lease=not cfg.allAckInSyncStateSet,
            fence=fence,
        )
        nursery.start_soon(
            _every_now, cfg.brokerHeartbeatInterval / 1000, self.send_heartbeat_to_controller
        )
        await self._until_done("register_to_controller", self.register)
        nursery.start_soon(every, cfg.syncBrokerMetadataPeriod / 1000, self._sync_replica_info)

    async def _until_done(self, step: str, fn: Any) -> Any:
        """Run a start-up step until it succeeds; each failure is logged with its reason."""
        attempt = 0
        while True:
            try:
                return await fn()
            except _RETRYABLE as e:
                attempt += 1
                events.emit(
                    self.log, events.ControllerStepRetry(step=step, attempt=attempt, error=str(e))
                )
            backoff = min(RETRY_INTERVAL_S * 2 ** (attempt - 1), RETRY_INTERVAL_MAX_S)
            await trio.sleep(backoff + self.rng.random() * RETRY_JITTER_S)

    async def register(self) -> None:
        """RegisterBrokerToController, then take the role (or ask for an election)."""
        calls, broker_id = self.calls, self.broker_controller_id
        assert calls is not None and broker_id is not None
        try:
            h, sync = await calls.register(
                broker_id, self.deps.addr(), self.deps.io.now_ms(), electable=self.electable
            )
        except IdForgotten as e:
            await self.id_flow.reapply_from_meta(calls, e.remark)
            try:
                h, sync = await calls.register(
                    broker_id, self.deps.addr(), self.deps.io.now_ms(), electable=self.electable
                )
            except IdForgotten as again:
                raise StepFailed(f"RegisterBroker: {again}") from None
        await self.deps.faults.reach(Fault.REGISTERED)
        if h.masterBrokerId is None or h.masterEpoch is None:
            if self.electable:
                await self.elect()
            else:  # the fence: ask for nothing, say why (the core's HoldFence)
                await self.on_view(ControllerView(None, None, h.masterEpoch or 0))
            return
        await self.change_broker_role(h.masterBrokerId, h.masterAddress, h.masterEpoch, sync)

    @property
    def electable(self) -> bool:
        """False while the catch-up fence holds (store/lost_page.py)."""
        return self.core is None or self.core.fence is None

    async def _lift_fence(self, d: LiftFence) -> None:
        """The broker caught up: remove the fence durably, then the heartbeats say so."""
        io, root = self.deps.io, self.config.storePathRootDir
        await io.run_blocking(lambda: clear_fence(root, fs=io.fs))
        events.emit(
            self.log,
            events.CatchUpFenceLifted(
                master_id=d.master_id,
                epoch=d.epoch,
                lost_offset=d.fence.lost_offset,
                old_end=d.fence.old_end,
            ),
        )

    async def elect(self) -> None:
        """Ask the controller to elect a master naming ourselves, then take what it says."""
        assert self.calls is not None and self.broker_controller_id is not None
        view = await self.calls.elect(self.broker_controller_id)
        await self.on_view(view)

    # ------------------------------------------------------------------ role changes

    async def change_broker_role(
        self,
        master_id: int | None,
        master_addr: str | None,
        master_epoch: int | None,
        sync: SyncStateSet | None,
    ) -> None:
        """Feed what the controller said about the set (register answer, GetReplicaInfo,
        NOTIFY_BROKER_ROLE_CHANGED) to the role core and carry it out."""
        if master_epoch is None:
            return
        await self.on_view(
            ControllerView(
                master_id,
                master_addr,
                master_epoch,
                None if sync is None else frozenset(sync.syncStateSet),
                None if sync is None else sync.syncStateSetEpoch,
            )
        )

    async def on_view(self, view: ControllerView) -> None:
        if self.core is None or self.decisions is None:
            return
        await self.decisions.on_view(self.core, view, monotonic_ms())

    def on_role_change_notified(
        self, h: NotifyBrokerRoleChangedRequestHeader, sync: SyncStateSet | None
    ) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED: act at once (in our nursery; the push is oneway)."""
        if self._nursery is None or self.broker_controller_id is None:
            return  # still starting: the registration answer carries the same facts
        events.emit(
            self.log,
            events.BrokerRoleChangeNotified(
                master_id=h.masterBrokerId, master_addr=h.masterAddress, epoch=h.masterEpoch
            ),
        )
        self._nursery.start_soon(
            self.change_broker_role, h.masterBrokerId, h.masterAddress, h.masterEpoch, sync
        )

    # ------------------------------------------------------------------ SyncStateSet, lease

    async def alter_sync_state_set(self, members: frozenset[int], base_epoch: int) -> AlterResult:
        """CONTROLLER_ALTER_SYNC_STATE_SET for the replication gate: applied, refused (not
        applied, and never will be) or unknown (may still apply)."""
        core, me, calls = self.core, self.broker_controller_id, self.calls
        if core is None or me is None or calls is None or not core.is_master:
            return AlterRefused("this broker is not master", fenced=False)
        header = AlterSyncStateSetRequestHeader(self.config.brokerName, me, core.master_epoch)
        body = to_json(SyncStateSet(sorted(members), base_epoch))
        try:
            resp = await calls.call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header, body)
        except ControllerUnavailable as e:
            return AlterUnknown(str(e))
        if resp.code == RC.SUCCESS:
            try:
                result = from_json(SyncStateSet, resp.body)
            except HeaderError as e:
                return AlterUnknown(f"unreadable answer: {e}")
            new = frozenset(result.syncStateSet)
            core.adopt_sync_state_set(new, result.syncStateSetEpoch)
            return AlterAccepted(new, result.syncStateSetEpoch)
        reason = f"{response_name(resp.code)}: {resp.remark}"
        if resp.code == RC.SYSTEM_ERROR:
            return AlterUnknown(reason)  # e.g. "not committed within ..., outcome unknown"
        if resp.code in (RC.CONTROLLER_FENCED_MASTER_EPOCH, RC.CONTROLLER_INVALID_MASTER):
            self._refresh_soon()  # we may not be master any more
        return AlterRefused(reason, fenced=resp.code == RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH)

    def _lease_valid(self, now: int) -> bool:
        return self.core is not None and self.core.lease_valid(now)

    async def replica_info_view(self) -> ControllerView | None:
        """The controller's view of the set (linearizable); None when it did not answer."""
        got = await self._replica_info(reregister=False)
        return None if got is None else replica_view(*got)

    async def _replica_info(
        self, *, reregister: bool
    ) -> tuple[GetReplicaInfoResponseHeader, bytes] | None:
        assert self.calls is not None
        what = "get_replica_info"
        try:
            resp = await self.calls.replica_info(self.deps.io.now_ms())
        except ControllerUnavailable as e:
            self.health.failed(what, str(e))
            return None
        if resp.code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST and reregister:
            await self._retry_once("register_to_controller", self.register)
            return None
        if resp.code != RC.SUCCESS:
            self.health.failed(what, f"{response_name(resp.code)}: {resp.remark}")
            return None
        try:
            h = from_ext(GetReplicaInfoResponseHeader, resp.ext_fields)
        except HeaderError as e:
            self.health.failed(what, str(e))
            return None
        self.health.ok(what)
        return h, resp.body

    # ------------------------------------------------------------------ periodic work

    async def _sync_replica_info(self) -> None:
        """syncBrokerMetadataPeriod: GetReplicaInfo, then the same decisions as any view."""
        got = await self._replica_info(reregister=True)
        if got is None:
            return
        h, body = got
        master = h.masterBrokerId if h.masterAddress else None
        await self.change_broker_role(master, h.masterAddress, h.masterEpoch, sync_body(body))

    def _refresh_soon(self) -> None:
        """Re-read the controller's view now (a refused or unanswered SyncStateSet change)."""
        if self._refreshing or self._nursery is None:
            return
        self._refreshing = True

        async def refresh() -> None:
            try:
                await trio.sleep(0.05)
                await self._sync_replica_info()
            finally:
                self._refreshing = False

        self._nursery.start_soon(refresh)

    async def _retry_once(self, step: str, fn: Any) -> None:
        try:
            await fn()
        except _RETRYABLE as e:
            self.health.failed(step, str(e))
            return
        self.health.ok(step)

    async def _sync_controller_metadata(self) -> None:
        assert self.calls is not None
        link = self.calls.link
        before = link.leader_addr
        try:
            leader = await link.find_leader()
        except ControllerUnavailable as e:
            self.health.failed("get_controller_metadata", str(e))
            return
        self.health.ok("get_controller_metadata")
        if leader != before:
            events.emit(self.log, events.ControllerLeaderChanged(leader=leader, previous=before))

    async def send_heartbeat_to_controller(self) -> None:
        """BROKER_HEARTBEAT to every controller replica; the epoch is the epoch file's last."""
        broker_id = self.broker_controller_id
        if broker_id is None or self.calls is None:
            return
        cfg, store = self.config, self.store
        records = store.epoch_records()
        header = BrokerHeartbeatRequestHeader(
            clusterName=cfg.brokerClusterName,
            brokerAddr=self.deps.addr(),
            brokerName=cfg.brokerName,
            brokerId=broker_id,
            epoch=records[-1].epoch if records else 0,
            maxOffset=store.log_end_offset(),
            confirmOffset=store.confirm_offset(),
            heartbeatTimeoutMills=cfg.controllerHeartBeatTimeoutMills,
            electionPriority=cfg.brokerElectionPriority,
            notElectable=not self.electable,
        )
        await self.calls.heartbeat_all(header)

    async def _resolve_ha_addr(self, master_addr: str) -> str:
        assert self._client is not None
        return await resolve_ha_addr(self._client, master_addr)


async def _every_now(period_s: float, fn: Any) -> None:
    """`every`, starting with an immediate call (the first heartbeat goes out at once)."""
    await every(period_s, fn, initial_delay_s=0)
