"""The pure answers of the broker's read-only admin queries (upstream AdminBrokerProcessor):

- `correction_offsets` (QUERY_CORRECTION_OFFSET, 308): per queue of a topic, the least
  committed offset over every group but ``filterGroups`` (an offset below the queue's minimum
  does not count); where the compare group's own offset is below that least one, the answer is
  Long.MAX_VALUE ("no correction"). Upstream also deletes the filter groups' offsets as it
  reads them; a query here never changes a table.
- `queue_window` / `queue_data` (QUERY_CONSUME_QUEUE, 321): a queue that does not exist is
  SYSTEM_ERROR "<queueId>@<topic> is not exist!"; an index outside [min, max) is SUCCESS with
  no body and the remark "Index <i> of <queueId>@<topic> is not exist!"; otherwise the entries
  from the index while ``offset - index < count``.
- `group_view` (the consumer group part of 321): the group's subscription and filter data, or
  "<group>@<topic> is not online!" when it has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs

from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.tables.consumer_offset import offset_key, split_key
from rocketrio.protocol.bodies import SubscriptionData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.query_bodies import ConsumeQueueData, QueryConsumeQueueRequestHeader

LONG_MAX: Final = (1 << 63) - 1
# one upstream ConsumeQueue mapped file (300000 entries): upstream's iterator never reads past it
MAX_CQ_ENTRIES: Final = 300_000


def filter_groups(text: str | None) -> frozenset[str]:
    """``filterGroups`` split on ',' (blank: none), as upstream's UtilAll.isBlank check."""
    if text is None or not text.strip():
        return frozenset()
    return frozenset(text.split(","))


def correction_offsets(
    table: Mapping[str, Mapping[int, int]],
    topic: str,
    compare_group: str,
    excluded: frozenset[str],
    min_offset: Callable[[str, int], int],
) -> dict[int, int]:
    """The QUERY_CORRECTION_OFFSET map (module docstring)."""
    least: dict[int, int] = {}
    for key, queues in table.items():
        t, group = split_key(key)
        if t != topic or group in excluded:
            continue
        for queue_id, offset in queues.items():
            if offset >= min_offset(topic, queue_id):
                known = least.get(queue_id)
                least[queue_id] = offset if known is None else min(known, offset)
    compare = None if compare_group in excluded else table.get(offset_key(topic, compare_group))
    for queue_id, offset in (compare or {}).items():
        known = least.get(queue_id)
        if known is not None:  # (upstream fails on a queue only the compare group has)
            least[queue_id] = LONG_MAX if known > offset else known
    return dict(sorted(least.items()))


@attrs.frozen
class IndexMissing:
    """SUCCESS without a body: the index is outside the queue's [min, max)."""

    remark: str


def queue_window(
    h: QueryConsumeQueueRequestHeader, bounds: tuple[int, int] | None
) -> int | IndexMissing | Refusal:
    """How many entries to read from ``h.index``, or why none (module docstring)."""
    where = f"{h.queueId}@{h.topic}"
    if bounds is None:
        return Refusal(ResponseCode.SYSTEM_ERROR, f"{where} is not exist!")
    low, high = bounds
    if not low <= h.index < high:
        return IndexMissing(f"Index {h.index} of {where} is not exist!")
    return max(0, min(h.count, high - h.index, MAX_CQ_ENTRIES))


def queue_data(
    first: int, entries: Sequence[tuple[int, int, int]], index: int, count: int
) -> list[ConsumeQueueData]:
    """The entries from ``first`` while their offset - ``index`` < ``count``."""
    out: list[ConsumeQueueData] = []
    for offset, (physic_offset, size, tags_code) in enumerate(entries, start=first):
        if offset - index >= count:
            break
        out.append(ConsumeQueueData(physic_offset, size, tags_code))
    return out


def group_view(
    group: str, topic: str, subscription: SubscriptionData | None, filter_json: str
) -> tuple[SubscriptionData | None, str]:
    """(subscriptionData, filterData) of the answer for ``consumerGroup``."""
    if subscription is None:
        return None, f"{group}@{topic} is not online!"
    return subscription, filter_json
