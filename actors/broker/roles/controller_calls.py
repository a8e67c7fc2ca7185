"""A controller-mode broker's calls to the controller, as typed results (upstream
BrokerOuterAPI's controller half): register, elect, GetReplicaInfo, AlterSyncStateSet and the
oneway BROKER_HEARTBEAT to every replica.

`ControllerCalls` owns the `ControllerLink` (which replica leads, re-asked on
CONTROLLER_NOT_LEADER) and `CallHealth`, which logs a periodic call's failure once and its
recovery once instead of every period. A step that failed for a reason that may pass raises
`StepFailed`; the caller waits and resumes from what is on disk.
"""

from __future__ import annotations

from typing import Any

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.roles.role_core import ControllerView
from rocketrio.actors.client.api import request
from rocketrio.actors.client.controller_admin import ControllerLink
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode, response_name
from rocketrio.protocol.controller_headers import (
    BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
    SyncStateSet,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, from_json

RC = ResponseCode


class StepFailed(Exception):
    """A controller step failed for a reason that may pass: wait, then resume from disk."""


class IdForgotten(Exception):
    """CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: the controller no longer knows our id."""

    def __init__(self, remark: str | None) -> None:
        super().__init__(f"{response_name(RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)}: {remark}")
        self.remark = remark


def sync_body(body: bytes) -> SyncStateSet | None:
    """A SyncStateSet body, None when there is none or it does not parse."""
    if not body:
        return None
    try:
        return from_json(SyncStateSet, body)
    except HeaderError:
        return None


def replica_view(h: GetReplicaInfoResponseHeader, body: bytes) -> ControllerView:
    """A GetReplicaInfo answer as the role core's view (no address: no master)."""
    sync = sync_body(body)
    return ControllerView(
        h.masterBrokerId if h.masterAddress else None,
        h.masterAddress,
        h.masterEpoch or 0,
        None if sync is None else frozenset(sync.syncStateSet),
        None if sync is None else sync.syncStateSetEpoch,
    )


class CallHealth:
    """Log a periodic call's failure once, and its recovery once."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self._failing: set[str] = set()

    def failed(self, what: str, error: str) -> None:
        if what not in self._failing:
            self._failing.add(what)
            events.emit(self.log, events.ControllerCallFailed(call=what, error=error))

    def ok(self, what: str) -> None:
        if what in self._failing:
            self._failing.discard(what)
            events.emit(self.log, events.ControllerCallRecovered(call=what))


class ControllerCalls:
    """The broker's requests to the controller leader (module docstring)."""

    def __init__(self, config: BrokerConfig, client: RemotingClient, health: CallHealth) -> None:
        self.config = config
        self.link = ControllerLink(client, config.controllerAddr)
        self.health = health
        self.log = structlog.get_logger("broker.replicas").bind(
            actor="replicas_manager", broker=config.brokerName
        )

    async def call(self, code: int, header: Any, body: bytes = b"") -> RemotingCommand:
        return await self.link.invoke_leader(request(code, header, body))

    async def find_leader(self) -> str:
        leader = await self.link.find_leader()
        events.emit(self.log, events.ControllerLeaderFound(leader=leader))
        return leader

    async def register(
        self, broker_id: int, addr: str, now_ms: int, *, electable: bool = True
    ) -> tuple[RegisterBrokerToControllerResponseHeader, SyncStateSet | None]:
        """RegisterBrokerToController; IdForgotten when the controller no longer knows our id
        (apply for it again, then retry). ``electable`` False: the catch-up fence holds."""
        cfg = self.config
        header = RegisterBrokerToControllerRequestHeader(
            cfg.brokerClusterName,
            cfg.brokerName,
            broker_id,
            addr,
            now_ms,
            notElectable=not electable,
        )
        resp = await self.call(RequestCode.CONTROLLER_REGISTER_BROKER, header)
        if resp.code == RC.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED:
            raise IdForgotten(resp.remark)
        if resp.code != RC.SUCCESS:
            raise StepFailed(f"RegisterBroker: {response_name(resp.code)}: {resp.remark}")
        return from_ext(RegisterBrokerToControllerResponseHeader, resp.ext_fields), sync_body(
            resp.body
        )

    async def elect(self, broker_id: int) -> ControllerView:
        """Ask the controller to elect a master, naming ourselves (upstream brokerElect);
        StepFailed while the set has no master."""
        cfg = self.config
        header = ElectMasterRequestHeader.of_broker_trigger(
            cfg.brokerClusterName, cfg.brokerName, broker_id
        )
        resp = await self.call(RequestCode.CONTROLLER_ELECT_MASTER, header)
        if resp.code not in (RC.SUCCESS, RC.CONTROLLER_MASTER_STILL_EXIST):
            raise StepFailed(
                f"broker set {cfg.brokerName} has no master: {response_name(resp.code)}: "
                f"{resp.remark}"
            )
        h = from_ext(ElectMasterResponseHeader, resp.ext_fields)
        if h.masterBrokerId is None or h.masterEpoch is None:
            raise StepFailed(f"broker set {cfg.brokerName} has no master yet")
        body = from_json(ElectMasterResponseBody, resp.body) if resp.body else None
        return ControllerView(
            h.masterBrokerId,
            h.masterAddress,
            h.masterEpoch,
            None if body is None else frozenset(body.syncStateSet),
            None if body is None else h.syncStateSetEpoch or 0,
        )

    async def replica_info(self, now_ms: int) -> RemotingCommand:
        """CONTROLLER_GET_REPLICA_INFO (answered after a Raft read barrier: linearizable)."""
        return await self.call(
            RequestCode.CONTROLLER_GET_REPLICA_INFO,
            GetReplicaInfoRequestHeader(self.config.brokerName, now_ms),
        )

    async def heartbeat_all(self, header: BrokerHeartbeatRequestHeader) -> None:
        """BROKER_HEARTBEAT (oneway) to every controller replica, like upstream: whichever
        becomes leader has already heard us."""
        async with trio.open_nursery() as nursery:
            for addr in self.link.addrs:
                nursery.start_soon(self._beat, addr, header)

    async def _beat(self, addr: str, header: BrokerHeartbeatRequestHeader) -> None:
        error = "timed out"
        with trio.move_on_after(self.config.sendHeartbeatTimeoutMillis / 1000):
            try:
                await self.link.remoting.invoke_oneway(
                    addr, request(RequestCode.BROKER_HEARTBEAT, header)
                )
                self.health.ok(f"heartbeat {addr}")
                return
            except RemotingError as e:
                error = str(e)
        self.health.failed(f"heartbeat {addr}", error)
