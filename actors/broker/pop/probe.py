"""The POP probes: PEEK_MESSAGE, NOTIFICATION and POLLING_INFO (upstream PeekMessageProcessor,
NotificationProcessor and PollingInfoProcessor). None of them changes anything: no CK, no offset
moves, no invisibility.

All three check, in upstream's order: the broker readable, the topic exists and is readable, the
queueId below the topic's read queues (a negative one means every queue), the group exists and
may consume; each refusal carries upstream's code (NO_PERMISSION, TOPIC_NOT_EXIST, SYSTEM_ERROR,
SUBSCRIPTION_GROUP_NOT_EXIST). A maxMsgNums of 0 or less peeks nothing (PULL_NOT_FOUND).

- PEEK_MESSAGE reads up to maxMsgNums messages from the group's pop offset (its consumer
  offset, else the queue's min offset) of the queue, or of every queue from a random one, and of
  the group's pop retry topic: first when the random draw is a multiple of 5, else after the
  topic when it gave fewer than asked for. ``rest`` counts what is left behind the offsets.
- NOTIFICATION answers whether the group has a message to pop there (the same queues, the pop
  retry topics too; an ordered request's queue whose batch is in flight counts as empty). When
  nothing is there and pollTime > 0 the request is held, in its own PopLongPollingService
  bounded by maxPopPollingSize like held pops, until bornTime + pollTime: an arrival on the topic
  or its retry topics re-checks it and answers True; the deadline, a full service or shutdown
  answers False.
- POLLING_INFO counts the POP_MESSAGE requests held now under (topic, group, queueId).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs
import trio

from rocketrio.actors.broker.dispatch.long_poll import Held, Waiter
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.pop.attempt import PopConfig
from rocketrio.actors.broker.pop.buffer_merge import PopBuffer
from rocketrio.actors.broker.pop.hold import PopLongPollingService
from rocketrio.actors.broker.pop.order_service import PopOrderService
from rocketrio.actors.broker.store.queue_reader import QueueReader
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.protocol.bodies import PERM_READ
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.pop_extra_info import pop_retry_topic_v1, pop_retry_topic_v2
from rocketrio.protocol.pop_probe_headers import (
    NotificationRequestHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
)
from rocketrio.storage.message_store import GetMessageStatus

RC = ResponseCode
# the statuses after which upstream's peek reads again from the store's next offset
_REREAD = (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY)
Probe = PeekMessageRequestHeader | NotificationRequestHeader | PollingInfoRequestHeader


@attrs.frozen
class Peeked:
    """A peek's answer: the stored records (FOUND when not empty) and the backlog counted."""

    buffers: tuple[bytes, ...]
    rest: int


@attrs.define
class _PeekAcc:
    want: int
    buffers: list[bytes] = attrs.field(factory=list)
    rest: int = 0


