"""The remoting side of POP: POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME frames <-> the POP processors' typed requests and outcomes.

Registered through the RemotingAdapter's ``extra_handlers`` (`pop_handlers`), so the processors
(pop_processor.py, pop_ack.py) never see a RemotingCommand and a gRPC adapter can call them the
same way. Encodings follow upstream: a pop that found messages is SUCCESS with the records back
to back and a PopMessageResponseHeader (popTime, invisibleTime, reviveQid, restNum,
startOffsetInfo, msgOffsetInfo and, for an ordered pop, orderCountInfo); one that found none is
POLLING_TIMEOUT (POLLING_FULL when no more pops may be held) with remark NO_MESSAGE_IN_QUEUE;
CHANGE_MESSAGE_INVISIBLETIME answers a ChangeInvisibleTimeResponseHeader. GET_POP_INFLIGHT
(rocketrio's own code) answers the in-flight counts of a group for `rocketrio admin
popProgress`: the revive service's, plus the POP buffer's CKs not yet written.
"""

from __future__ import annotations

from collections.abc import Awaitable
from functools import partial
from typing import Any, assert_never

from rocketrio.actors.broker.dispatch.answers import answer_done
from rocketrio.actors.broker.dispatch.held_reply import HeldReply
from rocketrio.actors.broker.dispatch.outcomes import Done, Refusal
from rocketrio.actors.broker.pop.ack import InvisibleTimeChanged, PopAckProcessor
from rocketrio.actors.broker.pop.attempt import PopOutcome, Popped
from rocketrio.actors.broker.pop.buffer_merge import PopBuffer
from rocketrio.actors.broker.pop.processor import PopMessageProcessor
from rocketrio.actors.broker.pop.revive_service import PopReviveService
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.answer_frames import empty_answer_frame
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import GetConsumeStatsRequestHeader
from rocketrio.protocol.pop_checkpoint import BatchAckMessageRequestBody, PopRecordError
from rocketrio.protocol.pop_headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopInflightBody,
    PopInflightItem,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    ack_fields,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext, to_json

RC = ResponseCode


def pop_response(cmd: RemotingCommand, outcome: PopOutcome) -> RemotingCommand:
    match outcome:
        case Popped():
            header = PopMessageResponseHeader(
                popTime=outcome.pop_time,
                invisibleTime=outcome.invisible_time,
                reviveQid=outcome.revive_qid,
                restNum=outcome.rest_num,
                startOffsetInfo=outcome.start_offset_info,
                msgOffsetInfo=outcome.msg_offset_info,
                orderCountInfo=outcome.order_count_info,
            )
            if outcome.found:
                return cmd.make_response(
                    RC.SUCCESS, "FOUND", to_ext(header), b"".join(outcome.buffers)
                )
            code = RC.POLLING_FULL if outcome.polling_full else RC.POLLING_TIMEOUT
            return cmd.make_response(code, "NO_MESSAGE_IN_QUEUE", to_ext(header))
        case Refusal():
            return cmd.make_response(outcome.code, outcome.remark)
        case _:
            assert_never(outcome)


def _changed(cmd: RemotingCommand, outcome: InvisibleTimeChanged | Refusal) -> RemotingCommand:
    match outcome:
        case InvisibleTimeChanged():
            header = ChangeInvisibleTimeResponseHeader(
                outcome.pop_time, outcome.invisible_time, outcome.revive_qid
            )
            return cmd.make_response(RC.SUCCESS, ext_fields=to_ext(header))
        case Refusal():
            return cmd.make_response(outcome.code, outcome.remark)
        case _:
            assert_never(outcome)


def _answer_ack(ctx: RequestContext, outcome: Done | Refusal) -> None:
    """An ACK's or a BATCH_ACK's answer; SUCCESS from its template (one per acknowledged
    message, all alike)."""
    if outcome.__class__ is Done:  # nothing subclasses Done; no isinstance call per ACK
        frame = empty_answer_frame(ctx.cmd, RC.SUCCESS)
        if frame is not None:
            ctx.respond_frame(RC.SUCCESS, frame)
            return
    ctx.respond(answer_done(ctx.cmd, outcome))


async def _answer_after(
    cmd: RemotingCommand, waiting: Awaitable[Refusal | None]
) -> RemotingCommand | None:
    refusal = await waiting
    return None if refusal is None else answer_done(cmd, refusal)


def pop_handlers(
    pop: PopMessageProcessor,
    acks: PopAckProcessor,
    revive: PopReviveService,
    buffer: PopBuffer | None = None,
) -> dict[int, Any]:
    """The request-code -> handler entries of POP for the RemotingAdapter. GET_POP_INFLIGHT
    counts the revive service's CKs and the POP buffer's not yet stored."""

    async def pop_message(ctx: RequestContext) -> RemotingCommand | None:
        h = from_ext(PopMessageRequestHeader, ctx.cmd.ext_fields)
        outcome = await pop.pop(h, HeldReply(ctx, pop_response))
        return None if outcome is None else pop_response(ctx.cmd, outcome)

    def ack_message(
        ctx: RequestContext,
    ) -> Awaitable[RemotingCommand | None] | RemotingCommand | None:
        """No coroutine unless the ACK's record must be put alone (`PopAckProcessor.ack_nowait`):
        one ACK_MESSAGE per acknowledged message makes this the POP consumer's hot path."""
        cmd = ctx.cmd
        f = ack_fields(cmd.ext_fields)
        if f is None:  # not plainly readable: the converter's value, or its HeaderError
            h = from_ext(AckMessageRequestHeader, cmd.ext_fields)
            f = (h.consumerGroup, h.topic, h.queueId, h.extraInfo, h.offset)
        result = acks.ack_nowait(*f, partial(_answer_ack, ctx))  # no frame of its own
        if result is None:
            return None
        if isinstance(result, Refusal):
            return answer_done(cmd, result)
        return _answer_after(cmd, result)

    async def batch_ack_message(ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        try:
            body = BatchAckMessageRequestBody.from_json(cmd.body or b"")
        except PopRecordError as e:
            return cmd.make_response(RC.INVALID_PARAMETER, f"bad BATCH_ACK_MESSAGE body: {e}")
        refusal = await acks.batch_ack(body, partial(_answer_ack, ctx))  # SUCCESS: the template
        return None if refusal is None else answer_done(cmd, refusal)

    async def change_invisible_time(ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        h = from_ext(ChangeInvisibleTimeRequestHeader, cmd.ext_fields)
        refusal = await acks.change_invisible_time(
            h, lambda outcome: ctx.respond(_changed(cmd, outcome))
        )
        return None if refusal is None else _changed(cmd, refusal)

    async def pop_inflight(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(GetConsumeStatsRequestHeader, ctx.cmd.ext_fields)
        counts = revive.inflight(h.consumerGroup)
        if counts is not None and buffer is not None:
            for key, n in buffer.inflight(h.consumerGroup).items():
                counts[key] = counts.get(key, 0) + n
        items = [
            PopInflightItem(topic, qid, n)
            for (topic, qid), n in sorted((counts or {}).items())
            if h.topic is None or topic == h.topic
        ]
        body = PopInflightBody(pop.config.broker_name, counts is not None, items)
        return ctx.cmd.make_response(RC.SUCCESS, body=to_json(body))

    return {
        RequestCode.GET_POP_INFLIGHT: pop_inflight,
        RequestCode.POP_MESSAGE: pop_message,
        RequestCode.ACK_MESSAGE: ack_message,
        RequestCode.BATCH_ACK_MESSAGE: batch_ack_message,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME: change_invisible_time,
    }
