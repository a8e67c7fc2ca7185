"""`put_and_wait`: answered only with the store actor's answer, whichever way the put went in
(``nowait_first``: `put_nowait`, or `put` awaited when the inbox is full)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.messages import PutCallback, put_and_wait
from rocketrio.actors.kernel.runtime import ActorStopped
from rocketrio.storage.message_store import MessageToStore, PutResult


class Writer:
    def __init__(self, *, full: bool = False, stopped: bool = False) -> None:
        self.full, self.stopped = full, stopped
        self.nowait: list[PutCallback] = []
        self.awaited: list[PutCallback] = []

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        if self.stopped:
            raise ActorStopped("store")
        if self.full:
            raise trio.WouldBlock
        self.nowait.append(on_done)

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        if self.stopped:
            raise ActorStopped("store")
        self.awaited.append(on_done)

    async def put_batch(self, put: Any) -> None:
        pytest.fail("a batch put: this path never makes one")

    def put_batch_nowait(self, put: Any) -> None:
        pytest.fail("a batch put: this path never makes one")


@pytest.mark.parametrize(("nowait_first", "full"), [(True, False), (True, True), (False, False)])
async def test_answered_only_with_the_stores_answer(
    nowait_first: bool, full: bool, mock_clock: trio.testing.MockClock
) -> None:
    w = Writer(full=full)
    msg = MessageToStore(topic="T", queue_id=0, body=b"x")
    got: list[Any] = []

    async def put() -> None:
        got.append(await put_and_wait(w, [msg], nowait_first=nowait_first))

    async with trio.open_nursery() as n:
        n.start_soon(put)
        await trio.sleep(10)
        assert got == []  # handed over, not answered: no answer before the store's
        (on_done,) = w.nowait + w.awaited
        assert (w.nowait != []) == (nowait_first and not full)
        on_done([PutResult(0, 0, 0, "", 0)], PutStatus.PUT_OK, None)
    assert got[0].stored


async def test_a_stopped_store_is_not_stored(mock_clock: trio.testing.MockClock) -> None:
    msg = MessageToStore(topic="T", queue_id=0, body=b"x")
    for nowait_first in (True, False):
        answer = await put_and_wait(Writer(stopped=True), [msg], nowait_first=nowait_first)
        assert not answer.stored and answer.status == PutStatus.SERVICE_NOT_AVAILABLE
