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
  may read from it while the master is down;
- with enableSlaveActingMaster (RIP-32, failover/acting_core.py) a slave polls its group every
  syncBrokerMemberGroupPeriod (by GET_BROKER_MEMBER_GROUP, or by the route of
  ``rmq_sys_SYNC_BROKER_MEMBER_<brokerName>`` with compatibleWithOldNameSrv), also hears
  NOTIFY_MIN_BROKER_ID_CHANGE, and acts as master while its id is the smallest live one:
  `acting_master()` holds and `special_services_on()` turns the delay/timer scan, transaction
  checks and POP revive on; it never takes writes (its store refuses them, the route clears the
  write bit). A master that goes offline is forgotten (slave sync stops copying from it); one
  that comes back is followed again and the special services stop;
- pre-online (failover/pre_online.py): a master with enableSlaveActingMaster (and not
  skipPreOnline) starts isolated: it replicates and answers, but stays off the NameServers
  (`role_known` is false) and runs no special service until it has its slaves' newer offsets;
  a slave copies nothing from a master the NameServers do not list yet (`master_to_sync`), so
  its offsets cannot move backwards while the master reads them;
- a returning slave (failover/slave_pre_online.py) starts isolated too: not registered, not
  acting, no special service, 905 ignored, until it has its group and either its master's HA
  handshake is done or, with no master, the acting slave's newer offsets are merged (per-queue
  maxima); with nobody else alive it goes online at once. ``skipPreOnline`` skips both sides.
