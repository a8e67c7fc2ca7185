"""Receipt handles and transaction ids the proxy hands to gRPC clients, encoded so that any
proxy (or this one after a restart) can act on them without state: pure encode/decode.

A receipt handle has upstream's ReceiptHandle format: the broker's POP checkpoint extraInfo
(start offset, pop time, invisible time, revive queue, retry flag, broker name, queue id, queue
offset) and, ninth, the message's commit log offset (what ForwardMessageToDeadLetterQueue
needs). The broker is given the first eight fields.
A transaction id carries what END_TRANSACTION needs: the broker set, the half's commit log
offset and queue offset, and the broker's transaction id (upstream's proxy TransactionId
encodes the same facts).
"""

from __future__ import annotations

import attrs

from rocketrio.actors.proxy.mapping import BadRequest, Code
from rocketrio.protocol.message import KEY_SEPARATOR
from rocketrio.protocol.pop_extra_info import ExtraInfo, ExtraInfoError

_TX_SEPARATOR = "#"


@attrs.frozen
class Receipt:
    extra: ExtraInfo  # has its queue offset
    commit_log_offset: int  # -1: not known (a handle from another proxy implementation)

    def encode(self) -> str:
        return f"{self.extra.build()}{KEY_SEPARATOR}{self.commit_log_offset}"

    @property
    def extra_info(self) -> str:
        """What the broker's ACK / CHANGE_INVISIBLE_TIME take."""
        return self.extra.build()


def encode_receipt(extra_info: str, queue_offset: int, commit_log_offset: int) -> str:
    """The handle of a popped message from the broker's extraInfo for it: that text as it
    came (eight fields; seven: the message's queue offset appended) and the commit log offset.
    Not parsed and rebuilt (one per received message): the broker writes it as
    `ExtraInfo.build` does (a test holds the two equal); a text of another number of fields
    is refused as `ExtraInfo.parse` refuses it."""
    fields = extra_info.count(KEY_SEPARATOR) + 1
    if fields == 8:
        return f"{extra_info}{KEY_SEPARATOR}{commit_log_offset}"
    if fields == 7:
        return f"{extra_info}{KEY_SEPARATOR}{queue_offset}{KEY_SEPARATOR}{commit_log_offset}"
    raise ExtraInfoError(f"extraInfo {extra_info!r} has {fields} fields, upstream's has 7 or 8")


def decode_receipt(handle: str) -> Receipt:
    """The checkpoint a receipt handle names; INVALID_RECEIPT_HANDLE when it is not one."""
    if not handle:
        raise BadRequest(Code.INVALID_RECEIPT_HANDLE, "receipt handle is empty")
    parts = handle.split(KEY_SEPARATOR)
    if len(parts) not in (8, 9):  # upstream: the commit log offset may be absent (-1)
        raise BadRequest(Code.INVALID_RECEIPT_HANDLE, f"receipt handle {handle!r} is invalid")
    try:
        extra = ExtraInfo.parse(KEY_SEPARATOR.join(parts[:8]))
        commit_log_offset = int(parts[8]) if len(parts) == 9 else -1
    except (ExtraInfoError, ValueError) as e:
        raise BadRequest(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {e}") from e
    if not extra.broker_name:
        raise BadRequest(Code.INVALID_RECEIPT_HANDLE, "receipt handle names no broker")
    return Receipt(extra, commit_log_offset)


@attrs.frozen
class TransactionId:
    broker_name: str
    commit_log_offset: int
    tran_state_table_offset: int
    broker_transaction_id: str

    def encode(self) -> str:
        return _TX_SEPARATOR.join(
            (
                self.broker_name,
                str(self.commit_log_offset),
                str(self.tran_state_table_offset),
                self.broker_transaction_id,
            )
        )

    @classmethod
    def decode(cls, text: str) -> TransactionId:
        parts = text.split(_TX_SEPARATOR)
        if len(parts) != 4 or not parts[0]:
            raise BadRequest(Code.INVALID_TRANSACTION_ID, f"transaction id {text!r} is invalid")
        try:
            return cls(parts[0], int(parts[1]), int(parts[2]), parts[3])
        except ValueError as e:
            raise BadRequest(
                Code.INVALID_TRANSACTION_ID, f"transaction id {text!r} is invalid"
            ) from e
