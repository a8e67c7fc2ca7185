"""Transactional messages: the half and op queues as the transaction service reads and writes
them (queue 0 of RMQ_SYS_TRANS_HALF_TOPIC and RMQ_SYS_TRANS_OP_HALF_TOPIC).

Reads go through the `StoreView` on the Trio thread in batches of READ_BATCH (upstream
OP_MSG_PULL_NUMS); a hole in a queue (retention, a failed put) is stepped over. Writes go
through the store actor, one put per message (each topic counts its own puts), each done once
as durable as an acknowledged send (store/confirmed_put.py).
"""

from __future__ import annotations

from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.store.confirmed_put import ConfirmingWriter, put_confirmed
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.transaction.policy import (
    HALF_QUEUE_ID,
    HALF_TOPIC,
    OP_TOPIC,
    decode_op_body,
    is_remove_op,
)
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message import (
    UNIQ_KEY,
    MessageDecodeError,
    MessageExt,
    decode_stored,
    parse_host,
)
from rocketrio.storage.message_store import MessageToStore, PutResult

READ_BATCH = 32  # messages per store read (upstream OP_MSG_PULL_NUMS)
READ_BYTES = 4 << 20
_NO_HOST = (b"\x00\x00\x00\x00", 0)


def host_of(text: str) -> tuple[bytes, int]:
    """``ip:port`` as a stored host (an unparsable one: 0.0.0.0:0)."""
    try:
        return parse_host(text)
    except ValueError:
        return _NO_HOST


class TransactionQueues:
    """Read and write access to the two transaction queues (see the module docstring)."""

    def __init__(self, writer: ConfirmingWriter, view: StoreView) -> None:
        self.writer = writer
        self.view = view

    def read(self, topic: str, offset: int, count: int) -> list[MessageExt]:
        got = self.view.get_messages(topic, HALF_QUEUE_ID, offset, count, READ_BYTES)
        out: list[MessageExt] = []
        for buf in got.buffers:
            try:
                out.append(decode_stored(buf)[0])
            except MessageDecodeError:
                continue
        return out

    def half_at(self, offset: int) -> MessageExt | None:
        got = self.read(HALF_TOPIC, offset, 1)
        return got[0] if got and got[0].queue_offset == offset else None

    def half_end(self) -> int:
        return self.view.get_max_offset(HALF_TOPIC, HALF_QUEUE_ID)

    async def put(self, msg: MessageToStore) -> PutResult | Refusal:
        """Store ``msg``; its result once it is as durable as an acknowledged send (a re-put
        only the master holds waits for confirmOffset, store/confirmed_put.py): the check
        round moves the half offset past the half it renewed or discarded only then."""
        got = await put_confirmed(self.writer, [msg])
        if isinstance(got, str):
            return Refusal(ResponseCode.SYSTEM_ERROR, got)
        return got.results[0]

    def ops_from(self, start: int) -> list[tuple[int, list[int]]]:
        """(op offset, half offsets) of every op from ``start`` to the op queue's end."""
        out: list[tuple[int, list[int]]] = []
        end = self.view.get_max_offset(OP_TOPIC, HALF_QUEUE_ID)
        offset = start
        while offset < end:
            batch = self.read(OP_TOPIC, offset, READ_BATCH)
            if not batch:
                offset += 1  # a hole (retention): nothing to learn there
                continue
            for op in batch:
                out.append((op.queue_offset, decode_op_body(op.body) if is_remove_op(op) else []))
            offset = batch[-1].queue_offset + 1
        return out

    def find_copy(self, uniq: str, start: int) -> int | None:
        """The latest copy of the transaction at or after ``start`` in the half queue."""
        found: int | None = None
        offset, end = start, self.half_end()
        while offset < end:
            batch = self.read(HALF_TOPIC, offset, READ_BATCH)
            if not batch:
                offset += 1
                continue
            for m in batch:
                if (m.properties.get(UNIQ_KEY) or m.offset_msg_id) == uniq:
                    found = m.queue_offset
            offset = batch[-1].queue_offset + 1
        return found
