"""END_TRANSACTION takes its half from the cache of recently stored halves (half_cache.py), with
a real broker on SimNetwork + MockClock: every END of a burst is served from the cache, each
commit reaches its topic once as the real message (no transaction property left in, the commit
bits set, the half's offset as its prepared offset, read from what reached the disk), no
rollback does; a role change empties the cache, so an END after it reads its half back from
the CommitLog and still commits once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import FlushDiskType
from rocketrio.actors.broker.transaction.policy import (
    HALF_TOPIC,
    OP_TOPIC,
    decode_op_body,
    transaction_value,
)
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
    end_header,
)
from rocketrio.protocol.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_COMMIT_TYPE,
    MessageExt,
    decode_stored,
)
from tests.harness.clients import cluster, create_topic, wait_for

S = LocalTransactionState
CONFIG: dict[str, Any] = {
    "transactionCheckInterval": 5_000,
    "transactionTimeOut": 6_000,
    "flushDiskType": FlushDiskType.SYNC_FLUSH,
    "messageIndexEnable": False,
}


class Listener:
    """Commits a body starting with ``c``, rolls back the others; no check expected."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> S:
        return S.COMMIT_MESSAGE if msg.body.startswith(b"c") else S.ROLLBACK_MESSAGE

    def check_local_transaction(self, msg: MessageExt) -> S:
        return S.UNKNOW


def read_queue(c: Any, topic: str, queue_id: int = 0) -> list[MessageExt]:
    got = c.brokers["broker-a"].store.view.get_messages(topic, queue_id, 0, 10_000, 64 << 20)
    return [decode_stored(b)[0] for b in got.buffers]


def decided(c: Any) -> list[int]:
    return sorted(o for op in read_queue(c, OP_TOPIC) for o in decode_op_body(op.body))


def committed(c: Any) -> list[MessageExt]:
    return [m for q in range(4) for m in read_queue(c, "T", q)]


async def test_every_end_of_a_burst_takes_its_half_from_the_cache_and_commits_it_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        broker = await c.start_broker("broker-a", "10.0.1.1", **CONFIG)
        await create_topic(c, "T")
        cache = broker.transactions.halves
        bodies = [f"{'c' if i % 4 else 'r'}{i:02}".encode() for i in range(32)]
        producer = TransactionProducer("pg", c.ns_addr, Listener(), **c.kwargs())
        async with producer as p:
            async with trio.open_nursery() as n:
                for body in bodies:
                    n.start_soon(p.send_message_in_transaction, Message("T", body))
            await wait_for(lambda: decided(c) == list(range(32)), timeout=2.0)
        assert (cache.hits, cache.misses, len(cache)) == (32, 0, 0)
        halves = {m.commitlog_offset: m for m in read_queue(c, HALF_TOPIC)}
        commits = committed(c)
        assert sorted(m.body for m in commits) == sorted(b for b in bodies if b[:1] == b"c")
        for m in commits:
            assert transaction_value(m.sys_flag) == TRANSACTION_COMMIT_TYPE
            for gone in (
                PROPERTY_REAL_TOPIC,
                PROPERTY_REAL_QUEUE_ID,
                PROPERTY_TRANSACTION_PREPARED,
            ):
                assert gone not in m.properties
            half = halves[m.prepared_transaction_offset]
            assert half.body == m.body and half.properties["UNIQ_KEY"] == m.properties["UNIQ_KEY"]


class Unknown(Listener):
    """Leaves every transaction unknown: the producer's END decides nothing, the half waits."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> S:
        return S.UNKNOW


async def test_a_role_change_empties_the_cache_and_the_end_reads_its_half_back(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        broker = await c.start_broker("broker-a", "10.0.1.1", **CONFIG)
        await create_topic(c, "T")
        service = broker.transactions
        producer = TransactionProducer("pg", c.ns_addr, Unknown(), **c.kwargs())
        async with producer as p:
            await p.send_message_in_transaction(Message("T", b"c-late"))
            await wait_for(lambda: len(service.halves) == 1, timeout=2.0)
            broker.on_acting_change(False)  # a role change: what was cached may be stale
            assert len(service.halves) == 0
            # the producer decides now (as a check's answer would): read back, committed once
            (half,) = read_queue(c, HALF_TOPIC)
            header = end_header(
                "pg", S.COMMIT_MESSAGE, tran_state_table_offset=half.queue_offset,
                commit_log_offset=half.commitlog_offset, msg_id=half.properties["UNIQ_KEY"],
                topic="T", transaction_id=None, broker_name=None, from_check=False,
            )  # fmt: skip
            assert await service.end_transaction(header) is None
            assert await service.end_transaction(header) is None  # a duplicate: nothing
        assert (service.halves.hits, service.halves.misses) == (0, 2)
        assert [m.body for m in committed(c)] == [b"c-late"]
        assert decided(c) == [0]
