"""ReplicasManager (RIP-44, persistent BrokerId): the broker's side of controller mode.

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
   and take the role in the answer. With no master in the answer the broker asks the controller
   to elect (CONTROLLER_ELECT_MASTER naming itself) until the set has a master.

Then, while the broker runs: BROKER_HEARTBEAT (oneway) to every controller replica every
brokerHeartbeatInterval with lastEpoch, maxOffset, confirmOffset (= maxOffset until replication
exists), controllerHeartBeatTimeoutMills and brokerElectionPriority; CONTROLLER_GET_REPLICA_INFO
every syncBrokerMetadataPeriod (a lost NOTIFY_BROKER_ROLE_CHANGED heals here); the controller's
NOTIFY_BROKER_ROLE_CHANGED push is acted on at once.

Roles: the master registers to the NameServers as brokerId 0 with brokerRole forced to SYNC_MASTER
(upstream changeToMaster) and appends ``<masterEpoch, commitlog max offset>`` to the epoch file;
a slave registers with its own id, refuses writes (naming the master) and knows its master's
address (replication is the next issue). Every role change bumps the topic DataVersion's
stateVersion to the masterEpoch (so a NameServer prefers the newer master, #6316) and
re-registers to the NameServers at once (registerBrokerWhenRoleChange). Role changes are
serialised by one lock and only move forward in masterEpoch.

Crash points: `FaultSites.reach(site)` is awaited at every step of the flow (sites in
fault_sites.Fault). Production passes `NO_FAULTS`; tests pass a hook that crashes the broker
there (see tests/actor/test_broker_identity.py).

What it needs of its broker is the `ReplicasHost` protocol (config, clock, addresses, the store
view, a barrier through the store actor, and `apply_role`), not the Broker class; to the send
path it is a `WriteGate` (`write_refusal`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Final, Protocol

import structlog
import trio

from rocketrio.actors import events
from rocketrio.actors.broker.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.fault_sites import NO_FAULTS, Fault, FaultSites
from rocketrio.actors.broker.outcomes import Refusal
from rocketrio.actors.broker.store_view import RunBlocking, StoreView
from rocketrio.actors.client.api import request
from rocketrio.actors.client.controller_admin import ControllerLink, ControllerUnavailable
from rocketrio.actors.remoting import RemotingClient, RemotingError
from rocketrio.actors.runtime import every
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
from rocketrio.storage.epoch_file import EpochFile

RC = ResponseCode
# upstream retries a failed start-up step every 5 s plus up to 1 s of jitter (two brokers of a
# set racing for the same id then rarely collide twice); we start at 1 s and double up to 10 s,
# so a controller that is merely electing is retried soon and a lasting refusal is not spammed
RETRY_INTERVAL_S: Final = 1.0
RETRY_INTERVAL_MAX_S: Final = 10.0
RETRY_JITTER_S: Final = 1.0


class _Retry(Exception):
    """This start-up step failed for a reason that may pass: wait, then resume from disk."""


class ReplicasHost(Protocol):
    """What the ReplicasManager uses of its broker."""

    config: BrokerConfig  # brokerRole / brokerId are set by apply_role
    rng: random.Random
    run_blocking: RunBlocking
    now_ms: Callable[[], int]
    store_view: StoreView

    @property
    def addr(self) -> str:
        """The address the broker serves on (known once it listens)."""
        ...

    async def commitlog_max_offset(self) -> int:
        """The CommitLog end once every put queued before the call is written."""
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
        self.identity = BrokerIdentityStore(self.config.broker_identity_dir, fs=broker.fs)
        self.epochs: EpochFile | None = None
        self.link: ControllerLink | None = None
        self.log = structlog.get_logger("broker.replicas").bind(
            actor="replicas_manager", broker=self.config.brokerName
        )
        # what this broker knows of its set (upstream ReplicasManager fields)
        self.broker_controller_id: int | None = None
        self.master_broker_id: int | None = None
        self.master_address: str | None = None
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.role: BrokerRole | None = None
        self.role_known = trio.Event()
        self._role_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._failing: set[str] = set()  # log a failing periodic call once, not every period

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """Load the epoch file (worker thread); a damaged file stops the broker start."""
        self.epochs = await self.broker.run_blocking(
            partial(EpochFile, self.config.epoch_file_path, fs=self.broker.fs)
        )
        if self.epochs.loaded_from_backup:
            self.log.warning("epoch_file_loaded_from_backup", path=self.epochs.path)

    @property
    def addr(self) -> str:
        return self.broker.addr

    @property
    def is_master(self) -> bool:
        return self.role is BrokerRole.SYNC_MASTER

    async def run(
        self,
        client: RemotingClient,
        *,
        task_status: trio.TaskStatus[ReplicasManager] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Start-up flow in the background, then the periodic tasks; until cancelled."""
        cfg = self.config
        self.link = ControllerLink(client, cfg.controllerAddr)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
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
                self.log.warning("controller_step_retry", step=step, attempt=attempt, error=str(e))
            backoff = min(RETRY_INTERVAL_S * 2 ** (attempt - 1), RETRY_INTERVAL_MAX_S)
            await trio.sleep(backoff + self.rng.random() * RETRY_JITTER_S)

    async def _find_leader(self) -> str:
        assert self.link is not None
        leader = await self.link.find_leader()
        self.log.info("controller_leader_found", leader=leader)
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
                self.log.info("broker_id_loaded", broker_id=meta.broker_id, path=store.directory)
                return meta
            temp = await blocking(store.read_temp)
            if temp is None:
                next_id = await self._get_next_broker_id()
                await self.faults.reach(Fault.NEXT_BROKER_ID_RECEIVED)
                temp = BrokerMeta(
                    cfg.brokerClusterName, cfg.brokerName, next_id, self._register_check_code()
                )
                await blocking(partial(store.write_temp, temp))
                self.log.info("broker_id_temp_written", broker_id=next_id)
                await self.faults.reach(Fault.TEMP_WRITTEN)
            else:
                store.check_owner(temp, cfg.brokerClusterName, cfg.brokerName)
                self.log.info("broker_id_resume_from_temp", broker_id=temp.broker_id)
            if not await self._apply_broker_id(temp):
                await blocking(store.delete_temp)
                # seed: delete the temp file and go back to GetNextBrokerId; a random pause
                # keeps two brokers racing for the same id from colliding again
                await trio.sleep(self.rng.random() * RETRY_JITTER_S)
                continue
            await self.faults.reach(Fault.APPLY_ANSWERED)
            meta = await blocking(store.commit_temp)
            self.log.info(events.BROKER_ID_APPLIED, broker_id=meta.broker_id, addr=self.addr)
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
            self.log.warning("broker_id_refused", broker_id=meta.broker_id, remark=resp.remark)
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
            self.log.warning("broker_id_reapplied", broker_id=meta.broker_id, remark=remark)
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
        """Apply what the controller said about the set (register answer, GetReplicaInfo,
        NOTIFY_BROKER_ROLE_CHANGED, election answer): master, masterEpoch and the SyncStateSet
        with its epoch. Older masterEpochs are ignored."""
        if master_id is None or master_epoch is None or self.broker_controller_id is None:
            return
        async with self._role_lock:
            if master_epoch < self.master_epoch:
                return
            if master_epoch == self.master_epoch and self.role is not None:
                self._same_epoch_update(master_id, master_addr, sync)
                return
            if master_id == self.broker_controller_id:
                await self._become_master(master_epoch, sync)
            else:
                self._become_slave(master_id, master_addr, master_epoch, sync)

    def _same_epoch_update(
        self, master_id: int, master_addr: str | None, sync: SyncStateSet | None
    ) -> None:
        if master_id != self.master_broker_id:
            # the controller gives one master per epoch: a different one here is a bug
            self.log.error(
                "conflicting_master_in_epoch",
                epoch=self.master_epoch,
                known_master=self.master_broker_id,
                reported_master=master_id,
            )
            return
        if self.is_master:
            if sync is not None:
                self.change_sync_state_set(sync.syncStateSet, sync.syncStateSetEpoch)
        elif master_addr and master_addr != self.master_address:
            # the master restarted on another address: same id, same epoch
            self.log.info(
                "master_address_changed",
                master_id=master_id,
                old_addr=self.master_address,
                new_addr=master_addr,
            )
            self.master_address = master_addr

    async def _become_master(self, master_epoch: int, sync: SyncStateSet | None) -> None:
        assert self.epochs is not None and self.broker_controller_id is not None
        # every queued put is on the CommitLog before we read where the new epoch starts
        start = await self.broker.commitlog_max_offset()
        epochs = self.epochs
        last = epochs.last_epoch()
        if master_epoch > last:
            await self.broker.run_blocking(partial(epochs.append, master_epoch, start))
        elif master_epoch < last:
            self.log.warning("epoch_file_ahead_of_controller", epoch=master_epoch, last=last)
        self.master_epoch = master_epoch
        self.master_broker_id = self.broker_controller_id
        self.master_address = self.addr
        if sync is not None:
            self.change_sync_state_set(sync.syncStateSet, sync.syncStateSetEpoch)
        self._take_role(BrokerRole.SYNC_MASTER, start_offset=start)

    def _become_slave(
        self, master_id: int, master_addr: str | None, master_epoch: int, sync: SyncStateSet | None
    ) -> None:
        self.master_epoch = master_epoch
        self.master_broker_id = master_id
        self.master_address = master_addr
        if sync is not None:
            self.change_sync_state_set(sync.syncStateSet, sync.syncStateSetEpoch)
        self._take_role(BrokerRole.SLAVE)

    def _take_role(self, role: BrokerRole, **fields: Any) -> None:
        assert self.broker_controller_id is not None
        self.role = role
        nameserver_id = 0 if role is BrokerRole.SYNC_MASTER else self.broker_controller_id
        self.broker.apply_role(role, nameserver_id, self.master_epoch)
        self.log.info(
            events.BROKER_ROLE_CHANGED,
            broker_id=self.broker_controller_id,
            broker_role=role.value,
            epoch=self.master_epoch,
            master_id=self.master_broker_id,
            master_addr=self.master_address,
            sync_state_set=sorted(self.sync_state_set),
            **fields,
        )
        self.role_known.set()

    def change_sync_state_set(self, members: Iterable[int], sync_state_set_epoch: int) -> None:
        """Adopt a SyncStateSet the controller confirmed (newer syncStateSetEpoch only)."""
        if sync_state_set_epoch <= self.sync_state_set_epoch:
            return
        new = frozenset(members)
        if new != self.sync_state_set:
            self.log.info(
                "sync_state_set_adopted",
                sync_state_set=sorted(new),
                previous=sorted(self.sync_state_set),
                sync_state_set_epoch=sync_state_set_epoch,
            )
        self.sync_state_set, self.sync_state_set_epoch = new, sync_state_set_epoch

    async def alter_sync_state_set(self, members: Iterable[int]) -> SyncStateSet | None:
        """Master only: ask the controller to set the SyncStateSet (the HA service's shrink /
        expand, next issue). Applied locally only once the controller accepted it; None when
        refused or unreachable (the reason is logged)."""
        broker_id = self.broker_controller_id
        if not self.is_master or broker_id is None:
            raise RuntimeError(f"{self.config.brokerName}: only the master alters the SyncStateSet")
        header = AlterSyncStateSetRequestHeader(
            self.config.brokerName, broker_id, self.master_epoch
        )
        body = to_json(SyncStateSet(list(members), self.sync_state_set_epoch))
        try:
            resp = await self._call(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, header, body)
        except ControllerUnavailable as e:
            self.log.warning("alter_sync_state_set_failed", error=str(e))
            return None
        if resp.code != RC.SUCCESS:
            self.log.warning(
                "alter_sync_state_set_failed", code=response_name(resp.code), remark=resp.remark
            )
            return None
        result = from_json(SyncStateSet, resp.body)
        self.change_sync_state_set(result.syncStateSet, result.syncStateSetEpoch)
        return result

    # ------------------------------------------------------------------ pushes and periodic work

    def on_role_change_notified(
        self, h: NotifyBrokerRoleChangedRequestHeader, sync: SyncStateSet | None
    ) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED: act at once (in our nursery; the push is oneway)."""
        if self._nursery is None or self.broker_controller_id is None:
            return  # still starting: the registration answer carries the same facts
        self.log.info(
            "broker_role_change_notified",
            master_id=h.masterBrokerId,
            master_addr=h.masterAddress,
            epoch=h.masterEpoch,
        )
        self._nursery.start_soon(
            self.change_broker_role, h.masterBrokerId, h.masterAddress, h.masterEpoch, sync
        )

    async def _sync_replica_info(self) -> None:
        """syncBrokerMetadataPeriod: GetReplicaInfo, then the same decisions as upstream."""
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
        sync = _sync_body(resp.body)
        epoch = h.masterEpoch or 0
        if epoch > self.master_epoch and (h.masterBrokerId is None or not h.masterAddress):
            # the set lost its master and nobody took over yet: offer ourselves
            await self._retry_once("broker_elect", self._broker_elect)
            return
        await self.change_broker_role(h.masterBrokerId, h.masterAddress, h.masterEpoch, sync)

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
            self.log.info("controller_leader_changed", leader=leader, previous=before)

    async def send_heartbeat_to_controller(self) -> None:
        """BROKER_HEARTBEAT (oneway) to every controller replica, like upstream: whichever
        becomes leader has already heard us."""
        assert self.link is not None and self.epochs is not None
        broker_id = self.broker_controller_id
        if broker_id is None:
            return
        cfg = self.config
        max_offset = self.broker.store_view.commitlog_max_offset()
        header = BrokerHeartbeatRequestHeader(
            clusterName=cfg.brokerClusterName,
            brokerAddr=self.addr,
            brokerName=cfg.brokerName,
            brokerId=broker_id,
            epoch=self.epochs.last_epoch(),
            maxOffset=max_offset,
            confirmOffset=max_offset,
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

    def _periodic_failed(self, what: str, error: str) -> None:
        if what not in self._failing:
            self._failing.add(what)
            self.log.warning("controller_call_failed", call=what, error=error)

    def _periodic_ok(self, what: str) -> None:
        if what in self._failing:
            self._failing.discard(what)
            self.log.info("controller_call_recovered", call=what)

    # ------------------------------------------------------------------ answers for the broker

    def write_refusal(self) -> Refusal | None:
        """Why this broker may not take writes now (None for the master): the `WriteGate`."""
        cfg = self.config
        if self.is_master:
            return None
        if self.role is None:
            return Refusal(
                RC.SERVICE_NOT_AVAILABLE,
                f"broker {cfg.brokerName} at {self.addr} has no role yet: it is still "
                f"registering with the controllers {cfg.controllerAddr}",
            )
        return Refusal(
            RC.SERVICE_NOT_AVAILABLE,
            f"broker {cfg.brokerName} brokerId {self.broker_controller_id} at {self.addr} is a "
            f"SLAVE (controller mode, masterEpoch {self.master_epoch}): send to the master, "
            f"brokerId {self.master_broker_id} at {self.master_address}",
        )

    def epoch_entry_cache(self) -> EpochEntryCache:
        """GET_BROKER_EPOCH_CACHE: the epoch file with end offsets, and the CommitLog end."""
        assert self.epochs is not None
        cfg = self.config
        return EpochEntryCache(
            clusterName=cfg.brokerClusterName,
            brokerName=cfg.brokerName,
            brokerId=cfg.brokerId,
            epochList=[
                EpochEntry(r.epoch, r.start_offset, r.end_offset) for r in self.epochs.ranges()
            ],
            maxOffset=self.broker.store_view.commitlog_max_offset(),
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
