"""The broker's role in controller mode, as a pure state machine (H8; RIP-44 ReplicasManager).

Inputs: what the controller says about this broker's set (`ControllerView`, from the register
answer, GetReplicaInfo, NOTIFY_BROKER_ROLE_CHANGED or an election answer) and lease
confirmations; time comes in as milliseconds. Outputs: `RoleDecision`s the shell
(replicas_manager.py) carries out: `BecomeMaster` (through the store actor: append
``<masterEpoch, CommitLog end>`` to the epoch file before the first write, then serve as
SYNC_MASTER), `BecomeSlave` (stop acknowledging, follow the named master), `AdoptSyncStateSet`,
`FollowNewAddress`, `RequestElection`.

Rules:
- **masterEpoch only moves forward**; an older view is ignored, an equal one only updates the
  SyncStateSet (master) or the master's address (slave).
- **One writer incarnation per epoch.** A broker writes records of epoch E only if THIS process
  appended E to its epoch file. If the controller names us master at an epoch our epoch file
  already holds (we were master at E, crashed and came back before the controller noticed), we
  must not resume writing in E: records we lost in the crash may exist on a slave, and new ones
  at the same (epoch, offset) would differ from them, which the truncation algorithm cannot
  see. We ask the controller for a new election instead (`RequestElection`), which it runs
  among the live SyncStateSet members, most advanced first.
- **No master: ask to be elected** (upstream brokerElect), when the controller's view has a
  newer epoch and no master.
- **Catch-up fence** (store/lost_page.py): a broker that cut its CommitLog after a lost page
  follows another master like any slave, but never takes the master role nor asks for an
  election (`HoldFence` instead) until the controller lists it in the SyncStateSet of a master
  elected after the cut (`LiftFence`, then the view is taken as usual).
- **Lease (inSyncReplicas mode, #7017).** With allAckInSyncStateSet every acknowledged write is
  on every possible member of the SyncStateSet, so any master the controller can elect holds it
  and a deposed master cannot acknowledge anything once its successor stops acking it: no lease
  is needed and controller downtime never stops traffic (C5). With inSyncReplicas = k the
  master acknowledges after k copies, which a successor elected from the rest may lack: there
  the master may count k copies only while it holds a lease — renewed by a linearizable
  GetReplicaInfo answer naming it master at its epoch, valid `lease_ms` from the moment the
  request was SENT — and a new master counts k copies only `lease_ms` after it became master,
  when any predecessor's lease has run out. Without a valid lease it falls back to every member
  of the set (sync_state.SyncStateCore.ack_bound).
"""

from __future__ import annotations

import enum

import attrs

from rocketrio.actors.broker.store.lost_page import (
    FenceLifted,
    FollowMaster,
    StayOut,
    fenced_verdict,
)
from rocketrio.storage.catch_up_fence import CatchUpFence


class Role(enum.Enum):
    MASTER = "MASTER"
    SLAVE = "SLAVE"


@attrs.frozen(slots=True)
class ControllerView:
    """What the controller says about the set: master (None: none), masterEpoch, SyncStateSet."""

    master_id: int | None
    master_addr: str | None
    master_epoch: int
    sync_state_set: frozenset[int] | None = None
    sync_state_set_epoch: int | None = None


@attrs.frozen(slots=True)
class BecomeMaster:
    epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int
    # True: we were already master (previous epoch) in this process: keep the HA connections
    was_master: bool


@attrs.frozen(slots=True)
class BecomeSlave:
    master_id: int
    master_addr: str | None
    epoch: int
    was_master: bool


@attrs.frozen(slots=True)
class AdoptSyncStateSet:
    members: frozenset[int]
    epoch: int


@attrs.frozen(slots=True)
class FollowNewAddress:
    """Same master, same epoch, new address (it restarted elsewhere): reconnect."""

    master_addr: str


@attrs.frozen(slots=True)
class RequestElection:
    """Ask the controller to elect a master naming this broker. ``deposed``: we were master
    and a newer epoch has none: stop acknowledging at once (the shell fails pending writes)."""

    reason: str
    deposed: bool = False


@attrs.frozen(slots=True)
class Ignore:
    reason: str


@attrs.frozen(slots=True)
class HoldFence:
    """The catch-up fence holds: no role taken, no election asked; ``reason`` says why."""

    reason: str


@attrs.frozen(slots=True)
class LiftFence:
    """The broker caught up (listed in the SyncStateSet of ``master_id`` at ``epoch``, newer
    than the fence's): remove the fence, then carry out ``then``."""

    fence: CatchUpFence
    master_id: int
    epoch: int
    then: RoleDecision


RoleDecision = (
    BecomeMaster
    | BecomeSlave
    | AdoptSyncStateSet
    | FollowNewAddress
    | RequestElection
    | Ignore
    | HoldFence
    | LiftFence
)


