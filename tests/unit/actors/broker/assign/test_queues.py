"""A topic's queues as QUERY_ASSIGNMENT splits them (actors/broker/assign/queues.py): every
readable queue of every broker set in the NameServers' route; a broker without NameServers
answers from its own topic table; the route is asked again once `CACHE_S` has passed."""

from __future__ import annotations

import trio
import trio.testing

from rocketrio.actors.broker.assign.queues import (
    CACHE_S,
    TopicQueues,
    local_queues,
    subscribe_queues,
)
from rocketrio.protocol.bodies import MessageQueue, QueueData, TopicConfig, TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import to_json

ROUTE = TopicRouteData(
    queueDatas=[
        QueueData("broker-a", 2, 2, 6),
        QueueData("broker-b", 1, 1, 2),  # write only: not a queue to consume from
        QueueData("broker-c", 1, 3, 4),
    ]
)


def test_the_routes_readable_queues_of_every_broker() -> None:
    assert subscribe_queues("T", ROUTE) == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-c", 0),
    ]


def test_the_local_table() -> None:
    assert local_queues("T", None, "b") is None
    assert local_queues("T", TopicConfig("T", 2, 2, 2), "b") == []
    assert local_queues("T", TopicConfig("T", 2, 4, 6), "b") == [
        MessageQueue("T", "b", 0),
        MessageQueue("T", "b", 1),
    ]


class FakeNamesrv:
    def __init__(self) -> None:
        self.asked = 0

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        assert cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
        self.asked += 1
        if cmd.ext_fields["topic"] != "T":
            return RemotingCommand(ResponseCode.TOPIC_NOT_EXIST)
        return RemotingCommand(ResponseCode.SUCCESS, body=to_json(ROUTE))


async def test_the_route_is_cached_then_asked_again(mock_clock: trio.testing.MockClock) -> None:
    ns = FakeNamesrv()
    source = TopicQueues(lambda: ns, lambda: ["ns:9876"], lambda _t: None)  # type: ignore[arg-type,return-value]
    assert len(await source.queues("T") or []) == 3
    await source.queues("T")
    assert ns.asked == 1
    await trio.sleep(CACHE_S)
    await source.queues("T")
    assert ns.asked == 2
    assert await source.queues("NoTopic") is None


async def test_without_namesrvs_the_local_table_answers() -> None:
    mine = [MessageQueue("T", "b", 0)]
    source = TopicQueues(lambda: None, lambda: [], lambda t: mine if t == "T" else None)
    assert await source.queues("T") == mine and await source.queues("U") is None
