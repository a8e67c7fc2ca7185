"""A static topic's logic queues as the POP path reads them (RIP-21 for POP, which upstream's
PopMessageProcessor does not translate; rocketrio's own design, see docs/static-topics.md).

`LogicQueueStore` is the POP path's `QueueReader` (store/queue_reader.py). Other topics go to
the store unchanged; on a static topic queue ids are logic ids and offsets logic offsets, so
POP, its checkpoints (CK: logic queue id, logic start offset and offset diffs), ACK,
CHANGE_INVISIBLE_TIME, ordered POP and revive keep their state in logic terms, in the same
offset table as the push consumers' logic offsets. A read is planned against the logic queue's
generations (`plan_read`, pure):

- before the first generation: OFFSET_TOO_SMALL with the first logic offset (the POP moves);
- at the end of a sealed generation, or in the hole a remapping leaves before the next one:
  OFFSET_FOUND_NULL with the next generation's first logic offset (the POP moves and reads
  again); past a sealed newest generation (a remapping has not decided the next one yet):
  OFFSET_OVERFLOW_ONE, nothing moves;
- otherwise the generation's physical queue is read (at most to its sealed end): here, or with
  a plain physical PULL_MESSAGE (``lo=false``) on the generation's broker.

The answer (`to_logic`, pure) has logic next/min/max offsets and its records relabelled: the
logic queue id and the logic queue offset written into each record, so the client's receipts
(built from the records, upstream's way) name logic positions. A generation read to its end
moves the next offset into the next generation.

Any broker holding the mapping reads this way, leader or not: the old leader revives and checks
the ACKs of the messages it popped before a remapping. A remote read that cannot be made raises
`QueueReadUnavailable` (logged as ``static_topic_remote_read_failed``): the POP answers
SYSTEM_ERROR, the revive round keeps the CK for the next round, nothing is taken as "no message".
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import attrs

from rocketrio.actors.broker.static_topic.remote import RemoteBrokers, RemoteUnavailable
from rocketrio.actors.broker.store.queue_reader import PlainQueues, QueueReadUnavailable
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.topic_queue_mapping import (
    TopicQueueMappingManager,
    leader_items,
)
from rocketrio.actors.observe import events
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.filter import EXPRESSION_TAG, SUB_ALL
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
from rocketrio.protocol.message import QUEUE_OFFSET_POSITION, decode_stored
from rocketrio.protocol.message_format import QUEUE_ID_POSITION, tags_hash_code
from rocketrio.protocol.serde import from_ext
from rocketrio.protocol.static_topic import LogicQueueMappingItem, find_item
from rocketrio.storage.store_read import CqMatch
from rocketrio.storage.store_types import GetMessageStatus, GetResult

_S = GetMessageStatus
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# the group a leader reads another broker's generation with (upstream pre-creates it everywhere)
REMOTE_READ_GROUP = "TOOLS_CONSUMER"


@attrs.frozen
class ReadAt:
    """Where a logic read goes: ``item``'s physical queue at ``physical_offset``."""

    item: LogicQueueMappingItem
    physical_offset: int
    max_count: int
    next_item: LogicQueueMappingItem | None  # the next decided generation
    newest: bool  # the newest decided generation (open for writes when it is the leader's)
    max_logic: int  # the largest logic offset the mapping itself knows


def plan_read(
    items: Sequence[LogicQueueMappingItem], logic_offset: int, max_count: int
) -> ReadAt | GetResult:
    """Where to read ``logic_offset``, or the answer the mapping alone gives."""
    decided = [i for i in items if i.logic_decided()]
    if not decided:
        return GetResult(_S.NO_MATCHED_LOGIC_QUEUE, logic_offset, 0, 0)
    max_logic = max(decided[-1].logicOffset, decided[-1].max_static_offset())
    item = find_item(decided, logic_offset, ignore_negative=True)
    assert item is not None
    i = decided.index(item)
    nxt = decided[i + 1] if i + 1 < len(decided) else None
    if logic_offset < item.logicOffset:  # before the first generation
        return GetResult(_S.OFFSET_TOO_SMALL, item.logicOffset, item.logicOffset, max_logic)
    physical = logic_offset - item.offset_delta()
    if item.end_decided():
        left = item.endOffset - physical
        if left <= 0:  # the end of a sealed generation, or the hole after it
            if nxt is None:
                return GetResult(_S.OFFSET_OVERFLOW_ONE, logic_offset, item.logicOffset, max_logic)
            return GetResult(_S.OFFSET_FOUND_NULL, nxt.logicOffset, item.logicOffset, max_logic)
        max_count = min(max_count, left)
    return ReadAt(item, physical, max_count, nxt, item is decided[-1], max_logic)


