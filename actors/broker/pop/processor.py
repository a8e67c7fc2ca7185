"""POP_MESSAGE (upstream PopMessageProcessor, non-orderly): pop, checkpoint, long-poll.

A pop reads up to maxMsgNums messages from one queue (queueId >= 0) or from the topic's queues
starting at a random one (queueId -1), and from the group's pop retry topic
(``%RETRY%<group>_<topic>``): first with probability popFromRetryProbability percent, otherwise
after the topic when the topic gave fewer than asked for (upstream's order). For every queue
that gave messages it writes a CK (pop_checkpoint.py) to revive queue ``n % reviveQueueNum`` of
``rmq_sys_REVIVE_LOG_<cluster>`` and waits for the store to answer; only then does the group's
consumer offset move past the messages (the messages are in flight, tracked by the CK). A CK the
store refused leaves the offset where it was and the messages are not returned. Two pops of one
group never read one queue at once (a queue being popped is skipped, like upstream's queue lock).
With ``enablePopBufferMerge`` a CK the buffer takes is kept in memory instead and the messages
go out at once; the offset then moves only through the buffer (buffer_merge.py), and every other
offset move of a pop waits behind it there (`commit_offset`).
``expType=SQL92`` pops through a compiled selector (dispatch/message_filter.py) that also judges
the retry topic's messages, as upstream; docs/sql92-filter.md.

The pop offset is the group's consumer offset; when the group has none, initMode decides: MIN
(0) the queue's min offset, MAX (1) the max offset minus one, except that a queue which still
holds its first message starts at 0 (upstream initPopOffsetByCheckMsgInMem); a retry topic
always starts at MIN. An offset the store no longer has moves to the store's next offset.

Messages of the pop retry topic are returned with the original topic and a POP_CK property
carrying their receipt (upstream popResponseReturnActualRetryTopic=false); messages of the
topic itself are returned as stored, and the client builds their receipt from the response
header's startOffsetInfo / msgOffsetInfo.

A pop is served as a task of the PopLongPollingService (bounded; inline when it cannot take
one), so its CK writes never stall the connection's next request. Nothing found and pollTime >
0: the pop is held in the PopLongPollingService (pop_hold.py) and
answered when a message arrives on the topic or its retry topic, or POLLING_TIMEOUT at the
deadline.

order=true (ordered POP, upstream's FIFO consumption): a queue whose last batch is still in
flight for the group is skipped (pop_order.py decides, pop_order_service.py holds the state);
otherwise its next messages are handed out without a CK, the group's offset stays at the
batch's first message (ACKs move it) and the response carries reviveQid 999
(POP_ORDER_REVIVE_QUEUE) and orderCountInfo. The pop retry topic is not read (nothing of an
ordered pop is revived).

On a slave acting for its dead master (RIP-32) the CK goes to a pinned master of another group
(`record_escape`, failover/pop_escape.py); the offset moves on this slave, and a returning
master takes it in pre-online.
"""

from __future__ import annotations

import itertools
import operator
import random
import struct
from collections.abc import Callable
from functools import partial
from itertools import chain, repeat

import attrs
import trio

