"""The remoting side of sending: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE
(320) and CONSUMER_SEND_MSG_BACK (36).

Decoding: SEND_MESSAGE_V2's short keys through the fast `parse_send_header_v2` (cattrs is a
quarter of a send's cost there), or its compiled twin (protocol/speedups/send_header.c) for a
plain header. Encoding: a `PutStatus` becomes the response code exactly like
upstream's SendMessageProcessor (`put_status_code`); a stored send answers with the
SendMessageResponseHeader (offset message id, queue, queue offset, UNIQ_KEY). A send is answered
later, from the store actor's turn: a plain single send through `StoredAnswer` (the store's
callback itself, its stored answer one `send_answer_frame` call), any other through `SendAnswer`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Final, assert_never

from rocketrio.actors.broker.dispatch.answers import BornHost, born_host, refused
from rocketrio.actors.broker.dispatch.outcomes import (
    PutFailed,
    PutStatus,
    Refusal,
    SendBackOutcome,
    SendOutcome,
    SendStored,
    SentBack,
)
from rocketrio.actors.broker.dispatch.table import Answer, Handlers
from rocketrio.actors.broker.send.completions import DirectAnswer, PendingSend
from rocketrio.actors.broker.send.processor import BlockedSend, OnSentBack, SendMessageProcessor
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import (
    RPC_TYPE_RESPONSE,
    SERIALIZE_ROCKETMQ,
    RequestCode,
    ResponseCode,
)
from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.send_answer import HEAD as _HEAD
from rocketrio.protocol.send_answer import send_answer_frame
from rocketrio.protocol.serde import from_ext
from rocketrio.storage.message_store import PutResult

RC = ResponseCode
# protocol/speedups/send_header.c: `parse_send_header_v2` of a plain header (None: declined)
_send_header_v2 = None if _speedups is None else _speedups.send_header_v2
# protocol/speedups/answer.c: `send_answer_frame` of a ROCKETMQ request (None: declined)
_answer_c = None if _speedups is None else _speedups.send_answer_frame
_ROCKETMQ = SERIALIZE_ROCKETMQ
_RESPONSE = RPC_TYPE_RESPONSE
_PUT_OK = PutStatus.PUT_OK
_SUCCESS = int(RC.SUCCESS)
# plain ints: an enum member's look-up costs more than the comparison on the hot path
_SEND_MESSAGE = int(RequestCode.SEND_MESSAGE)
_SEND_BATCH_MESSAGE = int(RequestCode.SEND_BATCH_MESSAGE)

# upstream SendMessageProcessor.handlePutMessageResult: (response code, remark when the store
# gave none). The stored statuses answer with the SendMessageResponseHeader too.
PUT_STATUS_CODES: Final[dict[PutStatus, tuple[int, str | None]]] = {
    PutStatus.PUT_OK: (RC.SUCCESS, None),
    PutStatus.FLUSH_DISK_TIMEOUT: (RC.FLUSH_DISK_TIMEOUT, None),
    PutStatus.FLUSH_SLAVE_TIMEOUT: (RC.FLUSH_SLAVE_TIMEOUT, None),
    PutStatus.SLAVE_NOT_AVAILABLE: (RC.SLAVE_NOT_AVAILABLE, None),
    PutStatus.IN_SYNC_REPLICAS_NOT_ENOUGH: (RC.SYSTEM_ERROR, "in-sync replicas not enough"),
    PutStatus.SERVICE_NOT_AVAILABLE: (
        RC.SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the "
        "broker's disk is full, messages are put to the slave, message store has been shut "
        "down, etc.",
    ),
    PutStatus.MESSAGE_ILLEGAL: (
        RC.MESSAGE_ILLEGAL,
        "the message is illegal, maybe msg body or properties length not matched",
    ),
    PutStatus.OS_PAGE_CACHE_BUSY: (
        RC.SYSTEM_ERROR,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    PutStatus.UNKNOWN_ERROR: (RC.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


def put_status_code(status: PutStatus, remark: str | None = None) -> tuple[int, str | None]:
    """A put's response code and remark: the store's remark when it gave one, else upstream's."""
    code, default = PUT_STATUS_CODES[status]
    return code, remark if remark is not None else default


