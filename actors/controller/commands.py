"""The commands of the controller's replicated state machine (upstream calls them events; here
"events" are log lines, actors/observe/events/): what goes into the Raft log and is
applied, in log order, to `ReplicasInfoManager` on every controller replica.

Commands are frozen attrs classes. Besides upstream's payload, the commands that move an epoch carry
the epoch they were computed against (`expected_*`): the state machine re-checks it when the
command is applied and refuses a stale command deterministically. A leader can have several
proposals in flight that were all validated against the same (not yet updated) state; without
this compare-and-set two racing first elections would both "win", or two AlterSyncStateSet
requests would both get the same new syncStateSetEpoch (issue #6342).

Encoding for the Raft log: `u16 command type | JSON` (upstream's EventSerializer layout); a batch
(all commands of one request, applied together) is `u16 0 | u32 count | (u32 length | command)*`.
Malformed bytes raise `CommandDecodeError`: a committed entry we cannot read is corruption, never
something to skip.
"""

from __future__ import annotations

import json
import struct
from typing import Any, Final

import attrs
from cattrs.errors import ClassValidationError

from rocketrio.protocol.serde import converter


class CommandDecodeError(ValueError):
    """Bytes from the Raft log that are not a controller command."""


def _id_set(ids: Any) -> frozenset[int]:
    return frozenset(int(i) for i in ids)


def _opt_id_set(ids: Any) -> frozenset[int] | None:
    return None if ids is None else _id_set(ids)


@attrs.frozen(slots=True)
class ApplyBrokerIdCommand:
    """Assign `new_broker_id` in a broker set (creating the set for brokerId 1)."""

    cluster_name: str
    broker_name: str
    broker_address: str
    new_broker_id: int
    register_check_code: str


@attrs.frozen(slots=True)
class UpdateBrokerAddressCommand:
    """A registered broker (identity brokerName:brokerId) now lives at `broker_address`."""

    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int


@attrs.frozen(slots=True)
class ElectMasterCommand:
    """Make `new_master_broker_id` master (SyncStateSet becomes {it}); None records that the
    master is gone and nobody could be elected. Applies only if the set's masterEpoch is still
    `expected_master_epoch`; masterEpoch then goes up by one either way."""

    broker_name: str
    new_master_broker_id: int | None
    expected_master_epoch: int

    @property
    def new_master_elected(self) -> bool:
        return self.new_master_broker_id is not None


@attrs.frozen(slots=True)
class AlterSyncStateSetCommand:
    """Replace the SyncStateSet; applies only under the epochs the master's request was checked
    against."""

    broker_name: str
    new_sync_state_set: frozenset[int] = attrs.field(converter=_id_set)
    expected_master_epoch: int
    expected_sync_state_set_epoch: int


@attrs.frozen(slots=True)
class CleanBrokerDataCommand:
    """Forget brokers of a set: the listed ids, or the whole set when `broker_ids` is None."""

    broker_name: str
    broker_ids: frozenset[int] | None = attrs.field(default=None, converter=_opt_id_set)


Command = (
    ApplyBrokerIdCommand
    | UpdateBrokerAddressCommand
    | ElectMasterCommand
    | AlterSyncStateSetCommand
    | CleanBrokerDataCommand
)

# ids as upstream's EventType (4 was its READ_EVENT); 0 tags a batch
_BATCH_TAG: Final = 0
EVENT_TYPE_IDS: Final[dict[type, int]] = {
    AlterSyncStateSetCommand: 1,
    ApplyBrokerIdCommand: 2,
    ElectMasterCommand: 3,
    CleanBrokerDataCommand: 5,
    UpdateBrokerAddressCommand: 6,
}
_TYPES_BY_ID: Final[dict[int, type]] = {v: k for k, v in EVENT_TYPE_IDS.items()}
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")


def _plain(command: Command) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in attrs.fields(type(command)):
        v = getattr(command, a.name)
        out[a.name] = sorted(v) if isinstance(v, frozenset) else v
    return out


def encode_command(command: Command) -> bytes:
    """One command as `u16 type | JSON` (keys sorted, id sets as sorted arrays)."""
    type_id = EVENT_TYPE_IDS[type(command)]
    body = json.dumps(_plain(command), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return _U16.pack(type_id) + body.encode()


def decode_command(data: bytes) -> Command:
    if len(data) < 2:
        raise CommandDecodeError(f"controller event too short ({len(data)} bytes)")
    (type_id,) = _U16.unpack_from(data, 0)
    cls = _TYPES_BY_ID.get(type_id)
    if cls is None:
        raise CommandDecodeError(f"unknown controller event type {type_id}")
    try:
        plain = json.loads(data[2:])
        command: Command = converter.structure(plain, cls)
    except (ValueError, TypeError, KeyError, UnicodeDecodeError, ClassValidationError) as e:
        raise CommandDecodeError(f"{cls.__name__}: cannot decode: {e!r}") from None
    return command


def encode_commands(commands: list[Command] | tuple[Command, ...]) -> bytes:
    """The commands of one request as one Raft entry, so they commit and apply together."""
    parts = [_U16.pack(_BATCH_TAG), _U32.pack(len(commands))]
    for command in commands:
        raw = encode_command(command)
        parts.append(_U32.pack(len(raw)))
        parts.append(raw)
    return b"".join(parts)


def decode_commands(data: bytes) -> tuple[Command, ...]:
    """Inverse of `encode_commands`; also accepts a single `encode_command` entry."""
    if len(data) < 2:
        raise CommandDecodeError(f"controller entry too short ({len(data)} bytes)")
    if _U16.unpack_from(data, 0)[0] != _BATCH_TAG:
        return (decode_command(data),)
    if len(data) < 6:
        raise CommandDecodeError("controller event batch: truncated count")
    (count,) = _U32.unpack_from(data, 2)
    pos, out = 6, []
    for i in range(count):
        if pos + 4 > len(data):
            raise CommandDecodeError(f"controller event batch: event {i} of {count} truncated")
        (size,) = _U32.unpack_from(data, pos)
        pos += 4
        if pos + size > len(data):
            raise CommandDecodeError(f"controller event batch: event {i} of {count} truncated")
        out.append(decode_command(data[pos : pos + size]))
        pos += size
    if pos != len(data):
        raise CommandDecodeError(f"controller event batch: {len(data) - pos} trailing bytes")
    return tuple(out)
