"""Typed headers and JSON bodies of the controller's remoting calls (RIP-44, persistent BrokerId).

Attribute names are upstream's extField / JSON keys, so `serde.from_ext` / `serde.to_ext` /
`serde.to_json` / `serde.from_json` convert them with no rename table. Sets of brokerIds travel as
JSON arrays; we always emit them sorted so the same state gives the same bytes.

Calls covered: CONTROLLER_GET_NEXT_BROKER_ID, CONTROLLER_APPLY_BROKER_ID,
CONTROLLER_REGISTER_BROKER, CONTROLLER_GET_REPLICA_INFO, CONTROLLER_GET_METADATA_INFO,
CONTROLLER_GET_SYNC_STATE_DATA, CONTROLLER_ELECT_MASTER, CONTROLLER_ALTER_SYNC_STATE_SET,
CLEAN_BROKER_DATA, BROKER_HEARTBEAT (controller flavour), NOTIFY_BROKER_ROLE_CHANGED and
GET_BROKER_EPOCH_CACHE (asked of a broker by the admin tool); and one rocketrio-internal call
between controller replicas, CONTROLLER_CHECK_BROKER_ALIVE (not upstream's: see its header).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable
from typing import Final

import attrs

from rocketrio.protocol.bodies import BrokerMemberGroup

# The controller flavour of BROKER_HEARTBEAT (904) is the NameServer's wire header (clusterName,
# brokerAddr, brokerName, brokerId, epoch, maxOffset, confirmOffset, heartbeatTimeoutMills,
# electionPriority): one class per wire header, re-exported here.
from rocketrio.protocol.headers import BrokerHeartbeatRequestHeader
from rocketrio.protocol.serde import HeaderError

__all__ = [
    "CONTROLLER_CHECK_BROKER_ALIVE",
    "MAX_EPOCH_END_OFFSET",
    "AlterSyncStateSetRequestHeader",
    "AlterSyncStateSetResponseHeader",
    "ApplyBrokerIdRequestHeader",
    "ApplyBrokerIdResponseHeader",
    "BrokerAliveVerdict",
    "BrokerHeartbeatRequestHeader",
    "BrokerReplicasInfo",
    "CheckBrokerAliveRequestHeader",
    "CheckBrokerAliveResponseHeader",
    "CleanControllerBrokerDataRequestHeader",
    "ElectMasterRequestHeader",
    "ElectMasterResponseBody",
    "ElectMasterResponseHeader",
    "EpochEntry",
    "EpochEntryCache",
    "GetMetaDataResponseHeader",
    "GetNextBrokerIdRequestHeader",
    "GetNextBrokerIdResponseHeader",
    "GetReplicaInfoRequestHeader",
    "GetReplicaInfoResponseHeader",
    "NotifyBrokerRoleChangedRequestHeader",
    "RegisterBrokerToControllerRequestHeader",
    "RegisterBrokerToControllerResponseHeader",
    "ReplicaIdentity",
    "ReplicasInfo",
    "RoleChangeNotifyEntry",
    "SyncStateSet",
    "decode_broker_names",
    "encode_broker_names",
    "parse_broker_id_set",
]

# --- persistent BrokerId flow ----------------------------------------------------------------


@attrs.define(slots=True)
class GetNextBrokerIdRequestHeader:
    clusterName: str
    brokerName: str


@attrs.define(slots=True)
class GetNextBrokerIdResponseHeader:
    clusterName: str | None = None
    brokerName: str | None = None
    nextBrokerId: int | None = None


@attrs.define(slots=True)
class ApplyBrokerIdRequestHeader:
    """`registerCheckCode` is `<brokerAddress>;<millis>` (upstream's format): the controller
    records the address from its first part, the whole string proves a resend is ours."""

    clusterName: str
    brokerName: str
    appliedBrokerId: int
    registerCheckCode: str


@attrs.define(slots=True)
class ApplyBrokerIdResponseHeader:
    clusterName: str | None = None
    brokerName: str | None = None


@attrs.define(slots=True)
class RegisterBrokerToControllerRequestHeader:
    clusterName: str
    brokerName: str
    brokerId: int
    brokerAddress: str
    invokeTime: int | None = None
    # rocketrio extension, as BrokerHeartbeatRequestHeader.notElectable
    notElectable: bool | None = None


@attrs.define(slots=True)
class RegisterBrokerToControllerResponseHeader:
    """Master fields are absent when the broker set has no live master."""

    clusterName: str | None = None
    brokerName: str | None = None
    masterBrokerId: int | None = None
    masterAddress: str | None = None
    masterEpoch: int | None = None
    syncStateSetEpoch: int | None = None


# --- replica info / metadata -----------------------------------------------------------------


@attrs.define(slots=True)
class GetReplicaInfoRequestHeader:
    brokerName: str
    invokeTime: int | None = None


@attrs.define(slots=True)
class GetReplicaInfoResponseHeader:
    masterBrokerId: int | None = None
    masterAddress: str | None = None
    masterEpoch: int | None = None


@attrs.define(slots=True)
class GetMetaDataResponseHeader:
    """CONTROLLER_GET_METADATA_INFO answer (any replica answers; it names the leader)."""

    group: str | None = None
    controllerLeaderId: str | None = None
    controllerLeaderAddress: str | None = None
    isLeader: bool = False
    peers: str | None = None
    # rocketrio's additions (Java ignores unknown ext fields): the answering replica's own
    # Raft state, which the web console shows per replica
    raftSelfId: str | None = None
    raftRole: str | None = None  # leader / follower / candidate
    raftTerm: int | None = None
    raftCommitIndex: int | None = None


@attrs.define(slots=True)
class SyncStateSet:
    """Body of ALTER_SYNC_STATE_SET (request and answer), GET_REPLICA_INFO, REGISTER_BROKER
    and NOTIFY_BROKER_ROLE_CHANGED."""

    syncStateSet: list[int] = attrs.field(factory=list, converter=lambda ids: sorted(set(ids)))
    syncStateSetEpoch: int = 0


# --- elect master ----------------------------------------------------------------------------


@attrs.define(slots=True)
class ElectMasterRequestHeader:
    """`brokerId` -1 means "no broker named" (controller trigger); `designateElect` true means
    an admin asked for that broker specifically."""

    clusterName: str = ""
    brokerName: str = ""
    brokerId: int = -1
    designateElect: bool = False
    invokeTime: int | None = None

    @classmethod
    def of_broker_trigger(
        cls, cluster_name: str, broker_name: str, broker_id: int
    ) -> ElectMasterRequestHeader:
        return cls(clusterName=cluster_name, brokerName=broker_name, brokerId=broker_id)

    @classmethod
    def of_controller_trigger(cls, broker_name: str) -> ElectMasterRequestHeader:
        return cls(brokerName=broker_name)

    @classmethod
    def of_admin_trigger(
        cls, cluster_name: str, broker_name: str, broker_id: int
    ) -> ElectMasterRequestHeader:
        return cls(
            clusterName=cluster_name,
            brokerName=broker_name,
            brokerId=broker_id,
            designateElect=True,
        )

    @property
    def named_broker_id(self) -> int | None:
        """The brokerId the request names, or None for a controller trigger."""
        return self.brokerId if self.brokerId >= 0 else None


@attrs.define(slots=True)
class ElectMasterResponseHeader:
    masterBrokerId: int | None = None
    masterAddress: str | None = None
    masterEpoch: int | None = None
    syncStateSetEpoch: int | None = None


@attrs.define(slots=True)
class ElectMasterResponseBody:
    brokerMemberGroup: BrokerMemberGroup | None = None
    syncStateSet: list[int] = attrs.field(factory=list, converter=lambda ids: sorted(set(ids)))


# --- alter SyncStateSet ----------------------------------------------------------------------


@attrs.define(slots=True)
class AlterSyncStateSetRequestHeader:
    """Body: `SyncStateSet` with the new set and the syncStateSetEpoch it was computed from."""

    brokerName: str
    masterBrokerId: int
    masterEpoch: int
    invokeTime: int | None = None


@attrs.define(slots=True)
class AlterSyncStateSetResponseHeader:
    newSyncStateSetEpoch: int | None = None


# --- admin: clean broker data, sync state data -----------------------------------------------


def parse_broker_id_set(text: str | None) -> frozenset[int] | None:
    """`"1;2;3"` -> {1, 2, 3}; None or blank -> None (meaning: the whole broker set)."""
    if text is None or not text.strip():
        return None
    ids: set[int] = set()
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        try:
            value = int(part)
        except ValueError:
            raise HeaderError(
                f"brokerControllerIdsToClean: {part!r} is not a brokerId "
                f"(expected ids separated by ';', e.g. 1;2;3)"
            ) from None
        if value < 0:
            raise HeaderError(f"brokerControllerIdsToClean: brokerId {value} is negative")
        ids.add(value)
    return frozenset(ids) if ids else None


@attrs.define(slots=True)
class CleanControllerBrokerDataRequestHeader:
    brokerName: str
    clusterName: str | None = None
    brokerControllerIdsToClean: str | None = None
    isCleanLivingBroker: bool = False
    invokeTime: int | None = None

    def broker_ids(self) -> frozenset[int] | None:
        """The ids to clean, None for the whole broker set; HeaderError on a malformed list."""
        return parse_broker_id_set(self.brokerControllerIdsToClean)


def encode_broker_names(names: Iterable[str]) -> bytes:
    """CONTROLLER_GET_SYNC_STATE_DATA request body: a JSON array of broker names."""
    return json.dumps(list(names), separators=(",", ":"), ensure_ascii=False).encode()


def decode_broker_names(body: bytes | None) -> list[str]:
    if not body:
        return []
    try:
        names = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise HeaderError(f"broker name list: body is not valid JSON: {e}") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise HeaderError("broker name list: body must be a JSON array of strings")
    return names


@attrs.define(slots=True)
class ReplicaIdentity:
    brokerName: str
    brokerId: int
    brokerAddress: str | None = None
    alive: bool = False


@attrs.define(slots=True)
class ReplicasInfo:
    masterBrokerId: int | None = None
    masterAddress: str | None = None
    masterEpoch: int = 0
    syncStateSetEpoch: int = 0
    inSyncReplicas: list[ReplicaIdentity] = attrs.field(factory=list)
    notInSyncReplicas: list[ReplicaIdentity] = attrs.field(factory=list)


@attrs.define(slots=True)
class BrokerReplicasInfo:
    """CONTROLLER_GET_SYNC_STATE_DATA answer body, keyed by broker name."""

    replicasInfoTable: dict[str, ReplicasInfo] = attrs.field(factory=dict)


# --- controller -> broker notification -------------------------------------------------------


@attrs.define(slots=True)
class NotifyBrokerRoleChangedRequestHeader:
    masterAddress: str | None = None
    masterEpoch: int | None = None
    syncStateSetEpoch: int | None = None
    masterBrokerId: int | None = None


@attrs.frozen(slots=True)
class RoleChangeNotifyEntry:
    """What the controller pushes to every live broker of a set after a master change."""

    masterBrokerId: int | None
    masterAddress: str | None
    masterEpoch: int
    syncStateSetEpoch: int
    syncStateSet: frozenset[int]

    def header(self) -> NotifyBrokerRoleChangedRequestHeader:
        return NotifyBrokerRoleChangedRequestHeader(
            masterAddress=self.masterAddress,
            masterEpoch=self.masterEpoch,
            syncStateSetEpoch=self.syncStateSetEpoch,
            masterBrokerId=self.masterBrokerId,
        )

    def body(self) -> SyncStateSet:
        return SyncStateSet(list(self.syncStateSet), self.syncStateSetEpoch)


# --- controller leader -> other controller replicas (rocketrio-internal) ----------------------

# Not an upstream code (upstream's controller codes are 1001-1016; 1101-1105 carry our Raft
# RPCs, 1199 our benchmark proposals): the controller leader asks a peer replica whether it
# finds a broker alive before deposing that broker as master (upstream #4800).
CONTROLLER_CHECK_BROKER_ALIVE: Final = 1198


class BrokerAliveVerdict(enum.StrEnum):
    """One replica's view of one broker, from its own liveness table only."""

    ALIVE = "ALIVE"  # heartbeat within its timeout, connection not closed
    DEAD = "DEAD"  # expired, or not heard (connection closed) after a full timeout of listening
    UNKNOWN = "UNKNOWN"  # not heard, and this replica has not listened a full timeout yet


@attrs.define(slots=True)
class CheckBrokerAliveRequestHeader:
    """CONTROLLER_CHECK_BROKER_ALIVE. `waitMillis`: if the asked replica finds the broker alive,
    it may wait that long for its own view to turn (its connection to the broker closing, or
    the heartbeat expiring) before it answers, so a death both saw is not lost to a race
    between the leader's question and the peer's own close notice."""

    clusterName: str
    brokerName: str
    brokerId: int
    waitMillis: int = 0


@attrs.define(slots=True)
class CheckBrokerAliveResponseHeader:
    """`silentMillis`: since the replica last heard the broker (None: never, or forgotten)."""

    verdict: BrokerAliveVerdict = attrs.field(converter=BrokerAliveVerdict)
    silentMillis: int | None = None


# --- GET_BROKER_EPOCH_CACHE (admin -> broker) ------------------------------------------------

# upstream EpochEntry's endOffset default (Long.MAX_VALUE): "the epoch is still open"
MAX_EPOCH_END_OFFSET = (1 << 63) - 1


@attrs.define(slots=True)
class EpochEntry:
    epoch: int
    startOffset: int
    endOffset: int = MAX_EPOCH_END_OFFSET


@attrs.define(slots=True)
class EpochEntryCache:
    clusterName: str
    brokerName: str
    brokerId: int
    epochList: list[EpochEntry] = attrs.field(factory=list)
    maxOffset: int = 0
