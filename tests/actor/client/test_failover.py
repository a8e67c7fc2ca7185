"""Clients notice master changes at once (SPEC M7, H7, failover): a real NameServer and Brokers
on the simulated network under a MockClock.

Brokers do not replicate yet, so a controller-mode failover is stood in for by killing the
master of broker-a (host 10.0.1.1) and starting another broker-a, brokerId 0, on 10.0.1.11 with
the same topic config and a fresh store. The route poll stays at its 30 s default, so only the
on-demand refreshes can explain the bounds below.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.actors.client.admin import wait_for_route
from rocketrio.actors.client.api import PullResult
from rocketrio.actors.client.async_send import SendFuture
from rocketrio.actors.client.config import ProducerConfig
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import Message, SendResult, SendStatus
from rocketrio.actors.client.mq_client import DEGRADED_ROUTE_POLL_S
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.queue_select import SelectMessageQueueByHash
from rocketrio.actors.client.remoting import InFlight
from rocketrio.actors.client.route_refresh import ROUTE_REFRESH_MIN_INTERVAL_S
from rocketrio.actors.kernel.remoting import RemotingError, RequestContext
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import PULL_FLAG_COMMIT_OFFSET, PullMessageRequestHeader
from rocketrio.protocol.message import parse_offset_msg_id
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.clients import Cluster, Collector, cluster, consumer, create_topic, wait_for

OLD_HOST, NEW_HOST, SLAVE_HOST = "10.0.1.1", "10.0.1.11", "10.0.1.2"
SEND_PERIOD_S = 0.01
# a failure waits for the next route query (<= one rate-limit interval), then one send: a few
# network round trips of at most 0.5 ms each
FAILOVER_SEND_BOUND_S = ROUTE_REFRESH_MIN_INTERVAL_S + SEND_PERIOD_S + 0.01


def producer(c: Cluster, **kw: Any) -> Producer:
    return Producer("pg", c.ns_addr, rng=random.Random(3), **c.kwargs(), **kw)


def store_host(r: SendResult) -> str:
    return parse_offset_msg_id(r.offset_msg_id)[0]


def registrations(c: Cluster) -> list[tuple[float, str]]:
    """(time, broker address) of every REGISTER_BROKER the NameServer has handled from now on."""
    seen: list[tuple[float, str]] = []
    c.on_namesrv_request(
        RequestCode.REGISTER_BROKER,
        lambda ctx: seen.append((trio.current_time(), ctx.cmd.ext_fields["brokerAddr"])),
    )
    return seen


def route_queries(c: Cluster, topic: str) -> list[float]:
    """When the NameServer answered each GET_ROUTEINFO_BY_TOPIC of ``topic`` from now on."""
    seen: list[float] = []

    def hook(ctx: RequestContext) -> None:
        if ctx.cmd.ext_fields.get("topic") == topic:
            seen.append(trio.current_time())

    c.on_namesrv_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, hook)
    return seen


async def fail_over(c: Cluster, outage_s: float = 1.0) -> float:
    """Kill broker-a's master, wait ``outage_s`` (a controller takes about a second), start the
    new master; returns when the NameServer took its registration."""
    seen = registrations(c)
    c.crash_broker("broker-a")
    await trio.sleep(outage_s)
    await c.start_broker("broker-a-new", NEW_HOST, broker_name="broker-a", topics_from="broker-a")
    return min(t for t, addr in seen if addr == c.addr("broker-a-new"))


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_steady_sends_reach_the_new_master_at_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock, mode: str
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=4)
        ok: list[tuple[float, str]] = []
        failures: list[float] = []

        def on_done(fut: SendFuture) -> None:
            if fut.exception() is None:
                ok.append((trio.current_time(), store_host(fut.result())))
            else:
                failures.append(trio.current_time())

        async with producer(c) as p:
            assert p.client.config.pollNameServerInterval == 30_000

            async def steady() -> None:
                for i in itertools.count():
                    msg = Message("T", f"m{i}".encode())
                    if mode == "async":
                        await p.send_async(msg, on_done)
                    else:
                        try:
                            host = store_host(await p.send(msg))
                            ok.append((trio.current_time(), host))
                        except MQClientError:
                            failures.append(trio.current_time())
                    await trio.sleep(SEND_PERIOD_S)

            async with trio.open_nursery() as n:
                n.start_soon(steady)
                await wait_for(lambda: len(ok) >= 10)
                queries = route_queries(c, "T")
                crashed_at = trio.current_time()
                registered_at = await fail_over(c)
                await wait_for(lambda: any(h == NEW_HOST for _, h in ok), timeout=5)
                await trio.sleep(0.5)
                n.cancel_scope.cancel()

        assert {h for t, h in ok if t < crashed_at} == {OLD_HOST}
        assert not [t for t, _ in ok if crashed_at < t < registered_at]  # a real outage
        assert failures  # sends in the outage failed (no master anywhere)
        first_new = min(t for t, h in ok if h == NEW_HOST)
        assert first_new - registered_at <= FAILOVER_SEND_BOUND_S
        # every send after the switch reaches the new master
        assert {h for t, h in ok if t >= first_new} == {NEW_HOST}
        assert max(failures) < first_new  # sends waiting to retry got the new master too
        # every failure refreshed the route, yet one query per rate-limit interval at most
        assert len(queries) >= (registered_at - crashed_at) / DEGRADED_ROUTE_POLL_S
        gaps = [b - a for a, b in itertools.pairwise(queries)]
        assert min(gaps) >= ROUTE_REFRESH_MIN_INTERVAL_S - 0.001


async def test_a_storm_of_failing_async_sends_makes_few_route_queries(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=4)
        async with producer(c) as p:
            await p.send(Message("T", b"warm"))  # the connection to the master is open
            queries = route_queries(c, "T")
            futs = [await p.send_async(Message("T", f"s{i}".encode())) for i in range(200)]
            assert not any(f.done for f in futs)  # all 200 in flight on one connection
            started = trio.current_time()
            await fail_over(c, outage_s=0.0)
            results = [await f.wait() for f in futs]
            finished = trio.current_time()
        assert {store_host(r) for r in results} == {NEW_HOST}
        assert 1 <= len(queries) <= 3  # not 200, nor 600 (three attempts each)
        assert len(queries) <= 1 + (finished - started) / ROUTE_REFRESH_MIN_INTERVAL_S
        # one query per topic per rate-limit interval (1 ms: network jitter)
        gaps = [b - a for a, b in itertools.pairwise(queries)]
        assert all(gap >= ROUTE_REFRESH_MIN_INTERVAL_S - 0.001 for gap in gaps)
        assert finished - started <= 3 * ROUTE_REFRESH_MIN_INTERVAL_S


async def test_a_closed_connection_refreshes_the_route(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "T", queues=2)
        async with producer(c) as p:
            warm = [await p.send(Message("T", b"w")) for _ in range(4)]
            assert {r.message_queue.brokerName for r in warm} == {"broker-a", "broker-b"}
            queries = route_queries(c, "T")
            c.crash_broker("broker-a")
            crashed_at = trio.current_time()
            await trio.sleep(0.05)
            # no send failed: the closed connection alone asked for the route
            assert len(queries) == 1 and queries[0] - crashed_at < 0.01
            assert [bd.brokerName for bd in p.client.routes["T"].brokerDatas] == ["broker-b"]


async def test_a_new_master_lifts_the_isolation_its_predecessor_earned(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "T", queues=2)
        async with producer(c) as p:
            last = MessageQueue("T", "broker-b", 1)  # round robin: broker-a's queue 0 is next
            while (await p.send(Message("T", b"w"))).message_queue != last:
                pass
            c.crash_broker("broker-a")
            down = [await p.send(Message("T", b"d")) for _ in range(6)]
            assert {r.message_queue.brokerName for r in down} == {"broker-b"}
            # notAvailableDuration is 30 s: only the new master's address can end it early
            assert not p.faults.is_available("broker-a", trio.current_time())
            seen = registrations(c)
            await c.start_broker(
                "broker-a-new", NEW_HOST, broker_name="broker-a", topics_from="broker-a"
            )
            registered_at = min(t for t, _ in seen)
            # the set that left the route is polled every second, not every 30 s
            back: list[tuple[float, SendResult]] = []
            while not any(r.message_queue.brokerName == "broker-a" for _, r in back):
                back.append((trio.current_time(), await p.send(Message("T", b"b"))))
                await trio.sleep(SEND_PERIOD_S)
            assert trio.current_time() - registered_at < 5
        first_a = min(t for t, r in back if r.message_queue.brokerName == "broker-a")
        assert first_a - registered_at <= DEGRADED_ROUTE_POLL_S + SEND_PERIOD_S + 0.01
        assert store_host(back[-1][1]) == NEW_HOST


# -- consumers, classic master/slave ----------------------------------------------------------

Pull = tuple[float, str, MessageQueue, int]  # time, address, queue, sysFlag


def record_pulls(
    api: Any,
    pulls: list[Pull],
    rewrite: Callable[[str, MessageQueue, PullResult], None] | None = None,
) -> None:
    real: Callable[..., Awaitable[PullResult]] = api.pull

    async def pull(addr: str, header: PullMessageRequestHeader, timeout_s: float) -> PullResult:
        mq = MessageQueue(header.topic, "broker-a", header.queueId)
        pulls.append((trio.current_time(), addr, mq, header.sysFlag))
        result = await real(addr, header, timeout_s)
        if rewrite is not None:
            rewrite(addr, mq, result)
        return result

    api.pull = pull


async def master_and_slave(c: Cluster) -> None:
    await c.start_broker(
        "broker-a-s", SLAVE_HOST, broker_name="broker-a", broker_id=1, role=BrokerRole.SLAVE
    )
    async with c.admin() as admin:
        for key in ("broker-a", "broker-a-s"):
            await admin.update_topic("T", broker_addr=c.addr(key), read_queues=4, write_queues=4)
        await wait_for_route(admin, "T")


def first_pull_at(pulls: list[Pull], addr: str, mq: MessageQueue, after: float) -> float | None:
    return min((t for t, a, q, _ in pulls if a == addr and q == mq and t >= after), default=None)


T_QUEUES = [MessageQueue("T", "broker-a", i) for i in range(4)]
# the failed pulls ask for the route at once, then retry after PULL_DELAY_WHEN_BROKER_GONE_S
SLAVE_SWITCH_BOUND_S = 0.1 + 0.01
# a returning master is seen by the degraded-route poll (every second), then pulled at once
MASTER_BACK_BOUND_S = DEGRADED_ROUTE_POLL_S + 0.01


async def test_consumer_reads_from_the_slave_while_the_master_is_down_and_returns(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await master_and_slave(c)
        master, slave = c.addr("broker-a"), c.addr("broker-a-s")
        m = consumer(c, "g", Collector())
        pulls: list[Pull] = []
        record_pulls(m.client.api, pulls)
        offsets_sent: list[tuple[str, MessageQueue, int]] = []
        real_update = m.client.api.update_consumer_offset

        async def update(addr: str, group: str, mq: MessageQueue, offset: int) -> None:
            offsets_sent.append((addr, mq, offset))
            await real_update(addr, group, mq, offset)

        m.client.api.update_consumer_offset = update  # type: ignore[method-assign]
        async with m:
            await wait_for(lambda: all(first_pull_at(pulls, master, q, 0) for q in T_QUEUES))
            c.crash_broker("broker-a")
            crashed_at = trio.current_time()
            await wait_for(
                lambda: all(first_pull_at(pulls, slave, q, crashed_at) for q in T_QUEUES), 5
            )
            to_slave = [first_pull_at(pulls, slave, q, crashed_at) or 0 for q in T_QUEUES]
            assert max(to_slave) - crashed_at <= SLAVE_SWITCH_BOUND_S
            # a slave is not asked to commit offsets with pulls; the offset store sends them
            assert not [f for _, a, _, f in pulls if a == slave and f & PULL_FLAG_COMMIT_OFFSET]
            assert m.offset_store is not None
            m.offset_store.table.update(T_QUEUES[2], 7, increase_only=False)
            await m.offset_store.persist([T_QUEUES[2]])
            assert offsets_sent[-1] == (slave, T_QUEUES[2], 7)
            assert c.brokers["broker-a-s"].tables.offsets.query("g", "T", 2) == 7

            await trio.sleep(2.0)  # pulls held at the slave (15 s suspend)
            await c.start_broker("broker-a", OLD_HOST)  # the master restarts on its store
            back_at = trio.current_time()
            await wait_for(
                lambda: all(first_pull_at(pulls, master, q, back_at) for q in T_QUEUES), 5
            )
            to_master = [first_pull_at(pulls, master, q, back_at) or 0 for q in T_QUEUES]
            assert max(to_master) - back_at <= MASTER_BACK_BOUND_S
            # the returning master heard the consumer's heartbeat at once, not after 30 s
            group = c.brokers["broker-a"].clients.consumers.get("g")
            assert group is not None and group.client_ids() == [m.client.client_id]
            await trio.sleep(1.0)
        t_pulls = [(t, a) for t, a, q, _ in pulls if q in T_QUEUES]
        assert not [t for t, a in t_pulls if crashed_at < t < back_at and a == master]
        assert not [t for t, a in t_pulls if t > max(to_master) and a != master]


async def test_pulls_follow_suggest_which_broker_id(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await master_and_slave(c)
        master, slave = c.addr("broker-a"), c.addr("broker-a-s")
        suggest_slave: set[int] = set()

        def rewrite(addr: str, mq: MessageQueue, result: PullResult) -> None:
            # stands in for a master that tells a lagging consumer to read from its slave
            if addr == master and mq == T_QUEUES[0] and suggest_slave:
                result.suggest_which_broker_id = 1
                suggest_slave.clear()

        m = consumer(c, "g", Collector())
        pulls: list[Pull] = []
        record_pulls(m.client.api, pulls, rewrite)
        async with m:
            await wait_for(lambda: all(first_pull_at(pulls, master, q, 0) for q in T_QUEUES))
            suggest_slave.add(1)
            answered_at = trio.current_time()
            async with producer(c) as p:
                sent = await p.send_to_queue(Message("T", b"x"), T_QUEUES[0])
            await wait_for(lambda: first_pull_at(pulls, slave, T_QUEUES[0], answered_at), 5)
            at_slave = first_pull_at(pulls, slave, T_QUEUES[0], answered_at) or 0
            # the slave answers (held for up to 15 s) suggesting the master again
            await wait_for(lambda: first_pull_at(pulls, master, T_QUEUES[0], at_slave), 20)
        assert sent.message_queue == T_QUEUES[0]
        queue0 = [(a, f) for t, a, q, f in pulls if q == T_QUEUES[0] and t >= answered_at]
        assert queue0[0][0] == slave and not queue0[0][1] & PULL_FLAG_COMMIT_OFFSET
        assert queue0[1][0] == master
        assert [a for _, a, q, _ in pulls if q != T_QUEUES[0]].count(slave) == 0


async def test_a_pull_answered_as_its_route_moves_is_delivered_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The route moves a queue after its pull was answered but before the pull loop resumed:
    the answer is still handled (delivered once, the next pull starts after it), outside the
    abandoned pull's cancelled scope."""
    async with cluster(tmp_path) as c:
        await master_and_slave(c)
        master = c.addr("broker-a")
        moved: list[int] = []
        collector = Collector()
        m = consumer(c, "g", collector)

        def rewrite(addr: str, mq: MessageQueue, result: PullResult) -> None:
            st = m.queues.get(mq)
            if mq == T_QUEUES[0] and result.messages() and not moved and st is not None:
                assert st.pull_scope is not None and st.pull_addr == addr
                st.pull_scope.cancel()  # what _on_route does when the route moves the queue
                moved.append(result.next_begin_offset)

        pulls: list[Pull] = []
        offsets: list[tuple[MessageQueue, int]] = []
        record_pulls(m.client.api, pulls, rewrite)
        real = m.client.api.pull

        async def pull(addr: str, header: PullMessageRequestHeader, timeout_s: float) -> PullResult:
            offsets.append(
                (MessageQueue(header.topic, "broker-a", header.queueId), header.queueOffset)
            )
            return await real(addr, header, timeout_s)

        m.client.api.pull = pull  # type: ignore[method-assign]
        async with m:
            await wait_for(lambda: all(first_pull_at(pulls, master, q, 0) for q in T_QUEUES))
            async with producer(c) as p:
                for i in range(3):
                    await p.send_to_queue(Message("T", b"m%d" % i), T_QUEUES[0])
            await wait_for(lambda: bool(moved) and (T_QUEUES[0], moved[0]) in offsets, 5)
            await trio.sleep(0.5)
        assert len(moved) == 1 and moved[0] >= 1
        assert sorted(msg.body for msg in collector.msgs) == [b"m0", b"m1", b"m2"]
        # every offset pulled once: the abandoned pull's answer moved the queue on
        queue0 = [o for q, o in offsets if q == T_QUEUES[0]]
        assert queue0 == sorted(set(queue0)) and queue0[-1] == 3


