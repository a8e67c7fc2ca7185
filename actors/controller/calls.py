"""Decoding the controller's Raft-backed requests into `Call`s: a request and the replicated
state in, a `Call` out (no I/O, no clock). A `Call` says how to compute the answer from a
liveness predicate (`Controller.execute` runs it on a ready leader, as a write or a read), which
election reason to log if it elects, and whether a master it deposes must be confirmed dead by a
majority first. A header that does not decode raises `HeaderError`, which the connection answers
as INVALID_PARAMETER.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from rocketrio.actors.controller.heartbeat_manager import BrokerLiveInfo
from rocketrio.actors.controller.replicas_info import (
    BrokerAlivePredicate,
    ControllerResult,
    ReplicasInfoManager,
)
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.controller_headers import (
    AlterSyncStateSetRequestHeader,
    ApplyBrokerIdRequestHeader,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetNextBrokerIdRequestHeader,
    GetReplicaInfoRequestHeader,
    RegisterBrokerToControllerRequestHeader,
    SyncStateSet,
    decode_broker_names,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, from_json

LiveInfo = Callable[[str, str, int], BrokerLiveInfo | None]


@attrs.frozen(slots=True)
class Call:
    """A decoded controller request: how to compute its answer from a liveness predicate, and
    the election reason. `confirm_master_death`: it may depose that set's master, whose death
    a majority must then confirm (else the master counts as alive for this call)."""

    compute: Callable[[BrokerAlivePredicate], ControllerResult]
    elect_reason: tuple[str, str] | None = None  # (brokerName, reason) if it may elect
    confirm_master_death: bool = False
    election: str | None = None  # the broker set, if it is an ElectMaster (election_total)


class CallDecoder:
    """The Raft-backed request codes and their decoders, over one `ReplicasInfoManager`."""

    def __init__(self, replicas: ReplicasInfoManager, live_info: LiveInfo) -> None:
        self.replicas = replicas
        self.live_info = live_info
        self.decoders: dict[int, Callable[[RemotingCommand], Call]] = {
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self.get_next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self.apply_broker_id,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self.get_replica_info,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self.get_sync_state_data,
            RequestCode.CONTROLLER_ELECT_MASTER: self.elect_master,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self.alter_sync_state_set,
            RequestCode.CLEAN_BROKER_DATA: self.clean_broker_data,
        }

    def get_next_broker_id(self, cmd: RemotingCommand) -> Call:
        h = from_ext(GetNextBrokerIdRequestHeader, cmd.ext_fields)
        return Call(lambda _alive: self.replicas.get_next_broker_id(h.clusterName, h.brokerName))

    def apply_broker_id(self, cmd: RemotingCommand) -> Call:
        h = from_ext(ApplyBrokerIdRequestHeader, cmd.ext_fields)
        return Call(
            lambda _alive: self.replicas.apply_broker_id(
                h.clusterName, h.brokerName, h.appliedBrokerId, h.registerCheckCode
            )
        )

    def register_broker(self, h: RegisterBrokerToControllerRequestHeader) -> Call:
        """The registration itself (the caller records it as a heartbeat first)."""
        return Call(
            lambda alive: self.replicas.register_broker(
                h.clusterName,
                h.brokerName,
                h.brokerId,
                h.brokerAddress,
                alive,
                self.live_info,
            ),
            (h.brokerName, "first_register"),
        )

    def get_replica_info(self, cmd: RemotingCommand) -> Call:
        h = from_ext(GetReplicaInfoRequestHeader, cmd.ext_fields)
        return Call(lambda _alive: self.replicas.get_replica_info(h.brokerName))

    def get_sync_state_data(self, cmd: RemotingCommand) -> Call:
        names = decode_broker_names(cmd.body)
        return Call(lambda alive: self.replicas.get_sync_state_data(names, alive))

    def elect_master(self, cmd: RemotingCommand) -> Call:
        h = from_ext(ElectMasterRequestHeader, cmd.ext_fields)
        reason = "admin" if h.designateElect else "broker_request"
        if h.named_broker_id is None:
            reason = "admin_controller_trigger"
        else:
            current = self.replicas.sync_state_info(h.brokerName)
            if (
                not h.designateElect
                and current is not None
                and (current.master_broker_id == h.named_broker_id)
            ):
                reason = "master_restarted"
        return Call(
            lambda alive: self.replicas.elect_master(
                h.brokerName,
                alive,
                self.live_info,
                broker_id=h.named_broker_id,
                designate_elect=h.designateElect,
            ),
            (h.brokerName, reason),
            # an admin who designates a broker moves the master on purpose; any other trigger
            # replaces a master only if it is dead, which a majority must confirm
            confirm_master_death=not h.designateElect,
            election=h.brokerName,
        )

    def alter_sync_state_set(self, cmd: RemotingCommand) -> Call:
        h = from_ext(AlterSyncStateSetRequestHeader, cmd.ext_fields)
        if not cmd.body:
            raise HeaderError(
                "CONTROLLER_ALTER_SYNC_STATE_SET needs a SyncStateSet JSON body "
                "(syncStateSet, syncStateSetEpoch)"
            )
        body = from_json(SyncStateSet, cmd.body)
        return Call(
            lambda alive: self.replicas.alter_sync_state_set(
                h.brokerName,
                h.masterBrokerId,
                h.masterEpoch,
                body.syncStateSet,
                body.syncStateSetEpoch,
                alive,
            )
        )

    def clean_broker_data(self, cmd: RemotingCommand) -> Call:
        h = from_ext(CleanControllerBrokerDataRequestHeader, cmd.ext_fields)
        return Call(
            lambda alive: self.replicas.clean_broker_data(
                h.clusterName,
                h.brokerName,
                h.brokerControllerIdsToClean,
                h.isCleanLivingBroker,
                alive,
            )
        )