from rocketrio.actors.broker.dispatch.filtered_read import read_selected
from rocketrio.actors.broker.dispatch.long_poll import Held, Waiter
from rocketrio.actors.broker.dispatch.message_filter import (
    PARSE_FAILED,
    FilterSelectors,
    MessageSelector,
    no_filters,
)
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.pop.attempt import PopAcc, PopAttempt, PopConfig, PopOutcome, Popped
from rocketrio.actors.broker.pop.buffer_merge import PopBuffer
from rocketrio.actors.broker.pop.hold import PopLongPollingService
from rocketrio.actors.broker.pop.order_service import PopOrderService
from rocketrio.actors.broker.pop.revive_log import Host, ck_message
from rocketrio.actors.broker.store.escape_bridge import PopRecordEscape
from rocketrio.actors.broker.store.messages import StoreWriter, put_and_wait
from rocketrio.actors.broker.store.queue_reader import QueueReader
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.broker.tables.topic_config import RETRY_GROUP_TOPIC_PREFIX, check_group_name
from rocketrio.protocol.bodies import PERM_READ
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.filter import SubscriptionParseError, build_subscription
from rocketrio.protocol.message import (
    QUEUE_OFFSET_POSITION,
    build_stored_message,
    decode_stored,
    encode_properties,
    parse_host,
)
from rocketrio.protocol.pop_checkpoint import PopCheckPoint
from rocketrio.protocol.pop_extra_info import (
    INIT_MODE_MIN,
    POP_ORDER_REVIVE_QUEUE,
    PROPERTY_POP_CK,
    ExtraInfo,
    msg_offset_entry,
    order_count_entry,
    pop_retry_topic_v1,
    pop_retry_topic_v2,
    start_offset_entry,
)
from rocketrio.protocol.pop_headers import PopMessageRequestHeader
from rocketrio.storage.message_store import GetMessageStatus, MessageToStore

MAX_POP_NUMS = 32  # upstream refuses more per request
RECHECKS = 3  # pops re-run before holding when messages arrived during the attempt
_QOFFSET = struct.Struct(">q")
# a stored record's queue offset, as a 1-tuple (`chain.from_iterable` of a read's records)
_queue_offset_of = partial(_QOFFSET.unpack_from, offset=QUEUE_OFFSET_POSITION)


def queue_offsets(buffers: list[bytes]) -> list[int]:
    """The queue offsets of a read's records."""
    return list(chain.from_iterable(map(_queue_offset_of, buffers)))


_S = GetMessageStatus
RESET_OFFSET = (_S.OFFSET_TOO_SMALL, _S.OFFSET_OVERFLOW_BADLY, _S.OFFSET_FOUND_NULL)
SKIPPED = (
    _S.NO_MATCHED_MESSAGE,
    _S.OFFSET_FOUND_NULL,
    _S.MESSAGE_WAS_REMOVING,
    _S.NO_MATCHED_LOGIC_QUEUE,
)