class PopProbe:
    """PEEK_MESSAGE, NOTIFICATION and POLLING_INFO of one broker (module docstring)."""

    def __init__(
        self,
        config: PopConfig,
        *,
        topics: TopicTable,
        groups: GroupTable,
        offsets: OffsetTable,
        store: QueueReader,
        pops: PopLongPollingService,
        notifications: PopLongPollingService,
        order: PopOrderService,
        now_ms: Callable[[], int],
        rng: random.Random | None = None,
        buffer: PopBuffer | None = None,
    ) -> None:
        self.config = config
        self.buffer = buffer  # the pop offsets it holds back are the ones a pop reads from
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.store = store
        self.pops = pops
        self.notifications = notifications
        self.order = order
        self.now_ms = now_ms
        self.rng = rng or random.Random()

    def check(self, h: Probe) -> Refusal | None:
        """Upstream's checks, in its order; None when the request may be served."""
        if not self.config.broker_permission & PERM_READ:
            return Refusal(
                RC.NO_PERMISSION,
                f"the broker[{self.config.broker_ip}] peeking message is forbidden",
            )
        tc = self.topics.select(h.topic)
        if tc is None:
            return Refusal(RC.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!")
        if not tc.perm & PERM_READ:
            return Refusal(RC.NO_PERMISSION, f"the topic[{h.topic}] peeking message is forbidden")
        if h.queueId >= 0 and not self.store.valid_queue(h.topic, h.queueId, tc.readQueueNums):
            return Refusal(
                RC.SYSTEM_ERROR,
                f"queueId[{h.queueId}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{tc.readQueueNums}]",
            )
        sgc = self.groups.find_group(h.consumerGroup)
        if sgc is None:
            return Refusal(
                RC.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{h.consumerGroup}] does not exist, create it first",
            )
        if not sgc.consumeEnable:
            return Refusal(RC.NO_PERMISSION, f"subscription group no permission, {h.consumerGroup}")
        return None

    # ------------------------------------------------------------------ shared reads

    def offset_of(self, group: str, topic: str, queue_id: int) -> int:
        """The group's pop offset of a queue without initialising it (upstream getPopOffset,
        which also reads PopBufferMergeService's latest offset first)."""
        buf = self.buffer
        if buf is not None and (latest := buf.latest(topic, group, queue_id)) is not None:
            return latest
        offset = self.offsets.query(group, topic, queue_id)
        return offset if offset >= 0 else self.store.get_min_offset(topic, queue_id)

    def queues(self, topic: str, queue_id: int, rand_q: int) -> list[int]:
        """``queue_id``, or every queue of ``topic`` from ``rand_q`` on when it is negative."""
        if queue_id >= 0:
            return [queue_id]
        tc = self.topics.select(topic)
        if tc is None:
            return []
        ids = self.store.pop_queue_ids(topic, tc.readQueueNums)
        return [ids[(rand_q + i) % len(ids)] for i in range(len(ids))]

    def retry_topic(self, topic: str, group: str) -> str:
        """The pop retry topic upstream's peek and notification read first."""
        v2 = self.config.enable_retry_topic_v2
        return pop_retry_topic_v2(topic, group) if v2 else pop_retry_topic_v1(topic, group)

    # ------------------------------------------------------------------ PEEK_MESSAGE

    async def peek(self, h: PeekMessageRequestHeader) -> Peeked | Refusal:
        refusal = self.check(h)
        if refusal is not None:
            return refusal
        rand_q = self.rng.randrange(100)
        acc = _PeekAcc(h.maxMsgNums)
        retry = self.retry_topic(h.topic, h.consumerGroup)
        retry_first = rand_q % 5 == 0
        if retry_first:
            await self._peek_topic(h, acc, retry, -1, rand_q)
        await self._peek_topic(h, acc, h.topic, h.queueId, rand_q)
        if not retry_first and len(acc.buffers) < acc.want:
            await self._peek_topic(h, acc, retry, -1, rand_q)
        return Peeked(tuple(acc.buffers), acc.rest)

    async def _peek_topic(
        self, h: PeekMessageRequestHeader, acc: _PeekAcc, topic: str, queue_id: int, rand_q: int
    ) -> None:
        for qid in self.queues(topic, queue_id, rand_q):
            offset = self.offset_of(h.consumerGroup, topic, qid)
            acc.rest += self.store.get_max_offset(topic, qid) - offset
            want = acc.want - len(acc.buffers)
            if want <= 0:
                continue
            max_bytes = self.config.max_transfer_bytes
            result = await self.store.read_messages(topic, qid, offset, want, max_bytes)
            if result.status in _REREAD:
                offset = result.next_begin_offset
                result = await self.store.read_messages(topic, qid, offset, want, max_bytes)
            acc.buffers.extend(result.buffers)

    # ------------------------------------------------------------------ NOTIFICATION

    async def notification(
        self, h: NotificationRequestHeader, reply: Waiter
    ) -> bool | Refusal | None:
        """True/False now, a refusal, or None once held (``reply`` gets the answer)."""
        refusal = self.check(h)
        if refusal is not None:
            return refusal
        if self.has_message(h):
            return True
        now = self.now_ms()
        left_ms = (h.bornTime or now) + h.pollTime - now  # upstream: expired at born + poll
        if h.pollTime <= 0 or left_ms <= 0:
            return False
        deadline = trio.current_time() + min(left_ms, self.config.max_poll_ms) / 1000
        held = Held(reply, h, h.topic, self._wake_topics(h), deadline, self._rerun, self.failed)
        return None if self.notifications.suspend(held) else False

    def has_message(self, h: NotificationRequestHeader) -> bool:
        """Whether the group has something to pop there (upstream's order of looking)."""
        rand_q = self.rng.randrange(100)
        retry = self._retry_topics(h)
        if rand_q % 5 == 0 and any(self._any_in(h, t, -1, rand_q) for t in retry):
            return True
        if self._any_in(h, h.topic, h.queueId, rand_q):
            return True
        return rand_q % 5 != 0 and any(self._any_in(h, t, -1, rand_q) for t in retry)

    def _retry_topics(self, h: NotificationRequestHeader) -> list[str]:
        names = [self.retry_topic(h.topic, h.consumerGroup)]
        if self.config.enable_retry_topic_v2 and self.config.retrieve_from_retry_v1:
            names.append(pop_retry_topic_v1(h.topic, h.consumerGroup))
        return names

    def _any_in(self, h: NotificationRequestHeader, topic: str, queue_id: int, rand_q: int) -> bool:
        group = h.consumerGroup
        for qid in self.queues(topic, queue_id, rand_q):
            # upstream checks an ordered request's block under the request's own topic
            if h.order and self.order.blocked(h.attemptId, h.topic, group, qid, 0):
                continue
            if self.store.get_max_offset(topic, qid) - self.offset_of(group, topic, qid) > 0:
                return True
        return False

    def _wake_topics(self, h: NotificationRequestHeader) -> tuple[str, ...]:
        return (
            h.topic,
            pop_retry_topic_v1(h.topic, h.consumerGroup),
            pop_retry_topic_v2(h.topic, h.consumerGroup),
        )

    async def _rerun(self, held: Held, final: bool) -> bool | None:
        if self.has_message(held.request):
            return True
        return False if final else None

    @staticmethod
    def failed(e: Exception) -> Refusal:
        return Refusal(RC.SYSTEM_ERROR, f"notification failed: {type(e).__name__}: {e}")

    # ------------------------------------------------------------------ POLLING_INFO

    def polling_info(self, h: PollingInfoRequestHeader) -> int | Refusal:
        refusal = self.check(h)
        if refusal is not None:
            return refusal
        return self.pops.polling_num((h.topic, h.consumerGroup, h.queueId))
