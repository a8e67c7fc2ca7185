"""The controller's replicated state: per broker set records, the checks shared with the
request handlers, applying committed commands (side (b) of `ReplicasInfoManager`) and the snapshot
codec.

`ReplicaState` owns `_sets` (brokerName -> BrokerSet) and is the only code that mutates it;
`ReplicasInfoManager` (replicas_info.py) adds the read-only request handlers on top. Nothing
here reads a clock, a random source or the liveness table, so the same commands in the same order
give the same state and the same snapshot bytes on every replica.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
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
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.controller_headers import RoleChangeNotifyEntry

FIRST_BROKER_CONTROLLER_ID = 1
SNAPSHOT_FORMAT = 1

RC = ResponseCode


class SnapshotError(ValueError):
    """Snapshot bytes that are not a controller state of a known format."""


@attrs.frozen(slots=True)
class ApplyOutcome:
    """What applying one command did: SUCCESS, or a deterministic refusal with a reason."""

    response_code: int = RC.SUCCESS
    remark: str | None = None

    @property
    def ok(self) -> bool:
        return self.response_code == RC.SUCCESS


_OK = ApplyOutcome()


def _refuse(code: int, remark: str) -> ApplyOutcome:
    return ApplyOutcome(code, remark)


@attrs.define(slots=True)
class BrokerIdInfo:
    address: str
    register_check_code: str


@attrs.define(slots=True)
class BrokerReplicaInfo:
    cluster_name: str
    broker_name: str
    next_assign_broker_id: int = FIRST_BROKER_CONTROLLER_ID
    broker_id_info: dict[int, BrokerIdInfo] = attrs.field(factory=dict)

    def address_of(self, broker_id: int | None) -> str | None:
        info = None if broker_id is None else self.broker_id_info.get(broker_id)
        return None if info is None else info.address

    def broker_id_table(self) -> dict[int, str]:
        return {i: self.broker_id_info[i].address for i in sorted(self.broker_id_info)}


@attrs.define(slots=True)
class SyncStateInfo:
    sync_state_set: set[int] = attrs.field(factory=set)
    sync_state_set_epoch: int = 0
    master_broker_id: int | None = None
    master_epoch: int = 0


@attrs.define(slots=True)
class BrokerSet:
    replica: BrokerReplicaInfo
    sync: SyncStateInfo


class ReplicaState:
    """The broker sets and every way committed commands change them."""

    def __init__(self) -> None:
        self._sets: dict[str, BrokerSet] = {}

    # --- reads for the actor / admin ---------------------------------------------------------

    def broker_names(self) -> list[str]:
        return sorted(self._sets)

    def replica_info(self, broker_name: str) -> BrokerReplicaInfo | None:
        s = self._sets.get(broker_name)
        return None if s is None else s.replica

    def sync_state_info(self, broker_name: str) -> SyncStateInfo | None:
        s = self._sets.get(broker_name)
        return None if s is None else s.sync

    def role_change_entry(self, broker_name: str) -> RoleChangeNotifyEntry | None:
        """What NOTIFY_BROKER_ROLE_CHANGED tells the brokers of the set (after an election)."""
        s = self._sets.get(broker_name)
        if s is None:
            return None
        return RoleChangeNotifyEntry(
            masterBrokerId=s.sync.master_broker_id,
            masterAddress=s.replica.address_of(s.sync.master_broker_id),
            masterEpoch=s.sync.master_epoch,
            syncStateSetEpoch=s.sync.sync_state_set_epoch,
            syncStateSet=frozenset(s.sync.sync_state_set),
        )

    def describe(self) -> dict[str, Any]:
        """JSON-ready admin view (registerCheckCodes left out: they prove identity)."""
        out: dict[str, Any] = {}
        for name in sorted(self._sets):
            s = self._sets[name]
            out[name] = {
                "clusterName": s.replica.cluster_name,
                "nextAssignBrokerId": s.replica.next_assign_broker_id,
                "brokers": {str(i): a for i, a in s.replica.broker_id_table().items()},
                "masterBrokerId": s.sync.master_broker_id,
                "masterEpoch": s.sync.master_epoch,
                "syncStateSet": sorted(s.sync.sync_state_set),
                "syncStateSetEpoch": s.sync.sync_state_set_epoch,
            }
        return out

    # --- checks shared by the handlers and by applying (state may have moved) ---------------

    def _check_apply_broker_id(
        self, cluster_name: str, broker_name: str, broker_id: int, register_check_code: str
    ) -> ApplyOutcome:
        s = self._sets.get(broker_name)
        if s is None:
            if broker_id == FIRST_BROKER_CONTROLLER_ID:
                return _OK
            return _refuse(
                RC.CONTROLLER_BROKER_ID_INVALID,
                f"broker set {broker_name} has no brokers yet: the first brokerId is "
                f"{FIRST_BROKER_CONTROLLER_ID}, not {broker_id}",
            )
        replica = s.replica
        if replica.cluster_name != cluster_name:
            return _refuse(
                RC.CONTROLLER_INVALID_REQUEST,
                f"broker set {broker_name} belongs to cluster {replica.cluster_name}, "
                f"not {cluster_name}",
            )
        owner = replica.broker_id_info.get(broker_id)
        if owner is not None:
            if owner.register_check_code == register_check_code:
                return _OK
            return _refuse(
                RC.CONTROLLER_BROKER_ID_INVALID,
                f"brokerId {broker_id} of {broker_name} belongs to another broker; "
                f"ask again: the next brokerId is {replica.next_assign_broker_id}",
            )
        if broker_id != replica.next_assign_broker_id:
            return _refuse(
                RC.CONTROLLER_BROKER_ID_INVALID,
                f"brokerId {broker_id} of {broker_name} is not assignable; "
                f"ask again: the next brokerId is {replica.next_assign_broker_id}",
            )
        return _OK

    def _check_alter(
        self,
        s: BrokerSet,
        new_set: frozenset[int],
        master_broker_id: int | None,
        master_epoch: int,
        sync_state_set_epoch: int,
    ) -> ApplyOutcome:
        """Checks shared by the handler and by applying the command (state may have moved)."""
        sync, name = s.sync, s.replica.broker_name
        if master_broker_id is not None and sync.master_broker_id != master_broker_id:
            return _refuse(
                RC.CONTROLLER_INVALID_MASTER,
                f"only the master of {name} ({sync.master_broker_id}) may alter its "
                f"SyncStateSet, not brokerId {master_broker_id}",
            )
        if master_epoch != sync.master_epoch:
            return _refuse(
                RC.CONTROLLER_FENCED_MASTER_EPOCH,
                f"masterEpoch {master_epoch} of {name} is stale, current is {sync.master_epoch}",
            )
        if sync_state_set_epoch != sync.sync_state_set_epoch:
            return _refuse(
                RC.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                f"syncStateSetEpoch {sync_state_set_epoch} of {name} is stale, current is "
                f"{sync.sync_state_set_epoch}",
            )
        unknown = sorted(new_set - s.replica.broker_id_info.keys())
        if unknown:
            return _refuse(
                RC.CONTROLLER_INVALID_REPLICAS,
                f"brokerIds {unknown} are not registered in broker set {name}",
            )
        if sync.master_broker_id not in new_set:
            return _refuse(
                RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                f"the new SyncStateSet {sorted(new_set)} of {name} must keep the master "
                f"{sync.master_broker_id}",
            )
        return _OK

    # --- (b) applying committed commands -------------------------------------------------------

    def apply_commands(self, commands: Iterable[Command]) -> list[ApplyOutcome]:
        return [self.apply_command(command) for command in commands]

    def apply_command(self, command: Command) -> ApplyOutcome:
        match command:
            case ApplyBrokerIdCommand():
                return self._apply_broker_id(command)
            case UpdateBrokerAddressCommand():
                return self._apply_update_address(command)
            case ElectMasterCommand():
                return self._apply_elect_master(command)
            case AlterSyncStateSetCommand():
                return self._apply_alter_sync_state_set(command)
            case CleanBrokerDataCommand():
                return self._apply_clean(command)
        raise TypeError(f"not a controller command: {command!r}")

    def _apply_broker_id(self, e: ApplyBrokerIdCommand) -> ApplyOutcome:
        check = self._check_apply_broker_id(
            e.cluster_name, e.broker_name, e.new_broker_id, e.register_check_code
        )
        if not check.ok:
            return check
        s = self._sets.get(e.broker_name)
        if s is None:
            s = BrokerSet(BrokerReplicaInfo(e.cluster_name, e.broker_name), SyncStateInfo())
            self._sets[e.broker_name] = s
        replica = s.replica
        if e.new_broker_id not in replica.broker_id_info:
            replica.broker_id_info[e.new_broker_id] = BrokerIdInfo(
                e.broker_address, e.register_check_code
            )
            replica.next_assign_broker_id = e.new_broker_id + 1
        return _OK

    def _apply_update_address(self, e: UpdateBrokerAddressCommand) -> ApplyOutcome:
        s = self._sets.get(e.broker_name)
        info = None if s is None else s.replica.broker_id_info.get(e.broker_id)
        if info is None:
            return _refuse(
                RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"brokerId {e.broker_id} of {e.broker_name} is no longer registered",
            )
        info.address = e.broker_address
        return _OK

    def _apply_elect_master(self, e: ElectMasterCommand) -> ApplyOutcome:
        s = self._sets.get(e.broker_name)
        if s is None:
            return _refuse(
                RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                f"broker set {e.broker_name} is no longer registered",
            )
        sync = s.sync
        if sync.master_epoch != e.expected_master_epoch:
            return _refuse(
                RC.CONTROLLER_FENCED_MASTER_EPOCH,
                f"another election of {e.broker_name} won first (masterEpoch is now "
                f"{sync.master_epoch}, master {sync.master_broker_id})",
            )
        new_master = e.new_master_broker_id
        if new_master is not None and new_master not in s.replica.broker_id_info:
            return _refuse(
                RC.CONTROLLER_ELECT_MASTER_FAILED,
                f"brokerId {new_master} of {e.broker_name} was cleaned before the election "
                f"committed",
            )
        sync.master_broker_id = new_master
        sync.master_epoch += 1
        if new_master is not None:
            sync.sync_state_set = {new_master}
            sync.sync_state_set_epoch += 1
        return _OK

    def _apply_alter_sync_state_set(self, e: AlterSyncStateSetCommand) -> ApplyOutcome:
        s = self._sets.get(e.broker_name)
        if s is None:
            return _refuse(
                RC.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                f"broker set {e.broker_name} is no longer registered",
            )
        check = self._check_alter(
            s,
            e.new_sync_state_set,
            None,
            e.expected_master_epoch,
            e.expected_sync_state_set_epoch,
        )
        if not check.ok:
            return check
        s.sync.sync_state_set = set(e.new_sync_state_set)
        s.sync.sync_state_set_epoch += 1
        return _OK

    def _apply_clean(self, e: CleanBrokerDataCommand) -> ApplyOutcome:
        s = self._sets.get(e.broker_name)
        if s is None:
            return _refuse(
                RC.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                f"broker set {e.broker_name} does not exist, nothing to clean",
            )
        if e.broker_ids is None:
            del self._sets[e.broker_name]
            return _OK
        sync = s.sync
        for broker_id in sorted(e.broker_ids):
            s.replica.broker_id_info.pop(broker_id, None)
        if sync.master_broker_id in e.broker_ids:
            # the master is gone: fence it like a failed election does
            sync.master_broker_id = None
            sync.master_epoch += 1
        remaining = sync.sync_state_set - e.broker_ids
        if remaining != sync.sync_state_set:
            # a changed set always gets a new epoch, so a master never holds a different set
            # under the same syncStateSetEpoch (#6342)
            sync.sync_state_set = remaining
            sync.sync_state_set_epoch += 1
        return _OK

    # --- snapshots ---------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The whole state as deterministic JSON (sorted keys and ids)."""
        sets = []
        for name in sorted(self._sets):
            s = self._sets[name]
            info = s.replica.broker_id_info
            sets.append(
                {
                    "clusterName": s.replica.cluster_name,
                    "brokerName": name,
                    "nextAssignBrokerId": s.replica.next_assign_broker_id,
                    "brokers": [
                        {
                            "brokerId": i,
                            "address": info[i].address,
                            "registerCheckCode": info[i].register_check_code,
                        }
                        for i in sorted(info)
                    ],
                    "syncStateSet": sorted(s.sync.sync_state_set),
                    "syncStateSetEpoch": s.sync.sync_state_set_epoch,
                    "masterBrokerId": s.sync.master_broker_id,
                    "masterEpoch": s.sync.master_epoch,
                }
            )
        doc = {"format": SNAPSHOT_FORMAT, "brokerSets": sets}
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()

    def restore(self, data: bytes) -> None:
        """Replace the whole state by a `snapshot()`; SnapshotError leaves the state untouched."""
        try:
            doc = json.loads(data)
            if doc.get("format") != SNAPSHOT_FORMAT:
                raise SnapshotError(f"unknown controller snapshot format {doc.get('format')!r}")
            sets = {d["brokerName"]: _set_from_plain(d) for d in doc["brokerSets"]}
        except SnapshotError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise SnapshotError(f"controller snapshot is malformed: {e!r}") from None
        self._sets = sets


def _set_from_plain(d: dict[str, Any]) -> BrokerSet:
    replica = BrokerReplicaInfo(
        cluster_name=str(d["clusterName"]),
        broker_name=str(d["brokerName"]),
        next_assign_broker_id=int(d["nextAssignBrokerId"]),
        broker_id_info={
            int(b["brokerId"]): BrokerIdInfo(str(b["address"]), str(b["registerCheckCode"]))
            for b in d["brokers"]
        },
    )
    master = d["masterBrokerId"]
    sync = SyncStateInfo(
        sync_state_set={int(i) for i in d["syncStateSet"]},
        sync_state_set_epoch=int(d["syncStateSetEpoch"]),
        master_broker_id=None if master is None else int(master),
        master_epoch=int(d["masterEpoch"]),
    )
    return BrokerSet(replica, sync)