class RoleCore:
    """See module docstring."""

    def __init__(
        self,
        broker_id: int,
        *,
        boot_last_epoch: int,
        lease_ms: int,
        needs_lease: bool,
        fence: CatchUpFence | None = None,
    ) -> None:
        """`boot_last_epoch`: the epoch file's last epoch when this process started (-1: none).
        `needs_lease`: the ack policy counts fewer copies than the whole SyncStateSet.
        `fence`: the catch-up fence found at start-up (module docstring)."""
        self.broker_id = broker_id
        self.fence = fence
        self.boot_last_epoch = boot_last_epoch
        self.lease_ms = lease_ms
        self.needs_lease = needs_lease
        self.role: Role | None = None
        self.master_epoch = 0
        self.master_id: int | None = None
        self.master_addr: str | None = None
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.lease_until_ms = -1
        self.became_master_ms = 0

    @property
    def is_master(self) -> bool:
        return self.role is Role.MASTER

    def on_view(self, view: ControllerView, now_ms: int) -> RoleDecision:
        """Apply what the controller said; returns what the shell must do."""
        if self.fence is None or view.master_epoch < self.master_epoch:
            return self._on_view(view, now_ms)
        match fenced_verdict(
            self.fence, self.broker_id, view.master_id, view.master_epoch, view.sync_state_set
        ):
            case StayOut(reason=reason):
                if self.role is Role.SLAVE and view.master_id is None:
                    self.role = None  # the master we followed is gone: nothing to follow
                return HoldFence(reason)
            case FollowMaster():
                return self._on_view(view, now_ms)
            case FenceLifted(master_id=master_id, master_epoch=epoch):
                fence, self.fence = self.fence, None
                return LiftFence(fence, master_id, epoch, self._on_view(view, now_ms))

    def _on_view(self, view: ControllerView, now_ms: int) -> RoleDecision:
        epoch = view.master_epoch
        if epoch < self.master_epoch:
            return Ignore(f"masterEpoch {epoch} is older than ours ({self.master_epoch})")
        if epoch == self.master_epoch and self.role is not None:
            return self._same_epoch(view)
        if view.master_id is None:
            deposed = self.role is Role.MASTER
            self.role = None
            self.master_epoch = epoch
            self.master_id = self.master_addr = None
            self.lease_until_ms = -1
            return RequestElection(f"the set has no master at masterEpoch {epoch}", deposed)
        if view.master_id == self.broker_id:
            if epoch <= self.boot_last_epoch:
                return RequestElection(
                    f"named master at masterEpoch {epoch}, which this broker's epoch file "
                    f"already holds (last {self.boot_last_epoch}): it wrote in that epoch before "
                    "it restarted, so it needs a new epoch"
                )
            return self._become_master(view, now_ms)
        if epoch < self.boot_last_epoch:
            return Ignore(
                f"masterEpoch {epoch} is older than this broker's epoch file "
                f"({self.boot_last_epoch}): the controller's view is stale or was reset"
            )
        return self._become_slave(view)

    def _same_epoch(self, view: ControllerView) -> RoleDecision:
        if view.master_id is None:
            return Ignore("the controller sees no live master at our epoch: an election follows")
        if view.master_id != self.master_id:
            return Ignore(
                f"controller names master {view.master_id} at masterEpoch {view.master_epoch}, "
                f"which we know as the epoch of master {self.master_id}: one master per epoch"
            )
        if self.role is Role.MASTER:
            members, sse = view.sync_state_set, view.sync_state_set_epoch
            if members is not None and sse is not None and sse > self.sync_state_set_epoch:
                self.sync_state_set, self.sync_state_set_epoch = members, sse
                return AdoptSyncStateSet(members, sse)
            return Ignore("nothing new")
        if view.master_addr and view.master_addr != self.master_addr:
            self.master_addr = view.master_addr
            return FollowNewAddress(view.master_addr)
        return Ignore("nothing new")

    def _become_master(self, view: ControllerView, now_ms: int) -> BecomeMaster:
        was_master = self.role is Role.MASTER
        self.role = Role.MASTER
        self.master_epoch = view.master_epoch
        self.master_id = self.broker_id
        self.master_addr = view.master_addr
        self.sync_state_set = view.sync_state_set or frozenset({self.broker_id})
        self.sync_state_set_epoch = view.sync_state_set_epoch or 0
        self.became_master_ms = now_ms
        self.lease_until_ms = -1  # a lease needs a linearizable confirmation (on_lease_confirmed)
        return BecomeMaster(
            view.master_epoch, self.sync_state_set, self.sync_state_set_epoch, was_master
        )

    def _become_slave(self, view: ControllerView) -> BecomeSlave:
        assert view.master_id is not None
        was_master = self.role is Role.MASTER
        self.role = Role.SLAVE
        self.master_epoch = view.master_epoch
        self.master_id = view.master_id
        self.master_addr = view.master_addr
        if view.sync_state_set is not None and view.sync_state_set_epoch is not None:
            self.sync_state_set = view.sync_state_set
            self.sync_state_set_epoch = view.sync_state_set_epoch
        self.lease_until_ms = -1
        return BecomeSlave(view.master_id, view.master_addr, view.master_epoch, was_master)

    def adopt_sync_state_set(self, members: frozenset[int], epoch: int) -> bool:
        """An AlterSyncStateSet answer; True when it is newer than what we hold."""
        if epoch <= self.sync_state_set_epoch:
            return False
        self.sync_state_set, self.sync_state_set_epoch = members, epoch
        return True

    # ------------------------------------------------------------------ lease

    def on_lease_confirmed(self, view: ControllerView, sent_at_ms: int) -> None:
        """A linearizable answer to a request sent at ``sent_at_ms`` names us master at our
        epoch: the lease runs until sent_at + lease_ms."""
        if (
            self.role is Role.MASTER
            and view.master_id == self.broker_id
            and view.master_epoch == self.master_epoch
        ):
            self.lease_until_ms = max(self.lease_until_ms, sent_at_ms + self.lease_ms)

    def lease_valid(self, now_ms: int) -> bool:
        """May the master count fewer copies than the whole SyncStateSet (see module doc)?"""
        if not self.needs_lease or self.role is not Role.MASTER:
            return False
        return now_ms < self.lease_until_ms and now_ms >= self.became_master_ms + self.lease_ms
