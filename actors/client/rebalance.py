"""Pure rebalance decisions: queue allocation and where a newly assigned queue starts.

`allocate` sorts a group's queues and client ids as upstream's RebalanceImpl does and splits them
with upstream's AllocateMessageQueueAveragely (protocol/allocation.py: each client a contiguous
block, the first ``len(queues) % len(clients)`` one extra queue). Every member computes the same
table from the same inputs, which is what makes clustering consumption split the queues without
coordination.

`start_offset` is upstream's RebalancePushImpl.computePullFromWhere as a decision: given the
offset the broker has for the group (or "none" / "error"), it says which offset to use or which
query (max offset, search by time) the shell has to make; `parse_consume_timestamp` reads the
consumeTimestamp that search starts from.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from datetime import datetime

import attrs

from rocketrio.actors.client.config import RETRY_GROUP_TOPIC_PREFIX, ConsumeFromWhere
from rocketrio.actors.client.errors import MQClientError
from rocketrio.protocol.allocation import allocate_averagely
from rocketrio.protocol.bodies import MessageQueue

OFFSET_NOT_FOUND = -1  # the broker has no offset for the group (QUERY_NOT_FOUND)
OFFSET_ERROR = -2  # the broker could not be asked


def mq_sort_key(mq: MessageQueue) -> tuple[str, str, int]:
    """Upstream MessageQueue.compareTo order."""
    return (mq.topic, mq.brokerName, mq.queueId)


def sort_queues(mqs: Iterable[MessageQueue]) -> list[MessageQueue]:
    return sorted(mqs, key=mq_sort_key)


def allocate(
    current_cid: str, mq_all: Iterable[MessageQueue], cid_all: Iterable[str]
) -> list[MessageQueue]:
    """Sort like upstream's RebalanceImpl, then allocate averagely."""
    return allocate_averagely(current_cid, sort_queues(set(mq_all)), sorted(set(cid_all)))


class StartKind(enum.Enum):
    OFFSET = "offset"  # start at StartOffset.offset
    MAX_OFFSET = "max_offset"  # ask the broker for the queue's max offset
    SEARCH_BY_TIME = "search_by_time"  # ask the broker for the offset at consumeTimestamp
    RETRY_LATER = "retry_later"  # the stored offset could not be read: skip this round


@attrs.frozen
class StartOffset:
    kind: StartKind
    offset: int = -1


def start_offset(where: ConsumeFromWhere, stored: int, topic: str) -> StartOffset:
    """Where a newly assigned queue starts, given the broker's stored offset for the group.

    ``stored`` is the offset (>= 0), OFFSET_NOT_FOUND or OFFSET_ERROR. A stored offset always
    wins. A brand-new group on a queue whose min offset is 0 gets 0 from the broker, so it
    starts at the beginning even with CONSUME_FROM_LAST_OFFSET (upstream's rule). Retry topics
    start at 0 for LAST_OFFSET (nothing there is older than the group) and at the max offset
    for TIMESTAMP, like upstream.
    """
    if stored >= 0:
        return StartOffset(StartKind.OFFSET, stored)
    if stored != OFFSET_NOT_FOUND:
        return StartOffset(StartKind.RETRY_LATER)
    is_retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
    if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return StartOffset(StartKind.OFFSET, 0)
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        return StartOffset(StartKind.MAX_OFFSET if is_retry else StartKind.SEARCH_BY_TIME)
    if is_retry:
        return StartOffset(StartKind.OFFSET, 0)
    return StartOffset(StartKind.MAX_OFFSET)


def parse_consume_timestamp(text: str) -> int:
    """``yyyyMMddHHmmss`` (local time) -> ms since the epoch."""
    try:
        return int(datetime.strptime(text, "%Y%m%d%H%M%S").timestamp() * 1000)
    except ValueError:
        raise MQClientError(f"consumeTimestamp {text!r} is not yyyyMMddHHmmss") from None


def default_consume_timestamp(now_ms: int) -> str:
    """Half an hour before ``now_ms``, as upstream's default consumeTimestamp."""
    return datetime.fromtimestamp((now_ms - 30 * 60 * 1000) / 1000).strftime("%Y%m%d%H%M%S")


@attrs.frozen
class RebalanceDiff:
    """What changes for one topic: queues to stop (persist first) and queues to start."""

    removed: frozenset[MessageQueue]
    added: tuple[MessageQueue, ...]


def diff_assignment(
    current: Iterable[MessageQueue], wanted: Sequence[MessageQueue]
) -> RebalanceDiff:
    cur = set(current)
    want = set(wanted)
    return RebalanceDiff(
        removed=frozenset(cur - want), added=tuple(mq for mq in wanted if mq not in cur)
    )
