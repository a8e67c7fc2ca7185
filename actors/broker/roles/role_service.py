"""The broker's role, whichever mode decides it: the one answer to "am I master".

Two implementations: `ReplicasManager` (controller mode, RIP-44: the controller names the
master and its epoch) and `ClassicRoleService` (fixed brokerRole / brokerId, upstream's
2m-2s deployments). `make_role_service` is the one place that branches on
enableControllerMode; every other part of the broker asks the `RoleService`:

- `serving_as_master()`: serving as master right now (takes writes, runs the master-only services:
  delay re-puts, transaction checks, POP revive, static-topic clean-up; a pull answered here is
  not behind anybody). A controller-mode broker whose role is not known yet is not master.
- `acting_master()` / `special_services_on()`: a classic slave standing in for its dead master
  (RIP-32, failover/): it runs the special services (re-puts escape to another group's master)
  but is not master: no writes, pulls still behind.
- `role_known`: False while a controller-mode broker has no role: it stays off the NameServers.
- `master_to_sync`: the master a slave copies metadata (topics, groups, offsets ...) from;
  `may_follow`: whether there can ever be one (not on a classic master).
- `write_refusal`: why a send is refused before it reaches the store (the send path's gate).
- `ha`: the replication service of the current mode (None before it started).

A role change is announced to the broker through ``on_role_change(RoleChange)``: the broker's
brokerRole / brokerId and the DataVersion its NameServers see move at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import attrs
import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.boot.fault_sites import NO_FAULTS, FaultSites
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.failover.pre_online import PreOnlineService
from rocketrio.actors.broker.ha.master_service import HAMasterService
from rocketrio.actors.broker.ha.service import AutoSwitchHAService
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.broker.store.disk_guard import WriteGate
from rocketrio.actors.kernel.remoting import RemotingClient


@attrs.frozen
class RoleChange:
    """A role the broker took: its role, the brokerId the NameServers see (0 for a master) and
    the DataVersion stateVersion to register with (the masterEpoch, #6316)."""

    role: BrokerRole
    broker_id: int
    state_version: int


RoleListener = Callable[[RoleChange], None]


class RoleService(Protocol):
    """What the broker asks of its role (module docstring)."""

    def serving_as_master(self) -> bool: ...

    def acting_master(self) -> bool:
        """A classic slave acting as its masterless group's master (RIP-32): it answers the
        offset and lock calls the route sends it and runs the special services, but never
        takes writes (its re-puts escape to another group's master)."""
        ...

    def special_services_on(self) -> bool:
        """Run the delay/timer scan, transaction checks and POP revive: serving as master or
        acting as master."""
        ...

    def group_members(self) -> dict[int, str]:
        """The live members of this broker's group (brokerId -> address) as last polled from
        the NameServers (RIP-32; empty where nothing polls them)."""
        ...

    @property
    def role_known(self) -> bool: ...

    @property
    def ha(self) -> AutoSwitchHAService | None: ...

    @property
    def boot_broker_id(self) -> int | None:
        """The brokerId to log at boot (None: the controller assigns it later)."""
        ...

    def master_to_sync(self) -> str | None: ...

    def may_follow(self) -> bool:
        """Whether `master_to_sync` can ever name a master: False for a classic master (its
        brokerRole is fixed), which then runs no slave sync at all."""
        ...

    def write_refusal(self) -> Refusal | None: ...

    def write_gates(self) -> tuple[WriteGate, ...]:
        """The gates the send path must ask (none where the store refuses by itself)."""
        ...

    def runtime_extras(self) -> dict[str, str]:
        """rocketrio's extra GET_BROKER_RUNTIME_INFO keys of this mode."""
        ...

    def handlers(self) -> Handlers: ...

    async def run(
        self, client: RemotingClient, *, task_status: trio.TaskStatus[Any] = ...
    ) -> None: ...


@attrs.frozen
class RoleDeps:
    """What either role service uses of the broker: its I/O and the parts it drives."""

    io: BrokerIO
    store: StoreActor
    ha_master: HAMasterService
    addr: Callable[[], str]  # where the broker serves (known once it listens)
    on_role_change: RoleListener
    faults: FaultSites = NO_FAULTS
    # a classic slave started or stopped acting as master (RIP-32)
    on_acting_change: Callable[[bool], None] = lambda _acting: None
    # a returning classic master's pre-online (RIP-32), and what to do once it is online
    pre_online: PreOnlineService | None = None
    on_online: Callable[[], None] = lambda: None

    @property
    def config(self) -> BrokerConfig:
        return self.io.config


def make_role_service(deps: RoleDeps) -> RoleService:
    """The role service of the broker's mode (enableControllerMode)."""
    from rocketrio.actors.broker.roles.classic import ClassicRoleService
    from rocketrio.actors.broker.roles.replicas_manager import ReplicasManager

    if deps.config.enableControllerMode:
        return ReplicasManager(deps)
    return ClassicRoleService(deps)
