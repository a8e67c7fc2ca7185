"""The public client API (`rocketrio.client`) against a real cluster, on asyncio and on Trio:
the same objects, awaited inside each loop (anyio's plugin runs every test once per backend)."""

from __future__ import annotations

import anyio
import pytest
import sniffio

from rocketrio.client import (
    INIT_MODE_MIN,
    ConsumeStatus,
    LitePullConsumer,
    Message,
    Producer,
    PushConsumer,
    SendStatus,
    SimpleConsumer,
)
from tests.harness.system import UpProcess

pytestmark = [pytest.mark.system, pytest.mark.anyio]


async def test_send_sync_async_and_push_consume(
    local_cluster: UpProcess, unique: str, anyio_backend: str
) -> None:
    assert sniffio.current_async_library() == anyio_backend  # really on that loop
    ns, topic = local_cluster.namesrv, f"Backends{unique}"
    async with Producer(f"p{unique}", ns) as producer:
        first = await producer.send(Message(topic, b"m-0", tags="t"))
        assert first.send_status is SendStatus.SEND_OK
        futures = [await producer.send_async(Message(topic, f"m-{i}".encode())) for i in (1, 2)]
        for fut in futures:
            assert (await fut.wait()).send_status is SendStatus.SEND_OK
    got: set[bytes] = set()
    done = anyio.Event()

    def listener(msgs: list) -> ConsumeStatus:
        got.update(m.body for m in msgs)
        if len(got) == 3:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(f"g{unique}", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    async with consumer:
        with anyio.fail_after(30):
            await done.wait()
    assert got == {b"m-0", b"m-1", b"m-2"}


async def test_pop_receive_and_ack(local_cluster: UpProcess, unique: str) -> None:
    ns, topic = local_cluster.namesrv, f"Pop{unique}"
    async with Producer(f"p{unique}", ns) as producer:
        for i in range(3):
            await producer.send(Message(topic, f"j-{i}".encode()))
    acked: set[bytes] = set()
    async with SimpleConsumer(f"g{unique}", ns, await_duration=1.0, init_mode=INIT_MODE_MIN) as c:
        c.subscribe(topic)
        with anyio.fail_after(30):
            while len(acked) < 3:
                for msg in await c.receive(16, 30.0):
                    await c.ack(msg)
                    acked.add(msg.body)
    assert acked == {b"j-0", b"j-1", b"j-2"}


async def test_lite_pull_poll_and_commit(local_cluster: UpProcess, unique: str) -> None:
    ns, topic = local_cluster.namesrv, f"Pull{unique}"
    async with Producer(f"p{unique}", ns) as producer:
        for i in range(4):
            await producer.send(Message(topic, f"r-{i}".encode()))
    got: list[bytes] = []
    consumer = LitePullConsumer(f"g{unique}", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(topic)
    async with consumer:
        with anyio.fail_after(30):
            while len(got) < 4:
                got.extend(m.body for m in await consumer.poll(1.0))
        await consumer.commit()
    assert sorted(got) == [b"r-0", b"r-1", b"r-2", b"r-3"]


async def test_a_dead_name_server_is_a_clear_error_on_both_loops(unique: str) -> None:
    from rocketrio.client import MQClientError, RemotingError

    async with Producer(f"p{unique}", "127.0.0.1:1", send_timeout=1.0) as producer:
        with pytest.raises((MQClientError, RemotingError)):
            await producer.send(Message(f"T{unique}", b"x"))