def _opt_bool(v: str | None) -> bool | None:
    if v is None:
        return None
    if v == "false":  # what clients send, checked first: the send hot path
        return False
    if v == "true":
        return True
    s = v.strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0", ""):
        return False
    raise ValueError(v)


def parse_send_header_v2(ext: dict[str, str]) -> SendMessageRequestHeader:
    """SEND_MESSAGE_V2 extFields -> the V1 header, without cattrs on the hot path.

    Same result as ``from_ext(SendMessageRequestHeaderV2, ext).to_v1()`` (a test checks it)
    at a quarter of the cost; any missing or malformed field falls back to that call, which
    raises the HeaderError naming the field.
    """
    get = ext.get
    try:
        j, k, m, l_ = get("j"), get("k"), get("m"), get("l")
        # positional, in the class's field order (cheaper than keywords on the hot path):
        # producerGroup, topic, defaultTopic, defaultTopicQueueNums, queueId, sysFlag,
        # bornTimestamp, flag, properties, reconsumeTimes, unitMode, batch,
        # maxReconsumeTimes, bname
        return SendMessageRequestHeader(
            ext["a"],
            ext["b"],
            ext["c"],
            int(ext["d"]),
            int(ext["e"]),
            int(ext["f"]),
            int(ext["g"]),
            int(ext["h"]),
            get("i"),
            None if j is None else int(j),
            None if k is None else _opt_bool(k),
            None if m is None else _opt_bool(m),
            None if l_ is None else int(l_),
            get("n"),
        )
    except (KeyError, ValueError):
        return from_ext(SendMessageRequestHeaderV2, ext).to_v1()


def send_header(cmd: RemotingCommand) -> SendMessageRequestHeader:
    """The V1 header of any send request code."""
    if cmd.code == _SEND_MESSAGE:
        return from_ext(SendMessageRequestHeader, cmd.ext_fields)
    if _send_header_v2 is not None:  # a plain V2 header in one compiled call
        h = _send_header_v2(cmd.ext_fields, SendMessageRequestHeader)
        if h is not None:
            return h  # type: ignore[no-any-return]
    return parse_send_header_v2(cmd.ext_fields)


def send_response_ext(stored: SendStored) -> dict[str, str]:
    """The SendMessageResponseHeader's extFields, built directly (the hot path); the same as
    ``to_ext(SendMessageResponseHeader(...))`` (a test checks it)."""
    return {
        "msgId": stored.msg_id,
        "queueId": str(stored.queue_id),
        "queueOffset": str(stored.queue_offset),
        "transactionId": stored.uniq_key,
    }


def send_response(cmd: RemotingCommand, outcome: SendOutcome) -> RemotingCommand:
    match outcome:
        case SendStored():
            if outcome.status is _PUT_OK:  # the common case, without the table look-up
                code, remark = RC.SUCCESS, outcome.remark
            else:
                code, remark = put_status_code(outcome.status, outcome.remark)
            return cmd.make_response(code, remark, send_response_ext(outcome))
        case PutFailed():
            code, remark = put_status_code(outcome.status, outcome.remark)
            return cmd.make_response(code, remark)
        case _:
            assert_never(outcome)


def send_back_response(cmd: RemotingCommand, outcome: SendBackOutcome) -> RemotingCommand:
    match outcome:
        case SentBack():
            return cmd.make_response(RC.SUCCESS)
        case PutFailed():
            # upstream answers a failed send-back SYSTEM_ERROR whatever the store said
            return cmd.make_response(RC.SYSTEM_ERROR, outcome.remark)
        case _:
            assert_never(outcome)


