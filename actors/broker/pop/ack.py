"""ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME (upstream AckMessageProcessor
and ChangeInvisibleTimeProcessor).

A receipt of an ordered pop (reviveQid 999, POP_ORDER_REVIVE_QUEUE) writes nothing to the revive
topic: it goes to `PopOrderService` (pop_order_service.py), which moves the group's offset or the
queue's block and answers at once.

Each call checks at once (a `Refusal` is returned) and otherwise hands its records to the
store writer and returns None; the outcome goes to the caller's ``on_done`` once the store
answered (like the send path), so a connection's reader never waits for a write.

An ACK names a popped message by its receipt (extraInfo: the CK's start offset, pop time, revive
queue and brokerName) plus topic, queueId and offset. The topic acked is the receipt's real
topic (the group's pop retry topic when the retry mark says so). The ACK record goes to the
receipt's revive queue and the answer waits for the store, so an acknowledged message is in the
CommitLog as acknowledged before the client hears SUCCESS. The ACKs of one scheduler turn go as
one put, those of one CK as one ``bAck`` record (ack_batch.py). An offset outside the queue's
[min, max] is answered NO_MESSAGE, like upstream. An ACK_MESSAGE of a plain topic reads that
range without a call, from the store's live table of consume queues (`PlainQueues`,
store/queue_reader.py); every other case, and every refusal, goes through `_check_offset`.

On a slave acting for its dead master (RIP-32) nothing can be written: an ACK (or a batch ACK's
records) whose CK the slave's revive rounds hold is applied to them in memory (`acting_ack`) and
answered SUCCESS, so that message is not revived; one they do not hold is refused as before, and
an in-memory ACK lost in a crash of the slave means one more delivery (at-least-once).

BATCH_ACK_MESSAGE carries one `BatchAck` per CK (a bit set of offsets from its start offset);
each becomes one ``bAck`` record in its revive queue.

CHANGE_MESSAGE_INVISIBLETIME writes a new CK for the one message (popTime now, the new invisible
time, a new revive queue, the receipt's brokerName like upstream), then acknowledges the message
under its old receipt. The answer carries popTime, invisibleTime and reviveQid from which the
client builds the new receipt
(``offset popTime invisibleTime reviveQid retry brokerName queueId offset``).
Shortening works the same way: the new CK's revive time is simply earlier.

On a slave acting for its dead master whose revive rounds do not hold the CK (a CK of a pop this
slave served, escaped to a pinned master: failover/pop_escape.py), the ACK records, and
CHANGE_INVISIBLE_TIME's new CK with the old receipt's ACK, are queued for that same master
(`record_escape`): written in the background, retried until stored, answered once stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import trio

from rocketrio.actors.broker.dispatch.outcomes import Done, PutStatus, Refusal
from rocketrio.actors.broker.pop.ack_batch import AckBatcher
from rocketrio.actors.broker.pop.attempt import PopConfig
from rocketrio.actors.broker.pop.buffer_merge import PopBuffer
from rocketrio.actors.broker.pop.order_service import PopOrderService
from rocketrio.actors.broker.pop.revive_log import Host, ack_message, ck_message
from rocketrio.actors.broker.store.escape_bridge import PopRecordEscape
from rocketrio.actors.broker.store.messages import StoreWriter
from rocketrio.actors.broker.store.queue_reader import QueueReader
from rocketrio.actors.broker.tables.tables import TopicTable
from rocketrio.actors.kernel.runtime import ActorStopped
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.pop_checkpoint import (
    AckMsg,
    BatchAck,
    BatchAckMessageRequestBody,
    MergeKey,
    PopCheckPoint,
)
from rocketrio.protocol.pop_extra_info import (
    NORMAL_TOPIC,
    POP_ORDER_REVIVE_QUEUE,
    ExtraInfo,
    ExtraInfoError,
    ExtraInfoFields,
    parse_fields,
    real_topic,
)
from rocketrio.protocol.pop_headers import ChangeInvisibleTimeRequestHeader
from rocketrio.storage.message_store import MessageToStore, PutResult

DONE = Done()


@attrs.frozen
class InvisibleTimeChanged:
    pop_time: int
    invisible_time: int
    revive_qid: int


OnAcked = Callable[[Done | Refusal], None]
OnChanged = Callable[[InvisibleTimeChanged | Refusal], None]


class PopAckProcessor:
    def __init__(
        self,
        config: PopConfig,
        *,
        topics: TopicTable,
        order: PopOrderService,
        store: QueueReader,
        writer: StoreWriter,
        now_ms: Callable[[], int],
        store_host: Host,
        next_revive_qid: Callable[[], int],
        acting_ack: Callable[[int, AckMsg], bool] | None = None,
        record_escape: Callable[[], PopRecordEscape | None] = lambda: None,
        acting: Callable[[], bool] = lambda: False,
        may_act: bool = True,
        buffer: PopBuffer | None = None,
    ) -> None:
        # enablePopBufferMerge (buffer_merge.py): an ACK of a CK it holds sets a bit there and
        # is answered at once; None when off
        self.buffer = buffer
        self.record_escape = record_escape  # set while this slave acts (module docstring)
        self.acting = acting  # this slave acts for its dead master (RIP-32): see acting_ack
        # False: this broker never acts nor escapes POP records (no enableSlaveActingMaster,
        # which is not a live key), so an ACK asks neither ``record_escape`` nor ``acting``
        self.may_act = may_act
        # RIP-32 (module docstring): applies an ACK in memory on an acting slave; False when
        # not acting or the CK is not held
        self.acting_ack = acting_ack
        self.config = config
        self.topics = topics
        self.order = order
        self.store = store
        self._plain = store.plain_queues()  # an ACK's offset check reads it (`ack_parsed`)
        self.writer = writer
        self.now_ms = now_ms
        self.store_host = store_host
        self.next_revive_qid = next_revive_qid
        # ACK_MESSAGE records of one turn, one put (ack_batch.py); run by the POP feature
        self.batcher = AckBatcher(writer, self._ack_record, not_stored)

    def _ack_record(self, ack: AckMsg, revive_qid: int) -> MessageToStore:
        c = self.config
        return ack_message(ack, c.revive_topic, revive_qid, self.now_ms(), self.store_host)

    def _receipt(self, extra_info: str) -> ExtraInfoFields | Refusal:
        """The receipt's fields (`ExtraInfo`'s, as a tuple: one per acknowledged message), or
        the refusal of a receipt that is not upstream's or names no revive queue."""
        try:
            extra = parse_fields(extra_info)
        except ExtraInfoError as e:
            return Refusal(ResponseCode.INVALID_PARAMETER, str(e))
        qid = extra[3]
        if qid == POP_ORDER_REVIVE_QUEUE:
            return extra
        if not 0 <= qid < self.config.revive_queue_num:
            return Refusal(
                ResponseCode.INVALID_PARAMETER,
                f"reviveQid {qid} of extraInfo is not a revive queue "
                f"(reviveQueueNum={self.config.revive_queue_num})",
            )
        return extra

    def _range_of(self, topic: str, queue_id: int) -> tuple[int, int] | None:
        """The queue's [min, max] as `_check_offset` reads it; None where it refuses every
        offset (no such topic, or a queue the topic lacks)."""
        tc = self.topics.select(topic)
        if tc is None:
            return None
        return self.store.queue_range(topic, queue_id, tc.readQueueNums)

    def _check_offset(self, topic: str, queue_id: int, offset: int) -> Refusal | None:
        tc = self.topics.select(topic)
        if tc is None:
            return Refusal(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!"
            )
        found = self.store.queue_range(topic, queue_id, tc.readQueueNums)
        if found is None:
            return Refusal(
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{tc.readQueueNums}]",
            )
        lo, hi = found
        if offset < lo or offset > hi:
            return Refusal(
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{topic}@{queue_id}, offset:{offset}, "
                f"minOffset:{lo}, maxOffset:{hi}",
            )
        return None

    async def _put(
        self,
        msgs: list[MessageToStore],
        on_stored: Callable[[], None],
        on_done: Callable[[Refusal], None],
    ) -> Refusal | None:
        """Hand ``msgs`` (one store request) to the writer; ``on_stored`` once they are in the
        CommitLog, ``on_done(refusal)`` when the store refused them. Awaits only inbox space
        (backpressure), never the write itself, so the connection keeps reading requests."""

        def done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
            if results and status.stored:
                on_stored()
            else:
                on_done(not_stored(status, remark))

        try:
            try:  # no checkpoint unless the inbox is full (backpressure)
                self.writer.put_nowait(msgs, done)
            except trio.WouldBlock:
                await self.writer.put(msgs, done)
        except ActorStopped:
            return not_stored(PutStatus.SERVICE_NOT_AVAILABLE, "the store is stopped")
        return None

    def ack_nowait(
        self, group: str, topic: str, queue_id: int, extra_info: str, offset: int, on_done: OnAcked
    ) -> Refusal | Awaitable[Refusal | None] | None:
        """ACK_MESSAGE (the header's consumerGroup, topic, queueId, extraInfo, offset): a
        refusal now, or None and ``on_done`` gets the outcome once the ACK record is stored. No
        coroutine on the common path (the ACK queued for its turn's put, or answered at once);
        only when the record must be put alone (the batcher is full or stopped) the awaitable of
        that put (a refusal or None, as above). Called once per acknowledged message, so the
        remoting handler answers it inline like the send path, and the ACK is queued as its
        CK's merge key and offset (the AckMsg is made per record, ack_batch.py)."""
        # `_receipt` and `_check_offset` inline (one ACK per message); their refusals are theirs
        try:
            ck_offset, pop_time, _, qid, retry, broker_name, _, _ = parse_fields(extra_info)
        except ExtraInfoError as e:
            return Refusal(ResponseCode.INVALID_PARAMETER, str(e))
        return self.ack_parsed(
            group, topic, queue_id, extra_info, offset,
            ck_offset, pop_time, qid, retry, broker_name, on_done,
        )  # fmt: skip

    def ack_parsed(
        self,
        group: str,
        topic: str,
        queue_id: int,
        extra_info: str,
        offset: int,
        ck_offset: int,
        pop_time: int,
        qid: int,
        retry: str,
        broker_name: str,
        on_done: OnAcked,
    ) -> Refusal | Awaitable[Refusal | None] | None:
        """`ack_nowait` of a receipt already read (``pop_headers.ack_request``: the direct
        path reads the ACK's fields and its receipt in one call)."""
        if not 0 <= qid < self.config.revive_queue_num and qid != POP_ORDER_REVIVE_QUEUE:
            return self._receipt(extra_info)  # not a revive queue: its refusal
        if retry != NORMAL_TOPIC:
            topic = real_topic(topic, group, retry)
        # the offset check without a call for a plain topic (`PlainQueues`): the topic's config
        # and the queue's live range read here; anything else (an unknown topic, a static
        # topic, a queue the topic lacks, an offset out of range) goes `_check_offset`, whose
        # refusal (or a static topic's acceptance) is the answer
        tc = self.topics.table.get(topic)
        plain = self._plain
        if (
            tc is None
            or plain.statics.table.get(topic) is not None
            or not 0 <= queue_id < tc.readQueueNums
        ):
            inside = False
        elif (cq := plain.queues.get((topic, queue_id))) is None:
            inside = offset == 0  # a queue the store does not have: [0, 0]
        else:
            inside = cq.min_offset <= offset <= cq.max_offset
        if not inside:
            bad = self._check_offset(topic, queue_id, offset)  # the refusal's code and text
            if bad is not None:
                return bad
        if qid == POP_ORDER_REVIVE_QUEUE:
            refusal = self.order.ack(topic, group, queue_id, offset, pop_time)
            on_done(refusal or DONE)
            return None
        key = (topic, group, queue_id, ck_offset, pop_time, broker_name)
        if self.may_act:
            escape = self.record_escape()
            if escape is not None or self.acting():  # RIP-32's acting slave (module docstring)
                return self._acting_ack(qid, AckMsg.of_key(key, (offset,)), escape, on_done)
        buf = self.buffer
        if buf is not None and buf.ack(key, offset):  # its CK is in memory: nothing to write
            on_done(DONE)
            return None
        if self.batcher.queue((qid, key, offset, on_done)):  # `AckBatcher.submit`'s queue
            return None  # answered once the turn's put is stored (ack_batch.py)
        msg = self._ack_record(AckMsg.of_key(key, (offset,)), qid)
        return self._put([msg], lambda: on_done(DONE), on_done)

    def _acting_ack(
        self, qid: int, ack: AckMsg, escape: PopRecordEscape | None, on_done: OnAcked
    ) -> Refusal | Awaitable[Refusal | None] | None:
        """`ack_nowait` on a slave acting for its dead master (or still holding pins of CKs it
        escaped, ``escape``): applied in memory when its revive rounds hold the CK, else sent to
        the CK's pinned master, else as on a master."""
        if self.acting_ack is not None and self.acting_ack(qid, ack):
            on_done(DONE)  # the acting slave's revive will not revive it (module docstring)
            return None
        if escape is not None:  # an acting slave: the CK's pinned master (module docstring)
            msg = self._ack_record(ack, qid)
            return _queued(escape.submit(ack.merge_key, [msg], lambda: on_done(DONE), acked=1))
        if self.batcher.submit(qid, ack.merge_key, ack.ack_offsets[0], on_done):
            return None
        return self._put([self._ack_record(ack, qid)], lambda: on_done(DONE), on_done)

    async def batch_ack(self, body: BatchAckMessageRequestBody, on_done: OnAcked) -> Refusal | None:
        """BATCH_ACK_MESSAGE: like `ack_nowait`, one ``bAck`` record per CK, one store request."""
        msgs = []
        keyed: list[tuple[MergeKey, MessageToStore, int]] = []  # for an acting slave's escape
        c = self.config
        for b in body.acks:
            if b.revive_queue_id == POP_ORDER_REVIVE_QUEUE:
                refusal = self._batch_ack_ordered(b)
                if refusal is not None:
                    return refusal
                continue
            if not 0 <= b.revive_queue_id < c.revive_queue_num:
                return Refusal(
                    ResponseCode.INVALID_PARAMETER,
                    f"reviveQueueId {b.revive_queue_id} is not a revive queue",
                )
            topic = real_topic(b.topic, b.consumer_group, b.retry)
            found = self._range_of(topic, b.queue_id)  # one read per CK, not per offset
            if found is None:
                continue  # upstream skips offsets `_check_offset` refuses: here all of them
            lo, hi = found
            offsets = [o for o in b.ack_offsets() if lo <= o <= hi]
            buf = self.buffer
            if buf is not None and offsets:  # those of a CK held in memory: set there
                key = (
                    topic, b.consumer_group, b.queue_id, b.start_offset, b.pop_time,
                    body.broker_name,
                )  # fmt: skip
                offsets = [o for o in offsets if not buf.ack(key, o)]
            if not offsets:
                continue
            ack = AckMsg(
                tuple(offsets),
                b.start_offset,
                b.consumer_group,
                topic,
                b.queue_id,
                b.pop_time,
                body.broker_name,
                batch=True,
            )
            if self.acting_ack is not None and self.acting_ack(b.revive_queue_id, ack):
                continue  # applied in memory by the acting slave (see `ack_nowait`)
            msg = ack_message(
                ack, c.revive_topic, b.revive_queue_id, self.now_ms(), self.store_host
            )
            msgs.append(msg)
            keyed.append((ack.merge_key, msg, len(offsets)))
        if not msgs:
            on_done(DONE)
            return None
        escape = self.record_escape()
        if escape is not None:
            return _submit_all(escape, keyed, lambda: on_done(DONE))
        return await self._put(msgs, lambda: on_done(DONE), on_done)

    def _batch_ack_ordered(self, b: BatchAck) -> Refusal | None:
        """One ordered CK's acknowledged offsets, in offset order (upstream ackOrderly each)."""
        topic = real_topic(b.topic, b.consumer_group, b.retry)
        for offset in sorted(b.ack_offsets()):
            if self._check_offset(topic, b.queue_id, offset) is not None:
                continue  # upstream skips these
            refusal = self.order.ack(topic, b.consumer_group, b.queue_id, offset, b.pop_time)
            if refusal is not None:
                return refusal
        return None

    def _ack_old(
        self, old: AckMsg, qid: int, changed: InvisibleTimeChanged, on_done: OnChanged
    ) -> None:
        """CHANGE_MESSAGE_INVISIBLETIME of a message whose old CK the POP buffer held: the new
        CK is stored, now the old one's bit (never before: the old CK all acknowledged would be
        dropped and the message's only CK lost with a refused new one); if the old CK has left
        the buffer meanwhile (written), its ACK record goes as usual."""
        key, offset = old.merge_key, old.ack_offsets[0]
        buf = self.buffer
        if buf is not None and buf.ack(key, offset):  # still in memory: set there
            on_done(changed)
            return
        answer = _changed_once(changed, on_done)
        if not self.batcher.submit(qid, key, offset, answer):
            on_done(changed)  # not recorded: the old CK revives the message once more

    async def change_invisible_time(
        self, h: ChangeInvisibleTimeRequestHeader, on_done: OnChanged
    ) -> Refusal | None:
        """CHANGE_MESSAGE_INVISIBLETIME: the new CK and the ACK of the old receipt go in one
        store request, the CK first (upstream's order); ``on_done`` gets the new receipt's
        popTime / invisibleTime / reviveQid once both are stored."""
        fields = self._receipt(h.extraInfo)
        if isinstance(fields, Refusal):
            return fields
        extra = ExtraInfo(*fields)
        if h.invisibleTime <= 0:
            return Refusal(
                ResponseCode.INVALID_PARAMETER, f"invisibleTime {h.invisibleTime} must be positive"
            )
        topic = extra.real_topic(h.topic, h.consumerGroup)
        bad = self._check_offset(topic, h.queueId, h.offset)
        if bad is not None:
            return bad
        if extra.revive_qid == POP_ORDER_REVIVE_QUEUE:
            invisible = self.order.change_invisible_time(
                topic, h.consumerGroup, h.queueId, h.offset, extra.pop_time, h.invisibleTime
            )
            on_done(InvisibleTimeChanged(extra.pop_time, invisible, POP_ORDER_REVIVE_QUEUE))
            return None
        c = self.config
        now = self.now_ms()
        revive_qid = self.next_revive_qid()
        ck = PopCheckPoint(
            start_offset=h.offset,
            pop_time=now,
            invisible_time=h.invisibleTime,
            num=1,
            queue_id=h.queueId,
            topic=topic,
            cid=h.consumerGroup,
            broker_name=extra.broker_name,  # upstream: the receipt's broker keeps the CK
        )
        old = AckMsg(
            (h.offset,),
            extra.ck_queue_offset,
            h.consumerGroup,
            topic,
            h.queueId,
            extra.pop_time,
            extra.broker_name,
        )
        msgs = [
            ck_message(ck, c.revive_topic, revive_qid, now, self.store_host),
            ack_message(old, c.revive_topic, extra.revive_qid, now, self.store_host),
        ]
        changed = InvisibleTimeChanged(now, h.invisibleTime, revive_qid)
        buf = self.buffer
        if buf is not None and buf.holds(old.merge_key, h.offset):  # the old CK is in memory
            return await self._put(
                msgs[:1], lambda: self._ack_old(old, extra.revive_qid, changed, on_done), on_done
            )
        escape = self.record_escape()
        if escape is not None:  # the old CK's pinned master keeps both (module docstring)
            if self.acting_ack is not None and self.acting_ack(extra.revive_qid, old):
                new_ck = msgs[:1]  # the old ACK was applied in memory (see `ack_nowait`)
                submitted = escape.submit(
                    ck.merge_key, new_ck, lambda: on_done(changed), acked=0, new_key=ck.merge_key
                )
                return _queued(submitted)
            submitted = escape.submit(
                old.merge_key, msgs, lambda: on_done(changed), acked=1, new_key=ck.merge_key
            )
            return _queued(submitted)
        return await self._put(msgs, lambda: on_done(changed), on_done)


def _changed_once(changed: InvisibleTimeChanged, on_done: OnChanged) -> OnAcked:
    """The old receipt's ACK answered as the change: it is made either way, the new CK is
    stored (an ACK not recorded means one more delivery, not a loss)."""
    return lambda _: on_done(changed)


def _queued(error: str | None) -> Refusal | None:
    return None if error is None else Refusal(ResponseCode.SYSTEM_ERROR, error)


def _submit_all(
    escape: PopRecordEscape,
    keyed: list[tuple[MergeKey, MessageToStore, int]],
    on_stored: Callable[[], None],
) -> Refusal | None:
    """A batch ACK's records, one job per CK (each to its own pinned master); ``on_stored``
    once all are stored."""
    left = [len(keyed)]

    def one_stored() -> None:
        left[0] -= 1
        if left[0] == 0:
            on_stored()

    for key, msg, count in keyed:
        refused = _queued(escape.submit(key, [msg], one_stored, acked=count))
        if refused is not None:
            return refused
    return None


def not_stored(status: PutStatus, remark: str | None) -> Refusal:
    return Refusal(
        ResponseCode.SYSTEM_ERROR,
        f"the POP record was not stored ({status.value}{': ' + remark if remark else ''}); retry",
    )
