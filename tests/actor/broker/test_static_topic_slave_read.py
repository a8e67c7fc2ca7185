"""A slave reads a logic queue whose older generation is on another broker (issue 30 item 3;
classic master/slave on the simulated network, MockClock): a static topic first led by
broker-a is remapped to broker-b; broker-b's slave, holding the mapping its sync wrote, serves
the whole logic queue: the old generation read remotely from broker-a, the new one from its
own replicated store, with the same logic offsets as broker-b's master; and a pull held at the
slave ends when the slave's synced mapping moves its logic queue away."""

from __future__ import annotations

from pathlib import Path

import attrs
import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.api import PullStatus
from rocketrio.actors.client.static_topic_admin import (
    remapping_static_topic,
    update_static_topic,
)
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import PULL_FLAG_SUSPEND
from tests.harness.classic_ha import M, S, classic, until
from tests.harness.clock import now_ms
from tests.harness.static_topic import T, pull_header, raw_send

A = "10.3.0.4"
ADMIN = "10.3.0.8"


async def read_all(admin: MQAdmin, addr: str, gid: int) -> list[int]:
    offset, got = 0, []
    for _ in range(50):
        res = await admin.api.pull(addr, pull_header(gid, offset), 5)
        if res.status is PullStatus.FOUND:
            got += [m.queue_offset for m in res.messages()]
        elif res.status is PullStatus.NO_NEW_MSG:
            return got
        elif res.status is not PullStatus.NO_MATCHED_MSG:
            raise AssertionError(f"pull {gid}@{offset} at {addr}: {res.status}")
        offset = res.next_begin_offset
    raise AssertionError("the logic queue never ended")


async def test_a_slave_reads_the_older_generation_from_the_other_broker(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic(tmp_path, 43) as c:
        await c.start(A, BrokerRole.ASYNC_MASTER, 0, brokerName="broker-a")
        await c.start(M, BrokerRole.ASYNC_MASTER, 0, brokerName="broker-b")
        slave = await c.start(S, BrokerRole.SLAVE, 1, brokerName="broker-b")
        async with MQAdmin(c.ns, c.net.transport(ADMIN)) as admin:
            await trio.sleep(5)  # every broker registered
            await update_static_topic(admin, T, 2, brokers="broker-a", now_ms=now_ms)
            for gid in (0, 1):
                for _ in range(5):
                    r = await raw_send(admin, f"{A}:10911", gid)
                    assert r.code == ResponseCode.SUCCESS, r.remark
            await remapping_static_topic(admin, T, brokers="broker-b", now_ms=now_ms)
            for gid in (0, 1):
                for _ in range(5):
                    r = await raw_send(admin, f"{M}:10911", gid)
                    assert r.code == ResponseCode.SUCCESS, r.remark
            expected = [0, 1, 2, 3, 4, 10000, 10001, 10002, 10003, 10004]
            for gid in (0, 1):
                assert await read_all(admin, f"{M}:10911", gid) == expected
            mapping = slave.tables.mappings
            await until(lambda: T in mapping.table and mapping.table[T].epoch > 0)
            await until(lambda: len(mapping.table[T].hostedQueues.get(0, [])) == 2)

            async def slave_serves_all() -> bool:
                return all([await read_all(admin, f"{S}:10911", g) == expected for g in (0, 1)])

            with trio.fail_after(120):
                while not await slave_serves_all():
                    await trio.sleep(1)


async def test_a_pull_held_at_the_slave_ends_when_the_synced_mapping_moves_its_queue(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A logic queue's pull long-polling at broker-b's slave is answered once the slave's sync
    (every 3 s) brings the mapping that moved the queue to broker-a, not after its 15 s hold."""
    async with classic(tmp_path, 44) as c:
        await c.start(A, BrokerRole.ASYNC_MASTER, 0, brokerName="broker-a")
        await c.start(M, BrokerRole.ASYNC_MASTER, 0, brokerName="broker-b")
        slave = await c.start(S, BrokerRole.SLAVE, 1, brokerName="broker-b")
        async with MQAdmin(c.ns, c.net.transport(ADMIN)) as admin:
            await trio.sleep(5)  # every broker registered
            await update_static_topic(admin, T, 1, brokers="broker-b", now_ms=now_ms)
            for _ in range(3):
                r = await raw_send(admin, f"{M}:10911", 0)
                assert r.code == ResponseCode.SUCCESS, r.remark
            mapping = slave.tables.mappings
            await until(lambda: T in mapping.table and mapping.table[T].leader_id_map() == {0: 0})
            assert await read_all(admin, f"{S}:10911", 0) == [0, 1, 2]
            held = attrs.evolve(
                pull_header(0, 3),
                sysFlag=pull_header(0, 3).sysFlag | PULL_FLAG_SUSPEND,
                suspendTimeoutMillis=15_000,
            )
            answered: list[float] = []

            async def long_poll() -> None:
                res = await admin.api.pull(f"{S}:10911", held, 30)
                assert res.status is PullStatus.NO_NEW_MSG, res.status
                answered.append(trio.current_time())

            async with trio.open_nursery() as n:
                n.start_soon(long_poll)
                await trio.sleep(1)
                assert answered == [] and slave.pull.hold.count == 1  # held at the slave
                await remapping_static_topic(admin, T, brokers="broker-a", now_ms=now_ms)
                moved_at = trio.current_time()
                await until(lambda: mapping.table[T].leader_id_map() == {})
                await until(lambda: bool(answered))
            # within the slave's 3 s sync period (and its answer), well before the 15 s hold
            assert answered[0] - moved_at < 4.0, answered[0] - moved_at
