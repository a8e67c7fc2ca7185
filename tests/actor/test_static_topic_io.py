"""Static topics in use (S3/S4, N5; SimNetwork, MockClock): routes with logic queues, sends to
and pulls from logic queues across a remapping, logic consumer offsets."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing
from test_client_harness import Cluster, cluster, sim_now_ms

from rocketrio.actors.client.admin import MQAdmin, wait_for_route
from rocketrio.actors.client.static_topic_admin import (
    remapping_static_topic,
    update_static_topic,
)
from rocketrio.protocol.bodies import TopicRouteData

T = "ST"
LQ = "__syslo__global__"


async def route_until(admin: MQAdmin, pred: object, timeout: float = 60.0) -> TopicRouteData:
    """The topic's route once ``pred(route)`` holds (brokers register asynchronously)."""
    with trio.fail_after(timeout):
        while True:
            route = await wait_for_route(admin, T)
            if pred(route):  # type: ignore[operator]
                return route
            await trio.sleep(0.5)


def leaders(route: TopicRouteData) -> dict[int, str]:
    """logic id -> the broker that registered it as led."""
    out: dict[int, str] = {}
    for name, info in sorted((route.topicQueueMappingByBroker or {}).items()):
        for gid in info.currIdMap:
            out[gid] = name
    return out


async def static_topic(c: Cluster, admin: MQAdmin, queues: int = 8) -> None:
    await update_static_topic(admin, T, queues, clusters="DefaultCluster", now_ms=sim_now_ms)


async def test_the_route_carries_each_brokers_mapping_info(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c, c.admin() as admin:
        await static_topic(c, admin)
        route = await route_until(admin, lambda r: len(leaders(r)) == 8)
        assert route.topicQueueMappingByBroker is not None
        infos = route.topicQueueMappingByBroker
        assert sorted(infos) == ["broker-a", "broker-b"]
        assert all(i.totalQueues == 8 and i.bname == n for n, i in infos.items())
        assert sorted(leaders(route).values()).count("broker-a") == 4
        # the mapping's physical ids: each broker's 4 queues
        assert all(sorted(i.currIdMap.values()) == [0, 1, 2, 3] for i in infos.values())

        await c.start_broker("broker-c", "10.0.1.3")
        await remapping_static_topic(
            admin, T, brokers="broker-a,broker-b,broker-c", now_ms=sim_now_ms
        )
        route = await route_until(
            admin, lambda r: "broker-c" in set(leaders(r).values()) and len(leaders(r)) == 8
        )
        assert sorted(leaders(route).values()).count("broker-c") == 3
