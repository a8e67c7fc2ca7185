"""ReplicasManager (RIP-44, persistent BrokerId): the broker's side of controller mode, as the
shell of `RoleCore` (role_core.py).

Runs only with enableControllerMode=true. Start-up, in order:
1. find the active controller: any replica of controllerAddr (``;``-separated) answers
   CONTROLLER_GET_METADATA_INFO and names the leader (re-checked every
   syncControllerMetadataPeriod, and at once when a call meets CONTROLLER_NOT_LEADER);
2. the BrokerId flow of seeds/persistent-unique-broker-id.zh.md, with `BrokerIdentityStore` at
   storePathBrokerIdentity (default storePathRootDir):
   - ``broker.meta`` exists (normal restart): the id is known, go to 3;
   - no file: CONTROLLER_GET_NEXT_BROKER_ID -> write ``.broker.meta.temp`` (id + a fresh
     registerCheckCode) -> CONTROLLER_APPLY_BROKER_ID -> rename temp to ``broker.meta``;
   - the temp file exists (crash before the rename): resend ApplyBrokerId from it; the
     controller accepts a resend with the same registerCheckCode;
   - ApplyBrokerId refused (the id went to another broker): delete the temp file, start over;
   any other failure (controller down, no leader) retries the same step later, so every crash
   point resumes from what is on disk and no id is ever held by two brokers;
3. CONTROLLER_REGISTER_BROKER with the current address (the controller updates a moved broker)
   and feed the answer to the role core.

Then, while the broker runs: BROKER_HEARTBEAT (oneway) to every controller replica every
brokerHeartbeatInterval with the last epoch of the epoch file, the CommitLog end, the
confirmOffset, controllerHeartBeatTimeoutMills and brokerElectionPriority;
CONTROLLER_GET_REPLICA_INFO every syncBrokerMetadataPeriod (a lost NOTIFY_BROKER_ROLE_CHANGED
heals here; it is also the linearizable read that renews a master's lease and tells the
replication gate the controller's SyncStateSet); NOTIFY_BROKER_ROLE_CHANGED is acted on at once.

Every controller fact becomes a `ControllerView`; the role core decides (one lock serialises
decisions) and this shell carries the decision out: `BecomeMaster` / `BecomeSlave` /
stepping down through the `AutoSwitchHAService` (ha/service.py: store role, replication gate,
HA connections), then the broker's role (brokerId 0 and SYNC_MASTER for the master, its own id
for a slave: the NameServers hear it at once, with the masterEpoch as DataVersion
stateVersion, #6316); `RequestElection` sends CONTROLLER_ELECT_MASTER naming this broker (also
what a restarted master does instead of writing again in its old epoch). The replication gate
sends its SyncStateSet changes through `alter_sync_state_set` (CONTROLLER_ALTER_SYNC_STATE_SET,
fenced by masterEpoch and syncStateSetEpoch; the answer says applied, refused or unknown).

Crash points: `FaultSites.reach(site)` is awaited at every step of the BrokerId flow (sites in
fault_sites.Fault). Production passes `NO_FAULTS`; tests pass a hook that crashes the broker
there (see tests/actor/test_broker_identity.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any, Final, Protocol

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.boot.fault_sites import NO_FAULTS, Fault, FaultSites
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.ha.group_transfer import (
    AlterAccepted,
    AlterRefused,
    AlterResult,
    AlterUnknown,
)
from rocketrio.actors.broker.ha.master_service import HAMasterService
from rocketrio.actors.broker.ha.service import AutoSwitchHAService, resolve_ha_addr
from rocketrio.actors.broker.roles.role_core import (
    AdoptSyncStateSet,
    BecomeMaster,
    BecomeSlave,
    ControllerView,
    FollowNewAddress,
    Ignore,
    RequestElection,
    Role,
    RoleCore,
    RoleDecision,
)
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.client.api import request
from rocketrio.actors.client.controller_admin import ControllerLink, ControllerUnavailable
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.kernel.runtime import every
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode, response_name
from rocketrio.protocol.controller_headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    EpochEntry,
    EpochEntryCache,
    GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    NotifyBrokerRoleChangedRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    SyncStateSet,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, from_json, to_json
from rocketrio.storage.broker_identity import BrokerIdentityStore, BrokerMeta
from rocketrio.storage.fs import FileSystem

RC = ResponseCode
# upstream retries a failed start-up step every 5 s plus up to 1 s of jitter (two brokers of a
# set racing for the same id then rarely collide twice); we start at 1 s and double up to 10 s,
# so a controller that is merely electing is retried soon and a lasting refusal is not spammed
RETRY_INTERVAL_S: Final = 1.0
RETRY_INTERVAL_MAX_S: Final = 10.0
RETRY_JITTER_S: Final = 1.0
ELECTION_RETRY_S: Final = 0.2
_ROLES = {Role.MASTER: BrokerRole.SYNC_MASTER, Role.SLAVE: BrokerRole.SLAVE}


def now_ms() -> int:
    """Role and lease timing: Trio's clock (monotonic, mocked in tests)."""
    return int(trio.current_time() * 1000)


