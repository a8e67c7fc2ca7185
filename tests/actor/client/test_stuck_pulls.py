"""A push consumer follows a frozen master's failover within the broker's pull hold
(client/stuck_pulls.py), not after its 30 s pull timeout and the 30 s route poll.

A controller-mode broker set of two replicas (real controller, NameServer and brokers on the
simulated network under MockClock, `rocketrio up`'s timings), a `Producer` sending every 50 ms
and a `PushConsumer` reading. The master freezes (every byte to and from it held: what SIGSTOP
does to its peers). The pulls parked there are unanswered past the broker's hold (15 s); the
watch then asks for the route, which names the new master, and the pulls move there. The
consumer persists its offsets rarely here (every 120 s): a persist failing at the frozen master
asks for the route as well (offset_store.py), which would move the pulls within ~5-8 s.

Bound, from the freeze: the last pull parked at the frozen master was sent by then, so it is
stuck at most HOLD_S + STUCK_AFTER_S later, seen within one watch poll (POLL_S), its route asked
once (ROUTE_REFRESH_MIN_INTERVAL_S) and the next pull at the new master answered within the
producer's send period and a few simulated round trips (SLACK_S). Without the watch the same
runs read nothing for 30 s or more (the pull's own timeout, then the same address again until
the route poll); the hand mutant "a stuck pull asks for no route" is caught here.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.client.pull_api import QueueState
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.client.route_refresh import ROUTE_REFRESH_MIN_INTERVAL_S
from rocketrio.actors.client.stuck_pulls import POLL_S, stuck_topics
from rocketrio.actors.client.stuck_sends import STUCK_AFTER_S
from rocketrio.protocol.bodies import MessageQueue, SubscriptionData
from tests.harness.failover_clients import client_kw, produce_forever
from tests.harness.replication import (
    CTRL_HOSTS,
    NS_HOST,
    Cluster,
    Node,
    cluster,
    pair,
    routed_topic,
)

TOPIC, GROUP = "PullT", "pull_g"
SEND_PERIOD_S = 0.05
HOLD_S = 15.0  # the push consumer's brokerSuspendMaxTimeMillis
SLACK_S = 0.5
BOUND_S = HOLD_S + STUCK_AFTER_S + POLL_S + ROUTE_REFRESH_MIN_INTERVAL_S + SLACK_S
TIMINGS = {"brokerHeartbeatInterval": 200, "controllerHeartBeatTimeoutMills": 1000}
PRODUCER_HOST, CONSUMER_HOST = "10.0.9.41", "10.0.9.42"


def _state(topic: str, addr: str | None, started: float) -> QueueState:  # in a loop
    st = QueueState(MessageQueue(topic, "broker-a", 0), SubscriptionData(topic, "*"), 0)
    st.pull_addr, st.pull_started = addr, started
    return st


async def test_only_pulls_in_flight_past_the_hold_are_stuck() -> None:
    queues = [
        _state("A", "10.0.0.2:10911", 100.0),  # sent at 100: stuck after 115.5
        _state("B", "10.0.0.2:10911", 101.0),
        _state("C", None, 0.0),  # between pulls
    ]
    assert stuck_topics(queues, 100.0 + HOLD_S + STUCK_AFTER_S, HOLD_S) == set()
    assert stuck_topics(queues, 100.01 + HOLD_S + STUCK_AFTER_S, HOLD_S) == {"A"}
    assert stuck_topics(queues, 200.0, HOLD_S) == {"A", "B"}


async def produce(c: Cluster) -> None:
    await produce_forever(c, PRODUCER_HOST, TOPIC, "pull_p", SEND_PERIOD_S)


async def consume(c: Cluster, got: list[float], ready: trio.Event) -> None:
    def listener(msgs: list[Any]) -> ConsumeStatus:
        got.extend(trio.current_time() for _ in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    kw = client_kw(c, CONSUMER_HOST)
    # offsets persisted rarely: a persist failing at the frozen master asks for the route too,
    # which would hide what the pulls do alone
    kw["client_config"].persistConsumerOffsetInterval = 120_000
    pc = PushConsumer(GROUP, c.namesrv_addr, **kw)
    pc.subscribe(TOPIC, "*")
    pc.register_listener(listener)
    async with pc:
        ready.set()
        await trio.sleep_forever()


async def routed(c: Cluster, b: Node) -> float:
    with trio.fail_after(60):
        while (await c.namesrv_ids()).get(0) != b.b.addr:
            await trio.sleep(0.01)
    return trio.current_time()


@pytest.mark.parametrize("seed", [1, 2])
async def test_a_push_consumer_leaves_a_frozen_master_within_the_pull_hold(
    tmp_path: Path, mock_clock: trio.testing.MockClock, seed: int
) -> None:
    ctrl = {"scanNotActiveBrokerInterval": 100}
    async with cluster(tmp_path, seed, controller_overrides=ctrl) as c:
        a, b = await pair(c, **TIMINGS)
        await routed_topic(c, TOPIC)
        got: list[float] = []
        ready = trio.Event()
        async with trio.open_nursery() as n:
            n.start_soon(produce, c)
            n.start_soon(consume, c, got, ready)
            await ready.wait()
            await trio.sleep(10.0 + random.Random(seed).uniform(0.0, 5.0))
            assert got, "the push group consumes before the fault"
            others = [NS_HOST, b.host, PRODUCER_HOST, CONSUMER_HOST, *CTRL_HOSTS.values()]
            frozen_at = trio.current_time()
            c.net.isolate(a.host, others)
            await routed(c, b)
            with trio.move_on_after(60):
                while not any(t > frozen_at + 0.1 for t in got):
                    await trio.sleep(0.05)
            n.cancel_scope.cancel()
        c.net.heal()
        after = [t for t in got if t > frozen_at + 0.1]
        assert after, "nothing consumed within 60 s of the freeze"
        recovery = after[0] - frozen_at
        assert recovery <= BOUND_S, f"consumed again {recovery:.2f}s after the freeze"
