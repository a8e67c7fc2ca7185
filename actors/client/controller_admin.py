"""Talking to a controller group: `ControllerLink` (find and follow the active controller) and
`ControllerAdmin`, the async API behind the controller commands of ``rocketrio admin``.

Any controller replica answers CONTROLLER_GET_METADATA_INFO and names the leader; every other
call must reach the leader, which is the only replica that serves reads (after a Raft barrier)
and writes. `ControllerLink.invoke_leader` asks the listed replicas for the leader once, sends
there, and on CONTROLLER_NOT_LEADER or a lost connection looks the leader up again and retries
once (the broker's ReplicasManager uses the same link). A write whose answer was lost may have
been applied: every controller write the broker and admin send is safe to resend.

    async with ControllerAdmin("127.0.0.1:9878", "127.0.0.1:9876") as admin:
        info = await admin.get_sync_state_set(["broker-a"])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from rocketrio.actors.client.admin import broker_names_of
from rocketrio.actors.client.api import MQClientAPI, request
from rocketrio.actors.client.errors import MQBrokerError, MQClientError, NotFound, UsageError
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError, RequestHook
from rocketrio.actors.kernel.transport import TcpTransport, Transport
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.controller_headers import (
    BrokerReplicasInfo,
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    ElectMasterResponseBody,
    ElectMasterResponseHeader,
    EpochEntryCache,
    GetMetaDataResponseHeader,
    encode_broker_names,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, from_json

DEFAULT_TIMEOUT_S = 5.0  # above the controller's own 3 s commit wait, so its answer arrives


def split_addrs(addrs: str | Iterable[str]) -> list[str]:
    """``"a:1;b:2"`` or a list -> ["a:1", "b:2"] (blanks dropped, order kept)."""
    items = addrs.split(";") if isinstance(addrs, str) else list(addrs)
    return [a.strip() for a in items if a.strip()]


class ControllerUnavailable(MQClientError):
    """No controller replica answered, or none knows a leader."""


class ControllerLink:
    """The controller replicas of ``controllerAddr`` and the leader last heard of."""

    def __init__(
        self,
        remoting: RemotingClient,
        controller_addrs: str | Iterable[str],
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.addrs = split_addrs(controller_addrs)
        if not self.addrs:
            raise ValueError("no controller address given (controllerAddr)")
        self.remoting = remoting
        self.timeout_s = timeout_s
        self.leader_addr: str | None = None

    async def metadata(self, addr: str) -> GetMetaDataResponseHeader:
        resp = await self.remoting.invoke(
            addr, request(RequestCode.CONTROLLER_GET_METADATA_INFO), self.timeout_s
        )
        if resp.code != ResponseCode.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark, addr)
        return from_ext(GetMetaDataResponseHeader, resp.ext_fields)

    async def any_metadata(self) -> GetMetaDataResponseHeader:
        """The first replica's answer that names a leader, else the first answer at all."""
        errors: list[str] = []
        first: GetMetaDataResponseHeader | None = None
        for addr in self.addrs:
            try:
                meta = await self.metadata(addr)
            except (RemotingError, MQBrokerError, HeaderError) as e:
                errors.append(f"{addr}: {e}")
                continue
            if meta.controllerLeaderAddress:
                return meta
            first = first or meta
        if first is not None:
            return first
        raise ControllerUnavailable("no controller answered: " + "; ".join(errors))

    async def find_leader(self) -> str:
        """Ask the replicas who leads (upstream updateControllerMetadata); remember it."""
        meta = await self.any_metadata()
        if not meta.controllerLeaderAddress:
            self.leader_addr = None
            raise ControllerUnavailable(
                f"controllers {';'.join(self.addrs)} have no leader yet (no majority up?)"
            )
        self.leader_addr = meta.controllerLeaderAddress
        return self.leader_addr

    async def invoke_leader(self, cmd: RemotingCommand) -> RemotingCommand:
        """Send to the leader; follow one leader change. Raises ControllerUnavailable."""
        last = "no attempt"
        for _ in range(2):
            leader = self.leader_addr or await self.find_leader()
            try:
                resp = await self.remoting.invoke(leader, attrs.evolve(cmd), self.timeout_s)
            except RemotingError as e:
                self.leader_addr, last = None, f"{leader}: {e}"
                continue
            if resp.code == ResponseCode.CONTROLLER_NOT_LEADER:
                self.leader_addr, last = None, f"{leader}: {resp.remark}"
                continue
            return resp
        raise ControllerUnavailable(f"controller leader unreachable ({last})")


@attrs.define
class ElectMasterResult:
    header: ElectMasterResponseHeader
    body: ElectMasterResponseBody


def _check(resp: RemotingCommand, addr: str) -> RemotingCommand:
    if resp.code != ResponseCode.SUCCESS:
        raise MQBrokerError(resp.code, resp.remark, addr)
    return resp