def relabel(record: bytes, queue_id: int, offset_delta: int) -> bytes:
    """``record`` with the logic queue id and its queue offset + ``offset_delta``."""
    buf = bytearray(record)
    _I32.pack_into(buf, QUEUE_ID_POSITION, queue_id)
    physical = _I64.unpack_from(buf, QUEUE_OFFSET_POSITION)[0]
    _I64.pack_into(buf, QUEUE_OFFSET_POSITION, physical + offset_delta)
    return bytes(buf)


def to_logic(plan: ReadAt, queue_id: int, r: GetResult) -> GetResult:
    """A physical read of ``plan`` in logic terms (module docstring)."""
    item, nxt = plan.item, plan.next_item
    delta = item.offset_delta()
    status, next_p = r.status, r.next_begin_offset
    ended = next_p >= item.endOffset if item.end_decided() else (
        not plan.newest and not r.buffers and next_p >= r.max_offset
    )  # fmt: skip
    if ended and nxt is not None:
        next_logic = nxt.logicOffset
        if not r.buffers:
            status = _S.OFFSET_FOUND_NULL  # the reader moves on to the next generation
    else:
        next_logic = item.static_offset_strictly(next_p)
    buffers = [relabel(b, queue_id, delta) for b in r.buffers]
    low = item.static_offset_loosely(r.min_offset)
    high = max(item.static_offset_loosely(r.max_offset), plan.max_logic)
    return GetResult(status, next_logic, low, high, buffers, len(buffers))


def split_records(body: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 4 <= len(body):
        size = _I32.unpack_from(body, pos)[0]
        if size <= 0:
            break
        out.append(body[pos : pos + size])
        pos += size
    return out


def remote_result(
    code: int, h: PullMessageResponseHeader, body: bytes, asked: int, tag_codes: CqMatch
) -> GetResult:
    """A physical PULL_MESSAGE answer as the store's `GetResult` (tags filtered here: the
    remote read asks for every message)."""
    next_p, lo, hi = h.nextBeginOffset, h.minOffset, h.maxOffset
    if code == ResponseCode.SUCCESS:
        records = split_records(body)
        if isinstance(tag_codes, set):  # a bit-map probe is for this broker's ext only
            records = [r for r in records if _tag_code(r) in tag_codes]
        if not records:
            return GetResult(_S.NO_MATCHED_MESSAGE, next_p, lo, hi)
        return GetResult(_S.FOUND, next_p, lo, hi, records, len(records))
    if code == ResponseCode.PULL_OFFSET_MOVED:
        status = _S.OFFSET_TOO_SMALL if asked < lo else _S.OFFSET_OVERFLOW_BADLY
        return GetResult(status, next_p, lo, hi)
    if code == ResponseCode.PULL_RETRY_IMMEDIATELY:
        return GetResult(_S.NO_MATCHED_MESSAGE, next_p, lo, hi)
    return GetResult(_S.OFFSET_OVERFLOW_ONE, next_p, lo, hi)  # PULL_NOT_FOUND


def _tag_code(record: bytes) -> int:
    tag = decode_stored(record)[0].tags
    return tags_hash_code(tag) if tag else 0


_PULL_CODES = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    }
)


