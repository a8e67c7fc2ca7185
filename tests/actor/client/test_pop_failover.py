"""A POP group follows a failover as fast as a push group (issue 26: chaos runs saw the POP group
read nothing for up to 27 s after a master was suspended, partitioned or killed, while push
groups recovered in about 5 s).

A controller-mode broker set of two replicas (real controller, NameServer and brokers on the
simulated network under MockClock) with the timings `rocketrio up` uses (heartbeat every 200 ms,
deposed after 1 s of silence, scans every 100 ms). A real `Producer` sends every 50 ms, a
`SimpleConsumer` receives and acks in the chaos workload's loop (`cli/chaos/workload.py` `_pop`:
16 messages, invisible 10 s, await 2 s). Then the master freezes (every byte to and from it
held, new connections time out: what SIGSTOP does to its peers), dies, or is cut from the rest
of the cluster but not from the clients for 4 s (chaos's partition-master).

Measured: from the moment the NameServer's route names the new master to the first receive that
returns messages. The cause of the stall was the consumer's stale route: a POP parked at the
hung master was waited out for its whole timeout (3 s + the await), and nothing refreshed the
route after that, so every later POP went to the same hung master until the 30 s route poll.
Now a POP unanswered ``STUCK_AFTER_S`` past its own await (the broker answers a long poll by
then) asks for the route every 0.1 s and is given up as soon as the route names another master;
a failed one refreshes the route too.

Bound: the POP sent just before the route changed is found stuck at most ``await +
STUCK_AFTER_S`` after it was sent, the route then takes one watch poll (``POLL_S``) plus one
rate-limited query (``ROUTE_REFRESH_MIN_INTERVAL_S``), and the next POP at the new master is
answered within the producer's send period and a few simulated round trips (0.1 s allowed):
AWAIT_S + 0.5 + 0.1 + 0.1 + 0.1 = 2.8 s. Before the fix the same runs took 10.0, 15.5 and 21.1 s
(the route poll), after it 1.6-1.7 s. A frozen master's failover must also raise nothing from
`receive`: the given-up POP is sent to the new master inside the same call.

A killed master closes its connections, so the route was refreshed at once even before; but
the POP there failed and the caller's loop slept 0.5 s (0.49 s measured). Now a POP whose
connection failed waits (<= 0.5 s) for the refreshed route and goes to the new master, or
returns nothing while the route has none: bound one route query interval plus the slack, 0.2 s
(0.09 s measured), and no error reaches the caller.

`rocketrio chaos`'s partition-master cuts the master from the cluster but not from the clients:
deposed, it keeps answering the POPs (empty, then as a slave that cannot store a checkpoint), so
no request fails or hangs; the route was looked at only by the 30 s poll (29.1 and 25.1 s
measured). Now a long poll that ended empty refreshes the route before `receive` returns: bound
the same (the POP in flight ends within its await), 1.0-1.1 s measured.

Hand mutants (tests/hand_mutants.py) caught here: the watch never giving a POP up and a
given-up POP raised to the caller instead of re-sent (frozen master), a POP whose connection
failed raised instead of re-sent (killed master), an empty long poll never looking at the route
(deposed master).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.client.route_refresh import ROUTE_REFRESH_MIN_INTERVAL_S
from rocketrio.actors.client.simple_consumer import SimpleConsumer
from rocketrio.actors.client.stuck_sends import POLL_S, STUCK_AFTER_S
from tests.harness.failover_clients import client_kw, produce_forever
from tests.harness.replication import (
    CTRL_HOSTS,
    NS_HOST,
    Cluster,
    Node,
    cluster,
    pair,
    routed_topic,
    wait_until,
)

TOPIC = "PopT"
GROUP = "pop_g"
SEND_PERIOD_S = 0.05
AWAIT_S, INVISIBLE_S = 2.0, 10.0  # the chaos workload's receive
TIMINGS = {"brokerHeartbeatInterval": 200, "controllerHeartBeatTimeoutMills": 1000}
SLACK_S = 0.1  # the producer's send period, round trips (<= 0.5 ms each) of the new POP
POP_RECOVERY_BOUND_S = AWAIT_S + STUCK_AFTER_S + POLL_S + ROUTE_REFRESH_MIN_INTERVAL_S + SLACK_S
# a dead master's connections close: the POP there fails at once, the route is refreshed (one
# rate-limited query at a time) until it names the new master, and the POP goes there
KILL_RECOVERY_BOUND_S = ROUTE_REFRESH_MIN_INTERVAL_S + SLACK_S
PARTITION_HOLD_S = 4.0  # chaos's --hold
PRODUCER_HOST, CONSUMER_HOST = "10.0.9.21", "10.0.9.22"


async def produce(c: Cluster) -> None:
    await produce_forever(c, PRODUCER_HOST, TOPIC, "pop_p", SEND_PERIOD_S)


async def consume(c: Cluster, got: list[tuple[float, str]], errors: list[Exception]) -> None:
    """The chaos workload's POP loop: receive, ack the batch, on an error wait 0.5 s."""
    async with SimpleConsumer(GROUP, c.namesrv_addr, **client_kw(c, CONSUMER_HOST)) as sc:
        sc.subscribe(TOPIC)
        while True:
            try:
                msgs = await sc.receive(16, invisible_duration=INVISIBLE_S, await_duration=AWAIT_S)
            except Exception as e:
                errors.append(e)
                await trio.sleep(0.5)
                continue
            got.extend((trio.current_time(), m.broker_name) for m in msgs)
            if msgs:
                try:
                    await sc.ack_batch(msgs)
                except Exception:  # they come back after the invisible time
                    pass


