"""Carrying out the role core's decisions (role_core.py) in controller mode.

One lock serialises decisions: `on_view` feeds a `ControllerView` to the core and carries the
decision out before the next view is looked at:

- `BecomeMaster` / `BecomeSlave`: through the `AutoSwitchHAService` (store role, replication
  gate, HA connections), then the broker's role (`RoleChange`: brokerId 0 and SYNC_MASTER for a
  master, its own id for a slave; the masterEpoch as the NameServers' stateVersion, #6316), and
  with inSyncReplicas (no all-ack) the master's lease renewal: a linearizable GetReplicaInfo
  every masterLeaseTimeMillis / 3 while it is master;
- `AdoptSyncStateSet`, `FollowNewAddress`: the replication gate or the HA client hears it;
- `RequestElection`: CONTROLLER_ELECT_MASTER naming this broker, in the background and one at a
  time (also what a restarted master does instead of writing again in its old epoch); a deposed
  master first steps down (nothing is written until an election);
- `HoldFence`: a WARN events.CatchUpFenceHolds each time the reason changes, nothing else;
  `LiftFence`: ``lift_fence`` removes the fence file (then the heartbeats say electable), then
  the decision it carries.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any, Final

import trio

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.ha.service import AutoSwitchHAService
from rocketrio.actors.broker.roles.controller_calls import CallHealth, StepFailed
from rocketrio.actors.broker.roles.role_core import (
    AdoptSyncStateSet,
    BecomeMaster,
    BecomeSlave,
    ControllerView,
    FollowNewAddress,
    HoldFence,
    Ignore,
    LiftFence,
    RequestElection,
    RoleCore,
    RoleDecision,
)
from rocketrio.actors.broker.roles.role_service import RoleChange, RoleListener
from rocketrio.actors.client.controller_admin import ControllerUnavailable
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.observe import events
from rocketrio.protocol.serde import HeaderError

ELECTION_RETRY_S: Final = 0.2
_RETRYABLE = (StepFailed, ControllerUnavailable, HeaderError)


class RoleDecisions:
    """The decisions' shell of one controller-mode broker (module docstring)."""

    def __init__(
        self,
        config: BrokerConfig,
        ha: AutoSwitchHAService,
        *,
        on_role_change: RoleListener,
        elect: Callable[[], Awaitable[None]],
        replica_info_view: Callable[[], Awaitable[ControllerView | None]],
        health: CallHealth,
        rng: random.Random,
        log: Any,
        role_taken: trio.Event,
        lift_fence: Callable[[LiftFence], Awaitable[None]] | None = None,
    ) -> None:
        self.config = config
        self.ha = ha
        self.on_role_change = on_role_change
        self.elect = elect
        self.replica_info_view = replica_info_view
        self.health = health
        self.rng = rng
        self.log = log
        self.role_taken = role_taken  # set once the first role is taken
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._electing = False
        self._lease_task = False
        self.lift_fence = lift_fence
        self._fence_reason: str | None = None

    def start(self, nursery: trio.Nursery) -> None:
        """Background work (elections, lease renewal) runs in ``nursery``."""
        self._nursery = nursery

    async def on_view(self, core: RoleCore, view: ControllerView, now_ms: int) -> None:
        async with self._lock:
            await self._carry_out(core, core.on_view(view, now_ms))

    async def _carry_out(self, core: RoleCore, d: RoleDecision) -> None:
        me = core.broker_id
        match d:
            case BecomeMaster():
                start = await self.ha.change_to_master(
                    me, d.epoch, d.sync_state_set, d.sync_state_set_epoch
                )
                self._take_role(
                    core, BrokerRole.SYNC_MASTER, start_offset=start, reelected=d.was_master
                )
                if core.needs_lease:
                    self._start_lease_renewal(core)
            case BecomeSlave():
                await self.ha.change_to_slave(me, d.master_addr, d.epoch)
                self._take_role(core, BrokerRole.SLAVE, was_master=d.was_master)
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
                self.ha.follow(me, d.master_addr, core.master_epoch)
            case RequestElection():
                await self._request_election(core, d)
            case HoldFence():
                if d.reason != self._fence_reason:
                    self._fence_reason = d.reason
                    events.emit(
                        self.log,
                        events.CatchUpFenceHolds(
                            reason=d.reason, master_id=core.master_id, epoch=core.master_epoch
                        ),
                    )
            case LiftFence():
                assert self.lift_fence is not None
                await self.lift_fence(d)
                await self._carry_out(core, d.then)
            case Ignore():
                pass

    async def _request_election(self, core: RoleCore, d: RequestElection) -> None:
        me = core.broker_id
        events.emit(self.log, events.MasterElectionRequested(broker_id=me, reason=d.reason))
        if d.deposed:
            await self.ha.step_down()
            events.emit(
                self.log, events.MasterSteppedDown(epoch=core.master_epoch, reason=d.reason)
            )
            self._announce(BrokerRole.SLAVE, me, core.master_epoch)
        self._elect_soon(core)

    def _announce(self, role: BrokerRole, broker_id: int, state_version: int) -> None:
        self.config.brokerRole = role
        self.config.brokerId = broker_id
        self.on_role_change(RoleChange(role, broker_id, state_version))

    def _take_role(self, core: RoleCore, role: BrokerRole, **fields: Any) -> None:
        nameserver_id = 0 if role is BrokerRole.SYNC_MASTER else core.broker_id
        self._announce(role, nameserver_id, core.master_epoch)
        events.emit(
            self.log,
            events.BrokerRoleChanged(
                broker_id=core.broker_id,
                broker_role=role.value,
                epoch=core.master_epoch,
                master_id=core.master_id,
                master_addr=core.master_addr,
                sync_state_set=sorted(core.sync_state_set),
                **fields,
            ),
        )
        self.role_taken.set()

    def _elect_soon(self, core: RoleCore) -> None:
        """Ask for an election in the background (outside the lock), one at a time."""
        if self._electing or self._nursery is None:
            return
        self._electing = True

        async def elect() -> None:
            try:
                while True:
                    try:
                        await self.elect()
                        return
                    except _RETRYABLE as e:
                        self.health.failed("broker_elect", str(e))
                    await trio.sleep(ELECTION_RETRY_S + self.rng.random() * ELECTION_RETRY_S)
                    if core.role is not None:
                        return
            finally:
                self._electing = False

        self._nursery.start_soon(elect)

    def _start_lease_renewal(self, core: RoleCore) -> None:
        if self._lease_task or self._nursery is None:
            return
        self._lease_task = True
        self._nursery.start_soon(self._renew_lease, core)

    async def _renew_lease(self, core: RoleCore) -> None:
        """While master: a linearizable GetReplicaInfo every lease/3 renews the lease."""
        period_s = self.config.masterLeaseTimeMillis / 3000
        try:
            while core.is_master:
                sent = monotonic_ms()
                view = await self.replica_info_view()
                if view is not None:
                    core.on_lease_confirmed(view, sent)
                await trio.sleep(period_s)
        finally:
            self._lease_task = False