class _Retry(Exception):
    """This start-up step failed for a reason that may pass: wait, then resume from disk."""


class ReplicasHost(Protocol):
    """What the ReplicasManager uses of its broker."""

    config: BrokerConfig  # brokerRole / brokerId are set by apply_role
    rng: random.Random
    run_blocking: RunBlocking
    now_ms: Callable[[], int]
    fs: FileSystem
    transport: Transport
    store_actor: StoreActor
    ha_master: HAMasterService

    @property
    def addr(self) -> str:
        """The address the broker serves on (known once it listens)."""
        ...

    def apply_role(self, role: BrokerRole, broker_id: int, state_version: int) -> None:
        """Adopt the role: the NameServers hear it at once."""
        ...


class ReplicasManager:
    """The controller-mode service of one broker. Run with `nursery.start(rm.run, client)`."""

    def __init__(self, broker: ReplicasHost, faults: FaultSites = NO_FAULTS) -> None:
        self.broker = broker
        self.config = broker.config
        self.faults = faults
        self.rng: random.Random = broker.rng
        self.store = broker.store_actor
        self.identity = BrokerIdentityStore(self.config.broker_identity_dir, fs=broker.fs)
        self.link: ControllerLink | None = None
        self.log = structlog.get_logger("broker.replicas").bind(
            actor="replicas_manager", broker=self.config.brokerName
        )
        self.broker_controller_id: int | None = None
        self.core: RoleCore | None = None
        self.ha: AutoSwitchHAService | None = None
        self.role_known = trio.Event()
        self._role_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._client: RemotingClient | None = None
        self._electing = False
        self._refreshing = False
        self._lease_task = False
        self._failing: set[str] = set()  # log a failing periodic call once, not every period

    # ------------------------------------------------------------------ views for the broker

    @property
    def addr(self) -> str:
        return self.broker.addr

    @property
    def role(self) -> BrokerRole | None:
        return None if self.core is None or self.core.role is None else _ROLES[self.core.role]

    @property
    def is_master(self) -> bool:
        return self.core is not None and self.core.is_master

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

    # ------------------------------------------------------------------ lifecycle

    async def run(
        self,
        client: RemotingClient,
        *,
        task_status: trio.TaskStatus[ReplicasManager] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Start-up flow in the background, then the periodic tasks; until cancelled."""
        cfg = self.config
        self.link = ControllerLink(client, cfg.controllerAddr)
        self._client = client
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.ha = AutoSwitchHAService(
                    cfg,
                    store=self.store,
                    master_service=self.broker.ha_master,
                    transport=self.broker.transport,
                    resolve_ha_addr=self._resolve_ha_addr,
                    rng=self.rng,
                    alter=self.alter_sync_state_set,
                    lease_valid=self._lease_valid,
                    on_refresh_needed=self._refresh_soon,
                )
                await nursery.start(self.ha.run)
                task_status.started(self)
                await self._start_up(nursery)
        finally:
            self._nursery = None

    async def _start_up(self, nursery: trio.Nursery) -> None:
        cfg = self.config
        await self._until_done("find_controller_leader", self._find_leader)
        nursery.start_soon(
            every, cfg.syncControllerMetadataPeriod / 1000, self._sync_controller_metadata
        )
        meta = await self._until_done("apply_broker_id", self._obtain_broker_id)
        self.broker_controller_id = meta.broker_id
        records = self.store.epoch_records()
        self.core = RoleCore(
            meta.broker_id,
            boot_last_epoch=records[-1].epoch if records else -1,
            lease_ms=cfg.masterLeaseTimeMillis,
            needs_lease=not cfg.allAckInSyncStateSet,
        )
        nursery.start_soon(
            _every_now, cfg.brokerHeartbeatInterval / 1000, self.send_heartbeat_to_controller
        )
        await self._until_done("register_to_controller", self._register)
        nursery.start_soon(every, cfg.syncBrokerMetadataPeriod / 1000, self._sync_replica_info)

    async def _until_done(self, step: str, fn: Any) -> Any:
        """Run a start-up step until it succeeds; each failure is logged with its reason."""
        attempt = 0
        while True:
            try:
                return await fn()
            except (_Retry, ControllerUnavailable, HeaderError) as e:
                attempt += 1
                events.emit(
                    self.log, events.ControllerStepRetry(step=step, attempt=attempt, error=str(e))
                )
            backoff = min(RETRY_INTERVAL_S * 2 ** (attempt - 1), RETRY_INTERVAL_MAX_S)
            await trio.sleep(backoff + self.rng.random() * RETRY_JITTER_S)

    async def _find_leader(self) -> str:
        assert self.link is not None
        leader = await self.link.find_leader()
        events.emit(self.log, events.ControllerLeaderFound(leader=leader))
        return leader

    # ------------------------------------------------------------------ controller calls

    async def _call(self, code: int, header: Any, body: bytes = b"") -> RemotingCommand:
        assert self.link is not None
        return await self.link.invoke_leader(request(code, header, body))

    def _register_check_code(self) -> str:
        # upstream's "<brokerAddress>;<millis>" (the controller records the address part) plus
        # a random nonce: two incarnations on one address in one millisecond still differ
        return f"{self.addr};{self.broker.now_ms()};{self.rng.getrandbits(32):08x}"

    # ------------------------------------------------------------------ the BrokerId flow

    async def _obtain_broker_id(self) -> BrokerMeta:
        """Steps 1-4 of the seed, resumed from whatever the identity files say."""
        store, cfg = self.identity, self.config
        blocking = self.broker.run_blocking
        while True:
            meta = await blocking(store.read_meta)
            if meta is not None:
                store.check_owner(meta, cfg.brokerClusterName, cfg.brokerName)
                if await blocking(store.read_temp) is not None:
                    await blocking(store.delete_temp)  # a leftover: broker.meta is the truth
                events.emit(
                    self.log, events.BrokerIdLoaded(broker_id=meta.broker_id, path=store.directory)
                )
                return meta
            temp = await blocking(store.read_temp)
            if temp is None:
                next_id = await self._get_next_broker_id()
                await self.faults.reach(Fault.NEXT_BROKER_ID_RECEIVED)
                temp = BrokerMeta(
                    cfg.brokerClusterName, cfg.brokerName, next_id, self._register_check_code()
                )
                await blocking(partial(store.write_temp, temp))
                events.emit(self.log, events.BrokerIdTempWritten(broker_id=next_id))
                await self.faults.reach(Fault.TEMP_WRITTEN)
            else:
                store.check_owner(temp, cfg.brokerClusterName, cfg.brokerName)
                events.emit(self.log, events.BrokerIdResumeFromTemp(broker_id=temp.broker_id))
            if not await self._apply_broker_id(temp):
                await blocking(store.delete_temp)
                # seed: delete the temp file and go back to GetNextBrokerId; a random pause
                # keeps two brokers racing for the same id from colliding again
                await trio.sleep(self.rng.random() * RETRY_JITTER_S)
                continue
            await self.faults.reach(Fault.APPLY_ANSWERED)
            meta = await blocking(store.commit_temp)
            events.emit(self.log, events.BrokerIdApplied(broker_id=meta.broker_id, addr=self.addr))
            await self.faults.reach(Fault.META_COMMITTED)
            return meta

    async def _get_next_broker_id(self) -> int:
        cfg = self.config
        resp = await self._call(
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
            GetNextBrokerIdRequestHeader(cfg.brokerClusterName, cfg.brokerName),
        )
        if resp.code != RC.SUCCESS:
            raise _Retry(f"GetNextBrokerId: {response_name(resp.code)}: {resp.remark}")
        next_id = from_ext(GetNextBrokerIdResponseHeader, resp.ext_fields).nextBrokerId
        if next_id is None:
            raise _Retry("GetNextBrokerId: the answer carries no nextBrokerId")
        return next_id

    async def _apply_broker_id(self, meta: BrokerMeta) -> bool:
        """True: the controller holds this id for us. False: refused (taken by another broker)."""
        resp = await self._call(
            RequestCode.CONTROLLER_APPLY_BROKER_ID,
            ApplyBrokerIdRequestHeader(
                meta.cluster_name, meta.broker_name, meta.broker_id, meta.register_check_code
            ),
        )
        if resp.code == RC.SUCCESS:
            return True
        if resp.code == RC.CONTROLLER_BROKER_ID_INVALID:
            events.emit(
                self.log, events.BrokerIdRefused(broker_id=meta.broker_id, remark=resp.remark)
            )
            return False
        raise _Retry(f"ApplyBrokerId {meta.broker_id}: {response_name(resp.code)}: {resp.remark}")

    # ------------------------------------------------------------------ registration

    async def _register(self) -> None:
        """RegisterBrokerToController, then take the role (or ask for an election)."""
        h, sync = await self._register_to_controller()
        await self.faults.reach(Fault.REGISTERED)
        if h.masterBrokerId is None or h.masterEpoch is None:
            await self._broker_elect()
            return
        await self.change_broker_role(h.masterBrokerId, h.masterAddress, h.masterEpoch, sync)

    async def _register_to_controller(
        self,
    ) -> tuple[RegisterBrokerToControllerResponseHeader, SyncStateSet | None]:
        cfg, broker_id = self.config, self.broker_controller_id
        assert broker_id is not None
        header = RegisterBrokerToControllerRequestHeader(
            cfg.brokerClusterName, cfg.brokerName, broker_id, self.addr, self.broker.now_ms()
        )
        resp = await self._call(RequestCode.CONTROLLER_REGISTER_BROKER, header)
        if resp.code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED:
            await self._reapply_from_meta(resp.remark)
            resp = await self._call(RequestCode.CONTROLLER_REGISTER_BROKER, header)
        if resp.code != RC.SUCCESS:
            raise _Retry(f"RegisterBroker: {response_name(resp.code)}: {resp.remark}")
        h = from_ext(RegisterBrokerToControllerResponseHeader, resp.ext_fields)
        return h, _sync_body(resp.body)

    async def _reapply_from_meta(self, remark: str | None) -> None:
        """The controller forgot our id (its store was wiped, or cleanBrokerMetadata): apply
        for the same id with the same registerCheckCode. This is a CAS, so it succeeds only if
        nobody else holds the id; otherwise say what the operator has to do."""
        meta = await self.broker.run_blocking(self.identity.read_meta)
        if meta is None:
            raise _Retry("broker.meta disappeared while the broker was running")
        if await self._apply_broker_id(meta):
            events.emit(self.log, events.BrokerIdReapplied(broker_id=meta.broker_id, remark=remark))
            return
        raise _Retry(
            f"the controller does not know brokerId {meta.broker_id} of "
            f"{meta.broker_name} ({remark}) and will not give it back: if its metadata was "
            f"cleaned on purpose, delete {self.identity.directory}/broker.meta to join as a "
            f"new broker"
        )

    async def _broker_elect(self) -> None:
        """Ask the controller to elect a master, naming ourselves (upstream brokerElect);
        _Retry while the set has no master."""
        cfg, broker_id = self.config, self.broker_controller_id
        assert broker_id is not None
        header = ElectMasterRequestHeader.of_broker_trigger(
            cfg.brokerClusterName, cfg.brokerName, broker_id
        )
        resp = await self._call(RequestCode.CONTROLLER_ELECT_MASTER, header)
        if resp.code not in (RC.SUCCESS, RC.CONTROLLER_MASTER_STILL_EXIST):
            raise _Retry(
                f"broker set {cfg.brokerName} has no master: {response_name(resp.code)}: "
                f"{resp.remark}"
            )
        h = from_ext(ElectMasterResponseHeader, resp.ext_fields)
        if h.masterBrokerId is None or h.masterEpoch is None:
            raise _Retry(f"broker set {cfg.brokerName} has no master yet")
        body = from_json(ElectMasterResponseBody, resp.body) if resp.body else None
        sync = None if body is None else SyncStateSet(body.syncStateSet, h.syncStateSetEpoch or 0)
        await self.change_broker_role(h.masterBrokerId, h.masterAddress, h.masterEpoch, sync)

    # ------------------------------------------------------------------ role changes

    async def change_broker_role(
        self,
        master_id: int | None,
        master_addr: str | None,
        master_epoch: int | None,
        sync: SyncStateSet | None,
    ) -> None:
        """Feed what the controller said about the set (register answer, GetReplicaInfo,
        NOTIFY_BROKER_ROLE_CHANGED, election answer) to the role core and carry it out."""
        if master_epoch is None or self.core is None:
            return
        view = ControllerView(
            master_id,
            master_addr,
            master_epoch,
            None if sync is None else frozenset(sync.syncStateSet),
            None if sync is None else sync.syncStateSetEpoch,
        )
        async with self._role_lock:
            decision = self.core.on_view(view, now_ms())
            await self._carry_out(decision)

    async def _carry_out(self, d: RoleDecision) -> None:
        assert self.core is not None and self.ha is not None
        me = self.broker_controller_id
        assert me is not None
        match d:
            case BecomeMaster():
                start = await self.ha.change_to_master(
                    me, d.epoch, d.sync_state_set, d.sync_state_set_epoch
                )
                self._take_role(BrokerRole.SYNC_MASTER, start_offset=start, reelected=d.was_master)
                if self.core.needs_lease:
                    self._start_lease_renewal()
            case BecomeSlave():
                await self.ha.change_to_slave(me, d.master_addr, d.epoch)
                self._take_role(BrokerRole.SLAVE, was_master=d.was_master)
            case AdoptSyncStateSet():
                self.ha.on_authoritative(d.members, d.epoch)
                events.emit(
                    self.log,
                    events.SyncStateSetAdopted(
                        sync_state_set=sorted(d.members), sync_state_set_epoch=d.epoch
                    ),
                )
            case FollowNewAddress():
                events.emit(self.log, events.MasterAddressChanged(master_addr=d.master_addr))
                self.ha.follow(me, d.master_addr, self.core.master_epoch)
            case RequestElection():
                events.emit(self.log, events.MasterElectionRequested(broker_id=me, reason=d.reason))
                if d.deposed:
                    await self.ha.step_down()
                    events.emit(
                        self.log,
                        events.MasterSteppedDown(epoch=self.core.master_epoch, reason=d.reason),
                    )
                    self.broker.apply_role(BrokerRole.SLAVE, me, self.core.master_epoch)
                self._elect_soon()
            case Ignore():
                pass

    def _take_role(self, role: BrokerRole, **fields: Any) -> None:
        core = self.core
        assert core is not None and self.broker_controller_id is not None
        nameserver_id = 0 if role is BrokerRole.SYNC_MASTER else self.broker_controller_id
        self.broker.apply_role(role, nameserver_id, core.master_epoch)
        events.emit(
            self.log,
            events.BrokerRoleChanged(
                broker_id=self.broker_controller_id,
                broker_role=role.value,
                epoch=core.master_epoch,
                master_id=core.master_id,
                master_addr=core.master_addr,
                sync_state_set=sorted(core.sync_state_set),
                **fields,
            ),
        )
        self.role_known.set()

    def _elect_soon(self) -> None:
        """Ask for an election in the background (outside the role lock), one at a time."""
        if self._electing or self._nursery is None:
            return
        self._electing = True

        async def elect() -> None:
            try:
                while True:
                    try:
                        await self._broker_elect()
                        return
                    except (_Retry, ControllerUnavailable, HeaderError) as e:
                        self._periodic_failed("broker_elect", str(e))
                    await trio.sleep(ELECTION_RETRY_S + self.rng.random() * ELECTION_RETRY_S)
                    if self.core is not None and self.core.role is not None:
                        return
            finally:
                self._electing = False

        self._nursery.start_soon(elect)

    # ------------------------------------------------------------------ SyncStateSet

    async def alter_sync_state_set(self, members: frozenset[int], base_epoch: int) -> AlterResult:
        """CONTROLLER_ALTER_SYNC_STATE_SET for the replication gate: applied, refused (not
        applied, and never will be) or unknown (may still apply)."""
        core, me = self.core, self.broker_controller_id
        if core is None or me is None or not core.is_master:
            return AlterRefused("this broker is not master", fenced=False)
        header = AlterSyncStateSetRequestHeader(self.config.brokerName, me, core.master_epoch)
        body = to_json(SyncStateSet(sorted(members), base_epoch))
        try:
            resp = await self._call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header, body)
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

    # ------------------------------------------------------------------ lease (inSyncReplicas)

    def _lease_valid(self, now: int) -> bool:
        return self.core is not None and self.core.lease_valid(now)

    def _start_lease_renewal(self) -> None:
        if self._lease_task or self._nursery is None:
            return
        self._lease_task = True
        self._nursery.start_soon(self._renew_lease)

    async def _renew_lease(self) -> None:
        """While master: a linearizable GetReplicaInfo every lease/3 renews the lease."""
        period_s = self.config.masterLeaseTimeMillis / 3000
        try:
            while self.core is not None and self.core.is_master:
                sent = now_ms()
                view = await self._replica_info_view()
                if view is not None and self.core is not None:
                    self.core.on_lease_confirmed(view, sent)
                await trio.sleep(period_s)
        finally:
            self._lease_task = False

    # ------------------------------------------------------------------ pushes and periodic work

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

    async def _replica_info_view(self) -> ControllerView | None:
        """CONTROLLER_GET_REPLICA_INFO (answered after a Raft read barrier: linearizable)."""
        try:
            resp = await self._call(
                RequestCode.CONTROLLER_GET_REPLICA_INFO,
                GetReplicaInfoRequestHeader(self.config.brokerName, self.broker.now_ms()),
            )
        except ControllerUnavailable as e:
            self._periodic_failed("get_replica_info", str(e))
            return None
        if resp.code != RC.SUCCESS:
            self._periodic_failed("get_replica_info", f"{response_name(resp.code)}: {resp.remark}")
            return None
        try:
            h = from_ext(GetReplicaInfoResponseHeader, resp.ext_fields)
        except HeaderError as e:
            self._periodic_failed("get_replica_info", str(e))
            return None
        self._periodic_ok("get_replica_info")
        sync = _sync_body(resp.body)
        return ControllerView(
            h.masterBrokerId if h.masterAddress else None,
            h.masterAddress,
            h.masterEpoch or 0,
            None if sync is None else frozenset(sync.syncStateSet),
            None if sync is None else sync.syncStateSetEpoch,
        )

    async def _sync_replica_info(self) -> None:
        """syncBrokerMetadataPeriod: GetReplicaInfo, then the same decisions as any view."""
        try:
            resp = await self._call(
                RequestCode.CONTROLLER_GET_REPLICA_INFO,
                GetReplicaInfoRequestHeader(self.config.brokerName, self.broker.now_ms()),
            )
        except ControllerUnavailable as e:
            self._periodic_failed("get_replica_info", str(e))
            return
        if resp.code == RC.CONTROLLER_BROKER_METADATA_NOT_EXIST:
            await self._retry_once("register_to_controller", self._register)
            return
        if resp.code != RC.SUCCESS:
            self._periodic_failed("get_replica_info", f"{response_name(resp.code)}: {resp.remark}")
            return
        try:
            h = from_ext(GetReplicaInfoResponseHeader, resp.ext_fields)
        except HeaderError as e:
            self._periodic_failed("get_replica_info", str(e))
            return
        self._periodic_ok("get_replica_info")
        master = h.masterBrokerId if h.masterAddress else None
        await self.change_broker_role(master, h.masterAddress, h.masterEpoch, _sync_body(resp.body))

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
        except (_Retry, ControllerUnavailable, HeaderError) as e:
            self._periodic_failed(step, str(e))
            return
        self._periodic_ok(step)

    async def _sync_controller_metadata(self) -> None:
        assert self.link is not None
        before = self.link.leader_addr
        try:
            leader = await self.link.find_leader()
        except ControllerUnavailable as e:
            self._periodic_failed("get_controller_metadata", str(e))
            return
        self._periodic_ok("get_controller_metadata")
        if leader != before:
            events.emit(self.log, events.ControllerLeaderChanged(leader=leader, previous=before))

    async def send_heartbeat_to_controller(self) -> None:
        """BROKER_HEARTBEAT (oneway) to every controller replica, like upstream: whichever
        becomes leader has already heard us. The epoch is the epoch file's last one."""
        assert self.link is not None
        broker_id = self.broker_controller_id
        if broker_id is None:
            return
        cfg, store = self.config, self.store
        records = store.epoch_records()
        header = BrokerHeartbeatRequestHeader(
            clusterName=cfg.brokerClusterName,
            brokerAddr=self.addr,
            brokerName=cfg.brokerName,
            brokerId=broker_id,
            epoch=records[-1].epoch if records else 0,
            maxOffset=store.log_end_offset(),
            confirmOffset=store.confirm_offset(),
            heartbeatTimeoutMills=cfg.controllerHeartBeatTimeoutMills,
            electionPriority=cfg.brokerElectionPriority,
        )
        async with trio.open_nursery() as nursery:
            for addr in self.link.addrs:
                nursery.start_soon(self._beat, addr, header)

    async def _beat(self, addr: str, header: BrokerHeartbeatRequestHeader) -> None:
        assert self.link is not None
        error = "timed out"
        with trio.move_on_after(self.config.sendHeartbeatTimeoutMillis / 1000):
            try:
                await self.link.remoting.invoke_oneway(
                    addr, request(RequestCode.BROKER_HEARTBEAT, header)
                )
                self._periodic_ok(f"heartbeat {addr}")
                return
            except RemotingError as e:
                error = str(e)
        self._periodic_failed(f"heartbeat {addr}", error)

    async def _resolve_ha_addr(self, master_addr: str) -> str:
        assert self._client is not None
        return await resolve_ha_addr(self._client, master_addr)

    def _periodic_failed(self, what: str, error: str) -> None:
        if what not in self._failing:
            self._failing.add(what)
            events.emit(self.log, events.ControllerCallFailed(call=what, error=error))

    def _periodic_ok(self, what: str) -> None:
        if what in self._failing:
            self._failing.discard(what)
            events.emit(self.log, events.ControllerCallRecovered(call=what))

    # ------------------------------------------------------------------ answers for the broker

    def write_refusal(self) -> Refusal | None:
        """Why this broker may not take writes now (None for the master): the `WriteGate`."""
        cfg, core = self.config, self.core
        if core is not None and core.is_master:
            return None
        if core is None or core.role is None:
            return Refusal(
                RC.SERVICE_NOT_AVAILABLE,
                f"broker {cfg.brokerName} at {self.addr} has no role yet: it is registering "
                f"with the controllers {cfg.controllerAddr} or waiting for an election",
            )
        return Refusal(
            RC.SERVICE_NOT_AVAILABLE,
            f"broker {cfg.brokerName} brokerId {self.broker_controller_id} at {self.addr} is a "
            f"SLAVE (controller mode, masterEpoch {core.master_epoch}): send to the master, "
            f"brokerId {core.master_id} at {core.master_addr}",
        )

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


def _sync_body(body: bytes) -> SyncStateSet | None:
    if not body:
        return None
    try:
        return from_json(SyncStateSet, body)
    except HeaderError:
        return None


async def _every_now(period_s: float, fn: Any) -> None:
    """`every`, starting with an immediate call (the first heartbeat goes out at once)."""
    await every(period_s, fn, initial_delay_s=0)
