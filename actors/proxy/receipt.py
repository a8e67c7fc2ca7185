"""Receipt handles and transaction ids the proxy hands to gRPC clients, encoded so that any
proxy (or this one after a restart) can act on them without state: pure encode/decode.

A receipt handle is the broker's POP checkpoint extraInfo (the POP_CK receipt, as upstream's
proxy passes it on): it names the broker set, queue, offsets, pop time and invisible time.
A transaction id carries what END_TRANSACTION needs: the broker set, the half's commit log
offset and queue offset, and the broker's transaction id (upstream's proxy TransactionId
encodes the same facts).
"""

from __future__ import annotations

import attrs

from rocketrio.actors.broker.pop_extra_info import ExtraInfo, ExtraInfoError
from rocketrio.actors.proxy.mapping import BadRequest, Code

_TX_SEPARATOR = "#"


def decode_receipt(handle: str) -> ExtraInfo:
    """The checkpoint a receipt handle names; INVALID_RECEIPT_HANDLE when it is not one."""
    if not handle:
        raise BadRequest(Code.INVALID_RECEIPT_HANDLE, "receipt handle is empty")
    try:
        info = ExtraInfo.parse(handle)
    except (ExtraInfoError, ValueError) as e:
        raise BadRequest(Code.INVALID_RECEIPT_HANDLE, f"receipt handle is invalid: {e}") from e
    if not info.broker_name:
        raise BadRequest(Code.INVALID_RECEIPT_HANDLE, "receipt handle names no broker")
    return info


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
