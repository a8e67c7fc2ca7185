"""The reads the POP path makes of a topic's queues, as a port (`QueueReader`).

POP (pop/processor.py), its acks (pop/ack.py) and the revive service (pop/revive_service.py)
read queues by id and offset. For an ordinary topic those are the store's physical queues
(`PhysicalQueues`, the `StoreView` as it is). A static topic's queues are logic queues whose
offsets are logic offsets spread over generations on several brokers: the static-topic feature
supplies a reader that translates (static_topic/logic_store.py), so the POP path works on logic
queues without knowing about mappings.

`QueueReadUnavailable`: a read that cannot be made now (another broker holding an older
generation did not answer). The caller retries later; it must never take it for "no message".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from rocketrio.actors.broker.store.view import StoreView
from rocketrio.storage.consume_queue import ConsumeQueue
from rocketrio.storage.dispatch_request import QueueKey
from rocketrio.storage.store_read import CqMatch
from rocketrio.storage.store_types import GetResult


class StaticTopics(Protocol):
    """Where a reader sees which topics are static: ``table`` names them (a dict that a reload
    may replace whole, so a keeper reads ``table`` at each use, never keeps it)."""

    @property
    def table(self) -> Mapping[str, object]: ...


@attrs.frozen
class NoStaticTopics:
    """`StaticTopics` of a reader that has none."""

    table: Mapping[str, object] = attrs.field(factory=dict)


@attrs.frozen
class PlainQueues:
    """What an ACK's offset check reads per message without a call (pop/ack.py): a topic that
    ``statics.table`` does not name is plain, and its queue's live [min, max] is
    ``queues[(topic, queue_id)]``'s ``min_offset`` / ``max_offset`` ((0, 0) when absent, as
    `QueueReader.queue_range` says); a static topic's range is `QueueReader.queue_range`'s.
    ``queues`` is the store's live table (`StoreView.live_queues`), kept for its lifetime."""

    statics: StaticTopics
    queues: Mapping[QueueKey, ConsumeQueue]


class QueueReadUnavailable(Exception):
    """A queue read that cannot be made now (the remark says why); retry later."""


class QueueReader(Protocol):
    async def read_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: CqMatch = None,
    ) -> GetResult: ...

    def read_nowait(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: CqMatch = None,
    ) -> GetResult | None:
        """`read_messages` read inline when it needs no wait (a queue of this store, a read
        no bigger than the view's off-loop threshold); None when it would wait."""
        ...

    def get_min_offset(self, topic: str, queue_id: int) -> int: ...

    def get_max_offset(self, topic: str, queue_id: int) -> int: ...

    def pop_queue_ids(self, topic: str, read_queue_nums: int) -> Sequence[int]:
        """The queues a POP of ``topic`` with queueId -1 reads here."""
        ...

    def valid_queue(self, topic: str, queue_id: int, read_queue_nums: int) -> bool:
        """Whether ``queue_id`` names a queue of ``topic`` (a POP or an ACK may name it)."""
        ...

    def plain_queues(self) -> PlainQueues:
        """What an ACK's offset check keeps to read a plain topic's queue range per message
        without a call (`PlainQueues`)."""
        ...

    def queue_range(
        self, topic: str, queue_id: int, read_queue_nums: int
    ) -> tuple[int, int] | None:
        """`valid_queue`, then (`get_min_offset`, `get_max_offset`) in one call: None when
        ``queue_id`` names no queue of ``topic``. An ACK's offset check, once per acknowledged
        message, so it reads the store's queue once instead of through each layer twice."""
        ...


class PhysicalQueues:
    """The store's own queues: `QueueReader` over a `StoreView`."""

    def __init__(self, view: StoreView) -> None:
        self.view = view

    async def read_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: CqMatch = None,
    ) -> GetResult:
        return await self.view.read_messages(
            topic, queue_id, offset, max_count, max_bytes, tag_codes
        )

    def read_nowait(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        max_bytes: int,
        tag_codes: CqMatch = None,
    ) -> GetResult | None:
        view = self.view
        if max_bytes > view.off_loop_read_bytes:
            return None
        return view.get_messages(topic, queue_id, offset, max_count, max_bytes, tag_codes)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        return self.view.get_min_offset(topic, queue_id)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        return self.view.get_max_offset(topic, queue_id)

    def pop_queue_ids(self, topic: str, read_queue_nums: int) -> Sequence[int]:
        return range(read_queue_nums)

    def valid_queue(self, topic: str, queue_id: int, read_queue_nums: int) -> bool:
        return 0 <= queue_id < read_queue_nums

    def plain_queues(self) -> PlainQueues:
        return PlainQueues(NoStaticTopics(), self.view.live_queues())

    def queue_range(
        self, topic: str, queue_id: int, read_queue_nums: int
    ) -> tuple[int, int] | None:
        if not 0 <= queue_id < read_queue_nums:
            return None
        return self.view.queue_range(topic, queue_id)
