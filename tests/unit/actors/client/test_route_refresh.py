"""On-demand route refreshes (shared, rate limited), master-aware isolation, the pull back-off
after a broker went away, and what counts as a degraded route."""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing

from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.client.mq_client import route_degraded
from rocketrio.actors.client.pull_api import (
    NoBrokerAddress,
    broker_gone,
    pull_retry_delay,
)
from rocketrio.actors.client.queue_select import FaultTracker
from rocketrio.actors.client.route_refresh import RouteRefresher
from rocketrio.actors.kernel.remoting import RemotingError, RemotingTimeout
from rocketrio.protocol.bodies import BrokerData, QueueData, TopicRouteData
from rocketrio.protocol.codes import ResponseCode


class SlowNameServer:
    """A fetch that takes ``took_s`` and records when each query of a topic started."""

    def __init__(self, took_s: float = 0.02) -> None:
        self.took_s = took_s
        self.starts: dict[str, list[float]] = {}

    async def fetch(self, topic: str) -> None:
        self.starts.setdefault(topic, []).append(trio.current_time())
        await trio.sleep(self.took_s)


async def test_a_storm_of_requests_shares_one_query(mock_clock: trio.testing.MockClock) -> None:
    ns = SlowNameServer()
    refresher = RouteRefresher(ns.fetch, min_interval_s=0.1)
    woken: list[float] = []
    async with trio.open_nursery() as n:

        async def requester() -> None:
            await refresher.request("T", n).wait()
            woken.append(trio.current_time())

        for _ in range(200):
            n.start_soon(requester)
    assert ns.starts == {"T": [0.0]}
    assert woken == [pytest.approx(0.02)] * 200


async def test_a_request_during_a_query_waits_for_the_next_one_rate_limited(
    mock_clock: trio.testing.MockClock,
) -> None:
    # a query already running when a send failed may predate the new master: it does not count
    ns = SlowNameServer()
    refresher = RouteRefresher(ns.fetch, min_interval_s=0.1)
    async with trio.open_nursery() as n:
        first = refresher.request("T", n)
        await trio.sleep(0.01)  # the first query is running
        second = refresher.request("T", n)
        assert second is not first
        other = refresher.request("U", n)  # the limit is per topic
        await first.wait()
        assert not second.is_set()
        await second.wait()
        await other.wait()
    assert ns.starts == {"T": [0.0, 0.1], "U": [0.01]}
    assert refresher.queries == 3


async def test_queries_of_a_topic_start_at_most_once_per_interval(
    mock_clock: trio.testing.MockClock,
) -> None:
    ns = SlowNameServer(took_s=0.0)
    refresher = RouteRefresher(ns.fetch, min_interval_s=0.1)
    async with trio.open_nursery() as n:
        for _ in range(100):  # a request every 10 ms for a second
            refresher.request("T", n)
            await trio.sleep(0.01)
    starts = ns.starts["T"]
    assert len(starts) == 11  # at 0.0, 0.1, ... 1.0 (the last for the requests after 0.9)
    assert all(b - a == pytest.approx(0.1) for a, b in itertools.pairwise(starts))


async def test_a_cancelled_refresher_releases_its_waiters(
    mock_clock: trio.testing.MockClock,
) -> None:
    ns = SlowNameServer(took_s=10.0)
    refresher = RouteRefresher(ns.fetch)
    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as client:
            running = refresher.request("T", client)
            await trio.sleep(1.0)
            queued = refresher.request("T", client)
            client.cancel_scope.cancel()
        with trio.fail_after(0.001):
            await running.wait()
            await queued.wait()
        # a fresh request after the cancellation starts a new query
        again = refresher.request("T", outer)
        await again.wait()
    assert len(ns.starts["T"]) == 2


def test_isolation_ends_when_the_master_address_changes() -> None:
    faults = FaultTracker()
    assert not faults
    faults.mark_unavailable("broker-a", now=100.0, duration_s=30, addr="10.0.1.1:10911")
    assert faults
    assert not faults.is_available("broker-a", 110.0, "10.0.1.1:10911")
    assert not faults.is_available("broker-a", 110.0, None)  # no master in the route yet
    assert not faults.is_available("broker-a", 110.0)
    assert faults.is_available("broker-a", 110.0, "10.0.1.11:10911")  # a new master
    assert not faults  # and the isolation is gone for good
    faults.mark_unavailable("broker-b", now=100.0, duration_s=30)  # address not known
    assert not faults.is_available("broker-b", 110.0, "10.0.2.1:10911")
    assert faults.is_available("broker-b", 130.0, "10.0.2.1:10911")


def test_pull_retry_delay_starts_short_and_backs_off_to_upstreams_3s() -> None:
    delays = [pull_retry_delay(n) for n in range(1, 9)]
    assert delays == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.0, 3.0, 3.0])


@pytest.mark.parametrize(
    ("exc", "gone"),
    [
        (RemotingError("cannot connect"), True),
        (RemotingTimeout("timed out"), True),
        (NoBrokerAddress("no address"), True),
        (MQBrokerError(ResponseCode.SERVICE_NOT_AVAILABLE, "slave"), True),
        (MQBrokerError(ResponseCode.SYSTEM_BUSY, "stopping"), True),
        (MQBrokerError(ResponseCode.SUBSCRIPTION_NOT_EXIST, "no heartbeat"), False),
        (MQBrokerError(ResponseCode.TOPIC_NOT_EXIST, "no topic"), False),
    ],
)
def test_what_counts_as_the_broker_being_gone(exc: Exception, gone: bool) -> None:
    assert broker_gone(exc) is gone


def route(*sets: tuple[str, dict[int, str]], queues: tuple[str, ...] = ()) -> TopicRouteData:
    names = queues or tuple(name for name, _ in sets)
    return TopicRouteData(
        queueDatas=[QueueData(n, 4, 4, 6, 0) for n in names],
        brokerDatas=[
            BrokerData(cluster="c", brokerName=name, brokerAddrs=addrs) for name, addrs in sets
        ],
    )


def test_a_route_is_degraded_when_a_broker_set_has_no_master() -> None:
    assert not route_degraded(route(("a", {0: "x"}), ("b", {0: "y", 1: "z"})))
    assert route_degraded(route(("a", {0: "x"}), ("b", {1: "z"})))  # classic master died
    assert route_degraded(route(("a", {0: "x"}), queues=("a", "b")))  # b has no address
