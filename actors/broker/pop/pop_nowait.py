"""A POP whose messages are there, served without a task (the POP consumer's common case).

`PopMessageProcessor.pop` first tries `PopNowait.try_serve`: the same attempt as the task's
(processor.py: the same topics in the same order, the same queues skipped while another pop of
the group reads them, the same CKs built by `PopMessageProcessor.checkpoint`), but every read
inline (`QueueReader.read_nowait`) and the attempt's CKs handed to the store as one request
with `put_nowait`. The pop is answered from that request's completion: once the store answered
that the CKs are stored, the group's offsets move past the messages and the pop gets them; a
refused request returns none of them and leaves every offset where it was (the task path
refuses queue by queue; one request is stored whole or not at all). So, as on the task path, a
message is handed out only once its CK is on the CommitLog where no failover cuts it
(`PutStatus.kept_by_failover`: a CK answered FLUSH_SLAVE_TIMEOUT is on the master only, while
the moved offsets reach the slaves by slave sync; the messages would never come back), and the
queues read stay marked as being popped until then. A CK the POP buffer takes (buffer_merge.py)
is not written: its messages go out with the answer at once, which an attempt whose every CK
the buffer took gets inline; an attempt declined after the buffer took some takes them back.

It declines (False, and the caller serves the pop as before, on a task of the hold service)
before anything is handed out: an ordered pop, a SQL92 selector, a slave acting for its dead
master (its CKs escape elsewhere), a read that would wait (a static topic's, one bigger than
the off-loop threshold), an attempt that found nothing (the task path re-reads, rechecks and
holds it), and a full store inbox. What it did before declining is what the task path does
too: the group's first offset of a queue, or an offset the store no longer has moved on.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import attrs
import trio

from rocketrio.actors.broker.dispatch.long_poll import Waiter
from rocketrio.actors.broker.dispatch.message_filter import MessageSelector
from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.pop.attempt import PopAcc, PopAttempt, PopOutcome
from rocketrio.actors.broker.pop.processor import (
    RESET_OFFSET,
    SKIPPED,
    PopMessageProcessor,
    queue_offsets,
)
from rocketrio.actors.kernel.runtime import ActorStopped
from rocketrio.protocol.pop_checkpoint import PopCheckPoint
from rocketrio.protocol.pop_headers import PopMessageRequestHeader
from rocketrio.storage.message_store import MessageToStore, PutResult


@attrs.frozen
class _Taken:
    """One queue's read of the attempt: its CK record and where its offset goes."""

    key: tuple[str, str, int]  # (topic, group, queue), marked as being popped
    next_offset: int
    rest_stored: int  # messages left in the queue once the CK is stored
    rest_refused: int  # ... when it is not (the read's messages go back)
    record: MessageToStore


class _Refused(Exception):
    """A read that would wait: the attempt goes to the task path."""