class ControllerAdmin:
    """mqadmin's controller commands; `namesrv_addr` is needed to expand a cluster name."""

    def __init__(
        self,
        controller_addr: str | Iterable[str] | None,
        namesrv_addr: str | Iterable[str] | None = None,
        transport: Transport | None = None,
        *,
        request_hook: RequestHook | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.remoting = RemotingClient(transport or TcpTransport(), request_hook=request_hook)
        addrs = split_addrs(controller_addr or "")
        self.link = ControllerLink(self.remoting, addrs, timeout) if addrs else None
        ns = split_addrs(namesrv_addr or "")
        self.api = MQClientAPI(self.remoting, ns, timeout) if ns else None
        self.timeout = timeout

    async def __aenter__(self) -> ControllerAdmin:
        await self.remoting.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.remoting.__aexit__(None, None, None)

    def _controllers(self) -> ControllerLink:
        if self.link is None:
            raise UsageError("this command needs the controller address (-a host:port)")
        return self.link

    def _namesrv(self) -> MQClientAPI:
        if self.api is None:
            raise UsageError("this command needs the name server address (-n host:port)")
        return self.api

    async def _leader_call(self, code: int, header: Any = None, body: bytes = b"") -> Any:
        link = self._controllers()
        resp = await link.invoke_leader(request(code, header, body))
        return _check(resp, link.leader_addr or "controller")

    # -- commands ------------------------------------------------------------------------------

    async def get_controller_metadata(self) -> GetMetaDataResponseHeader:
        """getControllerMetaData: group, leader id and address, peers (any replica answers)."""
        return await self._controllers().any_metadata()

    async def broker_names_of_cluster(self, cluster: str) -> list[str]:
        return broker_names_of(await self._namesrv().get_cluster_info(), cluster)

    async def get_sync_state_set(
        self, broker_names: Iterable[str] | None = None, *, cluster: str | None = None
    ) -> BrokerReplicasInfo:
        """getSyncStateSet for the named broker sets, or every set of `cluster`."""
        names = list(broker_names or [])
        if cluster:
            names.extend(n for n in await self.broker_names_of_cluster(cluster) if n not in names)
        if not names:
            raise UsageError("give broker names (-b) or a cluster (-c with -n)")
        resp = await self._leader_call(
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=encode_broker_names(names)
        )
        return from_json(BrokerReplicasInfo, resp.body)

    async def elect_master(
        self, cluster: str, broker_name: str, broker_id: int
    ) -> ElectMasterResult:
        """electMaster: make `broker_id` master of the set (it must be alive and in sync)."""
        header = ElectMasterRequestHeader.of_admin_trigger(cluster, broker_name, broker_id)
        resp = await self._leader_call(RequestCode.CONTROLLER_ELECT_MASTER, header)
        body = (
            from_json(ElectMasterResponseBody, resp.body)
            if resp.body
            else ElectMasterResponseBody()
        )
        return ElectMasterResult(from_ext(ElectMasterResponseHeader, resp.ext_fields), body)

    async def clean_broker_metadata(
        self,
        cluster: str | None,
        broker_name: str,
        broker_ids: str | Iterable[int] | None = None,
        clean_living: bool = False,
    ) -> None:
        """cleanBrokerMetadata: forget brokerIds ("1;2") of a set, or the whole set."""
        if broker_ids is not None and not isinstance(broker_ids, str):
            broker_ids = ";".join(str(i) for i in sorted(broker_ids))
        header = CleanControllerBrokerDataRequestHeader(
            brokerName=broker_name,
            clusterName=cluster,
            brokerControllerIdsToClean=broker_ids or None,
            isCleanLivingBroker=clean_living,
        )
        await self._leader_call(RequestCode.CLEAN_BROKER_DATA, header)

    async def broker_epoch(self, broker_addr: str) -> EpochEntryCache:
        resp = await self.remoting.invoke(
            broker_addr, request(RequestCode.GET_BROKER_EPOCH_CACHE), self.timeout
        )
        return from_json(EpochEntryCache, _check(resp, broker_addr).body)

    async def get_broker_epoch(
        self,
        broker_addr: str | None = None,
        *,
        cluster: str | None = None,
        broker_name: str | None = None,
    ) -> list[EpochEntryCache]:
        """getBrokerEpoch of one broker address, or of every replica of a set / cluster."""
        if broker_addr:
            return [await self.broker_epoch(broker_addr)]
        if not cluster and not broker_name:
            raise UsageError("give a broker address (-b), a broker name (-bn) or a cluster (-c)")
        info = await self._namesrv().get_cluster_info()
        names = [broker_name] if broker_name else await self.broker_names_of_cluster(cluster or "")
        out = []
        for name in names:
            bd = info.brokerAddrTable.get(name)
            if bd is None:
                raise NotFound(f"broker {name} is not registered in the name server")
            for _bid, addr in sorted(bd.brokerAddrs.items()):
                out.append(await self.broker_epoch(addr))
        return out