class LogicQueueStore:
    """The POP path's `QueueReader`: the store, with static topics' logic queues translated."""

    def __init__(
        self,
        view: StoreView,
        mappings: TopicQueueMappingManager,
        remote: RemoteBrokers,
        log: Any,
    ) -> None:
        self.view = view
        self.mappings = mappings
        self.remote = remote
        self.log = log
        # a plain queue's live [min, max], without the view's and store's calls (the ACK's)
        self._plain_range = view.queue_range_reader()

    async def read_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: CqMatch = None,
    ) -> GetResult:
        detail = self.mappings.get(topic)
        if detail is None:
            return await self.view.read_messages(
                topic, queue_id, offset, max_count, max_bytes, tag_codes
            )
        plan = plan_read(detail.hostedQueues.get(queue_id, []), offset, max_count)
        if isinstance(plan, GetResult):
            return plan
        item = plan.item
        if item.bname == detail.bname:
            r = await self.view.read_messages(
                topic, item.queueId, plan.physical_offset, plan.max_count, max_bytes, tag_codes
            )
        else:
            r = await self._remote_read(topic, queue_id, plan, max_bytes, tag_codes)
        return to_logic(plan, queue_id, r)

    def read_nowait(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: CqMatch = None,
    ) -> GetResult | None:
        """A plain topic's small read, inline; None for a static topic's (it may be remote)."""
        view = self.view
        if self.mappings.get(topic) is not None or max_bytes > view.off_loop_read_bytes:
            return None
        return view.get_messages(topic, queue_id, offset, max_count, max_bytes, tag_codes)

    async def _remote_read(
        self, topic: str, gid: int, plan: ReadAt, max_bytes: int, tag_codes: CqMatch
    ) -> GetResult:
        item = plan.item
        h = PullMessageRequestHeader(
            REMOTE_READ_GROUP, topic, item.queueId, plan.physical_offset, plan.max_count,
            PULL_FLAG_SUBSCRIPTION, -1, 0, 0, SUB_ALL, EXPRESSION_TAG, max_bytes, item.bname,
            lo=False,
        )  # fmt: skip
        try:
            resp = await self.remote.call(item.bname, topic, RequestCode.PULL_MESSAGE, h)
            if resp.code not in _PULL_CODES:
                raise RemoteUnavailable(f"broker {item.bname}: {resp.code} {resp.remark}")
        except RemoteUnavailable as e:
            events.emit(
                self.log,
                events.StaticTopicRemoteReadFailed(
                    topic=topic, queue_id=gid, item_broker=item.bname, call="POP read",
                    error=str(e),
                ),
            )  # fmt: skip
            raise QueueReadUnavailable(str(e)) from e
        header = from_ext(PullMessageResponseHeader, resp.ext_fields)
        return remote_result(resp.code, header, resp.body, plan.physical_offset, tag_codes)

    def _decided(self, topic: str, gid: int) -> tuple[str, list[LogicQueueMappingItem]] | None:
        detail = self.mappings.get(topic)
        if detail is None:
            return None
        return detail.bname, [i for i in detail.hostedQueues.get(gid, []) if i.logic_decided()]

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        found = self._decided(topic, queue_id)
        if found is None:
            return self.view.get_min_offset(topic, queue_id)
        bname, decided = found
        if not decided:
            return 0
        first = decided[0]
        if first.bname != bname:
            return first.logicOffset  # another broker's: what the mapping says
        return first.static_offset_loosely(self.view.get_min_offset(topic, first.queueId))

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        found = self._decided(topic, queue_id)
        if found is None:
            return self.view.get_max_offset(topic, queue_id)
        bname, decided = found
        if not decided:
            return 0
        last = decided[-1]
        if last.bname != bname:
            return max(last.logicOffset, last.max_static_offset())
        return last.static_offset_loosely(self.view.get_max_offset(topic, last.queueId))

    def pop_queue_ids(self, topic: str, read_queue_nums: int) -> Sequence[int]:
        """A static topic's logic queues led here (a POP is served by the leader only)."""
        detail = self.mappings.get(topic)
        if detail is None:
            return range(read_queue_nums)
        return sorted(g for g in detail.hostedQueues if leader_items(detail, g) is not None)

    def valid_queue(self, topic: str, queue_id: int, read_queue_nums: int) -> bool:
        detail = self.mappings.get(topic)
        if detail is None:
            return 0 <= queue_id < read_queue_nums
        return 0 <= queue_id < detail.totalQueues

    def plain_queues(self) -> PlainQueues:
        """The mapping table's topics are static; the rest read the store's live queues."""
        return PlainQueues(self.mappings, self.view.live_queues())

    def queue_range(
        self, topic: str, queue_id: int, read_queue_nums: int
    ) -> tuple[int, int] | None:
        """`valid_queue` and the queue's [min, max]: a plain topic's from the store in one read
        (the ACK's hot path: the mapping looked up once, in its table, and the range read by
        the store's reader straight: `StoreView.queue_range_reader`), a static topic's logic
        range."""
        if self.mappings.table.get(topic) is None:
            if not 0 <= queue_id < read_queue_nums:
                return None
            return self._plain_range(topic, queue_id)
        if not self.valid_queue(topic, queue_id, read_queue_nums):
            return None
        return self.get_min_offset(topic, queue_id), self.get_max_offset(topic, queue_id)
