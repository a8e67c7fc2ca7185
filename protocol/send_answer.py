"""A stored send's answer frame: SUCCESS with the SendMessageResponseHeader's four extFields
(msgId, queueId, queueOffset, transactionId), in the serialize type of the request.

`send_answer_frame` is `encode_response` of that answer (`_send_answer_frame_py`, the reference
and the fallback); with the compiled extension a ROCKETMQ request (a Java client's) gets the
frame from one call (protocol/speedups/answer.c) that writes it from the header's fixed first
bytes and the four values, with no extFields dict and no ``str()`` of the two numbers; the
same bytes (tests/unit/protocol/test_send_answer.py).
"""

from __future__ import annotations

from rocketrio.protocol.codes import (
    CURRENT_VERSION,
    RPC_TYPE_RESPONSE,
    SERIALIZE_ROCKETMQ,
    ResponseCode,
)
from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.remoting import (
    RemotingCommand,
    _rocketmq_header_of_py,
    encode_response,
)

_SUCCESS = int(ResponseCode.SUCCESS)
# code, language and version of every answer: the first 5 bytes of its ROCKETMQ header, as
# the reference encoder writes them
HEAD = _rocketmq_header_of_py(_SUCCESS, "PYTHON", CURRENT_VERSION, 0, 0, None, {})[:5]
_HEAD = HEAD


def _send_answer_frame_py(
    request: RemotingCommand,
    remark: str | None,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    uniq: str,
) -> bytes:
    ext = {
        "msgId": msg_id,
        "queueId": str(queue_id),
        "queueOffset": str(queue_offset),
        "transactionId": uniq,
    }
    return encode_response(request, _SUCCESS, remark, ext)


def _send_answer_frame_c(
    request: RemotingCommand,
    remark: str | None,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    uniq: str,
) -> bytes:
    """`_send_answer_frame_py` by the compiled twin for a ROCKETMQ request; the twin for a
    JSON one and for what the compiled one declines."""
    if request.serialize_type == SERIALIZE_ROCKETMQ:
        frame = _speedups.send_answer_frame(  # type: ignore[union-attr]
            _HEAD, request.opaque, RPC_TYPE_RESPONSE, remark, msg_id, queue_id, queue_offset, uniq
        )
        if frame is not None:
            return frame  # type: ignore[no-any-return]
    return _send_answer_frame_py(request, remark, msg_id, queue_id, queue_offset, uniq)


send_answer_frame = _send_answer_frame_c if _speedups is not None else _send_answer_frame_py
