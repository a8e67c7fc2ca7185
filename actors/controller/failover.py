"""Controller broker liveness in, role-change notifications out (a mixin of `Controller`).

Liveness: BROKER_HEARTBEAT (direct when standalone; when embedded, the NameServer's heartbeats
are also fed here) and REGISTER_BROKER refresh `BrokerHeartbeatManager`; a closed broker
connection is an immediate death. The table is reset when this replica starts and when it
becomes leader; until `liveness_settled`, only brokers this leader has heard and then lost
(closed connection, or silent past their own timeout) count as dead, and only their sets are
re-elected: a broker not heard yet is not a dead one. A scan every
scanNotActiveBrokerInterval drops expired brokers (logged as broker_heartbeat_timeout); the
leader then runs a controller-triggered ElectMaster through the log for every set whose master
is gone (also every scanInactiveMasterInterval and right after a broker connection closes).
When an applied election names a new master and notifyBrokerRoleChanged is on, the leader
pushes NOTIFY_BROKER_ROLE_CHANGED (oneway) to the set's live brokers at their registered
addresses.

Death confirmation (upstream #4800): before a master that only this leader finds dead is
deposed, whatever the trigger (heartbeat expiry, channel close, inactive-master scan, or a
broker's or admin's controller-less ElectMaster), `confirm_master_dead` asks every other replica
CONTROLLER_CHECK_BROKER_ALIVE and `death_check.tally_death` counts the verdicts; without a
majority of DEAD the master stays (logged master_death_not_confirmed with the tally). Replicas
answer from their own table at once, except that one that still finds the broker alive waits up
to `waitMillis` for its own view to turn (its connection closing, the heartbeat expiring), so a
crash that closed every connection is confirmed in one round trip even when the leader's
question overtakes the peer's own close notice. With one replica the leader is the majority:
nothing is asked and nothing changes.

Only the leader reports what it applied in its own term: ElectMaster / AlterSyncStateSet /
ApplyBrokerId are logged once, and a new master is pushed to the set's live brokers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

import trio

from rocketrio.actors.controller.commands import (
    AlterSyncStateSetCommand,
    ApplyBrokerIdCommand,
    Command,
    ElectMasterCommand,
)
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.controller.death_check import DeathTally, tally_death
from rocketrio.actors.controller.heartbeat_manager import BrokerHeartbeatManager, BrokerLiveInfo
from rocketrio.actors.controller.replicas_info import (
    ApplyOutcome,
    BrokerAlivePredicate,
    ReplicasInfoManager,
)
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.remoting import (
    Connection,
    RemotingClient,
    RemotingError,
    RequestContext,
)
from rocketrio.actors.observe import events as log_events
from rocketrio.actors.raft.node import RaftNode, Role
from rocketrio.protocol import fastjson
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.controller_headers import (
    CONTROLLER_CHECK_BROKER_ALIVE,
    BrokerAliveVerdict,
    BrokerHeartbeatRequestHeader,
    CheckBrokerAliveRequestHeader,
    CheckBrokerAliveResponseHeader,
    RoleChangeNotifyEntry,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, to_ext

NOTIFY_TIMEOUT_S = 3.0
# Death confirmation: how long the leader waits for the other replicas' verdicts, and how long
# a replica that still finds the broker alive may wait for its own view to turn (less, so its
# answer arrives in time). A replica never waits longer than MAX_CHECK_WAIT_MS, whatever asked.
ALIVE_CHECK_TIMEOUT_S: Final = 0.5
ALIVE_CHECK_WAIT_MS: Final = 250
MAX_CHECK_WAIT_MS: Final = 1000
_BROKER_ADDRS = "controller_broker_addrs"  # Connection.attrs key: broker addresses seen on it


class FailoverMixin:
    """Liveness bookkeeping and applied-command reactions of `Controller`, whose state it uses.

    Relies on Controller's `node`, `heartbeats`, `replicas`, `config`, `self_id`, `log`,
    `_nursery`, `_client`, `_elect_reasons`, `_elect_candidates`, `_liveness_changed`,
    `_is_alive` and `_reelect_dead_masters`.
    """

    node: RaftNode
    heartbeats: BrokerHeartbeatManager
    replicas: ReplicasInfoManager
    config: ControllerConfig
    self_id: str
    log: Any
    _nursery: trio.Nursery | None
    _client: RemotingClient | None
    _elect_reasons: dict[str, str]
    _elect_candidates: dict[str, list[int]]
    _liveness_changed: trio.Event
    start_answer: Callable[..., RemotingCommand | None]

    async def _reelect_dead_masters(
        self, reason: str, only: frozenset[str] | None = None
    ) -> None: ...

    def observe_heartbeat(self, h: BrokerHeartbeatRequestHeader) -> None:
        """Feed one broker heartbeat (direct, or forwarded by the NameServer) to liveness."""
        if h.brokerId is None:
            return
        if h.brokerId == 0:
            # a NameServer heartbeat of a master (its role id): no identity, but a live process
            hb = self.heartbeats
            hb.on_address_heartbeat(h.clusterName, h.brokerName, h.brokerAddr, monotonic_ms())
            return
        self.heartbeats.on_heartbeat(
            h.clusterName,
            h.brokerName,
            h.brokerId,
            h.brokerAddr,
            monotonic_ms(),
            timeout_ms=h.heartbeatTimeoutMills,
            epoch=h.epoch,
            max_offset=h.maxOffset,
            confirm_offset=h.confirmOffset,
            election_priority=h.electionPriority,
            not_electable=h.notElectable,
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
        if not dead:
            return
        # wake the death checks this replica is holding for a peer (`_answer_check_later`)
        self._liveness_changed.set()
        self._liveness_changed = trio.Event()
        if not self.node.is_leader:
            return
        now = monotonic_ms()
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
        log_events.emit(
            self.log,
            log_events.BrokerHeartbeatTimeout(
                cluster=info.cluster_name,
                broker=info.broker_name,
                broker_id=info.broker_id,
                addr=info.broker_addr,
                silent_ms=now - info.last_update_ms,
                reason=reason,
            ),
        )

    async def _scan(self) -> None:
        """scanNotActiveBroker: drop expired brokers; a dead master triggers an election."""
        now = self._tick()
        if not self.node.is_ready_leader:
            return
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

    def _tick(self) -> int:
        """Now, after telling the liveness table: a stall of this replica is not silence of
        the brokers (`BrokerHeartbeatManager.tick`)."""
        now = monotonic_ms()
        cfg = self.config
        period = min(cfg.scanNotActiveBrokerInterval, cfg.scanInactiveMasterInterval)
        self.heartbeats.tick(now, period)
        return now

    async def _scan_inactive_masters(self) -> None:
        now = self._tick()
        if self.node.is_ready_leader and self.heartbeats.liveness_settled(now):
            await self._reelect_dead_masters("master_inactive")

    # ------------------------------------------------------------------ death confirmation

    def check_broker_alive(self, ctx: RequestContext) -> RemotingCommand | None:
        """CONTROLLER_CHECK_BROKER_ALIVE from the leader: this replica's own verdict, at once,
        or after waiting up to `waitMillis` for an ALIVE to turn (see the module docstring)."""
        h = from_ext(CheckBrokerAliveRequestHeader, ctx.cmd.ext_fields)
        if h.brokerId < 0:
            raise HeaderError(f"brokerId must be >= 0, got {h.brokerId}")
        wait_ms = min(max(h.waitMillis, 0), MAX_CHECK_WAIT_MS)
        verdict = self._verdict(h)
        if verdict is BrokerAliveVerdict.ALIVE and wait_ms > 0 and self._nursery is not None:
            # a waiting answer is a task: it counts against the controller's in-flight bound
            return self.start_answer(ctx, self._answer_check_later, ctx, h, wait_ms / 1000)
        return self._check_answer(ctx, h, verdict)

    def _verdict(self, h: CheckBrokerAliveRequestHeader) -> BrokerAliveVerdict:
        return self.heartbeats.verdict(h.clusterName, h.brokerName, h.brokerId, monotonic_ms())

    async def _answer_check_later(
        self, ctx: RequestContext, h: CheckBrokerAliveRequestHeader, wait_s: float
    ) -> None:
        deadline = trio.current_time() + wait_s
        while (verdict := self._verdict(h)) is BrokerAliveVerdict.ALIVE:
            now = trio.current_time()
            if now >= deadline:
                break
            wake = deadline
            info = self.heartbeats.live_info(h.clusterName, h.brokerName, h.brokerId)
            if info is not None:
                # 1 ms past the expiry, so the integer-ms clock surely shows it
                wake = min(wake, max(now + 0.001, (info.dead_from_ms + 1) / 1000))
            with trio.move_on_at(wake):
                await self._liveness_changed.wait()
        ctx.respond(self._check_answer(ctx, h, verdict))

    def _check_answer(
        self, ctx: RequestContext, h: CheckBrokerAliveRequestHeader, verdict: BrokerAliveVerdict
    ) -> RemotingCommand:
        info = self.heartbeats.live_info(h.clusterName, h.brokerName, h.brokerId)
        silent = None if info is None else monotonic_ms() - info.last_update_ms
        header = CheckBrokerAliveResponseHeader(verdict=verdict, silentMillis=silent)
        return ctx.cmd.make_response(ResponseCode.SUCCESS, None, to_ext(header))

    async def confirm_master_dead(
        self, cluster: str, broker_name: str, broker_id: int, reason: str
    ) -> DeathTally:
        """Ask every other replica about a broker this leader finds dead; log and return the
        tally (`confirmed`: a majority of the group says DEAD). Takes one round trip when the
        peers agree, at most ALIVE_CHECK_TIMEOUT_S when some do not answer."""
        peers = self.config.peer_map()
        started = trio.current_time()
        answers = {
            self.self_id: self.heartbeats.verdict(cluster, broker_name, broker_id, monotonic_ms())
        }
        errors: dict[str, str] = {}
        tally = tally_death(peers, answers)
        client = self._client
        if not tally.decided and client is not None:
            header = CheckBrokerAliveRequestHeader(
                cluster, broker_name, broker_id, ALIVE_CHECK_WAIT_MS
            )
            send, recv = trio.open_memory_channel[tuple[str, BrokerAliveVerdict]](len(peers))
            async with trio.open_nursery() as nursery:
                async with send:
                    for peer_id, addr in peers.items():
                        if peer_id != self.self_id:
                            nursery.start_soon(
                                self._ask_alive, client, peer_id, addr, header, send.clone(), errors
                            )
                with trio.move_on_after(ALIVE_CHECK_TIMEOUT_S):
                    async for peer_id, verdict in recv:
                        answers[peer_id] = verdict
                        tally = tally_death(peers, answers)
                        if tally.decided:
                            break
                nursery.cancel_scope.cancel()  # the rest cannot change the outcome
            tally = tally_death(peers, answers)
        record = (
            log_events.MasterDeathConfirmed
            if tally.confirmed
            else log_events.MasterDeathNotConfirmed
        )
        log_events.emit(
            self.log,
            record(
                cluster=cluster,
                broker_id=broker_id,
                reason=reason,
                elapsed_ms=round((trio.current_time() - started) * 1000, 1),
                errors=errors or None,
                **tally.fields(),
            ),
            broker=broker_name,
        )
        return tally

    async def _ask_alive(
        self,
        client: RemotingClient,
        peer_id: str,
        addr: str,
        header: CheckBrokerAliveRequestHeader,
        send: trio.MemorySendChannel[tuple[str, BrokerAliveVerdict]],
        errors: dict[str, str],
    ) -> None:
        cmd = RemotingCommand(code=CONTROLLER_CHECK_BROKER_ALIVE, ext_fields=to_ext(header))
        async with send:
            try:
                resp = await client.invoke(addr, cmd, ALIVE_CHECK_TIMEOUT_S)
                if resp.code != ResponseCode.SUCCESS:
                    errors[peer_id] = f"code {resp.code}: {resp.remark}"
                    return
                answer = from_ext(CheckBrokerAliveResponseHeader, resp.ext_fields)
            except (RemotingError, HeaderError) as e:
                errors[peer_id] = str(e)  # no answer: cannot confirm
                return
            await send.send((peer_id, answer.verdict))

    async def unconfirmed_master_deaths(self, broker_names: Iterable[str], reason: str) -> set[str]:
        """The sets among `broker_names` whose recorded master this leader finds dead but a
        majority of the controller group does not (checked concurrently, one round each)."""
        suspects: list[tuple[str, str, int]] = []
        for name in broker_names:
            sync, replica = self.replicas.sync_state_info(name), self.replicas.replica_info(name)
            if sync is None or replica is None or sync.master_broker_id is None:
                continue
            master = sync.master_broker_id
            if not self._is_alive(replica.cluster_name, name, master):
                suspects.append((replica.cluster_name, name, master))
        unconfirmed: set[str] = set()

        async def confirm(cluster: str, name: str, master: int) -> None:
            if not (await self.confirm_master_dead(cluster, name, master, reason)).confirmed:
                unconfirmed.add(name)

        async with trio.open_nursery() as nursery:
            for suspect in suspects:
                nursery.start_soon(confirm, *suspect)
        return unconfirmed

    async def election_liveness(self, broker_name: str, reason: str) -> BrokerAlivePredicate:
        """Liveness for an election in `broker_name`: this replica's table, except that a
        recorded master whose death a majority does not confirm counts as alive."""
        sync = self.replicas.sync_state_info(broker_name)
        replica = self.replicas.replica_info(broker_name)
        if sync is None or replica is None or sync.master_broker_id is None:
            return self._is_alive
        master = (replica.cluster_name, broker_name, sync.master_broker_id)
        if not await self.unconfirmed_master_deaths([broker_name], reason):
            return self._is_alive

        def is_alive(cluster: str, name: str, broker_id: int) -> bool:
            return (cluster, name, broker_id) == master or self._is_alive(cluster, name, broker_id)

        return is_alive

    def _on_role_change(self, role: Role, term: int, leader: str | None) -> None:
        if role is Role.LEADER:
            # a new leader has heard no broker yet: listen one timeout before judging silence
            self.heartbeats.reset(monotonic_ms())

    # ------------------------------------------------------------------ applied commands

    def _on_applied(self, batch: Sequence[Command], outcomes: Sequence[ApplyOutcome]) -> None:
        """Log what the leader applied in its own term; push role changes after elections.

        Entries before the leader's no-op were proposed (and acted on) by an earlier leader;
        only a ready leader reports, so each change is logged and pushed once.
        """
        if not self.node.is_ready_leader:
            return
        for command, outcome in zip(batch, outcomes, strict=True):
            if not outcome.ok:
                continue
            match command:
                case ElectMasterCommand():
                    self._after_election(command)
                case AlterSyncStateSetCommand():
                    sync = self.replicas.sync_state_info(command.broker_name)
                    log_events.emit(
                        self.log,
                        log_events.SyncStateSetChanged(
                            broker=command.broker_name,
                            sync_state_set=sorted(command.new_sync_state_set),
                            epoch=None if sync is None else sync.sync_state_set_epoch,
                        ),
                    )
                case ApplyBrokerIdCommand():
                    log_events.emit(
                        self.log,
                        log_events.BrokerIdApplied(
                            broker_id=command.new_broker_id, addr=command.broker_address
                        ),
                        broker=command.broker_name,
                    )

    def _after_election(self, command: ElectMasterCommand) -> None:
        name = command.broker_name
        entry = self.replicas.role_change_entry(name)
        if entry is None:
            return
        log_events.emit(
            self.log,
            log_events.ElectMaster(
                broker=name,
                master_id=entry.masterBrokerId,
                master_addr=entry.masterAddress,
                epoch=entry.masterEpoch,
                sync_state_set=sorted(entry.syncStateSet),
                reason=self._elect_reasons.pop(name, "unknown"),
                term=self.node.term,
                candidates=self._elect_candidates.pop(name, None),
            ),
        )
        if not command.new_master_elected or not self.config.notifyBrokerRoleChanged:
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
            body=fastjson.encode(entry.body()),
        )
        error = "timed out"
        with trio.move_on_after(NOTIFY_TIMEOUT_S):
            try:
                await client.invoke_oneway(addr, cmd)
                return
            except RemotingError as e:
                error = str(e)
        # the broker also polls GetReplicaInfo (syncBrokerMetadataPeriod): a lost push heals
        log_events.emit(self.log, log_events.NotifyBrokerRoleChangedFailed(addr=addr, error=error))
