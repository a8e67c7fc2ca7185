"""Reading a queue through a `MessageSelector` (the store's half of upstream getMessage with a
MessageFilter).

Tag codes are applied by the store on the ConsumeQueue, and so is a SQL92 selector's bit-map
probe (a record the bit-map says the filter did not match is never read). The other records of
a SQL92 selector are read and judged here on their properties: when a batch is all rejected
the read goes on from where it stopped, until ``max_count`` messages are kept, ``max_bytes``
are read, the queue ends or `MAX_FILTER_SCAN_ENTRIES` entries were looked at (upstream scans at
most 16000 bytes of ConsumeQueue, 800 entries, per pull). The consumer then asks again from
``next_begin_offset`` (NO_MATCHED_MESSAGE: at once), so no message is skipped unjudged.
"""

from __future__ import annotations

import struct

from rocketrio.actors.broker.dispatch.message_filter import MessageSelector
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.protocol.message import QUEUE_OFFSET_POSITION
from rocketrio.storage.message_store import GetMessageStatus, GetResult
from rocketrio.storage.store_read import MAX_FILTER_SCAN_ENTRIES

_QOFFSET = struct.Struct(">q")
_GO_ON = (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE)


async def read_selected(
    store: StoreView,
    topic: str,
    queue_id: int,
    offset: int,
    max_count: int,
    max_bytes: int,
    sel: MessageSelector,
) -> GetResult:
    """Up to ``max_count`` records of the queue from ``offset`` that ``sel`` keeps."""
    result = await store.read_messages(topic, queue_id, offset, max_count, max_bytes, sel.cq_match)
    if sel.keep is None:
        return result
    sel.filter(result)
    read_bytes = sum(map(len, result.buffers))
    while (
        result.status in _GO_ON
        and result.message_count < max_count
        and result.next_begin_offset - offset < MAX_FILTER_SCAN_ENTRIES
        and result.next_begin_offset < result.max_offset
        and read_bytes < max_bytes
    ):
        more = await store.read_messages(
            topic,
            queue_id,
            result.next_begin_offset,
            max_count,
            max_bytes - read_bytes,
            sel.cq_match,
        )  # a whole batch each time: most of it may be rejected
        if more.status not in _GO_ON:
            break
        sel.filter(more)
        room = max_count - result.message_count
        next_begin = more.next_begin_offset
        if len(more.buffers) > room:  # kept more than fits: stop after the last one taken
            del more.buffers[room:]
            next_begin = _QOFFSET.unpack_from(more.buffers[-1], QUEUE_OFFSET_POSITION)[0] + 1
        result.buffers.extend(more.buffers)
        result.message_count = len(result.buffers)
        result.next_begin_offset = next_begin
        result.max_offset = more.max_offset
        read_bytes += sum(map(len, more.buffers))
        if result.buffers:
            result.status = GetMessageStatus.FOUND
    return result
