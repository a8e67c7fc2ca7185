"""A topic's queues as QUERY_ASSIGNMENT splits them (upstream TopicRouteInfoManager's
getTopicSubscribeInfo): every readable queue of every broker set in the topic's route on the
NameServers, so the consumers of a topic served by several broker sets are split across all of
them whichever broker they ask.

`subscribe_queues` is pure (route -> queues). `TopicQueues` is the shell: a route asked of the
NameServers is kept `CACHE_S` (upstream refreshes its cache every 30 s) in a table of at most
`CACHE_MAX` topics; a broker without NameServers (a test, a lone broker) answers from its own
topic table. No route (an unknown topic, or no NameServer answered) is None: no assignment.
A static topic's logic queues are not mapped (the route's physical queues are used).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.protocol.bodies import PERM_READ, MessageQueue, TopicConfig, TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetRouteInfoRequestHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import HeaderError, from_json, to_ext

CACHE_S = 30.0
CACHE_MAX = 4096
CALL_TIMEOUT_S = 3.0


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """Every readable queue of the route (upstream topicRouteData2TopicSubscribeInfo)."""
    return [
        MessageQueue(topic, qd.brokerName, i)
        for qd in route.queueDatas
        if qd.perm & PERM_READ
        for i in range(qd.readQueueNums)
    ]


def local_queues(topic: str, tc: TopicConfig | None, broker_name: str) -> list[MessageQueue] | None:
    """This broker's own readable queues of ``topic`` (None: no such topic)."""
    if tc is None:
        return None
    if not tc.perm & PERM_READ:
        return []
    return [MessageQueue(topic, broker_name, i) for i in range(tc.readQueueNums)]


class TopicQueues:
    """The queues of a topic, from the NameServers' route (module docstring)."""

    def __init__(
        self,
        client: Callable[[], RemotingClient | None],
        namesrv_addrs: Callable[[], list[str]],
        local: Callable[[str], list[MessageQueue] | None],
    ) -> None:
        self._client = client
        self._namesrv_addrs = namesrv_addrs
        self._local = local
        self._cache: dict[str, tuple[float, list[MessageQueue]]] = {}

    async def queues(self, topic: str) -> list[MessageQueue] | None:
        addrs, client = self._namesrv_addrs(), self._client()
        if not addrs or client is None:
            return self._local(topic)
        now = trio.current_time()
        hit = self._cache.get(topic)
        if hit is not None and now - hit[0] < CACHE_S:
            return hit[1]
        route = await self._route(client, addrs, topic)
        if route is None:
            self._cache.pop(topic, None)
            return None
        if len(self._cache) >= CACHE_MAX:
            self._cache.clear()
        mqs = self._cache[topic] = (now, subscribe_queues(topic, route))
        return mqs[1]

    async def _route(
        self, client: RemotingClient, addrs: list[str], topic: str
    ) -> TopicRouteData | None:
        for ns in addrs:
            cmd = RemotingCommand(
                RequestCode.GET_ROUTEINFO_BY_TOPIC,
                ext_fields=to_ext(GetRouteInfoRequestHeader(topic)),
            )
            try:
                resp = await client.invoke(ns, cmd, CALL_TIMEOUT_S)
                if resp.code == ResponseCode.SUCCESS:
                    return from_json(TopicRouteData, resp.body)
            except (RemotingError, HeaderError, trio.TooSlowError):
                continue
        return None
