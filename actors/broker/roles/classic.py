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

import random
from typing import Any

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.ha.master_service import HAMasterService
from rocketrio.actors.broker.ha.service import AutoSwitchHAService, ResolveHaAddr
from rocketrio.actors.broker.ha.sync_state import AckPolicy
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.client.api import request
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import GetBrokerMemberGroupResponseBody
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetBrokerMemberGroupRequestHeader
from rocketrio.protocol.serde import HeaderError, from_json

MASTER_ID = 0
FIND_MASTER_PERIOD_S = 3.0
FIND_MASTER_RETRY_S = 0.5
CALL_TIMEOUT_S = 3.0


class ClassicRoleService:
    """See module docstring. Run with ``await nursery.start(service.run, client)``."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        store: StoreActor,
        master_service: HAMasterService,
        transport: Transport,
        resolve_ha_addr: ResolveHaAddr,
        rng: random.Random,
    ) -> None:
        self.config = config
        self.store = store
        self.rng = rng
        self.log = structlog.get_logger("broker.classic").bind(
            actor="classic_roles", broker=config.brokerName
        )
        role = config.brokerRole
        policy = AckPolicy(
            all_ack_in_sync_state_set=False,
            in_sync_replicas=2 if role is BrokerRole.SYNC_MASTER else 1,
            min_in_sync_replicas=1,
        )
        self.ha = AutoSwitchHAService(
            config,
            store=store,
            master_service=master_service,
            transport=transport,
            resolve_ha_addr=resolve_ha_addr,
            rng=rng,
            policy=policy,
            alter=None,
            classic_min_copies=2 if role is BrokerRole.SYNC_MASTER else 0,
            classic=True,
        )
        self.master_addr: str | None = None
        self.epoch: int | None = None

    @property
    def is_master(self) -> bool:
        return self.config.brokerRole is not BrokerRole.SLAVE

    async def run(
        self,
        client: RemotingClient,
        *,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.ha.run)
            if self.is_master:
                records = self.store.epoch_records()
                self.epoch = (records[-1].epoch if records else 0) + 1
                start = await self.ha.change_to_master(
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
                self.ha.follow(cfg.brokerId, addr, None)
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
