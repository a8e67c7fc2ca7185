"""The transaction check round moves its half offset past a half it renewed only once the
renewed copy is as durable as an acknowledged send (store/confirmed_put.py), with a real broker
on SimNetwork + MockClock.

A check renews an undecided half (a copy with one more check) and steps past the old one. A copy
answered FLUSH_SLAVE_TIMEOUT is on the master only: a failover may cut it while the half
offset (a consumer offset, copied by slave sync) survives, and the transaction would never be
checked again. The store's answer is rewritten here to FLUSH_SLAVE_TIMEOUT, and the store's
confirmOffset and mastership are the test's: the round waits while confirmOffset is short of the
copy, writes no second copy meanwhile, and moves on once it passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.actors.broker.transaction.policy import HALF_TOPIC
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.transaction_producer import (
    LocalTransactionState,
    TransactionProducer,
)
from rocketrio.protocol.message import decode_stored
from rocketrio.storage.message_store import PutResult
from tests.harness.clients import cluster, create_topic

S = LocalTransactionState
CHECK_INTERVAL_MS = 5_000
CONFIG: dict[str, Any] = {
    "transactionCheckInterval": CHECK_INTERVAL_MS,
    "transactionTimeOut": 6_000,
    "messageIndexEnable": False,
}


class HalvesOnTheMasterOnly:
    """The transaction queues' store writer: a renewed half is stored, then answered
    FLUSH_SLAVE_TIMEOUT (as a master whose replicas did not ack in time); and the store's
    mastership (epoch 1) and confirmOffset as the test sets them."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.confirm = 0
        self.renewed: list[PutResult] = []

    def _wrap(self, messages: list[Any], on_done: PutCallback) -> PutCallback:
        if messages[0].topic != HALF_TOPIC:
            return on_done

        def answered(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
            if status is PutStatus.PUT_OK:
                self.renewed.extend(results)
                status, remark = PutStatus.FLUSH_SLAVE_TIMEOUT, "the test's slave is slow"
            on_done(results, status, remark)

        return answered

    def put_nowait(self, messages: list[Any], on_done: PutCallback) -> None:
        self.writer.put_nowait(messages, self._wrap(messages, on_done))

    async def put(self, messages: list[Any], on_done: PutCallback) -> None:
        await self.writer.put(messages, self._wrap(messages, on_done))

    def master_epoch(self) -> int | None:
        return 1

    def confirm_offset(self) -> int:
        return self.confirm


async def test_a_renewed_half_only_the_master_holds_keeps_the_half_offset(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, ()) as c:
        broker = await c.start_broker("broker-a", "10.0.1.1", **CONFIG)
        await create_topic(c, "T")
        service = broker.transactions
        store = HalvesOnTheMasterOnly(service.queues.writer)
        service.queues.writer = store

        class Unknown:
            def execute_local_transaction(self, msg: Message, arg: Any) -> S:
                return S.UNKNOW

            def check_local_transaction(self, msg: Any) -> S:
                return S.UNKNOW

        producer = TransactionProducer("pg", c.ns_addr, Unknown(), **c.kwargs())
        async with producer as p:
            await p.send_message_in_transaction(Message("T", b"undecided"))
            # past transactionTimeOut (6 s): the first check renews the half
            await trio.sleep(2 * CHECK_INTERVAL_MS / 1000 + 1)
            assert len(store.renewed) == 1
            assert service.half_offset == 0  # still at the half whose copy is unconfirmed
            await trio.sleep(3 * CHECK_INTERVAL_MS / 1000)
            assert len(store.renewed) == 1  # waiting writes no second copy
            assert service.half_offset == 0
            end = store.renewed[0]
            store.confirm = end.commitlog_offset + end.size  # the replicas caught up
            await trio.sleep(1)
            assert service.half_offset == 1  # past the old half, on to its copy
        got = broker.store.view.get_messages(HALF_TOPIC, 0, 0, 9, 1 << 20)
        halves = [decode_stored(b)[0].body for b in got.buffers]
        assert halves == [b"undecided"] * 2
