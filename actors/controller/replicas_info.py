"""`ReplicasInfoManager`: the controller's replicated state machine (RIP-44 + persistent BrokerId).

State, per broker set (brokerName): `BrokerReplicaInfo` (cluster, nextAssignBrokerId from 1,
brokerId -> address + registerCheckCode) and `SyncStateInfo` (SyncStateSet of brokerIds,
syncStateSetEpoch, master brokerId or None, masterEpoch). Identity is brokerName:brokerId; an
address is only where that broker is reachable now.

Two kinds of methods, as upstream:
(a) request handlers only READ state and return a `ControllerResult` (commands to replicate, plus
    the answer to give once they are applied). Liveness comes in as functions.
(b) `apply_command` / `apply_commands` mutate state deterministically and return an `ApplyOutcome`
    per command. Same commands in the same order give the same state (and snapshot bytes) on every
    replica; nothing here reads a clock, a random source or the liveness table.
This module holds the handlers (a); the records, the checks shared with applying, (b) and the
snapshot codec live in replica_state.py (`ReplicaState`, the base class).

How the controller actor drives it (leader only, after it applied its own term's no-op entry):
1. `result = manager.<handler>(...)`. No commands: answer `result` now.
2. Otherwise propose `events.encode_commands(result.commands)` as ONE Raft entry. Every replica
   applies a committed entry with `apply_commands(decode_commands(data))`.
3. The leader answers with `result.settle(outcomes)`. Commands that move an epoch carry the epoch
   they were checked against and are refused at apply time if another entry moved it first (two
   brokers racing for the first election, two ApplyBrokerId for the same id, concurrent
   AlterSyncStateSet). On a refusal the actor re-runs the same handler on the new state, at most
   electMasterMaxRetryCount times, then answers the refusal.

Election entry points: `register_broker` elects only when the set has no master at all (first
start, or after "no master available"); a recorded master that went silent is replaced only by
`elect_master` triggered from `scan_need_reelect_broker_sets`, which the actor runs only once
`BrokerHeartbeatManager.liveness_settled` (a fresh controller leader has heard nobody yet).
A set whose SyncStateSet is empty (first start, or all members cleaned) elects the first live
broker that asks, so a lone broker never stays a slave forever (#6586).

Broker-side rule that prevents acked-but-lost on SyncStateSet expand (#5663): the master must ack
writes against the UNION of the last set the controller confirmed and every set it has proposed
but not yet seen confirmed, from the moment it decides to expand until GetReplicaInfo / the
AlterSyncStateSet answer tells it the controller's set. The controller may apply an expand whose
answer is lost; if the master then dies, the new member can be elected, so it must already hold
every message the master acknowledged. Shrinks take effect locally only after the controller's
answer (seed: "applied locally only after the controller accepted it").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from rocketrio.actors.controller.commands import (
    AlterSyncStateSetCommand,
    ApplyBrokerIdCommand,
    CleanBrokerDataCommand,
    Command,
    ElectMasterCommand,
    UpdateBrokerAddressCommand,
)
from rocketrio.actors.controller.elect_policy import ElectPolicy, elect
from rocketrio.actors.controller.heartbeat_manager import BrokerLiveInfo
from rocketrio.actors.controller.replica_state import (
    FIRST_BROKER_CONTROLLER_ID,
    SNAPSHOT_FORMAT,
    ApplyOutcome,
    BrokerIdInfo,
    BrokerReplicaInfo,
    BrokerSet,
    ReplicaState,
    SnapshotError,
    SyncStateInfo,
)
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import BrokerMemberGroup
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.controller_headers import (
    AlterSyncStateSetResponseHeader,
    ApplyBrokerIdResponseHeader,
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    GetNextBrokerIdResponseHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerResponseHeader,
    ReplicaIdentity,
    ReplicasInfo,
    SyncStateSet,
    parse_broker_id_set,
)
from rocketrio.protocol.serde import HeaderError

# the records and the apply side moved to replica_state.py; callers keep importing them here
__all__ = [
    "FIRST_BROKER_CONTROLLER_ID",
    "SNAPSHOT_FORMAT",
    "ApplyOutcome",
    "BrokerAlivePredicate",
    "BrokerIdInfo",
    "BrokerLiveInfoLookup",
    "BrokerReplicaInfo",
    "BrokerSet",
    "ControllerResult",
    "ReplicaState",
    "ReplicasInfoManager",
    "SnapshotError",
    "SyncStateInfo",
]

# (clusterName, brokerName, brokerId) -> alive? / last heartbeat
BrokerAlivePredicate = Callable[[str, str, int], bool]
BrokerLiveInfoLookup = Callable[[str, str, int], BrokerLiveInfo | None]

RC = ResponseCode


@attrs.frozen(slots=True)
class ControllerResult:
    """A handler's decision: commands to replicate and the answer (header/body are typed attrs
    values; `body_bytes` gives the JSON the remoting layer sends)."""

    commands: tuple[Command, ...] = ()
    response_code: int = RC.SUCCESS
    remark: str | None = None
    header: Any = None
    body: Any = None

    @property
    def ok(self) -> bool:
        return self.response_code == RC.SUCCESS

    def body_bytes(self) -> bytes | None:
        return None if self.body is None else fastjson.encode(self.body)

    def settle(self, outcomes: Sequence[ApplyOutcome]) -> ControllerResult:
        """The answer once `commands` were applied: unchanged if every command applied, else the
        first refusal (state moved under the request; the actor may re-run the handler)."""
        if len(outcomes) != len(self.commands):
            raise ValueError(f"{len(self.commands)} commands but {len(outcomes)} outcomes")
        for outcome in outcomes:
            if not outcome.ok:
                return ControllerResult(response_code=outcome.response_code, remark=outcome.remark)
        return ControllerResult(
            response_code=self.response_code, remark=self.remark, header=self.header, body=self.body
        )


def electable(info: BrokerLiveInfo | None) -> bool:
    """A broker may be elected unless its last heartbeat said it is not (its catch-up fence:
    it cut its CommitLog after a lost page and has not caught up, docs/hardening.md)."""
    return info is None or info.electable


def _fail(code: int, remark: str, header: Any = None) -> ControllerResult:
    return ControllerResult(response_code=code, remark=remark, header=header)


class ReplicasInfoManager(ReplicaState):
    """Side (a), the request handlers, over the state and apply side of `ReplicaState`."""

    def __init__(self, *, enable_elect_unclean_master: bool = False) -> None:
        super().__init__()
        self.enable_elect_unclean_master = enable_elect_unclean_master

    # --- (a) handlers: persistent BrokerId ---------------------------------------------------

    def get_next_broker_id(self, cluster_name: str, broker_name: str) -> ControllerResult:
        s = self._sets.get(broker_name)
        next_id = FIRST_BROKER_CONTROLLER_ID if s is None else s.replica.next_assign_broker_id
        header = GetNextBrokerIdResponseHeader(cluster_name, broker_name, next_id)
        return ControllerResult(header=header)

    def apply_broker_id(
        self, cluster_name: str, broker_name: str, applied_broker_id: int, register_check_code: str
    ) -> ControllerResult:
        """CAS: the id must be the next assignable one, or already ours (same registerCheckCode:
        an idempotent resend after a crash before broker.meta was written)."""
        header = ApplyBrokerIdResponseHeader(cluster_name, broker_name)
        address = register_check_code.partition(";")[0]
        if not address:
            return _fail(
                RC.CONTROLLER_INVALID_REQUEST,
                f"registerCheckCode {register_check_code!r} must be '<brokerAddress>;<millis>'",
                header,
            )
        check = self._check_apply_broker_id(
            cluster_name, broker_name, applied_broker_id, register_check_code
        )
        if not check.ok:
            return _fail(check.response_code, check.remark or "", header)
        s = self._sets.get(broker_name)
        if s is not None and applied_broker_id in s.replica.broker_id_info:
            return ControllerResult(header=header)  # already committed as ours: nothing to log
        command = ApplyBrokerIdCommand(
            cluster_name, broker_name, address, applied_broker_id, register_check_code
        )
        return ControllerResult(commands=(command,), header=header)

    # --- (a) handlers: registration and replica info -----------------------------------------

    def register_broker(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_address: str,
        is_alive: BrokerAlivePredicate,
        live_info: BrokerLiveInfoLookup,
        policy: ElectPolicy = elect,
    ) -> ControllerResult:
        """Update the address of an existing brokerId and answer the set's master. With no
        master at all, elect one now (the first broker of a set becomes master of {itself}).
        The actor should count the request as a heartbeat of the broker before calling."""
        s = self._sets.get(broker_name)
        header = RegisterBrokerToControllerResponseHeader(cluster_name, broker_name)
        if s is None or broker_id not in s.replica.broker_id_info:
            what = f"broker set {broker_name}" if s is None else f"brokerId {broker_id}"
            return _fail(
                RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"{what} is not registered in the controller: apply for a brokerId first",
                header,
            )
        if s.replica.cluster_name != cluster_name:
            return _fail(
                RC.CONTROLLER_INVALID_REQUEST,
                f"broker set {broker_name} belongs to cluster {s.replica.cluster_name}, "
                f"not {cluster_name}",
                header,
            )
        commands: list[Command] = []
        if s.replica.address_of(broker_id) != broker_address:
            commands.append(
                UpdateBrokerAddressCommand(cluster_name, broker_name, broker_address, broker_id)
            )
        sync = s.sync
        body = SyncStateSet(list(sync.sync_state_set), sync.sync_state_set_epoch)
        master = sync.master_broker_id
        if master is None:
            new_master = self._choose_master(s, broker_id, False, is_alive, live_info, policy)
            if new_master is not None:
                commands.append(ElectMasterCommand(broker_name, new_master, sync.master_epoch))
                master, body = new_master, SyncStateSet([new_master], sync.sync_state_set_epoch + 1)
                header.masterEpoch = sync.master_epoch + 1
                header.syncStateSetEpoch = sync.sync_state_set_epoch + 1
        elif is_alive(cluster_name, broker_name, master):
            header.masterEpoch = sync.master_epoch
            header.syncStateSetEpoch = sync.sync_state_set_epoch
        else:
            master = None  # silent master: the re-election scan replaces it, not a register
        if master is not None:
            header.masterBrokerId = master
            header.masterAddress = (
                broker_address if master == broker_id else s.replica.address_of(master)
            )
        return ControllerResult(commands=tuple(commands), header=header, body=body)

    def get_replica_info(self, broker_name: str) -> ControllerResult:
        s = self._sets.get(broker_name)
        if s is None:
            return _fail(
                RC.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                f"broker set {broker_name} is not known to the controller",
                GetReplicaInfoResponseHeader(),
            )
        sync = s.sync
        header = GetReplicaInfoResponseHeader(
            sync.master_broker_id, s.replica.address_of(sync.master_broker_id), sync.master_epoch
        )
        body = SyncStateSet(list(sync.sync_state_set), sync.sync_state_set_epoch)
        return ControllerResult(header=header, body=body)

    def get_sync_state_data(
        self, broker_names: Iterable[str], is_alive: BrokerAlivePredicate
    ) -> ControllerResult:
        """BrokerReplicasInfo for the named sets (unknown names are left out, as upstream)."""
        table: dict[str, ReplicasInfo] = {}
        for name in broker_names:
            s = self._sets.get(name)
            if s is None:
                continue
            in_sync: list[ReplicaIdentity] = []
            not_in_sync: list[ReplicaIdentity] = []
            for broker_id, address in s.replica.broker_id_table().items():
                alive = is_alive(s.replica.cluster_name, name, broker_id)
                replica = ReplicaIdentity(name, broker_id, address, alive)
                (in_sync if broker_id in s.sync.sync_state_set else not_in_sync).append(replica)
            table[name] = ReplicasInfo(
                masterBrokerId=s.sync.master_broker_id,
                masterAddress=s.replica.address_of(s.sync.master_broker_id),
                masterEpoch=s.sync.master_epoch,
                syncStateSetEpoch=s.sync.sync_state_set_epoch,
                inSyncReplicas=in_sync,
                notInSyncReplicas=not_in_sync,
            )
        return ControllerResult(body=BrokerReplicasInfo(table))

    # --- (a) handlers: elections -------------------------------------------------------------

    def _choose_master(
        self,
        s: BrokerSet,
        named_id: int | None,
        designate: bool,
        is_alive: BrokerAlivePredicate,
        live_info: BrokerLiveInfoLookup,
        policy: ElectPolicy,
        *,
        sticky: bool = True,
    ) -> int | None:
        """`sticky`: a live old master keeps the role (False: rank it like everyone else)."""
        cluster, name = s.replica.cluster_name, s.replica.broker_name
        known = s.replica.broker_id_info

        def is_valid(broker_id: int) -> bool:
            return (
                broker_id in known
                and is_alive(cluster, name, broker_id)
                and electable(live_info(cluster, name, broker_id))
            )

        if not s.sync.sync_state_set and named_id is not None:
            # nobody holds committed data (first start, or every member cleaned): the broker
            # that asks becomes the first master
            return named_id if is_valid(named_id) else None
        return policy(
            sync_state_brokers=s.sync.sync_state_set,
            all_replica_brokers=list(known) if self.enable_elect_unclean_master else None,
            old_master=s.sync.master_broker_id if sticky else None,
            prefer_broker_id=named_id if designate else None,
            is_valid=is_valid,
            live_info=lambda broker_id: live_info(cluster, name, broker_id),
        )

    def _member_group(self, s: BrokerSet) -> BrokerMemberGroup:
        return BrokerMemberGroup(
            s.replica.cluster_name, s.replica.broker_name, s.replica.broker_id_table()
        )

    def elect_master(
        self,
        broker_name: str,
        is_alive: BrokerAlivePredicate,
        live_info: BrokerLiveInfoLookup,
        *,
        broker_id: int | None = None,
        designate_elect: bool = False,
        policy: ElectPolicy = elect,
    ) -> ControllerResult:
        """CONTROLLER_ELECT_MASTER. `broker_id` None: controller trigger (dead master);
        a broker trigger names itself (elected if the set never had a master); an admin trigger
        sets `designate_elect` and gets that broker or nothing. A broker trigger from the
        current master itself means it restarted: a new epoch is elected even if it wins."""
        s = self._sets.get(broker_name)
        if s is None:
            return _fail(
                RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"broker set {broker_name} has not been registered",
                ElectMasterResponseHeader(),
            )
        sync, replica = s.sync, s.replica
        old_master = sync.master_broker_id
        # the master itself asks (not an admin): it restarted and must not write again in the
        # epoch it held before (records it lost may sit on a slave), so the set gets a new
        # epoch, whoever of the live SyncStateSet is most advanced wins, itself included
        restarted = broker_id is not None and not designate_elect and broker_id == old_master
        new_master = self._choose_master(
            s, broker_id, designate_elect, is_alive, live_info, policy, sticky=not restarted
        )
        if new_master is not None and new_master == old_master and not restarted:
            header = ElectMasterResponseHeader(
                old_master,
                replica.address_of(old_master),
                sync.master_epoch,
                sync.sync_state_set_epoch,
            )
            body = ElectMasterResponseBody(self._member_group(s), list(sync.sync_state_set))
            remark = f"master {old_master} of {broker_name} is still alive, nothing to elect"
            return ControllerResult(
                response_code=RC.CONTROLLER_MASTER_STILL_EXIST,
                remark=remark,
                header=header,
                body=body,
            )
        if new_master is not None:
            header = ElectMasterResponseHeader(
                new_master,
                replica.address_of(new_master),
                sync.master_epoch + 1,
                sync.sync_state_set_epoch + 1,
            )
            body = ElectMasterResponseBody(self._member_group(s), [new_master])
            command = ElectMasterCommand(broker_name, new_master, sync.master_epoch)
            return ControllerResult(commands=(command,), header=header, body=body)
        return self._no_master_elected(s, broker_id, designate_elect, is_alive)

    def _no_master_elected(
        self,
        s: BrokerSet,
        broker_id: int | None,
        designate: bool,
        is_alive: BrokerAlivePredicate,
    ) -> ControllerResult:
        sync, name = s.sync, s.replica.broker_name
        alive = [
            b for b in sorted(s.replica.broker_id_info) if is_alive(s.replica.cluster_name, name, b)
        ]
        why = (
            f"no eligible replica of {name} is alive (SyncStateSet "
            f"{sorted(sync.sync_state_set)}, alive {alive}, "
            f"enableElectUncleanMaster={str(self.enable_elect_unclean_master).lower()})"
        )
        if broker_id is None:
            # Record that the master is gone (fences it: masterEpoch moves) once, not on every
            # scan while nobody can take over.
            commands: tuple[Command, ...] = ()
            if sync.master_broker_id is not None:
                commands = (ElectMasterCommand(name, None, sync.master_epoch),)
            return ControllerResult(
                commands=commands,
                response_code=RC.CONTROLLER_MASTER_NOT_AVAILABLE,
                remark=f"master of {name} is down and {why}",
                header=ElectMasterResponseHeader(),
            )
        if designate:
            why = (
                f"brokerId {broker_id} cannot be master of {name}: it must be alive and in the "
                f"SyncStateSet {sorted(sync.sync_state_set)} (alive {alive})"
            )
        return _fail(RC.CONTROLLER_ELECT_MASTER_FAILED, why, ElectMasterResponseHeader())

    def scan_need_reelect_broker_sets(
        self, is_alive: BrokerAlivePredicate, live_info: BrokerLiveInfoLookup | None = None
    ) -> list[str]:
        """Sets to run a controller-triggered elect_master for: the recorded master is not alive
        or says it is not electable (its catch-up fence), or there is no master and a replica
        that could take over is alive (and electable)."""
        out = []
        for name in sorted(self._sets):
            s = self._sets[name]
            cluster, master = s.replica.cluster_name, s.sync.master_broker_id

            def can_lead(b: int, cluster: str = cluster, name: str = name) -> bool:
                return live_info is None or electable(live_info(cluster, name, b))

            alive = [
                b
                for b in s.replica.broker_id_info
                if is_alive(cluster, name, b) and (b == master or can_lead(b))
            ]
            if not alive:
                continue
            if master is not None:
                if not is_alive(cluster, name, master) or not can_lead(master):
                    out.append(name)
            elif self.enable_elect_unclean_master or any(b in s.sync.sync_state_set for b in alive):
                out.append(name)
        return out

    # --- (a) handlers: SyncStateSet and cleaning ---------------------------------------------

    def alter_sync_state_set(
        self,
        broker_name: str,
        master_broker_id: int,
        master_epoch: int,
        new_sync_state_set: Iterable[int],
        sync_state_set_epoch: int,
        is_alive: BrokerAlivePredicate,
    ) -> ControllerResult:
        """CONTROLLER_ALTER_SYNC_STATE_SET from a master. Pre-checks, in order: the set exists;
        sent by the current master under the current masterEpoch; computed from the current
        syncStateSetEpoch; an actual change; every member registered; every ADDED member alive
        (keeping a member the controller thinks dead is harmless: elections check liveness
        again, and refusing would block the master from dropping a different, lagging one);
        the master stays in the set."""
        header = AlterSyncStateSetResponseHeader()
        s = self._sets.get(broker_name)
        if s is None:
            return _fail(
                RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                f"broker set {broker_name} is not known to the controller",
                header,
            )
        new_set = frozenset(new_sync_state_set)
        fence = self._check_alter(s, new_set, master_broker_id, master_epoch, sync_state_set_epoch)
        if not fence.ok:
            return _fail(fence.response_code, fence.remark or "", header)
        if new_set == s.sync.sync_state_set:
            return _fail(
                RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                f"SyncStateSet of {broker_name} is already {sorted(new_set)}, nothing to change",
                header,
            )
        cluster = s.replica.cluster_name
        dead = sorted(
            b for b in new_set - s.sync.sync_state_set if not is_alive(cluster, broker_name, b)
        )
        if dead:
            return _fail(
                RC.CONTROLLER_BROKER_NOT_ALIVE,
                f"cannot add brokerIds {dead} to the SyncStateSet of {broker_name}: not alive",
                header,
            )
        header.newSyncStateSetEpoch = sync_state_set_epoch + 1
        command = AlterSyncStateSetCommand(broker_name, new_set, master_epoch, sync_state_set_epoch)
        body = SyncStateSet(list(new_set), sync_state_set_epoch + 1)
        return ControllerResult(commands=(command,), header=header, body=body)

    def clean_broker_data(
        self,
        cluster_name: str | None,
        broker_name: str,
        broker_ids_to_clean: str | None,
        is_clean_living_broker: bool,
        is_alive: BrokerAlivePredicate,
    ) -> ControllerResult:
        """CLEAN_BROKER_DATA (admin cleanBrokerMetadata): forget the listed brokerIds ("1;2")
        or, with none listed, the whole set. Living brokers are refused unless
        isCleanLivingBroker. Cleaned ids are never handed out again while the set exists."""
        s = self._sets.get(broker_name)
        if s is None:
            return _fail(
                RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                f"broker set {broker_name} does not exist, nothing to clean",
            )
        cluster = s.replica.cluster_name
        if cluster_name and cluster_name != cluster:
            return _fail(
                RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                f"broker set {broker_name} belongs to cluster {cluster}, not {cluster_name}",
            )
        try:
            ids = parse_broker_id_set(broker_ids_to_clean)
        except HeaderError as e:
            return _fail(RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, str(e))
        if ids is not None:
            unknown = sorted(ids - s.replica.broker_id_info.keys())
            if unknown:
                return _fail(
                    RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                    f"brokerIds {unknown} are not registered in broker set {broker_name}",
                )
        if not is_clean_living_broker:
            targets = sorted(s.replica.broker_id_info if ids is None else ids)
            alive = [b for b in targets if is_alive(cluster, broker_name, b)]
            if alive:
                return _fail(
                    RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                    f"brokerIds {alive} of {broker_name} are still alive: stop them first or "
                    f"set isCleanLivingBroker",
                )
        return ControllerResult(commands=(CleanBrokerDataCommand(broker_name, ids),))