"""

from __future__ import annotations

from typing import Any

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.failover.acting_core import ActingCore, MinBrokerChange
from rocketrio.actors.broker.failover.member_group import (
    fetch_member_group,
    ha_info_answer,
    pull_ha_info,
)
from rocketrio.actors.broker.failover.pre_online import RETRY_S as PRE_ONLINE_RETRY_S
from rocketrio.actors.broker.failover.slave_pre_online import (
    FollowMaster,
    GoOnline,
    PullFrom,
    Wait,
    slave_step,
)
from rocketrio.actors.broker.ha.service import AutoSwitchHAService, resolve_ha_addr
from rocketrio.actors.broker.ha.sync_state import AckPolicy
from rocketrio.actors.broker.roles.role_service import RoleDeps
from rocketrio.actors.broker.store.disk_guard import WriteGate
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError, RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    ExchangeHAInfoRequestHeader,
    NotifyMinBrokerIdChangeRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, to_ext

MASTER_ID = 0
FIND_MASTER_PERIOD_S = 3.0
FIND_MASTER_RETRY_S = 0.5


def cfg_polls_members(config: BrokerConfig) -> bool:
    """Poll GET_BROKER_MEMBER_GROUP every syncBrokerMemberGroupPeriod (upstream: every broker
    with acting master or strict locks; otherwise a slave only looks for its master)."""
    return config.enableSlaveActingMaster or config.lockInStrictMode


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
        self.acting = ActingCore(config.brokerId, enabled=config.enableSlaveActingMaster)
        self._on_acting_change = deps.on_acting_change
        self._addr = deps.addr
        self._known_ha: dict[str, str] = {}  # master address -> HA address a 905/906 named
        self._started = False
        self._pre_online = deps.pre_online
        self._on_online = deps.on_online
        self.isolated = (  # pre-online: a returning master, or slave (slave_pre_online.py)
            config.enableSlaveActingMaster
            and not config.skipPreOnline
            and deps.pre_online is not None
        )

    # ------------------------------------------------------------------ the RoleService

    def serving_as_master(self) -> bool:
        return self.config.brokerRole is not BrokerRole.SLAVE

    def acting_master(self) -> bool:
        return self.acting.acting and not self.isolated

    def special_services_on(self) -> bool:
        return not self.isolated and (self.serving_as_master() or self.acting.acting)

    def group_members(self) -> dict[int, str]:
        return dict(self.acting.members)

    @property
    def role_known(self) -> bool:
        return not self.isolated  # fixed by the config; hidden during pre-online

    @property
    def ha(self) -> AutoSwitchHAService | None:
        return self._ha if self._started else None

    @property
    def boot_broker_id(self) -> int | None:
        return self.config.brokerId

    def may_follow(self) -> bool:
        return self.config.brokerRole is BrokerRole.SLAVE  # fixed in classic mode

    def master_to_sync(self) -> str | None:
        if self.serving_as_master():
            return None
        if self.acting.enabled and not self.acting.master_listed():
            return None  # acting, or its master is in pre-online: nothing to copy yet
        return self.master_addr

    def write_refusal(self) -> Refusal | None:
        return None  # a classic slave's store refuses puts itself (SERVICE_NOT_AVAILABLE)

    def write_gates(self) -> tuple[WriteGate, ...]:
        return ()  # nothing to ask before the store: see write_refusal

    def runtime_extras(self) -> dict[str, str]:
        if not self.acting.enabled:
            return {}
        return {
            "actingMaster": "true" if self.acting.acting else "false",
            "minBrokerIdInGroup": str(
                -1 if self.acting.min_broker_id is None else self.acting.min_broker_id
            ),
        }

    def handlers(self) -> Handlers:
        """The controller-mode calls, answered as not served here; RIP-32's
        NOTIFY_MIN_BROKER_ID_CHANGE (905) and EXCHANGE_BROKER_HA_INFO (906)."""
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
            RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE: self._handle_notify_min_broker_id,
            RequestCode.EXCHANGE_BROKER_HA_INFO: self._handle_exchange_ha_info,
        }

    async def _handle_notify_min_broker_id(self, ctx: RequestContext) -> RemotingCommand:
        """NOTIFY_MIN_BROKER_ID_CHANGE (905, oneway from a NameServer)."""
        try:
            h = from_ext(NotifyMinBrokerIdChangeRequestHeader, ctx.cmd.ext_fields)
        except HeaderError as e:
            return ctx.cmd.make_response(ResponseCode.INVALID_PARAMETER, str(e))
        if self.isolated:  # in pre-online: its own poll decides (upstream skips it too)
            return ctx.cmd.make_response(ResponseCode.SUCCESS)
        change = self.acting.on_notify(
            h.minBrokerId, h.minBrokerAddr, h.offlineBrokerAddr, h.haBrokerAddr
        )
        if change is not None:
            self._apply(change, "notify")
        return ctx.cmd.make_response(ResponseCode.SUCCESS)

    async def _handle_exchange_ha_info(self, ctx: RequestContext) -> RemotingCommand:
        """EXCHANGE_BROKER_HA_INFO (906): a push names our HA master; a pull asks for ours."""
        try:
            h = from_ext(ExchangeHAInfoRequestHeader, ctx.cmd.ext_fields)
        except HeaderError as e:
            return ctx.cmd.make_response(ResponseCode.INVALID_PARAMETER, str(e))
        if h.masterHaAddress:
            if not self.serving_as_master() and h.masterAddress:
                self._known_ha[h.masterAddress] = h.masterHaAddress
                hold_s = 2 * self.config.brokerNotActiveTimeoutMillis / 1000
                if self.acting.hold_for_master(trio.current_time() + hold_s):
                    self._acting_changed(False)
                self._follow(h.masterAddress)
            return ctx.cmd.make_response(ResponseCode.SUCCESS)
        is_master = self.serving_as_master()
        max_offset = await self.store.commitlog_max_offset() if is_master else 0
        answer = ha_info_answer(self.config, self._addr(), is_master, max_offset)
        return ctx.cmd.make_response(ResponseCode.SUCCESS, ext_fields=to_ext(answer))

    async def _resolve_ha_addr(self, master_addr: str) -> str:
        """The master's HA address: as a 905/906 named it, else (acting master on) asked of the
        master with EXCHANGE_BROKER_HA_INFO (upstream onMasterOnline), else GET_BROKER_CONFIG."""
        known = self._known_ha.get(master_addr)
        if known is not None:
            return known
        assert self._client is not None
        if self.acting.enabled:
            try:
                info = await pull_ha_info(self._client, master_addr)
            except RemotingError:
                info = None
            if info is not None and info.masterHaAddress:
                return info.masterHaAddress
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
                if self.isolated:
                    await self._go_online(client, nursery)
                if cfg_polls_members(self.config):
                    await self._follow_master(client)  # the members, for strict locks
                return
            await self.store.become_slave()
            task_status.started(self)
            if self.isolated:
                await self._slave_go_online(client, nursery)
            await self._follow_master(client)

    async def _go_online(self, client: RemotingClient, nursery: trio.Nursery) -> None:
        """Pre-online, then register and start the special services (module docstring)."""
        assert self._pre_online is not None
        await self._pre_online.run(client)
        self.isolated = False
        self._on_online()
        nursery.start_soon(self._pre_online.reverse_sync, client)

    async def _slave_go_online(self, client: RemotingClient, nursery: trio.Nursery) -> None:
        """A returning slave's pre-online (failover/slave_pre_online.py): isolated until its
        master's HA handshake is done or the acting slave's newer offsets are merged."""
        assert self._pre_online is not None
        cfg, pulled = self.config, set[str]()
        while True:
            members = await fetch_member_group(client, cfg, compatible=cfg.compatibleWithOldNameSrv)
            step = slave_step(
                cfg.brokerId,
                members,
                handshake_done=self._handshake_done(),
                pulled=frozenset(pulled),
            )
            match step:
                case GoOnline():
                    break
                case Wait():
                    pass
                case FollowMaster(master_addr=addr):
                    self._follow(addr)  # its HA address by EXCHANGE_BROKER_HA_INFO (906)
                case PullFrom(addr=addr):
                    if await self._pre_online.pull(client, addr):
                        pulled.add(addr)
            await trio.sleep(PRE_ONLINE_RETRY_S)
        done = events.SlavePreOnlineDone(
            reason=step.reason, master_addr=self.master_addr, pulled_from=sorted(pulled)
        )
        events.emit(self.log, done)
        self.isolated = False
        self._on_online()
        if pulled:  # clients routed to the acting slave commit there until their route refresh
            nursery.start_soon(self._pre_online.reverse_sync, client)

    def _handshake_done(self) -> bool:
        """The HA link to the master followed is in transfer (its first header arrived)."""
        view = self._ha.slave_view()
        return view is not None and view.connected and view.master_confirm_offset >= 0

    async def _follow_master(self, client: RemotingClient) -> None:
        """Poll the group's members; follow the master; act as master when RIP-32 says so."""
        cfg = self.config
        compatible = cfg_polls_members(cfg) and cfg.compatibleWithOldNameSrv
        while True:
            members = await fetch_member_group(client, cfg, compatible=compatible)
            if members is not None:
                self._on_members(members)
            if self.acting.tick(trio.current_time()):
                self._acting_changed(True)  # the announced master never got online
            if cfg_polls_members(cfg):
                period_s = cfg.syncBrokerMemberGroupPeriod / 1000
            else:
                period_s = FIND_MASTER_PERIOD_S if self.master_addr else FIND_MASTER_RETRY_S
            await trio.sleep(period_s * (0.8 + 0.4 * self.rng.random()))

    def _on_members(self, members: dict[int, str]) -> None:
        change = self.acting.on_members(members)
        if self.serving_as_master():
            return  # a master only keeps the list (aliveReplicaNumInGroup, strict locks)
        if not self.acting.enabled:
            self._follow(members.get(MASTER_ID))  # the pre-RIP-32 behaviour: id 0 or nobody
        elif change is not None:
            self._apply(change, "member_group")

    def _apply(self, change: MinBrokerChange, source: str) -> None:
        """Carry out a move of the group's smallest live id (upstream onMinBrokerChange)."""
        events.emit(
            self.log,
            events.GroupMinBrokerIdMoved(
                min_broker_id=change.min_broker_id,
                min_broker_addr=change.min_broker_addr,
                offline_broker_addr=change.offline_broker_addr,
                acting=change.acting_now,
                source=source,
            ),
        )
        if change.master_ha_addr and change.min_broker_addr:
            self._known_ha[change.min_broker_addr] = change.master_ha_addr
        if change.min_broker_id != MASTER_ID and self.master_addr is not None:
            self._follow(None)  # the master went offline: stop copying from it
        elif change.master_online:
            self._follow(change.min_broker_addr)
        if change.acting_before != change.acting_now:
            self._acting_changed(change.acting_now)

    def _acting_changed(self, acting: bool) -> None:
        min_id = -1 if self.acting.min_broker_id is None else self.acting.min_broker_id
        events.emit(self.log, events.ActingMasterChanged(acting=acting, min_broker_id=min_id))
        self._on_acting_change(acting)

    def _follow(self, addr: str | None) -> None:
        if addr == self.master_addr:
            return
        found = events.ClassicMasterFound(master_addr=addr, previous=self.master_addr)
        events.emit(self.log, found)
        self.master_addr = addr
        self._ha.follow(self.config.brokerId, addr, None)
