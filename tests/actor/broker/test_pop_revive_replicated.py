"""POP on a controller-mode master whose slave stopped answering (real controller, NameServer
and two brokers on the simulated network under MockClock).

A POP hands its messages out, and moves the group's offsets past them, only once its CK is
stored where no failover cuts it (`PutStatus.kept_by_failover`): a CK answered
FLUSH_SLAVE_TIMEOUT is on the master only, the moved offsets reach the slave by slave sync, and
after a failover the messages would never come back. Both ways a POP is served: without a task
(pop_nowait.py) and on one (a SQL92 selector declines the first).

The revive round re-puts a popped, unacknowledged message to the group's retry topic and then
forgets its CK and moves the revive offset. A re-put answered FLUSH_SLAVE_TIMEOUT is held by
the master only and a failover may cut it, while the revive offset (a consumer offset, copied
by slave sync) survives: the message would never come back. So the CK stays pending until
confirmOffset passes the re-put (store/confirmed_put.py), and the re-put is written once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.simple_consumer import SimpleConsumer
from rocketrio.protocol.bodies import TopicConfig
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.pop_extra_info import pop_retry_topic
from tests.harness.replication import Cluster, awaits_equal, cluster, pair, send, wait_until

TOPIC, GROUP = "PopT", "PopG"
INVISIBLE_S = 5.0
SYNC_FLUSH_TIMEOUT_S = 5  # the broker default (syncFlushTimeout)


def pop_consumer(c: Cluster, host: str) -> SimpleConsumer:
    return SimpleConsumer(
        GROUP,
        c.namesrv_addr,
        transport=c.net.transport(host),
        client_config=ClientConfig(clientIP=host, instanceName="pop"),
        await_duration=0.0,
    )


async def test_a_revive_reput_only_the_master_holds_keeps_its_ck(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 61) as c:
        a, b = await pair(c)
        await trio.sleep(11)  # past the controller's listening window after its election
        a.b.tables.topics.update(TopicConfig(TOPIC, 1, 1))
        for i in range(3):
            resp = await send(c, a, f"m{i}".encode(), 0, topic=TOPIC)
            assert resp.code == RC.SUCCESS, resp.remark
        async with pop_consumer(c, "10.0.9.30") as consumer:
            consumer.subscribe(TOPIC, "*")
            got = await consumer.receive(32, INVISIBLE_S, await_duration=0)
            assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]  # popped, never acked
            # the slave stops answering (a silent split between the two): the set still names it
            c.net.partition([a.b.addr.split(":")[0]], [b.b.addr.split(":")[0]])
            await trio.sleep(INVISIBLE_S + 2 + SYNC_FLUSH_TIMEOUT_S + 1)
            assert await c.sync_state_set() == {1, 2}
            revive = a.b.pop.revive
            # re-put, answered FLUSH_SLAVE_TIMEOUT: the CKs are still pending
            assert revive.inflight(GROUP) == {(TOPIC, 0): 3}
            await wait_until(lambda: awaits_equal(c.sync_state_set(), {1}), "the set shrank")
            await trio.sleep(2)
            assert revive.inflight(GROUP) == {}
            retry = pop_retry_topic(TOPIC, GROUP, False)
            first, entries = a.b.store.view.read_queue_entries(retry, 0, 0, 100)
            assert first == 0 and len(entries) == 3  # each re-put written once


@pytest.mark.parametrize("sql", [None, "TRUE"], ids=["nowait", "task"])
async def test_a_pop_whose_ck_only_the_master_holds_hands_nothing_out(
    sql: str | None, tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 67) as c:
        a, b = await pair(c, enablePropertyFilter=True)
        await trio.sleep(11)
        a.b.tables.topics.update(TopicConfig(TOPIC, 1, 1))
        for i in range(3):
            resp = await send(c, a, f"m{i}".encode(), 0, topic=TOPIC)
            assert resp.code == RC.SUCCESS, resp.remark
        c.net.partition([a.b.addr.split(":")[0]], [b.b.addr.split(":")[0]])
        async with pop_consumer(c, "10.0.9.31") as consumer:
            consumer.subscribe(TOPIC, "*", sql=sql)
            with trio.move_on_after(SYNC_FLUSH_TIMEOUT_S + 2):
                try:
                    await consumer.receive(32, 60.0, await_duration=0)
                except Exception:
                    pass  # the client's request timeout (3 s) is shorter than the CK's wait
            await trio.sleep(SYNC_FLUSH_TIMEOUT_S)
            assert a.b.tables.offsets.query(GROUP, TOPIC, 0) in (-1, 0)  # no offset moved
            await wait_until(lambda: awaits_equal(c.sync_state_set(), {1}), "the set shrank")
            got = await consumer.receive(32, 60.0, await_duration=0)
            assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]
            assert a.b.tables.offsets.query(GROUP, TOPIC, 0) == 3
