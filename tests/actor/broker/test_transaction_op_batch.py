"""Op records batched per turn (actors/broker/transaction/op_batch.py) with a real broker on
SimNetwork + MockClock: many transactions ended at once are decided by fewer op messages than
transactions, every half is named by an op before any check round runs, and after a kill -9 and
a restart (no key index: a missing op could not be repaired by a lookup) no decided transaction
is checked again, every commit is in its topic exactly once and no rollback is; a commit the
store refused gets no op, so the check commits it later (END_TRANSACTION without a task,
end_path.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import FlushDiskType
from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.actors.broker.transaction.policy import HALF_TOPIC, OP_TOPIC, decode_op_body
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
)
from rocketrio.protocol.message import MessageExt, decode_stored
from tests.harness.clients import Cluster, cluster, create_topic, wait_for

S = LocalTransactionState
CHECK_INTERVAL_MS = 5_000
CONFIG: dict[str, Any] = {
    "transactionCheckInterval": CHECK_INTERVAL_MS,
    "transactionTimeOut": 6_000,
    "flushDiskType": FlushDiskType.SYNC_FLUSH,
    "messageIndexEnable": False,
}


class Listener:
    """Commits a body starting with ``c``, rolls back the others; records every check."""

    def __init__(self) -> None:
        self.checked: list[MessageExt] = []

    def execute_local_transaction(self, msg: Message, arg: Any) -> S:
        return S.COMMIT_MESSAGE if msg.body.startswith(b"c") else S.ROLLBACK_MESSAGE

    def check_local_transaction(self, msg: MessageExt) -> S:
        self.checked.append(msg)
        return S.UNKNOW


def read_queue(c: Cluster, topic: str, queue_id: int = 0) -> list[MessageExt]:
    got = c.brokers["broker-a"].store.view.get_messages(topic, queue_id, 0, 10_000, 64 << 20)
    return [decode_stored(b)[0] for b in got.buffers]


def decided(c: Cluster) -> list[int]:
    return sorted(o for op in read_queue(c, OP_TOPIC) for o in decode_op_body(op.body))


async def test_ops_of_many_ends_batched_name_every_half_and_survive_a_restart(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        await c.start_broker("broker-a", "10.0.1.1", **CONFIG)
        await create_topic(c, "T")
        listener = Listener()
        bodies = [f"{'c' if i % 5 else 'r'}{i:02}".encode() for i in range(40)]
        producer = TransactionProducer("pg", c.ns_addr, listener, **c.kwargs())
        async with producer as p:
            async with trio.open_nursery() as n:
                for body in bodies:
                    n.start_soon(p.send_message_in_transaction, Message("T", body))
            # END_TRANSACTION is oneway: its ops land shortly after, before any check round
            await wait_for(lambda: decided(c) == list(range(40)), timeout=2.0)
            ops = read_queue(c, OP_TOPIC)
            assert len(ops) < 20  # merged: 40 transactions, far fewer op messages
            assert len(read_queue(c, HALF_TOPIC)) == 40
            c.crash_broker("broker-a")  # kill -9
            await trio.sleep(1)
            await c.start_broker("broker-a", "10.0.1.1", **CONFIG)
            await trio.sleep(4 * CHECK_INTERVAL_MS / 1000)  # check rounds past the timeout
        assert listener.checked == []  # every transaction was decided by an op
        real = sorted(m.body for q in range(4) for m in read_queue(c, "T", q))
        assert real == sorted(b for b in bodies if b.startswith(b"c"))


class RefuseFirstCommit:
    """The transaction service's store writer, refusing the first put to ``topic`` (a commit)
    as a store that could not write it would; every other put goes to the store."""

    def __init__(self, writer: Any, topic: str) -> None:
        self.writer, self.topic, self.refused = writer, topic, 0

    def _refuse(self, messages: list[Any], on_done: PutCallback) -> bool:
        if self.refused or messages[0].topic != self.topic:
            return False
        self.refused += 1
        on_done([], PutStatus.SERVICE_NOT_AVAILABLE, "refused by the test")
        return True

    def put_nowait(self, messages: list[Any], on_done: PutCallback) -> None:
        if not self._refuse(messages, on_done):
            self.writer.put_nowait(messages, on_done)

    async def put(self, messages: list[Any], on_done: PutCallback) -> None:
        if not self._refuse(messages, on_done):
            await self.writer.put(messages, on_done)


async def test_a_commit_the_store_refused_gets_no_op_and_is_committed_by_the_check(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """END_TRANSACTION's commit refused by the store: its op is not written (the half stays
    undecided), so the check round asks the producer and the commit then reaches the topic,
    once."""
    async with cluster(tmp_path, ()) as c:
        broker = await c.start_broker("broker-a", "10.0.1.1", **CONFIG)
        await create_topic(c, "T")
        service = broker.transactions
        service.writer = RefuseFirstCommit(service.writer, "T")
        listener = Listener()
        listener.check_local_transaction = lambda msg: (  # type: ignore[method-assign]
            listener.checked.append(msg) or S.COMMIT_MESSAGE
        )
        producer = TransactionProducer("pg", c.ns_addr, listener, **c.kwargs())
        async with producer as p:
            await p.send_message_in_transaction(Message("T", b"c-refused"))
            await wait_for(lambda: service.writer.refused == 1, timeout=2.0)
            await trio.sleep(0.5)
            assert decided(c) == []  # no op for the refused commit
            await trio.sleep(3 * CHECK_INTERVAL_MS / 1000)  # past transactionTimeOut: checked
        assert [m.body for m in listener.checked] == [b"c-refused"]
        real = [m.body for q in range(4) for m in read_queue(c, "T", q)]
        assert real == [b"c-refused"]


class FullInboxForCommits:
    """The transaction service's store writer with an inbox that is full whenever a commit to
    ``topic`` is queued without waiting (``put_nowait`` raises WouldBlock), as under a burst of
    ENDs; the awaited ``put`` (backpressure) then takes it."""

    def __init__(self, writer: Any, topic: str) -> None:
        self.writer, self.topic, self.full = writer, topic, 0

    def put_nowait(self, messages: list[Any], on_done: PutCallback) -> None:
        if messages[0].topic == self.topic:
            self.full += 1
            raise trio.WouldBlock
        self.writer.put_nowait(messages, on_done)

    async def put(self, messages: list[Any], on_done: PutCallback) -> None:
        await self.writer.put(messages, on_done)


async def test_an_end_whose_commit_meets_a_full_store_inbox_waits_and_commits_once(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    """END_TRANSACTION without a coroutine (end_path.py) hands its commit over without waiting;
    when the store's inbox is full it waits for room instead (the connection's backpressure):
    every commit still reaches its topic once and every op is written, with no check round."""
    async with cluster(tmp_path, ()) as c:
        broker = await c.start_broker("broker-a", "10.0.1.1", **CONFIG)
        await create_topic(c, "T")
        service = broker.transactions
        service.writer = FullInboxForCommits(service.writer, "T")
        listener = Listener()
        bodies = [f"c{i:02}".encode() for i in range(6)]
        producer = TransactionProducer("pg", c.ns_addr, listener, **c.kwargs())
        async with producer as p:
            async with trio.open_nursery() as n:
                for body in bodies:
                    n.start_soon(p.send_message_in_transaction, Message("T", body))
            await wait_for(lambda: decided(c) == list(range(6)), timeout=2.0)
            assert service.writer.full == 6  # every commit met the full inbox
            real = sorted(m.body for q in range(4) for m in read_queue(c, "T", q))
            assert real == bodies  # before any check round: the ENDs did it
        assert listener.checked == []