class PopMessageProcessor:
    def __init__(
        self,
        config: PopConfig,
        *,
        topics: TopicTable,
        groups: GroupTable,
        offsets: OffsetTable,
        store: QueueReader,
        writer: StoreWriter,
        hold: PopLongPollingService,
        order: PopOrderService,
        now_ms: Callable[[], int],
        store_host: Host,
        rng: random.Random | None = None,
        filters: FilterSelectors | None = None,
        record_escape: Callable[[], PopRecordEscape | None] = lambda: None,
        buffer: PopBuffer | None = None,
    ) -> None:
        self.config = config
        self.buffer = buffer  # enablePopBufferMerge (buffer_merge.py); None when off
        self.record_escape = record_escape  # set while this slave acts for its dead master
        self.filters = filters if filters is not None else no_filters()
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.store = store
        self.writer = writer
        self.hold = hold
        self.order = order
        self.now_ms = now_ms
        self.store_host = store_host
        self.rng = rng or random.Random()
        self._ck_counter = itertools.count()
        self.busy: set[tuple[str, str, int]] = set()  # (topic, group, queue) being popped
        # a pop served without a task (pop_nowait.py; set by the POP feature): True if served
        self.nowait: Callable[[PopMessageRequestHeader, MessageSelector, Waiter], bool] | None
        self.nowait = None

    def next_revive_qid(self) -> int:
        return next(self._ck_counter) % self.config.revive_queue_num

    # ------------------------------------------------------------------ the request

    async def pop(self, h: PopMessageRequestHeader, reply: Waiter) -> PopOutcome | None:
        """A refusal now, or None: ``reply`` gets the outcome once the pop found messages or
        its pollTime ended. Served without a task when its messages are there and nothing
        must wait but the store (pop_nowait.py), else as a task of the hold service when it can
        take one, else inline (then a found outcome is returned at once)."""
        checked = self._check(h)
        if isinstance(checked, Refusal):
            return checked
        if self.nowait is not None and self.nowait(h, checked, reply):
            return None
        if self.hold.try_start(self._serve, h, checked, reply):
            return None
        return await self._attempt(h, checked, reply)

    async def _serve(self, h: PopMessageRequestHeader, sel: MessageSelector, reply: Waiter) -> None:
        try:
            outcome = await self._attempt(h, sel, reply)
        except Exception as e:
            outcome = self.failed(e)
        if outcome is not None and not reply.gone:
            reply.deliver(outcome)

    async def _attempt(
        self, h: PopMessageRequestHeader, sel: MessageSelector, reply: Waiter
    ) -> PopOutcome | None:
        """Pop now; hold when nothing is there and pollTime > 0 (None: ``reply`` answers)."""
        for _ in range(RECHECKS):
            seen = self.hold.arrivals
            popped = await self._pop_once(h, sel)
            # a message that arrived while the pop awaited a read would not wake it once held
            if popped.found or h.pollTime <= 0 or self.hold.arrivals == seen:
                break
        return self.hold_or_answer(h, sel, reply, popped)

    def hold_or_answer(
        self, h: PopMessageRequestHeader, sel: MessageSelector, reply: Waiter, popped: Popped
    ) -> PopOutcome | None:
        """An attempt's outcome: ``popped``, or None once the pop is held (nothing found and a
        pollTime), or ``popped`` marked POLLING_FULL when it cannot be held."""
        if popped.found or h.pollTime <= 0:
            return popped
        deadline = trio.current_time() + min(h.pollTime, self.config.max_poll_ms) / 1000
        held = Held(
            reply,
            (h, sel),
            h.topic,
            self._wake_topics(h),
            deadline,
            self._rerun,
            self.failed,
        )
        if self.hold.suspend(held, (h.topic, h.consumerGroup, h.queueId)):
            return None
        return attrs.evolve(popped, polling_full=self.hold.holding)

    def _check(self, h: PopMessageRequestHeader) -> MessageSelector | Refusal:
        """Everything before the read; what the reads keep, or the refusal."""
        c = self.config
        if not c.broker_permission & PERM_READ:
            return Refusal(
                ResponseCode.NO_PERMISSION,
                f"the broker[{c.broker_ip}] popping message is forbidden",
            )
        if h.maxMsgNums > MAX_POP_NUMS:
            return Refusal(
                ResponseCode.SYSTEM_ERROR,
                f"the broker[{c.broker_ip}] pop message is illegal: maxMsgNums "
                f"{h.maxMsgNums} exceeds {MAX_POP_NUMS}",
            )
        if h.maxMsgNums <= 0 or h.invisibleTime <= 0:
            return Refusal(
                ResponseCode.INVALID_PARAMETER,
                f"maxMsgNums ({h.maxMsgNums}) and invisibleTime ({h.invisibleTime} ms) must "
                "be positive",
            )
        bad = check_group_name(h.consumerGroup)
        if bad:
            return Refusal(ResponseCode.INVALID_PARAMETER, bad)
        sgc = self.groups.find_group(h.consumerGroup)
        if sgc is None:
            return Refusal(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{h.consumerGroup}] does not exist, create it first",
            )
        if not sgc.consumeEnable:
            return Refusal(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumerGroup}"
            )
        tc = self.topics.select(h.topic)
        if tc is None:
            return Refusal(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!"
            )
        if not tc.perm & PERM_READ:
            return Refusal(
                ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] peeking message is forbidden"
            )
        if h.queueId != -1 and not self.store.valid_queue(h.topic, h.queueId, tc.readQueueNums):
            return Refusal(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queueId}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{tc.readQueueNums}]",
            )
        try:
            sub = build_subscription(h.topic, h.exp, h.expType)
        except SubscriptionParseError as e:
            return Refusal(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"{PARSE_FAILED}: {e}")
        return self.filters.for_pop(sub, h.consumerGroup)

    def retry_topics(self, h: PopMessageRequestHeader) -> list[str]:
        c = self.config
        names = []
        if c.enable_retry_topic_v2:
            names.append(pop_retry_topic_v2(h.topic, h.consumerGroup))
            if c.retrieve_from_retry_v1:
                names.append(pop_retry_topic_v1(h.topic, h.consumerGroup))
        else:
            names.append(pop_retry_topic_v1(h.topic, h.consumerGroup))
        return [t for t in names if self.topics.select(t) is not None]

    def _wake_topics(self, h: PopMessageRequestHeader) -> tuple[str, ...]:
        return (
            h.topic,
            pop_retry_topic_v1(h.topic, h.consumerGroup),
            pop_retry_topic_v2(h.topic, h.consumerGroup),
        )

    async def _rerun(self, held: Held, final: bool) -> PopOutcome | None:
        h, sel = held.request
        popped = await self._pop_once(h, sel)
        if popped.found or final:
            return popped
        return None

    @staticmethod
    def failed(e: Exception) -> Refusal:
        return Refusal(ResponseCode.SYSTEM_ERROR, f"pop failed: {type(e).__name__}: {e}")

    # ------------------------------------------------------------------ one attempt

    async def _pop_once(self, h: PopMessageRequestHeader, sel: MessageSelector) -> Popped:
        p = self.attempt_of(h, sel)
        acc = PopAcc(h.maxMsgNums)
        retry_topics = [] if h.order else self.retry_topics(h)
        retry_first = p.rand_q < self.config.pop_from_retry_probability
        if retry_first:
            for topic in retry_topics:
                await self._pop_topic(p, acc, topic, True)
        await self._pop_topic(p, acc, h.topic, False)
        if not retry_first and not acc.full:
            for topic in retry_topics:
                await self._pop_topic(p, acc, topic, True)
        return self.popped(p, acc)

    def attempt_of(self, h: PopMessageRequestHeader, sel: MessageSelector) -> PopAttempt:
        """One attempt's fixed parts: its pop time, revive queue and random start."""
        rand_q = self.rng.randrange(100)
        revive_qid = POP_ORDER_REVIVE_QUEUE if h.order else self.next_revive_qid()
        return PopAttempt(h, sel, self.now_ms(), revive_qid, rand_q)

    def popped(self, p: PopAttempt, acc: PopAcc) -> Popped:
        """What an attempt gathered, as its outcome."""
        h = p.h
        return Popped(
            p.pop_time,
            h.invisibleTime,
            p.revive_qid,
            acc.rest,
            ";".join(acc.start_infos),
            ";".join(acc.msg_infos),
            tuple(acc.buffers),
            order_count_info=";".join(acc.order_infos) if h.order else None,
        )

    async def _pop_topic(self, p: PopAttempt, acc: PopAcc, topic: str, is_retry: bool) -> None:
        tc = self.topics.select(topic)
        if tc is None:
            return
        if is_retry or p.h.queueId < 0:
            ids = self.store.pop_queue_ids(topic, tc.readQueueNums)  # a static topic's: logic
            n = len(ids)
            for i in range(n):
                await self._pop_queue(p, acc, topic, ids[(p.rand_q + i) % n], is_retry)
        else:
            await self._pop_queue(p, acc, topic, p.h.queueId, is_retry)

    def pop_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        buf = self.buffer
        if buf is not None and (latest := buf.latest(topic, group, queue_id)) is not None:
            return latest  # after the pops whose offsets the buffer holds back
        offset = self.offsets.query(group, topic, queue_id)
        if offset >= 0:
            return offset
        store = self.store
        if init_mode == INIT_MODE_MIN or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            offset = store.get_min_offset(topic, queue_id)
        elif store.get_min_offset(topic, queue_id) <= 0 and store.get_max_offset(topic, queue_id):
            offset = 0  # the queue still holds its first message
        else:
            offset = max(0, store.get_max_offset(topic, queue_id) - 1)
        self.offsets.commit(group, topic, queue_id, offset)
        return offset

    async def _pop_queue(
        self, p: PopAttempt, acc: PopAcc, topic: str, queue_id: int, is_retry: bool
    ) -> None:
        h = p.h
        group = h.consumerGroup
        key = (topic, group, queue_id)
        if acc.full or key in self.busy or self.held_back(topic, group, queue_id):
            offset = self.offsets.query(group, topic, queue_id)
            acc.rest += max(0, self.store.get_max_offset(topic, queue_id) - max(offset, 0))
            return
        self.busy.add(key)
        try:
            await self._pop_locked(p, acc, topic, queue_id, is_retry)
        finally:
            self.busy.discard(key)

    async def _pop_locked(
        self, p: PopAttempt, acc: PopAcc, topic: str, queue_id: int, is_retry: bool
    ) -> None:
        h = p.h
        group = h.consumerGroup
        if h.order and self.order.blocked(h.attemptId, topic, group, queue_id, h.invisibleTime):
            return  # its backlog is not counted: it cannot be popped before an ACK wakes it
        offset = self.pop_offset(group, topic, queue_id, h.initMode)
        # a retry topic's tags are not filtered; a SQL92 selector judges its messages too
        sel = MessageSelector(None, p.sel.keep) if is_retry else p.sel
        want = h.maxMsgNums - len(acc.buffers)
        max_bytes = self.config.max_transfer_bytes
        result = await read_selected(self.store, topic, queue_id, offset, want, max_bytes, sel)
        if result.status in RESET_OFFSET:
            offset = result.next_begin_offset
            self.commit_offset(group, topic, queue_id, offset)
            result = await read_selected(self.store, topic, queue_id, offset, want, max_bytes, sel)
        if result.message_count:
            qoffsets = queue_offsets(result.buffers)
            if h.order:
                counts = self.order.popped(
                    h.attemptId, topic, group, queue_id, p.pop_time, h.invisibleTime, qoffsets
                )
                # the offset stays at the batch's start: ACKs move it (commit_and_next)
                self.offsets.commit(group, topic, queue_id, offset)
                acc.order_infos.append(
                    order_count_entry(topic, queue_id, counts.by_offset, counts.min_count)
                )
                acc.start_infos.append(start_offset_entry(topic, queue_id, offset))
                acc.msg_infos.append(msg_offset_entry(topic, queue_id, qoffsets))
                acc.buffers.extend(result.buffers)
                acc.rest += max(0, result.max_offset - result.next_begin_offset)
                return
            ck = self.ck_of(p, topic, queue_id, offset, qoffsets)
            if not self.buffered(p, ck, result.next_begin_offset):
                if not await self._put_ck(ck, self.ck_record(p, ck)):
                    acc.rest += result.max_offset - offset
                    return
                self.commit_offset(group, topic, queue_id, result.next_begin_offset)
            self.take(p, acc, (topic, queue_id, offset, is_retry), qoffsets, result.buffers)
        elif result.status in SKIPPED and result.next_begin_offset > offset:
            self.commit_offset(group, topic, queue_id, result.next_begin_offset)
        acc.rest += max(0, result.max_offset - result.next_begin_offset)

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A pop's offset move: behind the offsets the buffer holds back for the queue, if it
        holds any (buffer_merge.py), else to the table."""
        buf = self.buffer
        if buf is None or not buf.defer_offset(topic, group, queue_id, offset):
            self.offsets.commit(group, topic, queue_id, offset)

    def held_back(self, topic: str, group: str, queue_id: int) -> bool:
        """The buffer holds back as many of the queue's pops as it may: skip it for now."""
        buf = self.buffer
        return buf is not None and buf.queue_full(topic, group, queue_id)

    def buffered(self, p: PopAttempt, ck: PopCheckPoint, next_offset: int) -> bool:
        """The CK kept by the buffer instead of written (its offset held back there), when the
        buffer is on and takes it; never on a slave acting for its dead master."""
        buf = self.buffer
        return (
            buf is not None
            and buf.takes(ck.invisible_time)
            and self.record_escape() is None
            and buf.add_ck(ck, p.revive_qid, next_offset, self.now_ms())
        )

    def checkpoint(
        self, p: PopAttempt, topic: str, queue_id: int, offset: int, qoffsets: list[int]
    ) -> tuple[PopCheckPoint, MessageToStore]:
        """The CK of a read from ``offset`` whose records have ``qoffsets``, and its record."""
        ck = self.ck_of(p, topic, queue_id, offset, qoffsets)
        return ck, self.ck_record(p, ck)

    def ck_record(self, p: PopAttempt, ck: PopCheckPoint) -> MessageToStore:
        """The CK's revive-log record."""
        c = self.config
        return ck_message(ck, c.revive_topic, p.revive_qid, self.now_ms(), self.store_host)

    def ck_of(
        self, p: PopAttempt, topic: str, queue_id: int, offset: int, qoffsets: list[int]
    ) -> PopCheckPoint:
        """The CK of a read from ``offset`` whose records have ``qoffsets``."""
        return PopCheckPoint(
            start_offset=offset,
            pop_time=p.pop_time,
            invisible_time=p.h.invisibleTime,
            num=len(qoffsets),
            queue_id=queue_id,
            topic=topic,
            cid=p.h.consumerGroup,
            broker_name=self.config.broker_name,
            queue_offset_diff=tuple(map(operator.sub, qoffsets, repeat(offset))),
        )

    def take(
        self,
        p: PopAttempt,
        acc: PopAcc,
        where: tuple[str, int, int, bool],
        qoffsets: list[int],
        buffers: list[bytes],
    ) -> None:
        """A read's messages into the answer (``where``: topic, queue, start offset, retry)."""
        topic, queue_id, offset, is_retry = where
        acc.start_infos.append(start_offset_entry(topic, queue_id, offset))
        acc.msg_infos.append(msg_offset_entry(topic, queue_id, qoffsets))
        if is_retry:
            acc.buffers.extend(self._as_original(p, topic, offset, b) for b in buffers)
        else:
            acc.buffers.extend(buffers)

    async def _put_ck(self, ck: PopCheckPoint, msg: MessageToStore) -> bool:
        """The CK stored: here, or on a slave acting for its dead master at its pinned master
        of another group (RIP-32, failover/pop_escape.py)."""
        escape = self.record_escape()
        if escape is not None:
            return await escape.put_ck(ck.merge_key, ck.num, msg) is None
        answer = await put_and_wait(self.writer, [msg], nowait_first=True)
        return bool(answer.results) and answer.status.kept_by_failover  # pop_nowait.py

    def _as_original(self, p: PopAttempt, retry_topic: str, ck_offset: int, record: bytes) -> bytes:
        """A pop retry topic's record re-encoded under the original topic with its receipt in
        POP_CK (so the client acks the retry topic's CK)."""
        msg, _ = decode_stored(record)
        props = msg.properties
        props.setdefault(
            PROPERTY_POP_CK,
            ExtraInfo.of(
                ck_offset,
                p.pop_time,
                p.h.invisibleTime,
                p.revive_qid,
                retry_topic,
                self.config.broker_name,
                msg.queue_id,
                msg.queue_offset,
            ).build(),
        )
        return build_stored_message(
            topic=p.h.topic,
            queue_id=msg.queue_id,
            body=msg.body,
            flag=msg.flag,
            properties=encode_properties(props),
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=parse_host(msg.born_host),
            store_timestamp=msg.store_timestamp,
            store_host=parse_host(msg.store_host),
            reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset,
            queue_offset=msg.queue_offset,
            physical_offset=msg.commitlog_offset,
            record_crc="none",
        )
