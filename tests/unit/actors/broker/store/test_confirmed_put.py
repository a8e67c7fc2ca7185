"""`put_confirmed` (actors/broker/store/confirmed_put.py): a broker's own re-put that moves an
offset counts as done only once it is as durable as an acknowledged send. Cluster simulation
seed 303789: the schedule service moved its delay offset past a re-put answered
FLUSH_SLAVE_TIMEOUT, the failover cut the re-put, and a consumer's send-back never came back."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.confirmed_put import CONFIRM_POLL_S, put_confirmed
from rocketrio.actors.broker.store.messages import PutAnswer, PutCallback
from rocketrio.storage.message_store import MessageToStore, PutResult

MSGS = [MessageToStore(topic="%RETRY%G", queue_id=0, body=b"x")]
AT, SIZE = 1000, 200  # the re-put's place in the CommitLog: it ends at 1200


class Store:
    """The store actor as `put_confirmed` sees it: answers each put with ``status``."""

    def __init__(self, status: PutStatus, *, epoch: int | None = 3) -> None:
        self.status = status
        self.epoch = epoch
        self.confirm = 0
        self.puts = 0

    def answer(self, on_done: PutCallback) -> None:
        self.puts += 1
        results = [PutResult(AT, SIZE, 7, "", 0)] if self.status.stored else []
        on_done(results, self.status, None)

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self.answer(on_done)

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self.answer(on_done)

    async def put_batch(self, put: Any) -> None:
        pytest.fail("no batch put here")

    def put_batch_nowait(self, put: Any) -> None:
        pytest.fail("no batch put here")

    def master_epoch(self) -> int | None:
        return self.epoch

    def confirm_offset(self) -> int:
        return self.confirm


async def put_into(got: list[PutAnswer | str], store: Store, **kw: Any) -> None:
    got.append(await put_confirmed(store, MSGS, **kw))


@pytest.mark.parametrize("status", [PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT])
async def test_an_acknowledged_put_is_done_at_once(
    status: PutStatus, mock_clock: trio.testing.MockClock
) -> None:
    store = Store(status)
    got = await put_confirmed(store, MSGS)
    assert isinstance(got, PutAnswer) and got.status is status
    assert store.puts == 1


async def test_a_put_that_stored_nothing_is_not_done(mock_clock: trio.testing.MockClock) -> None:
    store = Store(PutStatus.SERVICE_NOT_AVAILABLE)
    why = await put_confirmed(store, MSGS)
    assert isinstance(why, str) and why.startswith("SERVICE_NOT_AVAILABLE")


@pytest.mark.parametrize("status", [PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE])
async def test_a_put_only_the_master_holds_waits_for_confirm_offset(
    status: PutStatus, mock_clock: trio.testing.MockClock
) -> None:
    store = Store(status)
    got: list[PutAnswer | str] = []
    async with trio.open_nursery() as n:
        n.start_soon(put_into, got, store)
        await trio.sleep(30)
        assert got == []  # not done while the replicas have not confirmed it
        store.confirm = AT + SIZE - 1
        await trio.sleep(1)
        assert got == []  # short of the re-put's end by a byte
        store.confirm = AT + SIZE
        await trio.sleep(CONFIRM_POLL_S)
    assert len(got) == 1 and isinstance(got[0], PutAnswer) and got[0].status is status
    assert got[0].results[0].commitlog_offset == AT
    assert store.puts == 1  # waited: no second copy written


@pytest.mark.parametrize("after", [None, 4])  # not master any more; master of another epoch
async def test_a_mastership_that_ends_first_leaves_the_put_not_done(
    after: int | None, mock_clock: trio.testing.MockClock
) -> None:
    store = Store(PutStatus.FLUSH_SLAVE_TIMEOUT)
    got: list[PutAnswer | str] = []
    async with trio.open_nursery() as n:
        n.start_soon(put_into, got, store)
        await trio.sleep(5)
        store.epoch = after
        store.confirm = 10**9  # the next mastership's confirmOffset says nothing of this put
        await trio.sleep(CONFIRM_POLL_S)
    assert len(got) == 1 and isinstance(got[0], str) and "ended" in got[0]


async def test_a_stopping_caller_stops_waiting(mock_clock: trio.testing.MockClock) -> None:
    store = Store(PutStatus.FLUSH_SLAVE_TIMEOUT)
    stopping = [False]
    got: list[PutAnswer | str] = []
    async with trio.open_nursery() as n:
        n.start_soon(partial(put_into, got, store, give_up=lambda: stopping[0]))
        await trio.sleep(5)
        assert got == []
        stopping[0] = True
        await trio.sleep(CONFIRM_POLL_S)
    assert len(got) == 1 and isinstance(got[0], str) and "stopped" in got[0]
