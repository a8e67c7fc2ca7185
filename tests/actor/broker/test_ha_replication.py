"""Replication and failover end to end (H1-H8): real controller, NameServer and brokers in
controller mode on the simulated network under MockClock.

Each test states the user-visible promise it checks: every acknowledged message survives a
master's death and stays where it was acknowledged; a returning old master cuts what was never
acknowledged; consumers never see what a failover could remove; the ack policies; a restarted
master never writes again in its old epoch. (The seeded whole-cluster simulation in tests/sim
checks the same invariants under random faults.)
"""

from __future__ import annotations

import random
from pathlib import Path

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.protocol.bodies import TopicConfig
from rocketrio.protocol.codes import RequestCode
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from tests.harness.replication import (
    CTRL_HOSTS,
    QUEUES,
    TOPIC,
    Acked,
    Cluster,
    Node,
    awaits_equal,
    awaits_true,
    cluster,
    pair,
    send,
    send_many,
    wait_until,
)


async def read_queues(
    c: Cluster, node: Node, topic: str = TOPIC, queues: int = QUEUES
) -> dict[tuple[int, int], bytes]:
    """Every (queue, offset) -> body a consumer can pull from ``node`` now."""
    assert c.client is not None
    out: dict[tuple[int, int], bytes] = {}
    for qid in range(queues):
        offset = 0
        while True:
            header = PullMessageRequestHeader(
                consumerGroup="G", topic=topic, queueId=qid, queueOffset=offset,
                maxMsgNums=32, sysFlag=PULL_FLAG_SUBSCRIPTION, commitOffset=0,
                suspendTimeoutMillis=0, subscription="*", subVersion=0,
            )  # fmt: skip
            cmd = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=to_ext(header))
            resp = await c.client.invoke(node.b.addr, cmd, 10)
            if resp.code != RC.SUCCESS:
                break
            for m in iter_stored(resp.body):
                out[(qid, m.queue_offset)] = m.body
            offset = from_ext(PullMessageResponseHeader, resp.ext_fields).nextBeginOffset
    return out


def assert_all_present(acked: Acked, visible: dict[tuple[int, int], bytes]) -> None:
    missing = {b: pos for b, pos in acked.items() if visible.get(pos) != b}
    assert not missing, f"acknowledged but lost or moved: {sorted(missing.items())[:5]}"


def same_bytes(x: Node, y: Node, upto: int) -> bool:
    return x.b.store.message_store.commitlog.read(
        0, upto
    ) == y.b.store.message_store.commitlog.read(0, upto)


async def test_a_dead_masters_acknowledged_messages_are_all_on_the_new_master(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 31) as c:
        a, b = await pair(c)
        acked: Acked = {}
        assert await send_many(c, a, 40, "before", acked) == 40
        # every acknowledged message is already on the slave, byte for byte
        end = a.b.store.message_store.get_commitlog_max_offset()
        assert b.b.store.message_store.get_commitlog_max_offset() >= end and same_bytes(a, b, end)
        await trio.sleep(11)  # past the controller's listening window after its election
        crashed_at = trio.current_time()
        await a.crash()
        await wait_until(lambda: awaits_true(b.rm.serving_as_master()), "B promoted")
        # a closed connection triggers the election at once
        assert trio.current_time() - crashed_at < 0.5
        assert b.rm.master_epoch == 2
        assert await send_many(c, b, 20, "after", acked) == 20
        assert_all_present(acked, await read_queues(c, b))
        # A returns as B's slave and converges on B's log
        await (await a.start(port=10913)).wait_role()
        assert a.rm.role is BrokerRole.SLAVE
        await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "A back in the set")
        end = b.b.store.message_store.get_commitlog_max_offset()
        await wait_until(lambda: awaits_true(same_bytes(a, b, end)), "A byte-identical to B")
        a_epochs = [(r.epoch, r.start_offset) for r in a.b.store.message_store.epoch_records()]
        b_epochs = [(r.epoch, r.start_offset) for r in b.b.store.message_store.epoch_records()]
        assert a_epochs == b_epochs


