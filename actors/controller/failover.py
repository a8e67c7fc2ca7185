"""Controller broker liveness in, role-change notifications out (a mixin of `Controller`).

Liveness: BROKER_HEARTBEAT (direct when standalone; when embedded, the NameServer's heartbeats
are also fed here) and REGISTER_BROKER refresh `BrokerHeartbeatManager`; a closed broker
connection is an immediate death. The table is reset when this replica becomes leader; until
`liveness_settled`, only brokers this leader has heard and then lost (closed connection, or
silent past their own timeout) count as dead, and only their sets are re-elected: a broker not
heard yet is not a dead one. A scan every scanNotActiveBrokerInterval drops
expired brokers (logged as broker_heartbeat_timeout); the leader then runs a controller-triggered
ElectMaster through the log for every set whose master is gone (also every
scanInactiveMasterInterval and right after a broker connection closes). When an applied
election names a new master and notifyBrokerRoleChanged is on, the leader pushes
NOTIFY_BROKER_ROLE_CHANGED (oneway) to the set's live brokers at their registered addresses.

Only the leader reports what it applied in its own term: ElectMaster / AlterSyncStateSet /
ApplyBrokerId are logged once, and a new master is pushed to the set's live brokers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import trio

from rocketrio.actors import events
from rocketrio.actors import events as log_events
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    ElectMasterEvent,
    Event,
)
from rocketrio.actors.controller.heartbeat_manager import BrokerHeartbeatManager, BrokerLiveInfo
from rocketrio.actors.controller.replicas_info import ApplyOutcome, ReplicasInfoManager
from rocketrio.actors.raft.node import RaftNode, Role
from rocketrio.actors.remoting import Connection, RemotingClient, RemotingError
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.controller_headers import (
    BrokerHeartbeatRequestHeader,
    RoleChangeNotifyEntry,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_ext, to_json

NOTIFY_TIMEOUT_S = 3.0
_BROKER_ADDRS = "controller_broker_addrs"  # Connection.attrs key: broker addresses seen on it


def now_ms() -> int:
    """Liveness clock: Trio's (monotonic, mockable), only compared with itself."""
    return int(trio.current_time() * 1000)


