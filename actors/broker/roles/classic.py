"""Classic master/slave (H7): fixed brokerRole and brokerId, no controller, no failover.

Upstream's 2m-2s-async / 2m-2s-sync deployments: brokerId 0 with brokerRole ASYNC_MASTER or
SYNC_MASTER, brokerId >= 1 with brokerRole SLAVE, paired by brokerName. Replication uses the same
AutoSwitch HA channel as controller mode (upstream used its older DefaultHAService here):

- a master takes a new epoch, ``last + 1``, at every start, recorded before its first write.
  With no controller to hand out epochs, this is what keeps "one writer per epoch": a master that
  lost unflushed records in a crash writes the records that replace them in a new epoch, and a
  slave that still holds the lost ones cuts them at its next handshake instead of keeping
  different bytes under the same (epoch, offset).
- an ASYNC_MASTER acknowledges at once; a SYNC_MASTER once one slave that keeps up holds the
  message (its set is itself plus the slaves that caught up and stayed connected, decided
  locally), answering SLAVE_NOT_AVAILABLE at once when no slave is in sync, and
  FLUSH_SLAVE_TIMEOUT after syncFlushTimeout, like upstream;
- a slave asks the NameServers for its broker set's members (GET_BROKER_MEMBER_GROUP) until it
  knows the master (brokerId 0) and every few seconds after, and follows it; it dispatches what
  it receives at once (no failover can truncate a classic slave's confirmed data), so consumers
  may read from it while the master is down.
"""

from __future__ import annotations

from typing import Any

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.ha.service import AutoSwitchHAService, resolve_ha_addr
from rocketrio.actors.broker.ha.sync_state import AckPolicy
from rocketrio.actors.broker.roles.role_service import RoleDeps
from rocketrio.actors.broker.store.disk_guard import WriteGate
from rocketrio.actors.client.api import request
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError, RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import GetBrokerMemberGroupResponseBody
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetBrokerMemberGroupRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_json

MASTER_ID = 0
FIND_MASTER_PERIOD_S = 3.0
FIND_MASTER_RETRY_S = 0.5
CALL_TIMEOUT_S = 3.0


class ClassicRoleService:
    """See module docstring. Run with ``await nursery.start(service.run, client)``."""

    def __init__(self, deps: RoleDeps) -> None:
        config = deps.config
        self.config = config
        self.store = deps.store
        self.rng = deps.io.rng
        self.log = structlog.get_logger("broker.classic").bind(
            actor="classic_roles", broker=config.brokerName
        )
        role = config.brokerRole
        policy = AckPolicy(
            all_ack_in_sync_state_set=False,
            in_sync_replicas=2 if role is BrokerRole.SYNC_MASTER else 1,
            min_in_sync_replicas=1,
        )
        self._client: RemotingClient | None = None
        self._ha = AutoSwitchHAService(
            config,
            store=deps.store,
            master_service=deps.ha_master,
            transport=deps.io.transport,
            resolve_ha_addr=self._resolve_ha_addr,
            rng=deps.io.rng,
            policy=policy,
            alter=None,
            classic_min_copies=2 if role is BrokerRole.SYNC_MASTER else 0,
            classic=True,
        )
        self.master_addr: str | None = None
        self.epoch: int | None = None
        self._started = False

    # ------------------------------------------------------------------ the RoleService

    def serving_as_master(self) -> bool:
        return self.config.brokerRole is not BrokerRole.SLAVE

    @property
    def role_known(self) -> bool:
        return True  # fixed by the config

    @property
    def ha(self) -> AutoSwitchHAService | None:
        return self._ha if self._started else None

    @property
    def boot_broker_id(self) -> int | None:
        return self.config.brokerId

    def master_to_sync(self) -> str | None:
        return None if self.serving_as_master() else self.master_addr

    def write_refusal(self) -> Refusal | None:
        return None  # a classic slave's store refuses puts itself (SERVICE_NOT_AVAILABLE)

    def write_gates(self) -> tuple[WriteGate, ...]:
        return ()  # nothing to ask before the store: see write_refusal

    def runtime_extras(self) -> dict[str, str]:
        return {}

    def handlers(self) -> Handlers:
        """The controller-mode calls, answered as not served here."""
        name = self.config.brokerName

        async def role_change_notified(ctx: RequestContext) -> RemotingCommand:
            return ctx.cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"broker {name} is not in controller mode"
            )

        async def epoch_cache(ctx: RequestContext) -> RemotingCommand:
            return ctx.cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"broker {name} is not in controller mode "
                f"(enableControllerMode=false): it keeps no epoch file",
            )

        return {
            RequestCode.NOTIFY_BROKER_ROLE_CHANGED: role_change_notified,
            RequestCode.GET_BROKER_EPOCH_CACHE: epoch_cache,
        }

    async def _resolve_ha_addr(self, master_addr: str) -> str:
        assert self._client is not None
        return await resolve_ha_addr(self._client, master_addr)

    # ------------------------------------------------------------------ running

    async def run(
        self,
        client: RemotingClient,
        *,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self._client = client
        async with trio.open_nursery() as nursery:
            await nursery.start(self._ha.run)
            self._started = True
            if self.serving_as_master():
                records = self.store.epoch_records()
                self.epoch = (records[-1].epoch if records else 0) + 1
                start = await self._ha.change_to_master(
                    MASTER_ID, self.epoch, frozenset({MASTER_ID}), 0
                )
                events.emit(
                    self.log,
                    events.ClassicMasterStarted(
                        broker_role=self.config.brokerRole.value,
                        epoch=self.epoch,
                        start_offset=start,
                    ),
                )
                task_status.started(self)
                return
            await self.store.become_slave()
            task_status.started(self)
            await self._follow_master(client)

    async def _follow_master(self, client: RemotingClient) -> None:
        cfg = self.config
        while True:
            addr = await self._find_master(client)
            if addr != self.master_addr:
                events.emit(
                    self.log, events.ClassicMasterFound(master_addr=addr, previous=self.master_addr)
                )
                self.master_addr = addr
                self._ha.follow(cfg.brokerId, addr, None)
            await trio.sleep(
                (FIND_MASTER_PERIOD_S if addr else FIND_MASTER_RETRY_S)
                * (0.8 + 0.4 * self.rng.random())
            )

    async def _find_master(self, client: RemotingClient) -> str | None:
        """The master's address from the first NameServer that knows the broker set."""
        cfg = self.config
        header = GetBrokerMemberGroupRequestHeader(cfg.brokerClusterName, cfg.brokerName)
        for ns in cfg.namesrv_addrs:
            try:
                resp = await client.invoke(
                    ns, request(RequestCode.GET_BROKER_MEMBER_GROUP, header), CALL_TIMEOUT_S
                )
            except RemotingError:
                continue
            if resp.code != ResponseCode.SUCCESS or not resp.body:
                continue
            try:
                group = from_json(GetBrokerMemberGroupResponseBody, resp.body).brokerMemberGroup
            except HeaderError:
                continue
            return group.brokerAddrs.get(MASTER_ID)
        return None
