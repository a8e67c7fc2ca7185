"""Classic master/slave (H7): fixed brokerRole and brokerId, no controller.

A SYNC_MASTER acknowledges once its slave holds the message (SLAVE_NOT_AVAILABLE with no slave
in sync), an ASYNC_MASTER at once; the slave receives everything byte for byte, copies the
master's topics and offsets, serves reads while the master is down and suggests the master; a
master restarting takes a new epoch, and a slave holding records the master lost cuts them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerRole
from rocketrio.actors.broker.broker import Broker
from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.simple_consumer import SimpleConsumer
from rocketrio.protocol.codes import ResponseCode as RC
from rocketrio.protocol.headers import (
    PullMessageResponseHeader,
)
from rocketrio.protocol.message import iter_stored
from rocketrio.protocol.serde import from_ext
from tests.harness.classic_ha import TOPIC, M, S, classic, until


def log_bytes(b: Broker) -> bytes:
    return b.store.message_store.commitlog.read(0, b.store.message_store.get_commitlog_max_offset())


async def test_sync_master_waits_for_its_slave_and_the_slave_serves_reads(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic(tmp_path, 41) as c:
        m = await c.start(M, BrokerRole.SYNC_MASTER, 0)
        # no slave in sync yet: stored, answered SLAVE_NOT_AVAILABLE (upstream)
        assert (await c.send(M, b"alone")).code == RC.SLAVE_NOT_AVAILABLE
        s = await c.start(S, BrokerRole.SLAVE, 1)
        await until(
            lambda: m.ha_master.connection_count == 1 and len(m.ha_master.gate.core.applied) == 2
        )
        for i in range(10):
            assert (await c.send(M, f"m{i}".encode())).code == RC.SUCCESS
            # acknowledged => already on the slave
            assert (
                s.store.message_store.get_commitlog_max_offset()
                >= m.store.message_store.get_commitlog_max_offset()
            )
        assert log_bytes(s) == log_bytes(m)
        # slave sync copied the topic
        await until(lambda: s.tables.topics.select(TOPIC) is not None)
        c.crash(M)
        resp = await c.pull(S, 0)
        assert resp.code == RC.SUCCESS
        bodies = [msg.body for msg in iter_stored(resp.body)]
        assert bodies == [b"alone", *(f"m{i}".encode() for i in range(10))]
        assert from_ext(PullMessageResponseHeader, resp.ext_fields).suggestWhichBrokerId == 0
        # past its end the slave says "not yet", never "offset moved"
        assert (await c.pull(S, 500)).code == RC.PULL_RETRY_IMMEDIATELY
        # a slave takes no writes
        assert (await c.send(S, b"no")).code != RC.SUCCESS


async def test_async_master_acks_at_once_and_its_slave_catches_up(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic(tmp_path, 42) as c:
        m = await c.start(M, BrokerRole.ASYNC_MASTER, 0)
        for i in range(5):
            assert (await c.send(M, f"a{i}".encode())).code == RC.SUCCESS
        s = await c.start(S, BrokerRole.SLAVE, 1)
        await until(lambda: log_bytes(s) == log_bytes(m))


async def test_a_restarted_master_takes_a_new_epoch_and_its_slave_cuts_what_it_lost(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic(tmp_path, 43) as c:
        m = await c.start(M, BrokerRole.ASYNC_MASTER, 0)
        s = await c.start(S, BrokerRole.SLAVE, 1)
        for i in range(5):
            await c.send(M, f"x{i}".encode())
        await until(lambda: log_bytes(s) == log_bytes(m))
        kept = m.store.message_store.get_commitlog_max_offset()
        for i in range(3):
            await c.send(M, f"lost{i}".encode())
        await until(lambda: log_bytes(s) == log_bytes(m))
        # the master comes back without its last three records (as if never flushed)
        c.crash(M)
        await trio.sleep(0.5)
        m.store.message_store.truncate_to(kept)  # the files as a power cut would have left them
        m.store.message_store.close()
        m2 = await c.start(M, BrokerRole.ASYNC_MASTER, 0)
        assert [(r.epoch, r.start_offset) for r in m2.store.message_store.epoch_records()] == [
            (1, 0),
            (2, kept),
        ]
        await c.send(M, b"fresh")
        # the slave cut lost0..2 (never on the master again) and follows the new epoch
        await until(lambda: log_bytes(s) == log_bytes(m2))
        resp = await c.pull(S, 0)
        assert b"lost0" not in {msg.body for msg in iter_stored(resp.body)}


RETENTION: dict[str, Any] = {
    "fileReservedTime": 0.002,  # 7.2 s
    "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
    "cleanResourceInterval": 1000,
    "deleteCommitLogFilesInterval": 0,
}


def stored_bytes(b: Broker) -> tuple[int, bytes]:
    lo, hi = (
        b.store.message_store.get_commitlog_min_offset(),
        b.store.message_store.get_commitlog_max_offset(),
    )
    return lo, b.store.message_store.commitlog.read(lo, hi - lo)


async def test_master_and_slave_delete_the_same_expired_segments(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic(tmp_path, 43) as c:
        m = await c.start(M, BrokerRole.SYNC_MASTER, 0, **RETENTION)
        s = await c.start(S, BrokerRole.SLAVE, 1, **RETENTION)
        await until(
            lambda: m.ha_master.gate is not None and len(m.ha_master.gate.core.applied) == 2
        )
        body = b"r" * 1000
        for i in range(300):  # about five 64 KiB segments
            assert (await c.send(M, body + b"%04d" % i)).code == RC.SUCCESS
        last = m.store.message_store.retention_segments()[-1][0]
        assert last >= 4 * 64 * 1024
        await trio.sleep(10)
        # both kept only the current segment, byte for byte the same
        assert (
            m.store.message_store.commitlog.segment_bases()
            == [last]
            == s.store.message_store.commitlog.segment_bases()
        )
        assert stored_bytes(m) == stored_bytes(s)
        low = m.store.message_store.get_min_offset(TOPIC, 0)
        assert low == s.store.message_store.get_min_offset(TOPIC, 0) > 0
        # below the min offset: the slave sends the consumer to its master (as upstream,
        # without offsetCheckInSlave), which answers the moved offset
        resp = await c.pull(S, 0)
        assert resp.code == RC.PULL_RETRY_IMMEDIATELY
        assert from_ext(PullMessageResponseHeader, resp.ext_fields).suggestWhichBrokerId == 0
        resp = await c.pull(M, 0)
        assert resp.code == RC.PULL_OFFSET_MOVED
        assert from_ext(PullMessageResponseHeader, resp.ext_fields).nextBeginOffset == low
        first = next(iter_stored((await c.pull(S, low)).body))
        assert first.body == body + b"%04d" % low


async def test_a_slave_that_was_away_while_its_master_deleted_resyncs_from_the_oldest_data(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with classic(tmp_path, 44) as c:
        m = await c.start(M, BrokerRole.ASYNC_MASTER, 0, **RETENTION)
        s = await c.start(S, BrokerRole.SLAVE, 1, **RETENTION)
        for _ in range(50):
            assert (await c.send(M, b"a" * 1000)).code == RC.SUCCESS
        await until(lambda: stored_bytes(s) == stored_bytes(m))
        c.crash(S)
        c.scopes[S].cancel()
        for _ in range(300):
            assert (await c.send(M, b"b" * 1000)).code == RC.SUCCESS
        await trio.sleep(10)  # the master deletes what the slave never got
        assert (
            m.store.message_store.get_commitlog_min_offset()
            > s.store.message_store.get_commitlog_max_offset()
        )
        s2 = await c.start(S, BrokerRole.SLAVE, 1, **RETENTION)
        await until(lambda: stored_bytes(s2) == stored_bytes(m), timeout=60)
        assert s2.store.message_store.get_min_offset(
            TOPIC, 0
        ) == m.store.message_store.get_min_offset(TOPIC, 0)


async def test_a_sync_master_without_its_slave_still_hands_out_pops(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """Its CKs are answered SLAVE_NOT_AVAILABLE (stored, no slave to wait for): nothing
    replaces a classic master, so the POP hands the messages out (`PutStatus.kept_by_failover`),
    unlike a controller-mode master's FLUSH_SLAVE_TIMEOUT (test_pop_revive_replicated.py)."""
    async with classic(tmp_path, 43) as c:
        await c.start(M, BrokerRole.SYNC_MASTER, 0)
        for i in range(3):
            assert (await c.send(M, f"p{i}".encode())).code == RC.SLAVE_NOT_AVAILABLE
        consumer = SimpleConsumer(
            "PG2",
            c.ns,
            transport=c.net.transport("10.3.0.20"),
            client_config=ClientConfig(clientIP="10.3.0.20", instanceName="pop"),
            await_duration=0.0,
        )
        async with consumer:
            consumer.subscribe(TOPIC)
            got = await consumer.receive(32, 60.0, await_duration=0)
        assert sorted(m.body for m in got) == [b"p0", b"p1", b"p2"]
