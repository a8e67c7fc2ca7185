"""A client's side of CONSUME_MESSAGE_DIRECTLY (309): consume one message now, for an admin.

`mqadmin queryMsgByUniqueKey -g group -d clientId` has the broker that stored a message pass it,
as a stored record, to this client's connection (upstream ClientRemotingProcessor
.consumeMessageDirectly, ConsumeMessageConcurrentlyService / ConsumeMessageOrderlyService
.consumeMessageDirectly). The group's push consumer hands it to its listener once, outside its
queues: no offset moves, nothing is sent back, a retry message is shown under its real topic. The
answer is a ConsumeMessageDirectlyResult: the listener's status as a CMResult (concurrent:
CONSUME_SUCCESS -> CR_SUCCESS, RECONSUME_LATER -> CR_LATER; orderly: SUCCESS, COMMIT, ROLLBACK,
SUSPEND_CURRENT_QUEUE_A_MOMENT -> CR_SUCCESS, CR_COMMIT, CR_ROLLBACK, CR_LATER, with order=true
and the context's autoCommit), None -> CR_RETURN_NULL, an exception -> CR_THROW_EXCEPTION with it
as remark, and the time the listener took. A group this client has no push consumer of is
SYSTEM_ERROR with upstream's remark.

The listener runs in a task of the client (`serve`), not in the connection's reader, so a listener
that itself talks to the broker over this connection cannot wait on its own reader.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.message import ConsumeStatus
from rocketrio.actors.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from rocketrio.actors.client.orderly_consumer import OrderlyPushConsumer
from rocketrio.actors.client.push_consumer import PushConsumer
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.actors.observe import events
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.consume_directly import (
    CMResult,
    ConsumeMessageDirectlyResult,
    ConsumeMessageDirectlyResultRequestHeader,
)
from rocketrio.protocol.message import RETRY_TOPIC, MessageDecodeError, MessageExt, decode_stored
from rocketrio.protocol.serde import HeaderError, from_ext

if TYPE_CHECKING:
    from rocketrio.actors.client.mq_client import MQClientInstance

log = structlog.get_logger("client")

CONCURRENT_RESULTS = {
    ConsumeStatus.CONSUME_SUCCESS: CMResult.CR_SUCCESS,
    ConsumeStatus.RECONSUME_LATER: CMResult.CR_LATER,
}
ORDERLY_RESULTS = {
    ConsumeOrderlyStatus.SUCCESS: CMResult.CR_SUCCESS,
    ConsumeOrderlyStatus.COMMIT: CMResult.CR_COMMIT,
    ConsumeOrderlyStatus.ROLLBACK: CMResult.CR_ROLLBACK,
    ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT: CMResult.CR_LATER,
}


async def consume_directly(
    consumer: PushConsumer | OrderlyPushConsumer, msg: MessageExt, broker_name: str
) -> ConsumeMessageDirectlyResult:
    """Hand ``msg`` to the consumer's listener once; its verdict (module docstring)."""
    if (real := msg.properties.get(RETRY_TOPIC)) is not None:
        msg.topic = real  # upstream resetRetryAndNamespace
    mq = MessageQueue(msg.topic, broker_name, msg.queue_id)
    orderly = isinstance(consumer, OrderlyPushConsumer)
    result = ConsumeMessageDirectlyResult(order=orderly, autoCommit=True)
    ctx = ConsumeOrderlyContext(mq)
    listener: Any = consumer._listener
    began = aio.current_time()
    try:
        status = listener([msg], ctx) if orderly else listener([msg])
        if inspect.isawaitable(status):
            status = await status
        if status is None:
            result.consumeResult = CMResult.CR_RETURN_NULL
        else:
            results: dict[Any, CMResult] = ORDERLY_RESULTS if orderly else CONCURRENT_RESULTS
            result.consumeResult = results.get(status)
    except Exception as e:  # the admin is told, as upstream: CR_THROW_EXCEPTION with the error
        result.consumeResult = CMResult.CR_THROW_EXCEPTION
        result.remark = f"{type(e).__name__}: {e}"
    if orderly:
        result.autoCommit = ctx.auto_commit
    result.spentTimeMills = int((aio.current_time() - began) * 1000)
    return result


async def serve(client: MQClientInstance, ctx: RequestContext) -> None:
    """Answer one CONSUME_MESSAGE_DIRECTLY request through ``ctx.respond``."""
    cmd = ctx.cmd
    try:
        h = from_ext(ConsumeMessageDirectlyResultRequestHeader, cmd.ext_fields)
        msg = decode_stored(cmd.body or b"", decompress_body=True)[0]
    except (HeaderError, MessageDecodeError) as e:
        ctx.respond(cmd.make_response(ResponseCode.SYSTEM_ERROR, f"bad request: {e}"))
        return
    consumer = client.consumers.get(h.consumerGroup)
    if not isinstance(consumer, PushConsumer | OrderlyPushConsumer) or consumer._listener is None:
        remark = f"The Consumer Group <{h.consumerGroup}> not exist in this consumer"
        ctx.respond(cmd.make_response(ResponseCode.SYSTEM_ERROR, remark))
        return
    result = await consume_directly(consumer, msg, h.brokerName or "")
    name = result.consumeResult.value if result.consumeResult is not None else ""
    events.emit(
        log,
        events.ConsumedDirectly(
            group=h.consumerGroup,
            msg_id=msg.msg_id,
            result=name,
            spent_ms=result.spentTimeMills,
        ),
    )
    ctx.respond(cmd.make_response(ResponseCode.SUCCESS, body=fastjson.encode(result)))