async def new_master_routed(c: Cluster, b: Node) -> float:
    """When the NameServer first names ``b`` master of broker-a (polled every 10 ms)."""
    with trio.fail_after(60):
        while (await c.namesrv_ids()).get(0) != b.b.addr:
            await trio.sleep(0.01)
    return trio.current_time()


async def run_failover(tmp_path: Path, seed: int, fault: str) -> tuple[float, list[Exception]]:
    """The POP recovery (seconds from the new master in the route to the first POP receive
    that returns messages) after ``fault`` hits the master, and the receives that failed."""
    async with cluster(
        tmp_path, seed, controller_overrides={"scanNotActiveBrokerInterval": 100}
    ) as c:
        a, b = await pair(c, **TIMINGS)
        await routed_topic(c, TOPIC)
        got: list[tuple[float, str]] = []
        errors: list[Exception] = []
        async with trio.open_nursery() as n:
            n.start_soon(produce, c)
            n.start_soon(consume, c, got, errors)
            await trio.sleep(12.0)  # steady state; the slave copied topic and offsets
            assert got, "the POP group consumes before the fault"
            # the fault lands at a random moment of the route poll's 30 s period
            await trio.sleep(random.Random(seed).uniform(0.0, 30.0))
            others = [NS_HOST, b.host, PRODUCER_HOST, CONSUMER_HOST, *CTRL_HOSTS.values()]
            cluster_hosts = [NS_HOST, b.host, *CTRL_HOSTS.values()]
            if fault == "freeze":
                c.net.isolate(a.host, others)
            elif fault == "partition":  # chaos's partition: the clients still reach it
                c.net.isolate(a.host, cluster_hosts)
                n.start_soon(heal_after, c, PARTITION_HOLD_S)
            else:
                await a.crash()
            routed = await new_master_routed(c, b)
            await wait_until(lambda: _after(got, routed), "POP consumes again")
            n.cancel_scope.cancel()
        c.net.heal()
        return next(t for t, _ in got if t > routed) - routed, errors


async def heal_after(c: Cluster, hold_s: float) -> None:
    await trio.sleep(hold_s)
    c.net.heal()


async def _after(got: list[tuple[float, str]], t: float) -> bool:
    return any(at > t for at, _ in got)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_pop_resumes_soon_after_a_frozen_master_is_replaced(
    tmp_path: Path, mock_clock: trio.testing.MockClock, seed: int
) -> None:
    recovery, errors = await run_failover(tmp_path, seed, "freeze")
    assert recovery <= POP_RECOVERY_BOUND_S, f"POP resumed {recovery:.2f}s after the new master"
    # the POP parked at the frozen master is given up and sent to the new one inside the same
    # receive (the route names it within the POP's timeout here): the caller sees no error
    assert not errors, errors


async def test_pop_resumes_soon_after_a_dead_master_is_replaced(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    recovery, errors = await run_failover(tmp_path, 4, "kill")
    assert recovery <= KILL_RECOVERY_BOUND_S, f"POP resumed {recovery:.2f}s after the new master"
    assert not errors, errors  # the POP whose connection closed is not the caller's error


@pytest.mark.parametrize("seed", [5, 6])
async def test_pop_leaves_a_deposed_master_the_clients_still_reach(
    tmp_path: Path, mock_clock: trio.testing.MockClock, seed: int
) -> None:
    """`rocketrio chaos`'s partition-master: the master is cut from the cluster, not from the
    clients, for 4 s. It is deposed, but answers the POP group's long polls (empty: the
    producer moved to the new master) and, back as a slave, keeps answering them (it cannot
    store a checkpoint), so nothing told the consumer to look at its route."""
    recovery, errors = await run_failover(tmp_path, seed, "partition")
    assert recovery <= POP_RECOVERY_BOUND_S, f"POP resumed {recovery:.2f}s after the new master"
    assert not errors, errors
