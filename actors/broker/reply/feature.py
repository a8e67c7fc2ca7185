"""Request-reply as the broker builds it: the processor (processor.py) and its request codes,
SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325), answered with upstream's
SendMessageResponseHeader once the requester took the push (and the store the reply)."""

from __future__ import annotations

import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.dispatch.answers import born_host, refused
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.reply.processor import (
    ProducerChannels,
    ReplyAnswer,
    ReplyConfig,
    ReplyMessageProcessor,
    ReplySender,
)
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from rocketrio.protocol.message_format import PROPERTY_MSG_REGION, PROPERTY_TRACE_SWITCH
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext


def reply_response(cmd: RemotingCommand, answer: ReplyAnswer) -> RemotingCommand:
    code = ResponseCode.SUCCESS if answer.pushed else ResponseCode.SYSTEM_ERROR
    ext: dict[str, str] = {PROPERTY_MSG_REGION: "DefaultRegion", PROPERTY_TRACE_SWITCH: "true"}
    if answer.msg_id is not None:
        header = SendMessageResponseHeader(answer.msg_id, answer.queue_id, answer.queue_offset)
        ext.update(to_ext(header))
    return cmd.make_response(code, answer.remark, ext)


def reply_header(cmd: RemotingCommand) -> SendMessageRequestHeader:
    if cmd.code == RequestCode.SEND_REPLY_MESSAGE_V2:
        return from_ext(SendMessageRequestHeaderV2, cmd.ext_fields).to_v1()
    return from_ext(SendMessageRequestHeader, cmd.ext_fields)


class ReplyFeature:
    """The reply path of one broker (module docstring)."""

    def __init__(self, io: BrokerIO, *, send: ReplySender, producers: ProducerChannels) -> None:
        self.processor = ReplyMessageProcessor(
            ReplyConfig.of(io.config),
            send=send,
            producers=producers,
            now_ms=io.now_ms,
            rng=io.rng,
        )

    def handlers(self) -> Handlers:
        reply = self.processor

        async def send_reply(ctx: RequestContext) -> RemotingCommand | None:
            cmd, conn = ctx.cmd, ctx.conn
            h = reply_header(cmd)

            def on_done(answer: ReplyAnswer) -> None:
                ctx.respond(reply_response(cmd, answer))

            refusal = await reply.reply(h, cmd.body, born_host(conn), conn.remote, on_done)
            return None if refusal is None else refused(cmd, refusal)

        return {
            RequestCode.SEND_REPLY_MESSAGE: send_reply,
            RequestCode.SEND_REPLY_MESSAGE_V2: send_reply,
        }

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        self.processor.reconfigure(config, changed)

    async def run_services(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await self.processor.run(task_status=task_status)
