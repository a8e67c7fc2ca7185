"""Single puts sharing one inbox slot of the store actor (put_stage.py): the order of the inbox
holds (a put queued after a call is stored after it runs), the bounds hold (a full inbox still
pushes back), and every staged put is answered once."""

from __future__ import annotations

import random

import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.broker.store.messages import PutMessages, StagedPuts, StoreCall
from rocketrio.actors.broker.store.put_stage import PutStage
from rocketrio.actors.kernel.runtime import Reply
from rocketrio.storage.message_store import MessageStore, MessageToStore, PutResult, StoreConfig
from tests.harness.sim_disk import SimFileSystem
from tests.harness.store_actor import inline_store_actor

ROOT = "/store"


def test_a_stage_takes_puts_until_sealed_or_full() -> None:
    stage = PutStage(per_slot=3, max_extra=10)
    put = PutMessages([], lambda *a: None)
    assert not stage.join(put)  # nothing open
    token = StagedPuts([put])
    stage.opened(token)
    assert stage.join(put) and stage.join(put)
    assert not stage.join(put)  # per_slot reached
    assert stage.extra == 2
    stage.seal()
    assert not stage.join(put)
    stage.taken(token)
    assert stage.extra == 0


def test_the_extra_puts_are_bounded() -> None:
    stage = PutStage(per_slot=100, max_extra=2)
    put = PutMessages([], lambda *a: None)
    stage.opened(StagedPuts([put]))
    assert stage.join(put) and stage.join(put)
    assert not stage.join(put)  # two wait beyond their slot already


def test_a_slot_holds_at_most_per_slot_bytes_of_bodies() -> None:
    stage = PutStage(per_slot=100, max_extra=100, per_slot_bytes=10)

    def put(n: int) -> PutMessages:
        return PutMessages([MessageToStore("T", 0, b"x" * n)], lambda *a: None)

    stage.opened(StagedPuts([put(4)]))
    assert stage.join(put(6))  # 10 bytes: at the bound
    assert not stage.join(put(1))  # one more byte would pass it
    big = StagedPuts([put(30)])  # a put bigger than a slot has one of its own
    stage.opened(big)
    assert not stage.join(put(1))


def test_a_put_of_several_messages_counts_every_body() -> None:
    stage = PutStage(per_slot=100, max_extra=100, per_slot_bytes=10)
    two = PutMessages([MessageToStore("T", 0, b"x" * 4)] * 2, lambda *a: None)
    stage.opened(StagedPuts([two]))  # 8 bytes, not 4
    assert not stage.join(PutMessages([MessageToStore("T", 0, b"xxx")], lambda *a: None))
    assert stage.join(PutMessages([MessageToStore("T", 0, b"xx")], lambda *a: None))


def _actor(store: MessageStore) -> StoreActor:
    return inline_store_actor(store)


async def test_staged_puts_keep_the_inbox_order_around_a_call(
    mock_clock: trio.testing.MockClock,
) -> None:
    store = MessageStore(ROOT, StoreConfig(), fs=SimFileSystem(random.Random(3)))
    store.open()
    actor = _actor(store)
    offsets: dict[bytes, int] = {}

    def put(body: bytes) -> None:
        def done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
            assert status is PutStatus.PUT_OK and body not in offsets  # answered once
            offsets[body] = results[0].commitlog_offset

        actor.put_nowait([MessageToStore("T", 0, body)], done)

    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        # all queued before the actor runs again: a and b share a slot, the call seals it,
        # c and d share the next one
        put(b"a")
        put(b"b")
        call_saw: Reply[int] = Reply()
        actor.tell_nowait(StoreCall(lambda s: s.get_commitlog_max_offset(), call_saw, False))
        put(b"c")
        put(b"d")
        assert actor.queued() == 4  # each staged put counts
        await trio.testing.wait_all_tasks_blocked()
        assert actor.queued() == 0
        nursery.cancel_scope.cancel()
    assert list(offsets) == [b"a", b"b", b"c", b"d"]
    assert offsets[b"a"] < offsets[b"b"] < call_saw.result() <= offsets[b"c"] < offsets[b"d"]


async def test_a_full_inbox_still_pushes_back(mock_clock: trio.testing.MockClock) -> None:
    store = MessageStore(ROOT, StoreConfig(), fs=SimFileSystem(random.Random(4)))
    store.open()
    actor = _actor(store)  # not running: nothing is taken
    taken = 0
    try:
        while True:
            actor.put_nowait([MessageToStore("T", 0, b"x")], lambda *a: None)
            taken += 1
    except trio.WouldBlock:
        pass
    # the inbox slots (each a stage of up to STAGE_MAX) and at most inbox_capacity extras
    assert taken == actor.inbox_capacity + actor.inbox_capacity
    assert actor.queued() == taken


async def test_a_put_after_the_actor_took_the_stage_is_stored_and_answered(
    mock_clock: trio.testing.MockClock,
) -> None:
    store = MessageStore(ROOT, StoreConfig(), fs=SimFileSystem(random.Random(5)))
    store.open()
    actor = _actor(store)
    answered: list[bytes] = []

    def put(body: bytes) -> None:
        actor.put_nowait([MessageToStore("T", 0, body)], lambda *a: answered.append(body))

    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        put(b"a")
        await trio.testing.wait_all_tasks_blocked()  # the actor took and stored it
        put(b"b")  # must not join the list the actor already took
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert answered == [b"a", b"b"]
    assert store.get_commitlog_max_offset() > 0
