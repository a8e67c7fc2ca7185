"""The project's own consumers with SQL92 selectors (`subscribe(topic, sql=...)`) against a broker
on SimNetwork + MockClock: push, lite pull and POP (SimpleConsumer) receive exactly the matching
messages; a broker without enablePropertyFilter, or a selector that does not compile, fails
`start()` with the broker's CHECK_CLIENT_CONFIG answer (docs/sql92-filter.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.pull_consumer import LitePullConsumer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.client.simple_consumer import SimpleConsumer
from rocketrio.protocol.codes import ResponseCode
from tests.harness.clients import Cluster, Collector, cluster, create_topic, wait_for

T = "SqlTopic"
SQL = "region = 'eu' AND price BETWEEN 10 AND 20"


def wanted(i: int) -> bool:
    return i % 2 == 0 and 10 <= i <= 20


async def produce(c: Cluster, n: int = 30) -> None:
    async with Producer("pg", c.ns_addr, **c.kwargs()) as p:
        for i in range(n):
            props = {"region": "eu" if i % 2 == 0 else "us", "price": str(i)}
            await p.send(Message(T, f"m{i}".encode(), properties=props))


async def test_push_pull_and_simple_consumers_filter_by_sql(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        await c.start_broker("broker-a", "10.0.1.1", enablePropertyFilter=True)
        await create_topic(c, T)
        await produce(c)
        expect = {f"m{i}".encode() for i in range(30) if wanted(i)}
        got = Collector()
        push = PushConsumer("cg-push", c.ns_addr, **c.kwargs())
        push.subscribe(T, sql=SQL)
        push.register_listener(got)
        async with push:
            await wait_for(lambda: set(got.bodies()) >= expect)
            await trio.sleep(5)  # nothing else arrives
        assert sorted(got.bodies()) == sorted(expect)

        lite = LitePullConsumer("cg-lite", c.ns_addr, **c.kwargs())
        lite.subscribe(T, sql=SQL)
        polled: list[bytes] = []
        async with lite:
            with trio.move_on_after(30):
                while len(polled) < len(expect):
                    polled += [m.body for m in await lite.poll(1.0)]
        assert sorted(polled) == sorted(expect)

        simple = SimpleConsumer("cg-pop", c.ns_addr, **c.kwargs(), await_duration=0.0)
        popped: list[bytes] = []
        async with simple:
            simple.subscribe(T, sql=SQL)
            for _ in range(10):
                for m in await simple.receive(32, 60.0, await_duration=0):
                    popped.append(m.message.body)
                    await simple.ack(m)
        assert sorted(popped) == sorted(expect)


async def test_start_fails_when_the_broker_refuses(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path) as c:  # enablePropertyFilter=false, upstream's default
        await create_topic(c, T)
        push = PushConsumer("cg-off", c.ns_addr, **c.kwargs())
        push.subscribe(T, sql=SQL)
        push.register_listener(Collector())
        with pytest.raises(MQBrokerError) as err:
            async with push:
                pass
        assert err.value.code == ResponseCode.SYSTEM_ERROR
        assert "does not support consumer to filter message by SQL92" in err.value.remark


async def test_start_fails_on_a_bad_selector(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        await c.start_broker("broker-a", "10.0.1.1", enablePropertyFilter=True)
        await create_topic(c, T)
        push = PushConsumer("cg-bad", c.ns_addr, **c.kwargs())
        push.subscribe(T, sql="price BETWEEN 20 AND 10")
        push.register_listener(Collector())
        with pytest.raises(MQBrokerError) as err:
            async with push:
                pass
        assert err.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "Illegal values of between" in err.value.remark
