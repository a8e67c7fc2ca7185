"""Writing a turn's puts into the MessageStore, for the store actor (actor.py).

In arrival order: each run of single sends with ONE ``put_messages`` call, each batch body with
``put_batch_body``. A failing put wrote nothing (the store validates before writing and undoes a
partial append), so only the faulty request is answered with an error: MESSAGE_ILLEGAL for the
request's own fault, UNKNOWN_ERROR (logged) for the store's, SERVICE_NOT_AVAILABLE with the full
disk's remark once the disk refused a write (disk_faults.py); every put is counted in the
statistics (`PutStats`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.disk_faults import FaultState, disk_full
from rocketrio.actors.broker.store.messages import (
    AnyPut,
    PutBatchBody,
    PutMessages,
    PutStats,
    Stored,
    fail_put,
)
from rocketrio.actors.observe import events
from rocketrio.storage.message_store import MessageStore


class Appender:
    """Appends the puts of a turn; never raises for a put's own failure."""

    def __init__(
        self,
        store: MessageStore,
        faults: FaultState,
        stats: PutStats | None,
        now_ms: Callable[[], int],
        log: Any,
    ) -> None:
        self.store = store
        self.faults = faults
        self.stats = stats
        self.now_ms = now_ms
        self.log = log

    def append(self, puts: list[AnyPut]) -> list[tuple[AnyPut, Stored]]:
        """Store the turn's puts in arrival order: each run of PutMessages with ONE
        put_messages call, each batch body with put_batch_body. A failing put wrote nothing
        (the store validates before writing and undoes a partial append), so only the faulty
        request is answered with an error."""
        out: list[tuple[AnyPut, Stored]] = []
        run: list[PutMessages] = []
        for put in puts:
            if isinstance(put, PutMessages):
                run.append(put)
                continue
            if run:
                out.extend(self._messages(run))
                run = []
            if self.faults.fault is not None:  # an earlier put of the turn found the disk full
                self.refuse([put])
                continue
            try:
                stored = self.store.put_batch_body(
                    put.topic, put.queue_id, put.body, self.now_ms(), **put.options
                )
            except Exception as e:
                self._answer_error(put, e)
                continue
            if self.stats is not None:
                self.stats.on_topic_put(put.topic, stored.count, stored.total_size)
            out.append((put, stored))
        if run:
            out.extend(self._messages(run))
        return out

    def _messages(self, puts: list[PutMessages]) -> list[tuple[AnyPut, Stored]]:
        if self.faults.fault is not None:  # an earlier put of the turn found the disk full
            self.refuse(puts)
            return []
        msgs = puts[0].messages if len(puts) == 1 else [m for p in puts for m in p.messages]
        try:
            results = self.store.put_messages(msgs, self.now_ms())
        except Exception as e:
            if len(puts) == 1 or disk_full(e):
                for put in puts:  # a full disk: the store cut the whole batch back
                    self._answer_error(put, e)
                return []
            out: list[tuple[AnyPut, Stored]] = []
            for put in puts:
                out.extend(self._messages([put]))
            return out
        stats = self.stats
        if len(results) == len(puts):  # single sends only (the hot path): no slicing
            out = [(put, [r]) for put, r in zip(puts, results, strict=True)]
            if stats is not None:  # one count per run of sends to one topic, not per send
                topic = puts[0].messages[0].topic
                n = size = 0
                for put, r in zip(puts, results, strict=True):
                    t = put.messages[0].topic
                    if t != topic:
                        stats.on_topic_put(topic, n, size, n)
                        topic, n, size = t, 0, 0
                    n += 1
                    size += r.size
                stats.on_topic_put(topic, n, size, n)
            return out
        out = []
        i = 0
        for put in puts:  # one request each: counted once (a send's messages share a topic)
            n = len(put.messages)
            chunk = results[i : i + n]
            out.append((put, chunk))
            i += n
            if stats is not None:
                size = chunk[0].size if n == 1 else sum(r.size for r in chunk)
                stats.on_topic_put(put.messages[0].topic, n, size)
        return out

    def _answer_error(self, put: AnyPut, exc: Exception) -> None:
        if disk_full(exc):
            self.faults.enter(exc)
            self.refuse([put])
            return
        if self.stats is not None:
            self.stats.on_put_failed(1)
        if isinstance(exc, ValueError):
            # MessageTooLarge and fields out of range: the request's fault, not the store's
            fail_put(put, PutStatus.MESSAGE_ILLEGAL, f"the message is illegal: {exc}")
            return
        topic = put.topic if isinstance(put, PutBatchBody) else put.messages[0].topic
        events.emit(self.log, events.PutFailed(topic=topic), exc_info=exc)
        fail_put(put, PutStatus.UNKNOWN_ERROR, f"store put failed: {type(exc).__name__}: {exc}")

    def refuse(self, puts: Sequence[AnyPut]) -> None:
        if self.stats is not None:
            self.stats.on_put_failed(len(puts))
        fault = self.faults.fault
        remark = fault.remark() if fault is not None else None
        for put in puts:
            fail_put(put, PutStatus.SERVICE_NOT_AVAILABLE, remark)
