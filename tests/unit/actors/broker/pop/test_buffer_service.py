"""`PopBufferService` (buffer_service.py), the POP buffer's shell: a round on anything but a
serving master empties the buffer and turns it off; a due CK is written as the pop writes it, in
its revive queue, and counts as stored only where no failover cuts it; its ACKs go as one
``bAck`` after it; a write the store cannot take now is written by a later round."""

from __future__ import annotations

import json
from typing import Any

import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.pop.buffer_merge import STORED, BufferConfig, PopBuffer
from rocketrio.actors.broker.pop.buffer_service import PopBufferService
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.protocol.pop_checkpoint import PopCheckPoint
from rocketrio.storage.message_store import MessageToStore, PutResult

T0 = 1_700_000_000_000
HOST = (b"\x7f\x00\x00\x01", 0)


class Offsets:
    def __init__(self) -> None:
        self.table: dict[tuple[str, str, int], int] = {("G", "T", 0): 0}

    def query(self, group: str, topic: str, queue_id: int) -> int:
        return self.table.get((group, topic, queue_id), -1)

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.table[(group, topic, queue_id)] = offset


class Store:
    """Keeps each put's records and answers it with ``status`` (or raises ``raises``)."""

    def __init__(self) -> None:
        self.status = PutStatus.PUT_OK
        self.raises: type[Exception] | None = None
        self.puts: list[list[MessageToStore]] = []

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        if self.raises is not None:
            raise self.raises
        self.puts.append(messages)
        results = [PutResult(0, 1, 0, "", 0) for _ in messages]
        on_done(results if self.status.stored else [], self.status, None)

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self.put_nowait(messages, on_done)

    def put_batch_nowait(self, put: Any) -> None:
        raise AssertionError("not a POP record put")

    async def put_batch(self, put: Any) -> None:
        raise AssertionError("not a POP record put")


def setup(serving: list[bool]) -> tuple[PopBuffer, Store, PopBufferService, list[int]]:
    offsets = Offsets()
    buf = PopBuffer(BufferConfig(stay_ms=1_000), offsets)
    store = Store()
    now = [T0]
    service = PopBufferService(
        buf, store, "rmq_sys_REVIVE_LOG_C", HOST, lambda: now[0], lambda: serving[0]
    )
    return buf, store, service, now


CK = PopCheckPoint(0, T0, 60_000, 2, 0, "T", "G", "broker-a", queue_offset_diff=(0, 1))


def test_anything_but_a_serving_master_empties_the_buffer_and_turns_it_off() -> None:
    serving = [True]
    buf, store, service, _ = setup(serving)
    service.round()
    assert buf.enabled
    assert buf.add_ck(CK, 3, 2, T0)
    serving[0] = False
    service.round()
    assert not buf.enabled and buf.cks == {} and buf.latest("T", "G", 0) is None
    assert store.puts == []


def test_a_due_ck_is_written_in_its_revive_queue_then_its_acks_as_one_back() -> None:
    buf, store, service, now = setup([True])
    service.round()
    buf.add_ck(CK, 3, 2, T0)
    buf.ack(CK.merge_key, 1)
    now[0] = T0 + 1_001
    service.round()
    [[ck]] = store.puts
    assert (ck.topic, ck.queue_id) == ("rmq_sys_REVIVE_LOG_C", 3)
    assert PopCheckPoint.from_json(ck.body) == CK
    assert buf.offsets.query("G", "T", 0) == 0  # committed by the next round
    service.round()
    assert buf.offsets.query("G", "T", 0) == 2
    [ack] = store.puts[1]
    assert ack.queue_id == 3 and json.loads(ack.body)["aol"] == [1]
    service.round()
    assert buf.cks == {}


def test_a_ck_only_the_master_holds_is_written_again() -> None:
    buf, store, service, now = setup([True])
    service.round()
    buf.add_ck(CK, 0, 2, T0)
    store.status = PutStatus.FLUSH_SLAVE_TIMEOUT  # a failover could cut it
    now[0] = T0 + 1_001
    service.round()
    service.round()
    assert len(store.puts) == 2  # written again
    assert buf.offsets.query("G", "T", 0) == 0  # and the offset still before it
    store.status = PutStatus.PUT_OK
    service.round()
    [entry] = buf.cks.values()
    assert entry.ck_state == STORED
    service.round()
    assert buf.offsets.query("G", "T", 0) == 2


def test_a_write_the_store_cannot_take_now_is_written_by_a_later_round() -> None:
    buf, store, service, now = setup([True])
    service.round()
    buf.add_ck(CK, 0, 2, T0)
    store.raises = trio.WouldBlock
    now[0] = T0 + 1_001
    service.round()
    assert store.puts == []
    store.raises = None
    service.round()
    assert len(store.puts) == 1


async def test_run_serves_from_its_start() -> None:
    buf, _, service, _ = setup([True])
    async with trio.open_nursery() as n:
        await n.start(service.run)
        assert buf.enabled  # a pop right after the broker started already uses it
        n.cancel_scope.cancel()