class FailoverMixin:
    """Liveness bookkeeping and applied-event reactions of `Controller`, whose state it uses.

    Relies on Controller's `node`, `heartbeats`, `replicas`, `config`, `log`, `_nursery`,
    `_client`, `_elect_reasons`, `_is_alive` and `_reelect_dead_masters`.
    """

    node: RaftNode
    heartbeats: BrokerHeartbeatManager
    replicas: ReplicasInfoManager
    config: ControllerConfig
    log: Any
    _nursery: trio.Nursery | None
    _client: RemotingClient | None
    _elect_reasons: dict[str, str]

    async def _reelect_dead_masters(
        self, reason: str, only: frozenset[str] | None = None
    ) -> None: ...

    def observe_heartbeat(self, h: BrokerHeartbeatRequestHeader) -> None:
        """Feed one broker heartbeat (direct, or forwarded by the NameServer) to liveness."""
        if h.brokerId is None:
            return
        self.heartbeats.on_heartbeat(
            h.clusterName,
            h.brokerName,
            h.brokerId,
            h.brokerAddr,
            now_ms(),
            timeout_ms=h.heartbeatTimeoutMills,
            epoch=h.epoch,
            max_offset=h.maxOffset,
            confirm_offset=h.confirmOffset,
            election_priority=h.electionPriority,
        )

    def watch(self, conn: Connection) -> None:
        """Treat the close of `conn` as the death of the brokers that spoke on it."""
        conn.on_close.append(self._on_channel_closed)

    @staticmethod
    def remember_broker_addr(conn: Connection, addr: str) -> None:
        conn.attrs.setdefault(_BROKER_ADDRS, set()).add(addr)

    def _on_channel_closed(self, conn: Connection) -> None:
        if self._nursery is None or trio.current_effective_deadline() == -math.inf:
            return  # we are stopping: nothing to judge
        dead: list[BrokerLiveInfo] = []
        for addr in conn.attrs.get(_BROKER_ADDRS, ()):
            dead.extend(self.heartbeats.on_channel_closed(addr))
        if not dead or not self.node.is_leader:
            return
        now = now_ms()
        for info in dead:
            self._log_broker_gone(info, now, "channel_closed")
        if self.heartbeats.liveness_settled(now):
            self._nursery.start_soon(self._reelect_dead_masters, "master_channel_closed")
            return
        # a closed connection is evidence of death, not silence: even inside the listening
        # window after this replica became leader, re-elect the sets whose master it was (but
        # only those: other sets' brokers may simply not have been heard yet)
        sets = frozenset(info.broker_name for info in dead)
        self._nursery.start_soon(self._reelect_dead_masters, "master_channel_closed", sets)

    def _log_broker_gone(self, info: BrokerLiveInfo, now: int, reason: str) -> None:
        self.log.warning(
            log_events.BROKER_HEARTBEAT_TIMEOUT,
            cluster=info.cluster_name,
            broker=info.broker_name,
            broker_id=info.broker_id,
            addr=info.broker_addr,
            silent_ms=now - info.last_update_ms,
            reason=reason,
        )

    async def _scan(self) -> None:
        """scanNotActiveBroker: drop expired brokers; a dead master triggers an election."""
        if not self.node.is_ready_leader:
            return
        now = now_ms()
        expired = self.heartbeats.scan_not_active(now)
        for info in expired:
            self._log_broker_gone(info, now, "heartbeat_expired")
        if not expired:
            return
        if self.heartbeats.liveness_settled(now):
            await self._reelect_dead_masters("master_heartbeat_timeout")
            return
        # heard since this replica became leader, then silent past its own timeout: as dead as
        # a closed connection; only brokers never heard yet need the listening window
        sets = frozenset(info.broker_name for info in expired)
        await self._reelect_dead_masters("master_heartbeat_timeout", sets)

    async def _scan_inactive_masters(self) -> None:
        if self.node.is_ready_leader and self.heartbeats.liveness_settled(now_ms()):
            await self._reelect_dead_masters("master_inactive")

    def _on_role_change(self, role: Role, term: int, leader: str | None) -> None:
        if role is Role.LEADER:
            # a new leader has heard no broker yet: listen one timeout before judging silence
            self.heartbeats.reset(now_ms())

    # ------------------------------------------------------------------ applied events

    def _on_applied(self, batch: Sequence[Event], outcomes: Sequence[ApplyOutcome]) -> None:
        """Log what the leader applied in its own term; push role changes after elections.

        Entries before the leader's no-op were proposed (and acted on) by an earlier leader;
        only a ready leader reports, so each change is logged and pushed once.
        """
        if not self.node.is_ready_leader:
            return
        for event, outcome in zip(batch, outcomes, strict=True):
            if not outcome.ok:
                continue
            match event:
                case ElectMasterEvent():
                    self._after_election(event)
                case AlterSyncStateSetEvent():
                    sync = self.replicas.sync_state_info(event.broker_name)
                    self.log.info(
                        log_events.SYNC_STATE_SET_CHANGED,
                        broker=event.broker_name,
                        sync_state_set=sorted(event.new_sync_state_set),
                        epoch=None if sync is None else sync.sync_state_set_epoch,
                    )
                case ApplyBrokerIdEvent():
                    self.log.info(
                        log_events.BROKER_ID_APPLIED,
                        broker=event.broker_name,
                        broker_id=event.new_broker_id,
                        addr=event.broker_address,
                    )

    def _after_election(self, event: ElectMasterEvent) -> None:
        name = event.broker_name
        entry = self.replicas.role_change_entry(name)
        if entry is None:
            return
        self.log.info(
            log_events.ELECT_MASTER,
            broker=name,
            master_id=entry.masterBrokerId,
            master_addr=entry.masterAddress,
            epoch=entry.masterEpoch,
            sync_state_set=sorted(entry.syncStateSet),
            reason=self._elect_reasons.pop(name, "unknown"),
        )
        if not event.new_master_elected or not self.config.notifyBrokerRoleChanged:
            return
        replica = self.replicas.replica_info(name)
        if replica is None or self._nursery is None:
            return
        for broker_id, addr in replica.broker_id_table().items():
            if self._is_alive(replica.cluster_name, name, broker_id):
                self._nursery.start_soon(self._notify_role_changed, addr, entry)

    async def _notify_role_changed(self, addr: str, entry: RoleChangeNotifyEntry) -> None:
        client = self._client
        if client is None:
            return
        cmd = RemotingCommand(
            code=RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
            ext_fields=to_ext(entry.header()),
            body=to_json(entry.body()),
        )
        error = "timed out"
        with trio.move_on_after(NOTIFY_TIMEOUT_S):
            try:
                await client.invoke_oneway(addr, cmd)
                return
            except RemotingError as e:
                error = str(e)
        # the broker also polls GetReplicaInfo (syncBrokerMetadataPeriod): a lost push heals
        self.log.warning(events.NOTIFY_BROKER_ROLE_CHANGED_FAILED, addr=addr, error=error)
