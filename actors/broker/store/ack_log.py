"""The store actor's answers to a stored turn's puts (`AckLog.answer`: written to each client's
socket as the turn's last one is given, kernel/answer_flush.py) and its sampled account of what
it answered: events.SendAcked.NAME and events.SendNotAcked.NAME at most once per
`ACK_LOG_INTERVAL_S` (per reason), never one line per message, and each answered turn's put time
for the statistics (`PutStats.on_put_turn`). A master's turn is answered through its
replication gate: `completion` is what the gate calls with the turn's `AckOutcome`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.ha.group_transfer import AckOutcome, Completion
from rocketrio.actors.broker.store.messages import (
    AnyPut,
    PutStats,
    Stored,
    fail_put,
    stored_count,
)
from rocketrio.actors.kernel.answer_flush import ANSWERS
from rocketrio.actors.observe import events
from rocketrio.storage.message_store import BatchPutResult

ACK_LOG_INTERVAL_S = 1.0


_ACK_STATUS = {
    AckOutcome.FLUSH_SLAVE_TIMEOUT: PutStatus.FLUSH_SLAVE_TIMEOUT,
    AckOutcome.SLAVE_NOT_AVAILABLE: PutStatus.SLAVE_NOT_AVAILABLE,
}


class AckLog:
    def __init__(self, log: Any, stats: PutStats | None) -> None:
        self.log = log
        self.stats = stats
        self._acked_since_log = 0
        self._next_ack_log = 0.0
        self._not_acked: dict[str, int] = {}
        self._next_not_acked_log = 0.0

    def answer(
        self,
        done: list[tuple[AnyPut, Stored]],
        status: PutStatus,
        remark: str | None,
        started: float,
    ) -> None:
        """Answer the turn's stored puts, then `acked`. The answers reach the sockets as the
        last one is given, one send per connection (ANSWERS), not on the writers' turns."""
        with ANSWERS:
            for put, stored in done:
                put.on_done(stored, status, remark)  # type: ignore[arg-type]
        self.acked(done, started)

    def acked(self, done: list[tuple[AnyPut, Stored]], started: float) -> None:
        """The turn's puts were answered: count their time (once per turn), log sampled."""
        # no call per put: a single put's result is a list, a batch body's a BatchPutResult
        count = sum([len(s) if type(s) is list else stored_count(s) for _, s in done])
        self._acked_since_log += count
        now = trio.current_time()
        if self.stats is not None:
            self.stats.on_put_turn(int((now - started) * 1000), count)
        if now < self._next_ack_log:
            return
        self._next_ack_log = now + ACK_LOG_INTERVAL_S
        put, stored = done[-1]
        if isinstance(stored, BatchPutResult):
            topic, queue_id = stored.topic, stored.queue_id
            offset, cl_offset = stored.next_queue_offset - 1, stored.commitlog_offsets[-1]
        else:
            last = put.messages[-1]  # type: ignore[union-attr]
            topic, queue_id = last.topic, last.queue_id
            offset, cl_offset = stored[-1].queue_offset, stored[-1].commitlog_offset
        events.emit(
            self.log,
            events.SendAcked(
                topic=topic,
                queue_id=queue_id,
                offset=offset,
                commitlog_offset=cl_offset,
                count=self._acked_since_log,
            ),
        )
        self._acked_since_log = 0

    def not_acked(self, outcome: AckOutcome, count: int, epoch: int) -> None:
        """Stored puts the replicas did not acknowledge, by reason, sampled like `acked`."""
        key = outcome.value
        self._not_acked[key] = self._not_acked.get(key, 0) + count
        now = trio.current_time()
        if now < self._next_not_acked_log:
            return
        self._next_not_acked_log = now + ACK_LOG_INTERVAL_S
        for reason, n in self._not_acked.items():
            events.emit(self.log, events.SendNotAcked(reason=reason, count=n, epoch=epoch))
        self._not_acked.clear()

    def completion(
        self,
        done: list[tuple[AnyPut, Stored]],
        status: PutStatus,
        remark: str | None,
        started: float,
        epoch: Callable[[], int],
    ) -> Completion:
        """How a master's stored turn (begun at ``started``) is answered once its replication
        gate decides: acknowledged, stored on the master only, or not stored as master."""

        def complete(outcome: AckOutcome) -> None:
            if outcome is AckOutcome.ACKED:
                self.answer(done, status, remark, started)
                return
            if outcome is AckOutcome.NOT_MASTER:
                why = "the broker stopped being master before its replicas had the message"
                for put, _ in done:
                    fail_put(put, PutStatus.SERVICE_NOT_AVAILABLE, why)
            else:
                why = f"{outcome.value}: stored on the master, not acknowledged by its replicas"
                for put, stored in done:
                    put.on_done(stored, _ACK_STATUS[outcome], why)  # type: ignore[arg-type]
            self.not_acked(outcome, len(done), epoch())

        return complete
