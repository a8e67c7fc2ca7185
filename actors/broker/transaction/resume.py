"""RESUME_CHECK_HALF_MESSAGE (323; MQAdminExt.resumeCheckHalfMessage, `rocketrio admin
resumeCheckHalfMessage`): the transaction check of one half message resumed.

The request names a message by its offset message id; as upstream, the message read at that
CommitLog offset is put again at the end of RMQ_SYS_TRANS_HALF_TOPIC queue 0 with
TRANSACTION_CHECK_TIMES 0 and every other property kept, so the check service asks its producer
again from a fresh count (the use: a half given up after transactionCheckMax checks, now in
TRANS_CHECK_MAX_TIME_TOPIC). The copy keeps its UNIQ_KEY, so a transaction already decided is
never committed twice by it (policy.py's DecidedSet).

Unlike upstream, which re-puts whatever message the id names, a message without REAL_TOPIC (not
a half: the check could never commit it) is refused SYSTEM_ERROR and nothing is written. A
slave answers upstream's put failure (its store takes no puts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from rocketrio.actors.broker.dispatch.answers import answer_done, on_ext_awaited
from rocketrio.actors.broker.dispatch.outcomes import DONE, Done, Refusal
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.transaction.half_store import TransactionQueues
from rocketrio.actors.broker.transaction.policy import born_host_of, renewed_half
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import ResumeCheckHalfMessageRequestHeader
from rocketrio.protocol.message import (
    PROPERTY_REAL_TOPIC,
    MessageDecodeError,
    MessageExt,
    parse_offset_msg_id,
)
from rocketrio.storage.message_store import MessageToStore

PUT_FAILED = "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed."
PUT_ERROR = "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."


def resumed_half(msg: MessageExt) -> MessageToStore | str:
    """The half again, its check count 0; or why the message cannot be resumed."""
    if PROPERTY_REAL_TOPIC not in msg.properties:
        return f"the message in topic {msg.topic} is not a transaction half message (no REAL_TOPIC)"
    return renewed_half(msg, 0, born_host_of(msg))


async def resume_check(
    msg_id: str | None,
    *,
    view: StoreView,
    queues: TransactionQueues,
    is_master: Callable[[], bool],
) -> Done | Refusal:
    if not msg_id:
        return Refusal(ResponseCode.SYSTEM_ERROR, f"{PUT_ERROR} msgId is missing")
    try:
        _host, _port, offset = parse_offset_msg_id(msg_id.strip())
    except MessageDecodeError as e:
        return Refusal(ResponseCode.SYSTEM_ERROR, f"{PUT_ERROR} {e}")
    msg = view.look_message_by_offset(offset) if offset >= 0 else None
    if msg is None:
        return Refusal(ResponseCode.SYSTEM_ERROR, f"{PUT_ERROR} no message at offset {offset}")
    copy = resumed_half(msg)
    if isinstance(copy, str):
        return Refusal(ResponseCode.SYSTEM_ERROR, f"{PUT_ERROR} {copy}")
    if not is_master():
        return Refusal(ResponseCode.SYSTEM_ERROR, f"{PUT_FAILED} (this broker is not a master)")
    put = await queues.put(copy)
    if isinstance(put, Refusal):
        return Refusal(ResponseCode.SYSTEM_ERROR, f"{PUT_FAILED} ({put.remark})")
    return DONE


class ResumeSource(Protocol):
    """What the handler reads from the transaction service (service.py)."""

    view: StoreView
    queues: TransactionQueues

    def is_master(self) -> bool: ...


def resume_handlers(tx: ResumeSource) -> Handlers:
    """RESUME_CHECK_HALF_MESSAGE, registered next to the transaction service's END_TRANSACTION."""

    async def resume(h: ResumeCheckHalfMessageRequestHeader) -> Done | Refusal:
        return await resume_check(h.msgId, view=tx.view, queues=tx.queues, is_master=tx.is_master)

    return {
        RequestCode.RESUME_CHECK_HALF_MESSAGE: on_ext_awaited(
            ResumeCheckHalfMessageRequestHeader, resume, answer_done
        )
    }
