"""The broker's calls to the NameServers (upstream BrokerOuterAPI).

REGISTER_BROKER with the whole topic table (RegisterBrokerBody: TopicConfigSerializeWrapper +
DataVersion), UNREGISTER_BROKER, and the lightweight BROKER_HEARTBEAT. Every NameServer of
namesrvAddr is called concurrently and independently: one slow or dead NameServer never delays
the others, and a failure is logged, never raised (a broker keeps serving without NameServers;
clients then use cached routes). A NameServer the last registration did not reach is retried
sooner than the period: after `FIRST_RETRY_S`, doubling up to the period (`retry_delay`), so a
broker started a moment before its NameServer is registered within seconds, not a period later.
"""

from __future__ import annotations

import zlib
from collections.abc import Awaitable, Callable

import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
)
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    BrokerHeartbeatRequestHeader,
    QueryDataVersionRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_ext, to_ext, to_json

log = structlog.get_logger("broker.outer_api")

FIRST_RETRY_S = 1.0


def retry_delay(period_s: float, previous_s: float | None) -> float:
    """The wait before the next registration while a NameServer is unregistered: `FIRST_RETRY_S`
    after a success (``previous_s`` None), then doubling, never longer than the period."""
    wait = FIRST_RETRY_S if previous_s is None else previous_s * 2
    return min(wait, period_s)


class BrokerOuterAPI:
    def __init__(self, config: BrokerConfig, client: RemotingClient) -> None:
        self.config = config
        self.client = client
        self.registered: dict[str, bool] = {}  # namesrv addr -> last registration succeeded

    @property
    def namesrv_addrs(self) -> list[str]:
        return self.config.namesrv_addrs

    def all_registered(self) -> bool:
        """Whether the last registration (or heartbeat) reached every NameServer."""
        return all(self.registered.get(addr, False) for addr in self.namesrv_addrs)

    async def _each(self, call: Callable[[str], Awaitable[None]]) -> None:
        async with trio.open_nursery() as nursery:
            for addr in self.namesrv_addrs:
                nursery.start_soon(call, addr)

    async def _invoke(self, addr: str, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
        return await self.client.invoke(addr, cmd, timeout_s)

    # ------------------------------------------------------------------ register

    def _register_command(self, wrapper: TopicConfigSerializeWrapper) -> RemotingCommand:
        c = self.config
        body = to_json(RegisterBrokerBody(topicConfigSerializeWrapper=wrapper))
        header = RegisterBrokerRequestHeader(
            brokerName=c.brokerName,
            brokerAddr=c.broker_addr,
            clusterName=c.brokerClusterName,
            haServerAddr=c.ha_addr,
            brokerId=c.brokerId,
            heartbeatTimeoutMillis=c.brokerNotActiveTimeoutMillis,
            enableActingMaster=c.enableSlaveActingMaster,
            compressed=False,
            bodyCrc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        return RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields=to_ext(header), body=body)

    async def register_all(
        self, wrapper: TopicConfigSerializeWrapper
    ) -> dict[str, RegisterBrokerResponseHeader | None]:
        """Register with every NameServer; addr -> response header (None when it failed)."""
        results: dict[str, RegisterBrokerResponseHeader | None] = {}
        timeout_s = self.config.registerBrokerTimeoutMills / 1000

        async def one(addr: str) -> None:
            results[addr] = None
            try:
                resp = await self._invoke(addr, self._register_command(wrapper), timeout_s)
            except RemotingError as e:
                self._failed(addr, events.RegisterBrokerFailed, str(e))
                return
            if resp.code != ResponseCode.SUCCESS:
                self._failed(addr, events.RegisterBrokerFailed, f"code {resp.code}: {resp.remark}")
                return
            try:
                results[addr] = from_ext(RegisterBrokerResponseHeader, resp.ext_fields)
            except HeaderError as e:
                self._failed(addr, events.RegisterBrokerFailed, str(e))
                return
            if not self.registered.get(addr):
                events.emit(
                    log, events.RegisteredToNamesrv(namesrv=addr), broker=self.config.brokerName
                )
            self.registered[addr] = True

        await self._each(one)
        return results

    def _failed(
        self,
        addr: str,
        record: type[events.RegisterBrokerFailed | events.BrokerHeartbeatFailed],
        error: str,
    ) -> None:
        # log a NameServer going bad once, not every period
        if self.registered.get(addr, True):
            events.emit(log, record(namesrv=addr, error=error), broker=self.config.brokerName)
        self.registered[addr] = False

    # ------------------------------------------------------------------ unregister / heartbeat

    async def unregister_all(self) -> None:
        c = self.config
        header = UnRegisterBrokerRequestHeader(
            c.brokerName, c.broker_addr, c.brokerClusterName, c.brokerId
        )
        timeout_s = c.registerBrokerTimeoutMills / 1000

        async def one(addr: str) -> None:
            cmd = RemotingCommand(RequestCode.UNREGISTER_BROKER, ext_fields=to_ext(header))
            try:
                resp = await self._invoke(addr, cmd, timeout_s)
            except RemotingError as e:
                events.emit(log, events.UnregisterBrokerFailed(namesrv=addr, error=str(e)))
                return
            if resp.code != ResponseCode.SUCCESS:
                events.emit(log, events.UnregisterBrokerFailed(namesrv=addr, error=resp.remark))

        await self._each(one)

    async def heartbeat_all(self, topics_version: DataVersion | None = None) -> None:
        """BROKER_HEARTBEAT (904) to every NameServer; with acting master in
        compatibleWithOldNameSrv mode QUERY_DATA_VERSION (322) with the topics' DataVersion
        instead, which an old NameServer also takes as a heartbeat (upstream
        sendHeartbeatViaDataVersion)."""
        c = self.config
        if c.enableSlaveActingMaster and c.compatibleWithOldNameSrv and topics_version:
            await self._heartbeat_via_data_version(topics_version)
            return
        header = BrokerHeartbeatRequestHeader(
            clusterName=c.brokerClusterName,
            brokerAddr=c.broker_addr,
            brokerName=c.brokerName,
            brokerId=c.brokerId,
            heartbeatTimeoutMills=c.brokerNotActiveTimeoutMillis,
        )
        timeout_s = c.sendHeartbeatTimeoutMillis / 1000

        async def one(addr: str) -> None:
            cmd = RemotingCommand(RequestCode.BROKER_HEARTBEAT, ext_fields=to_ext(header))
            try:
                await self._invoke(addr, cmd, timeout_s)
            except RemotingError as e:
                self._failed(addr, events.BrokerHeartbeatFailed, str(e))

        await self._each(one)

    async def _heartbeat_via_data_version(self, version: DataVersion) -> None:
        c = self.config
        header = QueryDataVersionRequestHeader(
            c.brokerName, c.broker_addr, c.brokerClusterName, c.brokerId
        )
        timeout_s = c.sendHeartbeatTimeoutMillis / 1000

        async def one(addr: str) -> None:
            cmd = RemotingCommand(
                RequestCode.QUERY_DATA_VERSION, ext_fields=to_ext(header), body=to_json(version)
            )
            try:
                await self._invoke(addr, cmd, timeout_s)
            except RemotingError as e:
                self._failed(addr, events.BrokerHeartbeatFailed, str(e))

        await self._each(one)
