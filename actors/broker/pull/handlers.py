"""The remoting side of pulling: PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361).

A `Pulled` outcome becomes upstream's pull answer: the PullMessageResponseHeader (suggested
broker, next begin offset, the queue's min and max) with the store's status name as the remark,
and the records as the body when FOUND; the other statuses map to the pull codes
(`PULL_CODES`). A held pull is answered later through its `HeldReply`.

LITE_PULL_MESSAGE is what the lite pull consumers send (upstream DefaultLitePullConsumer, the
header's sysFlag carries the lite-pull bit): served exactly like PULL_MESSAGE, by whatever
serves PULL_MESSAGE once the table is built (`lite_pull_wrapper`: a static topic's logic queues
too), unless ``litePullMessageEnable`` is off (NO_PERMISSION with upstream's remark).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, assert_never

from rocketrio.actors.broker.dispatch.answers import refused
from rocketrio.actors.broker.dispatch.held_reply import HeldReply
from rocketrio.actors.broker.dispatch.outcomes import Pulled, PullOutcome, PullStatus, Refusal
from rocketrio.actors.broker.dispatch.table import Handler, Handlers
from rocketrio.actors.broker.pull.processor import PullMessageProcessor, pull_status
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.storage.message_store import GetMessageStatus

RC = ResponseCode

PULL_CODES: Final[dict[PullStatus, int]] = {
    PullStatus.FOUND: RC.SUCCESS,
    PullStatus.NO_NEW_MSG: RC.PULL_NOT_FOUND,
    PullStatus.NO_MATCHED_MSG: RC.PULL_RETRY_IMMEDIATELY,
    PullStatus.OFFSET_ILLEGAL: RC.PULL_OFFSET_MOVED,
}


def pull_code(status: GetMessageStatus, request_offset: int) -> int:
    """The response code of a pull the store answered with ``status``."""
    return PULL_CODES[pull_status(status, request_offset)]


def pull_response(cmd: RemotingCommand, outcome: PullOutcome) -> RemotingCommand:
    match outcome:
        case Pulled(status=status, result=result, suggest_broker_id=suggest):
            header = PullMessageResponseHeader(
                suggestWhichBrokerId=suggest,
                nextBeginOffset=result.next_begin_offset,
                minOffset=result.min_offset,
                maxOffset=result.max_offset,
            )
            if status is PullStatus.FOUND:
                code, body = RC.SUCCESS, b"".join(result.buffers)
            else:
                code, body = PULL_CODES[status], b""
            return cmd.make_response(code, result.status.value, to_ext(header), body)
        case Refusal():
            return refused(cmd, outcome)
        case _:
            assert_never(outcome)


def pull_handlers(pull: PullMessageProcessor) -> Handlers:
    """The request codes the pull package serves."""

    async def pull_message(ctx: RequestContext) -> RemotingCommand | None:
        h = from_ext(PullMessageRequestHeader, ctx.cmd.ext_fields)
        outcome = await pull.pull(h, HeldReply(ctx, pull_response))
        return None if outcome is None else pull_response(ctx.cmd, outcome)

    return {RequestCode.PULL_MESSAGE: pull_message, RequestCode.LITE_PULL_MESSAGE: pull_message}


def lite_pull_gate(
    serve: Handler, enabled: Callable[[], bool], broker_ip: Callable[[], str]
) -> Handler:
    """LITE_PULL_MESSAGE: refused while ``litePullMessageEnable`` is off, else ``serve``."""

    async def lite_pull(ctx: RequestContext) -> RemotingCommand | None:
        if not enabled():
            return ctx.cmd.make_response(
                RC.NO_PERMISSION,
                f"the broker[{broker_ip()}] for lite pull consumer is forbidden",
            )
        return await serve(ctx)

    return lite_pull


def lite_pull_wrapper(
    enabled: Callable[[], bool], broker_ip: Callable[[], str]
) -> Callable[[Handlers], Handlers]:
    """The table wrapper: 361 goes to the final PULL_MESSAGE handler (after static topics)."""

    def wrap(plain: Handlers) -> Handlers:
        serve = plain[RequestCode.PULL_MESSAGE]
        return {RequestCode.LITE_PULL_MESSAGE: lite_pull_gate(serve, enabled, broker_ip)}

    return wrap
