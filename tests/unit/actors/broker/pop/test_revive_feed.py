"""`ReviveFeedWriter` (revive_feed.py): a put's stored revive records reach ``written`` with the
offsets the store gave them; a refused put, a put answered with fewer results than messages,
and messages that are not revive records reach nothing; the put's own callback is always
called, after the feed, with what the store said."""

from __future__ import annotations

from typing import Any

import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.pop.revive_feed import ReviveFeedWriter
from rocketrio.actors.broker.pop.revive_log import ack_message, ck_message
from rocketrio.actors.broker.store.messages import PutCallback
from rocketrio.protocol.pop_checkpoint import AckMsg, PopCheckPoint
from rocketrio.storage.message_store import MessageToStore, PutResult

HOST = (b"\x7f\x00\x00\x01", 0)
CK = PopCheckPoint(10, 1_700_000_000_000, 30_000, 2, 1, "T", "G", "broker-a")
ACK = AckMsg((11,), 10, "G", "T", 1, 1_700_000_000_000, "broker-a")


class Store:
    """Answers each put at once: ``status``, and one result per message (``short``: one fewer),
    queue offsets counting from 40."""

    def __init__(self) -> None:
        self.status = PutStatus.PUT_OK
        self.short = False
        self.next = 40

    def _answer(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        results = []
        for _ in messages[: len(messages) - self.short]:
            results.append(PutResult(0, 1, self.next, "", 0))
            self.next += 1
        on_done(results if self.status.stored else [], self.status, None)

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self._answer(messages, on_done)

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self._answer(messages, on_done)

    def put_batch_nowait(self, put: Any) -> None:
        raise AssertionError("not a POP record put")

    async def put_batch(self, put: Any) -> None:
        raise AssertionError("not a POP record put")


def test_stored_revive_records_are_handed_on_with_their_offsets_and_nothing_else() -> None:
    store = Store()
    written: list[tuple[int, int, object]] = []
    answered: list[tuple[int, PutStatus, int]] = []
    feed = ReviveFeedWriter(store, lambda q, o, r: written.append((q, o, r)))

    def on_done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        answered.append((len(results), status, len(written)))

    plain = MessageToStore("T", 0, b"x")
    feed.put_nowait(
        [ck_message(CK, "R", 3, 0, HOST), plain, ack_message(ACK, "R", 5, 0, HOST)], on_done
    )
    assert written == [(3, 40, CK), (5, 42, ACK)]
    assert answered == [(3, PutStatus.PUT_OK, 2)]  # the put's answer after the feed
    trio.run(feed.put, [ack_message(ACK, "R", 5, 0, HOST)], on_done)  # the awaited put too
    assert written[-1] == (5, 43, ACK)
    store.status = PutStatus.FLUSH_SLAVE_TIMEOUT  # stored: the master's log holds it
    feed.put_nowait([ck_message(CK, "R", 3, 0, HOST)], on_done)
    assert written[-1] == (3, 44, CK)
    before = len(written)
    store.status = PutStatus.SERVICE_NOT_AVAILABLE  # refused: nothing stored
    feed.put_nowait([ck_message(CK, "R", 3, 0, HOST)], on_done)
    store.status, store.short = PutStatus.PUT_OK, True  # not one result per message
    feed.put_nowait([ck_message(CK, "R", 3, 0, HOST), ack_message(ACK, "R", 3, 0, HOST)], on_done)
    assert len(written) == before
    assert [a[:2] for a in answered[-2:]] == [
        (0, PutStatus.SERVICE_NOT_AVAILABLE),
        (1, PutStatus.PUT_OK),
    ]
