"""AutoSwitchHAService: the replication side of a role change (H1-H8; upstream's class name).

The ReplicasManager (controller mode) or the classic role service decides roles; this service
carries them out on the replication side and owns what lives only while a role lasts:

- `change_to_master`: stop the slave client (if any); build the `GroupTransferService` of this
  mastership (its `SyncStateCore` starts from the controller's SyncStateSet); make the store
  actor master of the epoch (the epoch is recorded before any write of it); serve slaves on the
  HA port. A master re-elected into a newer epoch keeps its gate and its slave connections
  (#9689: the transfer plan labels each batch from the current epoch list, so the slaves
  learn the new epoch).
- `change_to_slave`: drop the slave connections and the gate (what waited for replicas is
  answered as not acknowledged), make the store a slave, and run an `HAClient` towards the
  master's HA address — resolved from the master itself (GET_BROKER_CONFIG: brokerIP1 and
  haListenPort), so replication never waits for a NameServer round (upstream learnt it only from
  the NameServer's register answer).
- `step_down`: a deposed master with no successor yet: nothing is written until an election.

Everything runs in this service's nursery; cancelling `run` stops it all.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.ha.group_transfer import AlterFn, GroupTransferService
from rocketrio.actors.broker.ha.master_service import HAMasterService
from rocketrio.actors.broker.ha.slave_client import HAClient
from rocketrio.actors.broker.ha.status_body import SlaveView
from rocketrio.actors.broker.ha.sync_state import AckPolicy, SyncStateCore
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.config import parse_properties
from rocketrio.protocol.remoting import RemotingCommand

ResolveHaAddr = Callable[[str], Awaitable[str]]
RESOLVE_RETRY_S = 0.2
RESOLVE_RETRY_MAX_S = 2.0
RESOLVE_TIMEOUT_S = 3.0


def ha_addr_of(master_addr: str, config_text: bytes) -> str:
    """A master's HA address from its GET_BROKER_CONFIG answer (key=value lines): brokerIP2
    (else brokerIP1, else the host it answered on) and haListenPort (0 or missing: listenPort
    + 1, as upstream's BrokerStartup sets it)."""
    props = parse_properties(config_text.decode("utf-8", errors="replace"))
    host, _, port_text = master_addr.rpartition(":")
    ip = props.get("brokerIP2") or props.get("brokerIP1") or host
    port = int(props.get("haListenPort") or 0)
    if port <= 0:
        port = int(props.get("listenPort") or port_text) + 1
    return f"{ip}:{port}"


async def resolve_ha_addr(client: RemotingClient, master_addr: str) -> str:
    """Ask the master (GET_BROKER_CONFIG) where its HA listener is."""
    resp = await client.invoke(
        master_addr, RemotingCommand(RequestCode.GET_BROKER_CONFIG), RESOLVE_TIMEOUT_S
    )
    if resp.code != ResponseCode.SUCCESS:
        raise RemotingError(f"GET_BROKER_CONFIG from {master_addr}: {resp.remark}")
    return ha_addr_of(master_addr, resp.body)


def ack_policy(config: BrokerConfig) -> AckPolicy:
    return AckPolicy(
        all_ack_in_sync_state_set=config.allAckInSyncStateSet,
        in_sync_replicas=config.inSyncReplicas,
        min_in_sync_replicas=config.minInSyncReplicas,
        learner=config.asyncLearner,
    )


class AutoSwitchHAService:
    """See module docstring. Run with ``await nursery.start(service.run)``."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        store: StoreActor,
        master_service: HAMasterService,
        transport: Transport,
        resolve_ha_addr: ResolveHaAddr,
        rng: random.Random,
        policy: AckPolicy | None = None,
        alter: AlterFn | None = None,
        lease_valid: Callable[[int], bool] = lambda _now: True,
        on_refresh_needed: Callable[[], None] = lambda: None,
        classic_min_copies: int = 0,
        classic: bool = False,
    ) -> None:
        self.config = config
        self.classic = classic
        self.store = store
        self.master_service = master_service
        self.transport = transport
        self.resolve_ha_addr = resolve_ha_addr
        self.rng = rng
        self.policy = policy or ack_policy(config)
        self.alter = alter
        self.lease_valid = lease_valid
        self.on_refresh_needed = on_refresh_needed
        self.classic_min_copies = classic_min_copies
        self.log = structlog.get_logger("ha").bind(actor="ha_service", broker=config.brokerName)
        self.gate: GroupTransferService | None = None
        self.client: HAClient | None = None
        self._nursery: trio.Nursery | None = None
        self._client_scope: trio.CancelScope | None = None
        self._gate_scope: trio.CancelScope | None = None
        self._following: tuple[str, int | None] | None = None

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started(self)
            await trio.sleep_forever()

    # ------------------------------------------------------------------ roles

    def slave_view(self) -> SlaveView | None:
        """The replication status of this broker's HA client (None: not following a master)."""
        return None if self.client is None else self.client.view()

    async def change_to_master(
        self,
        broker_id: int,
        epoch: int,
        sync_state_set: frozenset[int],
        sync_state_set_epoch: int,
    ) -> int:
        """Serve as master of ``epoch``; returns the epoch's start offset."""
        self._stop_client()
        gate = self.gate
        if gate is None or gate.closed:
            gate = self._new_gate(broker_id, sync_state_set, sync_state_set_epoch)
        else:
            gate.on_authoritative(sync_state_set, sync_state_set_epoch)
        start = await self.store.become_master(epoch, gate)
        self.master_service.activate(gate, broker_id)
        return start

    async def change_to_slave(
        self, broker_id: int, master_addr: str | None, epoch: int | None
    ) -> None:
        """Follow the master at ``master_addr`` (remoting address) in ``epoch``."""
        self.master_service.deactivate()
        self._close_gate()
        await self.store.become_slave()
        self.follow(broker_id, master_addr, epoch)

    async def step_down(self) -> None:
        self.master_service.deactivate()
        self._close_gate()
        self._stop_client()
        await self.store.fence()

    def follow(self, broker_id: int, master_addr: str | None, epoch: int | None) -> None:
        """(Re)start the HA client towards ``master_addr`` (None: wait to learn it)."""
        if master_addr is None:
            self._stop_client()
            self._following = None
            return
        if self._following == (master_addr, epoch) and self._client_scope is not None:
            return
        self._stop_client()
        self._following = (master_addr, epoch)
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._client_scope = scope
        self._nursery.start_soon(self._run_client, scope, broker_id, master_addr, epoch)

    def on_authoritative(self, members: frozenset[int], epoch: int) -> None:
        if self.gate is not None:
            self.gate.on_authoritative(members, epoch)

    # ------------------------------------------------------------------ internals

    def _new_gate(
        self, broker_id: int, sync_state_set: frozenset[int], sync_state_set_epoch: int
    ) -> GroupTransferService:
        self._close_gate()
        store = self.store
        core: SyncStateCore[Any] = SyncStateCore(
            broker_id,
            self.policy,
            max_time_not_catchup_ms=self.config.haMaxTimeSlaveNotCatchup,
            sync_state_set=sync_state_set,
            sync_state_set_epoch=sync_state_set_epoch,
            epoch_start_offset=store.log_end_offset(),
            local_max=store.log_end_offset(),
            confirm_offset=store.confirm_offset(),
            now_ms=monotonic_ms(),
        )
        gate = GroupTransferService(
            core,
            sync_timeout_ms=self.config.syncFlushTimeout,
            check_period_ms=self.config.checkSyncStateSetPeriod,
            alter=self.alter,
            on_confirm=store.request_confirm,
            lease_valid=self.lease_valid,
            on_refresh_needed=self.on_refresh_needed,
            classic_min_copies=self.classic_min_copies,
            log=self.log.bind(actor="group_transfer"),
        )
        self.gate = gate
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._gate_scope = scope

        async def run_gate() -> None:
            with scope:
                await gate.run()

        self._nursery.start_soon(run_gate)
        return gate

    def _close_gate(self) -> None:
        if self.gate is not None:
            self.gate.close()
            self.gate = None
        if self._gate_scope is not None:
            self._gate_scope.cancel()
            self._gate_scope = None

    def _stop_client(self) -> None:
        if self._client_scope is not None:
            self._client_scope.cancel()
            self._client_scope = None
        self.client = None
        self._following = None

    async def _run_client(
        self, scope: trio.CancelScope, broker_id: int, master_addr: str, epoch: int | None
    ) -> None:
        cfg = self.config
        with scope:
            ha_addr = await self._resolve(master_addr)
            self.client = HAClient(
                self.transport,
                self.store,
                ha_addr,
                broker_id=broker_id,
                expected_epoch=epoch,
                async_learner=cfg.asyncLearner,
                sync_from_last_file=cfg.syncFromLastFile,
                heartbeat_interval_ms=cfg.haSendHeartbeatInterval,
                housekeeping_interval_ms=cfg.haHousekeepingInterval,
                rng=self.rng,
                log=self.log.bind(actor="ha_client"),
                confirm_own_max=self.classic,
            )
            await self.client.run()

    async def _resolve(self, master_addr: str) -> str:
        backoff = RESOLVE_RETRY_S
        while True:
            try:
                return await self.resolve_ha_addr(master_addr)
            except Exception as e:
                events.emit(self.log, events.MasterHaAddrUnknown(master=master_addr, error=str(e)))
            await trio.sleep(backoff * (0.5 + self.rng.random()))
            backoff = min(backoff * 2, RESOLVE_RETRY_MAX_S)