class PopNowait:
    """POP_MESSAGE without a task (module docstring)."""

    def __init__(self, proc: PopMessageProcessor) -> None:
        self.proc = proc

    def try_serve(self, h: PopMessageRequestHeader, sel: MessageSelector, reply: Waiter) -> bool:
        """True when the pop is served (``reply`` answered once its CKs are stored); False
        when declined, nothing handed out (module docstring)."""
        proc = self.proc
        if h.order or sel.keep is not None or proc.record_escape() is not None:
            return False
        p = proc.attempt_of(h, sel)
        acc = PopAcc(h.maxMsgNums)
        taken: list[_Taken] = []
        kept: list[PopCheckPoint] = []  # CKs the buffer took (buffer_merge.py)
        try:
            retry_topics = proc.retry_topics(h)
            retry_first = p.rand_q < proc.config.pop_from_retry_probability
            if retry_first:
                for topic in retry_topics:
                    self._topic(p, acc, topic, True, taken, kept)
            self._topic(p, acc, h.topic, False, taken, kept)
            if not retry_first and not acc.full:
                for topic in retry_topics:
                    self._topic(p, acc, topic, True, taken, kept)
            if taken:
                on_done = partial(self._stored, p, acc, taken, reply)
                proc.writer.put_nowait([t.record for t in taken], on_done)
                return True
            if acc.buffers:  # every CK kept by the buffer (buffer_merge.py): answered now
                outcome = proc.hold_or_answer(h, p.sel, reply, proc.popped(p, acc))
                if outcome is not None and not reply.gone:
                    reply.deliver(outcome)
                return True
        except (_Refused, trio.WouldBlock, ActorStopped):
            pass
        except BaseException:
            self._release(taken, kept)
            raise
        self._release(taken, kept)
        return False

    def _release(self, taken: list[_Taken], kept: Sequence[PopCheckPoint] = ()) -> None:
        busy = self.proc.busy
        for t in taken:
            busy.discard(t.key)
        buf = self.proc.buffer
        if buf is not None:
            for ck in reversed(kept):  # the attempt hands nothing out: nothing held back
                buf.withdraw(ck)

    def _topic(
        self,
        p: PopAttempt,
        acc: PopAcc,
        topic: str,
        is_retry: bool,
        taken: list[_Taken],
        kept: list[PopCheckPoint],
    ) -> None:
        """`PopMessageProcessor._pop_topic`, inline."""
        proc = self.proc
        tc = proc.topics.select(topic)
        if tc is None:
            return
        if is_retry or p.h.queueId < 0:
            ids = proc.store.pop_queue_ids(topic, tc.readQueueNums)
            n = len(ids)
            for i in range(n):
                self._queue(p, acc, topic, ids[(p.rand_q + i) % n], is_retry, taken, kept)
        else:
            self._queue(p, acc, topic, p.h.queueId, is_retry, taken, kept)

    def _queue(
        self,
        p: PopAttempt,
        acc: PopAcc,
        topic: str,
        queue_id: int,
        is_retry: bool,
        taken: list[_Taken],
        kept: list[PopCheckPoint],
    ) -> None:
        """`_pop_queue` and `_pop_locked` of a plain pop, inline; a queue that gave messages
        stays marked as being popped until its CK is stored (`_stored`)."""
        proc, h = self.proc, p.h
        group = h.consumerGroup
        key = (topic, group, queue_id)
        store, offsets = proc.store, proc.offsets
        if acc.full or key in proc.busy or proc.held_back(topic, group, queue_id):
            offset = offsets.query(group, topic, queue_id)
            acc.rest += max(0, store.get_max_offset(topic, queue_id) - max(offset, 0))
            return
        offset = proc.pop_offset(group, topic, queue_id, h.initMode)
        sel = MessageSelector(None, p.sel.keep) if is_retry else p.sel
        want = h.maxMsgNums - len(acc.buffers)
        max_bytes = proc.config.max_transfer_bytes
        result = store.read_nowait(topic, queue_id, offset, want, max_bytes, sel.cq_match)
        if result is not None and result.status in RESET_OFFSET:
            offset = result.next_begin_offset
            proc.commit_offset(group, topic, queue_id, offset)
            result = store.read_nowait(topic, queue_id, offset, want, max_bytes, sel.cq_match)
        if result is None:
            raise _Refused
        if result.message_count:
            qoffsets = queue_offsets(result.buffers)
            ck = proc.ck_of(p, topic, queue_id, offset, qoffsets)
            nxt, top = result.next_begin_offset, result.max_offset
            if proc.buffer is not None and proc.buffered(p, ck, nxt):  # out now, the CK kept
                kept.append(ck)
                acc.rest += max(0, top - nxt)
            else:
                proc.busy.add(key)
                record = proc.ck_record(p, ck)
                taken.append(_Taken(key, nxt, max(0, top - nxt), top - offset, record))
            proc.take(p, acc, (topic, queue_id, offset, is_retry), qoffsets, result.buffers)
            return
        if result.status in SKIPPED and result.next_begin_offset > offset:
            proc.commit_offset(group, topic, queue_id, result.next_begin_offset)
        acc.rest += max(0, result.max_offset - result.next_begin_offset)

    def _stored(
        self,
        p: PopAttempt,
        acc: PopAcc,
        taken: list[_Taken],
        reply: Waiter,
        results: list[PutResult],
        status: PutStatus,
        remark: str | None,
    ) -> None:
        """The store answered the attempt's CKs: offsets moved and the pop answered."""
        proc, h = self.proc, p.h
        outcome: PopOutcome | None
        try:
            if results and status.kept_by_failover:
                for t in taken:
                    proc.commit_offset(h.consumerGroup, t.key[0], t.key[2], t.next_offset)
                    acc.rest += t.rest_stored
            else:  # none of the messages goes out (module docstring)
                acc.buffers.clear()
                acc.start_infos.clear()
                acc.msg_infos.clear()
                acc.rest += sum(t.rest_refused for t in taken)
            outcome = proc.hold_or_answer(h, p.sel, reply, proc.popped(p, acc))
        except Exception as e:
            outcome = proc.failed(e)
        finally:
            self._release(taken)
        if outcome is not None and not reply.gone:
            reply.deliver(outcome)