async def test_a_new_master_serves_a_topic_its_slave_sync_never_copied(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """A topic created on the master moments before it died (the slave's metadata sync had not
    run yet) is served by the new master exactly as created (the metadata journal in the
    replicated log, issue 26), with every acknowledged message readable, dispatched before the
    promotion or not."""
    async with cluster(tmp_path, 41) as c:
        a, b = await pair(c)
        await trio.sleep(11)  # past the controller's listening window after its election
        a.b.tables.topics.update(
            TopicConfig("Fresh", 12, 12)
        )  # an admin's updateTopic on the master
        acked: dict[bytes, int] = {}
        for qid in (1, 10):
            resp = await send(c, a, f"fresh-{qid}".encode(), qid, topic="Fresh")
            assert resp.code == RC.SUCCESS
            acked[f"fresh-{qid}".encode()] = qid
        assert b.b.tables.topics.select("Fresh") is None  # not synced yet
        await a.crash()
        await wait_until(lambda: awaits_true(b.rm.serving_as_master()), "B promoted")
        tc = b.b.tables.topics.select("Fresh")
        assert tc is not None and tc.readQueueNums == tc.writeQueueNums == 12
        visible = await read_queues(c, b, topic="Fresh", queues=12)
        assert {body: q for (q, _), body in visible.items()} == acked


async def test_the_old_masters_unacknowledged_tail_is_cut_when_it_returns(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 32) as c:
        a, b = await pair(c, syncFlushTimeout=2000)
        acked: Acked = {}
        await send_many(c, a, 10, "ok", acked)
        await trio.sleep(11)
        # A loses its slave and the controller: it can store but never acknowledge
        c.net.partition([a.host], [b.host, CTRL_HOSTS["n0"]])
        tail = [await send(c, a, f"tail-{i}".encode(), 0) for i in range(3)]
        assert all(r.code == RC.FLUSH_SLAVE_TIMEOUT for r in tail)
        stored_end = a.b.store.message_store.get_commitlog_max_offset()
        assert stored_end > b.b.store.message_store.get_commitlog_max_offset()
        # nothing unacknowledged became visible to consumers on A
        visible_on_a = await read_queues(c, a)
        assert not any(body.startswith(b"tail") for body in visible_on_a.values())
        await a.crash()
        c.net.heal()
        await wait_until(lambda: awaits_true(b.rm.serving_as_master()), "B promoted")
        await send_many(c, b, 5, "new", acked)
        await (await a.start(port=10913)).wait_role()
        end = b.b.store.message_store.get_commitlog_max_offset()
        await wait_until(
            lambda: awaits_true(a.b.store.message_store.get_commitlog_max_offset() >= end),
            "A caught up",
        )
        assert same_bytes(a, b, end)
        assert_all_present(acked, await read_queues(c, b))
        assert not any(body.startswith(b"tail") for body in (await read_queues(c, b)).values())


async def test_a_dead_slave_leaves_the_set_and_writes_go_on(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 33) as c:
        a, b = await pair(c)
        await b.crash()
        started = trio.current_time()
        resp = await send(c, a, b"x", 0)
        # acknowledged once the controller accepted the shrink: one controller round trip
        assert resp.code == RC.SUCCESS and trio.current_time() - started < 0.5
        assert await c.sync_state_set() == {1}
        await (await b.start(port=10923)).wait_role()
        await wait_until(
            lambda: awaits_equal(c.sync_state_set(), {1, 2}), "B caught up and rejoined"
        )


async def test_min_in_sync_replicas_refuses_writes_before_the_slave_joins(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 34) as c:
        a = c.node()
        await (await a.start(minInSyncReplicas=2)).wait_role()
        resp = await send(c, a, b"x", 0)
        assert resp.code == RC.SYSTEM_ERROR and "in-sync replicas not enough" in (resp.remark or "")
        assert a.b.store.message_store.get_commitlog_max_offset() == 0  # refused before storing
        b = c.node()
        await (await b.start(minInSyncReplicas=2)).wait_role()
        await wait_until(lambda: awaits_equal(c.sync_state_set(), {1, 2}), "B joined")
        assert (await send(c, a, b"y", 0)).code == RC.SUCCESS


async def test_an_async_learner_replicates_but_never_joins_the_set(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, 35) as c:
        a, b = c.node(), c.node()
        await (await a.start()).wait_role()
        await (await b.start(asyncLearner=True)).wait_role()
        acked: Acked = {}
        await send_many(c, a, 10, "m", acked)
        end = a.b.store.message_store.get_commitlog_max_offset()
        await wait_until(lambda: awaits_true(same_bytes(a, b, end)), "the learner holds everything")
        await trio.sleep(3)
        assert await c.sync_state_set() == {1}


async def test_a_restarted_master_never_writes_again_in_its_old_epoch(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """The controller still names A master at epoch 1 when A comes back (the controller was
    down meanwhile): A asks for an election and writes in a NEW epoch."""
    async with cluster(tmp_path, 36) as c:
        a = c.node()
        await (await a.start()).wait_role()
        acked: Acked = {}
        await send_many(c, a, 5, "e1", acked)
        end = a.b.store.message_store.get_commitlog_max_offset()
        c.crash_controller("n0")
        await a.crash()
        await c.start_controller("n0")
        await (await a.start()).wait_role()
        await wait_until(lambda: awaits_true(a.rm.serving_as_master()), "A master again")
        assert a.rm.master_epoch == 2
        assert [(r.epoch, r.start_offset) for r in a.b.store.message_store.epoch_records()] == [
            (1, 0),
            (2, end),
        ]
        await send_many(c, a, 5, "e2", acked)
        assert_all_present(acked, await read_queues(c, a))


async def test_replication_converges_under_random_cuts_and_delays(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    rng = random.Random(37)
    async with cluster(tmp_path, 37) as c:
        a, b = await pair(c)
        acked: Acked = {}
        for round_ in range(20):
            await send_many(c, a, 3, f"r{round_}", acked)
            if rng.random() < 0.3:
                c.net.cut(a.host, b.host)
            if rng.random() < 0.3:
                c.net.set_delay(a.host, b.host, rng.random() * 0.2)
            await trio.sleep(rng.random())
        c.net.heal()
        end = a.b.store.message_store.get_commitlog_max_offset()
        await wait_until(lambda: awaits_true(same_bytes(a, b, end)), "converged")
        assert_all_present(acked, await read_queues(c, a))
        assert_all_present(acked, await read_queues(c, b))  # the slave dispatched them too


async def test_an_idle_pair_keeps_its_sync_state_set(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # a slave with nothing to copy still acks every haSendHeartbeatInterval (5 s), so an idle
    # master never sees it as "not caught up for haMaxTimeSlaveNotCatchup" (15 s) and the set
    # stays as it is: the slave's timer used to sleep until the deadline it computed before the
    # handshake (housekeeping, 20 s), the first heartbeat came at 20 s and the set shrank once
    async with cluster(tmp_path, 71) as c:
        await pair(c)
        before = await c.sync_state()
        assert before is not None
        for _ in range(120):  # one idle minute, looked at every half second
            await trio.sleep(0.5)
            now = await c.sync_state()
            assert now is not None
            assert (sorted(now.sync_state_set), now.sync_state_set_epoch) == (
                [1, 2],
                before.sync_state_set_epoch,
            ), trio.current_time()