async def test_an_ordered_send_is_one_attempt_but_refreshes_the_route(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=4)
        async with producer(c) as p:
            await p.send(Message("T", b"o"), SelectMessageQueueByHash, "k")
            c.crash_broker("broker-a")
            await trio.sleep(0.5)  # the refresh asked for by the closed connection is over
            queries = route_queries(c, "T")
            failed_at = trio.current_time()
            with pytest.raises(RemotingError, match="cannot connect"):
                await p.send(Message("T", b"o"), SelectMessageQueueByHash, "k")
            await trio.sleep(0.05)
        assert len(queries) == 1 and queries[0] - failed_at < 0.01


@pytest.mark.parametrize("retry_not_ok", [False, True])
async def test_a_not_store_ok_answer_is_a_result_unless_configured(
    tmp_path: Path, mock_clock: trio.testing.MockClock, retry_not_ok: bool
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "T", queues=2)
        cfg = ProducerConfig(producerGroup="pg", retryAnotherBrokerWhenNotStoreOK=retry_not_ok)
        async with producer(c, config=cfg) as p:
            real, real_begin = p.client.remoting.invoke, p.client.remoting.begin_nowait
            slow_slave = c.addr("broker-a")

            def slow(resp: RemotingCommand) -> RemotingCommand:
                resp.code = ResponseCode.FLUSH_SLAVE_TIMEOUT  # stored, the slave did not ack
                return resp

            async def invoke(addr: str, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
                resp = await real(addr, cmd, timeout)
                return slow(resp) if addr == slow_slave else resp

            class SlowSlaveCall:  # a send written at once (the watch's path)
                def __init__(self, call: InFlight) -> None:
                    self.call = call
                    self.fail, self.release = call.fail, call.release

                @property
                def done(self) -> bool:
                    return self.call.done

                async def wait(self, timeout: float) -> RemotingCommand:
                    return slow(await self.call.wait(timeout))

            def begin_nowait(addr: str, cmd: RemotingCommand) -> InFlight | SlowSlaveCall | None:
                call = real_begin(addr, cmd)
                return SlowSlaveCall(call) if call is not None and addr == slow_slave else call

            p.client.remoting.invoke = invoke  # type: ignore[method-assign]
            p.client.remoting.begin_nowait = begin_nowait  # type: ignore[method-assign,assignment]
            results = [await p.send(Message("T", f"m{i}".encode())) for i in range(6)]
            async_results = [
                await (await p.send_async(Message("T", b"a"))).wait() for _ in range(4)
            ]
        statuses = {(r.message_queue.brokerName, r.send_status) for r in results}
        if retry_not_ok:
            assert statuses == {("broker-b", SendStatus.SEND_OK)}
        else:
            assert statuses == {
                ("broker-a", SendStatus.FLUSH_SLAVE_TIMEOUT),
                ("broker-b", SendStatus.SEND_OK),
            }
        # async sends never retry an answer (upstream: the flag is for sync sends)
        assert {r.send_status for r in async_results} == {SendStatus.SEND_OK}
