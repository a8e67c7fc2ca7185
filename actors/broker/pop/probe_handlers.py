"""The remoting side of the POP probes (probe.py): PEEK_MESSAGE, NOTIFICATION and POLLING_INFO
frames <-> `PopProbe`'s typed requests and outcomes, with upstream's encodings.

A peek that found messages is SUCCESS, remark FOUND, the records back to back and a
PopMessageResponseHeader carrying restNum (popTime, invisibleTime and reviveQid 0, as upstream
sends them); one that found none is PULL_NOT_FOUND, remark NO_MESSAGE_IN_QUEUE. A NOTIFICATION
is SUCCESS with a NotificationResponseHeader (hasMsg), now or once its hold ends. POLLING_INFO is
SUCCESS with a PollingInfoResponseHeader (pollingNum). A refusal is its code and remark.
"""

from __future__ import annotations

from typing import Any, assert_never

from rocketrio.actors.broker.dispatch.held_reply import HeldReply
from rocketrio.actors.broker.dispatch.outcomes import Refusal
from rocketrio.actors.broker.pop.probe import Peeked, PopProbe
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.pop_headers import PopMessageResponseHeader
from rocketrio.protocol.pop_probe_headers import (
    NotificationRequestHeader,
    NotificationResponseHeader,
    PeekMessageRequestHeader,
    PollingInfoRequestHeader,
    PollingInfoResponseHeader,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext

RC = ResponseCode


def peek_response(cmd: RemotingCommand, outcome: Peeked | Refusal) -> RemotingCommand:
    match outcome:
        case Peeked():
            header = to_ext(PopMessageResponseHeader(0, 0, 0, outcome.rest))
            if outcome.buffers:
                return cmd.make_response(RC.SUCCESS, "FOUND", header, b"".join(outcome.buffers))
            return cmd.make_response(RC.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", header)
        case Refusal():
            return cmd.make_response(outcome.code, outcome.remark)
        case _:
            assert_never(outcome)


def notification_response(cmd: RemotingCommand, outcome: bool | Refusal) -> RemotingCommand:
    match outcome:
        case bool():
            header = to_ext(NotificationResponseHeader(outcome))
            return cmd.make_response(RC.SUCCESS, ext_fields=header)
        case Refusal():
            return cmd.make_response(outcome.code, outcome.remark)
        case _:
            assert_never(outcome)


def polling_info_response(cmd: RemotingCommand, outcome: int | Refusal) -> RemotingCommand:
    match outcome:
        case int():
            header = to_ext(PollingInfoResponseHeader(outcome))
            return cmd.make_response(RC.SUCCESS, ext_fields=header)
        case Refusal():
            return cmd.make_response(outcome.code, outcome.remark)
        case _:
            assert_never(outcome)


def probe_handlers(probe: PopProbe) -> dict[int, Any]:
    """The request-code -> handler entries of the POP probes for the RemotingAdapter."""

    async def peek_message(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(PeekMessageRequestHeader, ctx.cmd.ext_fields)
        return peek_response(ctx.cmd, await probe.peek(h))

    async def notification(ctx: RequestContext) -> RemotingCommand | None:
        h = from_ext(NotificationRequestHeader, ctx.cmd.ext_fields)
        outcome = await probe.notification(h, HeldReply(ctx, notification_response))
        return None if outcome is None else notification_response(ctx.cmd, outcome)

    def polling_info(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(PollingInfoRequestHeader, ctx.cmd.ext_fields)
        return polling_info_response(ctx.cmd, probe.polling_info(h))

    return {
        RequestCode.PEEK_MESSAGE: peek_message,
        RequestCode.NOTIFICATION: notification,
        RequestCode.POLLING_INFO: polling_info,
    }