class SendAnswer:
    """A send's way back to its connection (one slots object per send, no closure)."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: RequestContext) -> None:
        self.ctx = ctx

    def __call__(self, outcome: SendOutcome) -> None:
        ctx = self.ctx
        if type(outcome) is SendStored and outcome.status is _PUT_OK:
            # the common answer, encoded without a response command (the same bytes)
            o = outcome
            frame = send_answer_frame(
                ctx.cmd, o.remark, o.msg_id, o.queue_id, o.queue_offset, o.uniq_key
            )
            ctx.respond_frame(_SUCCESS, frame)
            return
        ctx.respond(send_response(ctx.cmd, outcome))


class StoredAnswer(DirectAnswer):
    """A plain single send's answer as the store's own `PutCallback` (`DirectAnswer`: the
    processor sets ``queue_id`` and ``uniq``): a stored send is encoded straight from the put's
    result, the same frame `SendAnswer` sends for the `SendStored` that `PendingSend` would
    have made (a test compares them); any other answer goes that way."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: RequestContext) -> None:  # queue_id, uniq: set before the put
        self.ctx = ctx

    def __call__(self, results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        ctx = self.ctx
        if status is _PUT_OK and results:
            r = results[0]
            cmd = ctx.cmd
            frame = None
            if _answer_c is not None and cmd.serialize_type == _ROCKETMQ:  # no wrapper call
                frame = _answer_c(
                    _HEAD, cmd.opaque, _RESPONSE, remark, r.msg_id, self.queue_id,
                    r.queue_offset, self.uniq,
                )  # fmt: skip
            if frame is None:  # a JSON request, or one the compiled call declines
                frame = send_answer_frame(
                    cmd, remark, r.msg_id, self.queue_id, r.queue_offset, self.uniq
                )
            ctx.respond_frame(_SUCCESS, frame)
            return
        PendingSend(SendAnswer(ctx), self.queue_id, self.uniq)(results, status, remark)


def _sent_back(ctx: RequestContext) -> OnSentBack:
    def on_done(outcome: SendBackOutcome) -> None:
        ctx.respond(send_back_response(ctx.cmd, outcome))

    return on_done


def send_handlers(send: SendMessageProcessor) -> Handlers:
    """The request codes the send package serves."""

    def send_message(ctx: RequestContext) -> Awaitable[Answer] | Answer:
        # no coroutine for a single send (the hot path): only a full store inbox, or a
        # batch, returns one for the reader to await
        cmd, conn = ctx.cmd, ctx.conn
        h = send_header(cmd)
        born = conn.attrs.get("born_host") or born_host(conn)
        if h.batch or cmd.code == _SEND_BATCH_MESSAGE:
            return send_batch(ctx, h, born)
        r = send.send_nowait(h, cmd.body, born, conn.remote, StoredAnswer(ctx))
        if r is None:
            return None
        if isinstance(r, BlockedSend):
            return blocked(cmd, r)
        return refused(cmd, r)

    async def send_batch(
        ctx: RequestContext, h: SendMessageRequestHeader, born: BornHost
    ) -> Answer:
        cmd = ctx.cmd
        refusal = await send.send_batch(h, cmd.body, born, ctx.conn.remote, SendAnswer(ctx))
        return None if refusal is None else refused(cmd, refusal)

    async def blocked(cmd: RemotingCommand, r: BlockedSend) -> Answer:
        refusal = await send.put_blocked(r)
        return None if refusal is None else refused(cmd, refusal)

    async def send_back(ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        h = from_ext(ConsumerSendMsgBackRequestHeader, cmd.ext_fields)
        outcome = await send.send_back(h, _sent_back(ctx))
        match outcome:
            case None:
                return None
            case SentBack():
                return send_back_response(cmd, outcome)
            case Refusal():
                return refused(cmd, outcome)
            case _:
                assert_never(outcome)

    return {
        RequestCode.SEND_MESSAGE: send_message,
        RequestCode.SEND_MESSAGE_V2: send_message,
        RequestCode.SEND_BATCH_MESSAGE: send_message,
        RequestCode.CONSUMER_SEND_MSG_BACK: send_back,
    }
