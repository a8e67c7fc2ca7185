"""Calls from one broker to another for a static topic's older generations (RIP-21 "remote
read"; upstream BrokerOuterAPI's RpcClient with its broker-name address table).

A logic queue's older items may live on other brokers. Their leader reads them with the
ordinary request (PULL_MESSAGE, QUERY_CONSUMER_OFFSET, GET_MIN_OFFSET,
SEARCH_OFFSET_BY_TIMESTAMP) sent with ``lo=false`` and the physical queue id, so the other
broker serves it as a plain physical request. The address of a broker name comes from the
topic's route on the NameServers (every broker holding a physical queue of the topic registers
it), cached and asked again when a call fails.

A call that cannot be made raises `RemoteUnavailable` with a remark a person can act on; the
caller turns it into an answer (never an exception out of a handler).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.protocol.bodies import TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetRouteInfoRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_json, to_ext

MASTER_ID = 0


class RemoteUnavailable(Exception):
    """A call to another broker could not be made (no address, no answer)."""


class RemoteBrokers:
    """Forwards a request to the master of a named broker set."""

    def __init__(
        self,
        client: Callable[[], RemotingClient | None],
        namesrv_addrs: Callable[[], list[str]],
        timeout_s: float = 3.0,
    ) -> None:
        self._client = client
        self._namesrv_addrs = namesrv_addrs
        self.timeout_s = timeout_s
        self._addrs: dict[str, str] = {}

    async def call(
        self, bname: str, topic: str, code: int, header: Any, body: bytes = b""
    ) -> RemotingCommand:
        """``header`` (None: a request without one) and ``body`` to broker set ``bname``'s
        master; its answer, whatever its code."""
        client = self._client()
        if client is None:
            raise RemoteUnavailable("this broker is not started yet")
        ext = to_ext(header) if header is not None else {}
        cmd = RemotingCommand(code, ext_fields=ext, body=body)
        addr = self._addrs.get(bname) or await self._lookup(client, bname, topic)
        try:
            return await client.invoke(addr, cmd, self.timeout_s)
        except RemotingError as e:
            self._addrs.pop(bname, None)  # ask the NameServer again next time
            raise RemoteUnavailable(f"broker {bname} at {addr} did not answer: {e}") from e

    async def call_or_reason(
        self, bname: str, topic: str, code: int, header: Any
    ) -> RemotingCommand | str:
        """`call`, with why it could not be made as a string instead of an exception."""
        try:
            return await self.call(bname, topic, code, header)
        except RemoteUnavailable as e:
            return str(e)

    async def _lookup(self, client: RemotingClient, bname: str, topic: str) -> str:
        errors = []
        for ns in self._namesrv_addrs():
            cmd = RemotingCommand(
                RequestCode.GET_ROUTEINFO_BY_TOPIC,
                ext_fields=to_ext(GetRouteInfoRequestHeader(topic)),
            )
            try:
                resp = await client.invoke(ns, cmd, self.timeout_s)
                if resp.code != ResponseCode.SUCCESS:
                    errors.append(f"{ns}: code {resp.code} {resp.remark}")
                    continue
                route = from_json(TopicRouteData, resp.body)
            except (RemotingError, HeaderError, trio.TooSlowError) as e:
                errors.append(f"{ns}: {e}")
                continue
            for bd in route.brokerDatas:
                if MASTER_ID in bd.brokerAddrs:
                    self._addrs[bd.brokerName] = bd.brokerAddrs[MASTER_ID]
            if bname in self._addrs:
                return self._addrs[bname]
            errors.append(f"{ns}: the route of {topic} names no master of {bname}")
        raise RemoteUnavailable(
            f"no address of broker {bname} (holding an older generation of {topic}): "
            + ("; ".join(errors) or "no NameServer configured")
        )
