"""What a broker does with a CommitLog record lost under later valid records, and, when it cut
its log for it, when it may be master again. Pure: the start-up shell (boot/store_open.py) and
the role core (roles/role_core.py) feed it facts and carry its verdicts out.

The case (store/disk_faults.py): a power cut or a failed fsync lost a page of the CommitLog,
and valid records follow the lost one in its segment. Recovery refuses (`LostRecord`): cutting
there silently could drop records a replica acknowledged.

`on_lost_record(mode, lost_offset, log_end)`, at start-up:
- controller mode, or a classic SLAVE: `Quarantine` - move ``[lost_offset, log_end)`` into a
  quarantine file beside the store (kept, never deleted by the broker), cut the log there with
  its ConsumeQueues and index, and start. A classic slave then fetches from its master as after
  any crash (a slave is never elected in classic mode). In controller mode the broker is
  ``fenced`` (storage/catch_up_fence.py) until it caught up: see `fenced_verdict`;
- a classic MASTER (no controller): `Refuse`, unchanged - nobody else holds the set's data
  authoritatively and nobody can say what its slaves acknowledged; an operator re-syncs the
  store from a replica or a backup.

`fenced_verdict(fence, me, master_id, master_epoch, sync_state_set)`, in controller mode while
fenced, for every view the controller gives:
- another broker is master: `FollowMaster` (be its slave, fetch from the cut on);
- and that master's epoch is newer than the fence's and its SyncStateSet (the controller's)
  lists this broker: `FenceLifted`. A master adds a slave to its SyncStateSet only once it has
  caught up with its log, and the elected master's log holds every acknowledged message (it
  was elected from the SyncStateSet), so the broker now holds all of them: it may be elected
  again like any member. The epoch check keeps the SyncStateSet of the epoch the broker itself
  was master in (still listing it) from lifting the fence;
- nobody is master, or the controller names this broker (a controller that does not know the
  fence, or a view from before it heard of it): `StayOut` - neither master nor slave, no
  election asked, and a reason saying so. When this broker was the only replica with data the
  set has no master until an operator decides (docs/hardening.md): a truncated log is never
  served silently as master.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from rocketrio.storage.catch_up_fence import CatchUpFence


class RoleMode(enum.Enum):
    CONTROLLER = "controller mode"
    CLASSIC_SLAVE = "classic SLAVE"
    CLASSIC_MASTER = "classic master"


def role_mode(*, controller_mode: bool, slave: bool) -> RoleMode:
    if controller_mode:
        return RoleMode.CONTROLLER
    return RoleMode.CLASSIC_SLAVE if slave else RoleMode.CLASSIC_MASTER


@attrs.frozen
class Quarantine:
    """Move ``[offset, log_end)`` aside and cut there; ``fence``: not electable until caught up."""

    offset: int
    log_end: int
    fence: bool


@attrs.frozen
class Refuse:
    reason: str


LostRecordDecision = Quarantine | Refuse


def on_lost_record(mode: RoleMode, lost_offset: int, log_end: int) -> LostRecordDecision:
    """At start-up: what to do with the record lost at ``lost_offset`` (module docstring)."""
    if log_end <= lost_offset:
        return Refuse(f"the lost record at {lost_offset} is not below the log end {log_end}")
    match mode:
        case RoleMode.CLASSIC_MASTER:
            return Refuse(
                "a classic master has no controller to elect a replica that holds these "
                "records, so only an operator may decide what to keep"
            )
        case RoleMode.CLASSIC_SLAVE:
            return Quarantine(lost_offset, log_end, fence=False)
        case RoleMode.CONTROLLER:
            return Quarantine(lost_offset, log_end, fence=True)


@attrs.frozen
class FollowMaster:
    master_id: int


@attrs.frozen
class FenceLifted:
    master_id: int
    master_epoch: int


@attrs.frozen
class StayOut:
    reason: str


FenceVerdict = FollowMaster | FenceLifted | StayOut


def fenced_verdict(
    fence: CatchUpFence,
    me: int,
    master_id: int | None,
    master_epoch: int,
    sync_state_set: Iterable[int] | None,
) -> FenceVerdict:
    """While fenced: what the controller's view means for this broker (module docstring)."""
    cut = (
        f"this broker cut its CommitLog at {fence.lost_offset} after a lost page (it had "
        f"ended at {fence.old_end}; the cut bytes are in {fence.quarantine})"
    )
    if master_id is None:
        return StayOut(
            f"{cut} and the set has no master to catch up from: it stays out of service and "
            "is not electable; if it was the only replica with data an operator decides "
            "(docs/hardening.md)"
        )
    if master_id == me:
        return StayOut(
            f"{cut} and the controller names it master at masterEpoch {master_epoch}: it "
            "refuses the role until it has caught up from a master elected after the cut"
        )
    if master_epoch > fence.epoch and me in set(sync_state_set or ()):
        return FenceLifted(master_id, master_epoch)
    return FollowMaster(master_id)
