"""The proxy's PullMessage, UpdateOffset, GetOffset and QueryOffset RPCs (the gRPC face of a
pull consumer): each is one remoting call to the master of the broker set the request's
MessageQueue names, as upstream's ConsumerProcessor makes them (pullMessage,
updateConsumerOffset, queryConsumerOffset, getMinOffset / getMaxOffset, and
SEARCH_OFFSET_BY_TIMESTAMP for the TIMESTAMP policy).

PullMessage streams a status first, then the messages, then the offset to pull from next
(the broker's nextBeginOffset). Status codes: a pull that found messages OK; none yet, or none
matching the filter, MESSAGE_NOT_FOUND; an offset outside the queue ILLEGAL_OFFSET (next_offset
still says where to go on); a group without a stored offset OFFSET_NOT_FOUND; broker refusals
by upstream's ResponseBuilder (mapping.code_of_remoting).

The pure parts (`message_queue_of`, `pull_code`, `pull_responses`, `tag_filter`) are module
functions; `OffsetHandlers` holds the calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from rocketrio.actors.client.api import PullStatus
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.grpc_bridge import Call
from rocketrio.actors.proxy.mapping import BadRequest, Code, status
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    PullMessageRequestHeader,
)
from rocketrio.protocol.message import PROPERTY_TAGS, MessageExt
from rocketrio.protocol.sql92_parse import EXPRESSION_SQL92, Sql92ParseError, parse_sql92

MAX_PULL_BATCH = 32  # upstream's pull batch cap (maxMsgNums per PULL_MESSAGE)
MAX_PULL_POLL_MS = 30_000  # a held pull is capped like a receive's long poll
PULL_MARGIN_S = 3.0  # waited for the broker's answer beyond its long poll

_PULL_CODE = {
    PullStatus.FOUND: Code.OK,
    PullStatus.NO_NEW_MSG: Code.MESSAGE_NOT_FOUND,
    PullStatus.NO_MATCHED_MSG: Code.MESSAGE_NOT_FOUND,
    PullStatus.OFFSET_ILLEGAL: Code.ILLEGAL_OFFSET,
}


def message_queue_of(mq: pb.MessageQueue) -> MessageQueue:
    """The remoting queue a request names (its topic, broker set and queue id)."""
    if not mq.topic.name:
        raise BadRequest(Code.ILLEGAL_TOPIC, "topic name is empty")
    if not mq.broker.name:
        raise BadRequest(Code.BAD_REQUEST, "message queue names no broker")
    if mq.id < 0:
        raise BadRequest(Code.BAD_REQUEST, f"queue id {mq.id} is negative")
    return MessageQueue(topic=mq.topic.name, brokerName=mq.broker.name, queueId=mq.id)


def pull_code(pull_status: PullStatus) -> int:
    return _PULL_CODE[pull_status]


def tag_filter(expression: pb.FilterExpression) -> Callable[[MessageExt], bool]:
    """The broker filters by tag hash; the exact tag is checked here, as upstream's clients
    do. A SQL92 expression is checked (`sql_expression`) and left to the broker."""
    if expression.type == pb.SQL:
        sql_expression(expression)
        return lambda _m: True
    text = expression.expression.strip()
    if not text or text == "*":
        return lambda _m: True
    tags = {t.strip() for t in text.split("||") if t.strip()}
    return lambda m: m.properties.get(PROPERTY_TAGS) in tags


def pull_responses(
    code: int, message: str, messages: Sequence[pb.Message], next_offset: int
) -> list[spb.PullMessageResponse]:
    """The PullMessage stream: status, then each message, then the next offset."""
    out = [spb.PullMessageResponse(status=status(code, message))]
    out += [spb.PullMessageResponse(message=m) for m in messages]
    out.append(spb.PullMessageResponse(next_offset=next_offset))
    return out


def expression_of(expression: pb.FilterExpression) -> str:
    return expression.expression.strip() or "*"


def expression_type_of(expression: pb.FilterExpression) -> str:
    """The remoting expressionType of a gRPC FilterExpression (TAG unless SQL)."""
    return EXPRESSION_SQL92 if expression.type == pb.SQL else "TAG"


def sql_expression(expression: pb.FilterExpression) -> str:
    """A SQL92 FilterExpression's text; one that does not compile is ILLEGAL_FILTER_EXPRESSION
    with the compiler's message (upstream's broker answers SUBSCRIPTION_PARSE_FAILED, which
    upstream's proxy turns into that code)."""
    try:
        parse_sql92(expression.expression)
    except Sql92ParseError as e:
        raise BadRequest(Code.ILLEGAL_FILTER_EXPRESSION, e.java_message) from e
    return expression.expression


class OffsetHandlers:
    def __init__(
        self,
        client: MQClientInstance,
        route: Callable[[str], Awaitable[Any]],
        master: Callable[[str, str], Awaitable[str]],
    ) -> None:
        self.client = client
        self.route = route
        self.master = master

    async def _queue(self, mq: pb.MessageQueue) -> tuple[MessageQueue, str]:
        queue = message_queue_of(mq)
        await self.route(queue.topic)
        return queue, await self.master(queue.brokerName, queue.topic)

    @staticmethod
    def _group(resource: pb.Resource) -> str:
        if not resource.name:
            raise BadRequest(Code.ILLEGAL_CONSUMER_GROUP, "consumer group is empty")
        return resource.name

    async def pull_message(self, call: Call) -> list[spb.PullMessageResponse]:
        req: spb.PullMessageRequest = call.request
        group = self._group(req.group)
        accept = tag_filter(req.filter_expression)
        queue, addr = await self._queue(req.message_queue)
        if req.offset < 0:
            raise BadRequest(Code.ILLEGAL_OFFSET, f"offset {req.offset} is negative")
        batch = req.batch_size or MAX_PULL_BATCH
        if not 0 < batch <= MAX_PULL_BATCH:
            raise BadRequest(Code.BAD_REQUEST, f"batch size must be 1..{MAX_PULL_BATCH}")
        poll_ms = min(mp.ms_of_duration(req.long_polling_timeout), MAX_PULL_POLL_MS)
        header = PullMessageRequestHeader(
            consumerGroup=group,
            topic=queue.topic,
            queueId=queue.queueId,
            queueOffset=req.offset,
            maxMsgNums=batch,
            sysFlag=PULL_FLAG_SUBSCRIPTION | (PULL_FLAG_SUSPEND if poll_ms > 0 else 0),
            commitOffset=0,
            suspendTimeoutMillis=poll_ms,
            subVersion=0,
            subscription=expression_of(req.filter_expression),
            expressionType=expression_type_of(req.filter_expression),
            bname=queue.brokerName,
        )
        result = await self.client.api.pull(addr, header, poll_ms / 1000 + PULL_MARGIN_S)
        found = [
            mp.received_message(m, queue.topic, None, 0) for m in result.messages() if accept(m)
        ]
        code = pull_code(result.status)
        if result.status is PullStatus.FOUND and not found:
            code = Code.MESSAGE_NOT_FOUND  # every message pulled failed the exact tag check
        return pull_responses(code, result.status.value, found, result.next_begin_offset)

    async def update_offset(self, call: Call) -> spb.UpdateOffsetResponse:
        req: spb.UpdateOffsetRequest = call.request
        group = self._group(req.group)
        queue, addr = await self._queue(req.message_queue)
        if req.offset < 0:
            raise BadRequest(Code.ILLEGAL_OFFSET, f"offset {req.offset} is negative")
        await self.client.api.update_consumer_offset(addr, group, queue, req.offset)
        return spb.UpdateOffsetResponse(status=status(Code.OK))

    async def get_offset(self, call: Call) -> spb.GetOffsetResponse:
        req: spb.GetOffsetRequest = call.request
        group = self._group(req.group)
        queue, addr = await self._queue(req.message_queue)
        offset = await self.client.api.query_consumer_offset(addr, group, queue)
        if offset < 0:
            return spb.GetOffsetResponse(
                status=status(Code.OFFSET_NOT_FOUND, f"group {group} has no offset for {queue}")
            )
        return spb.GetOffsetResponse(status=status(Code.OK), offset=offset)

    async def query_offset(self, call: Call) -> spb.QueryOffsetResponse:
        req: spb.QueryOffsetRequest = call.request
        queue, addr = await self._queue(req.message_queue)
        match req.query_offset_policy:
            case pb.BEGINNING:
                offset = await self.client.api.get_min_offset(addr, queue)
            case pb.END:
                offset = await self.client.api.get_max_offset(addr, queue)
            case pb.TIMESTAMP:
                if not req.HasField("timestamp"):
                    raise BadRequest(Code.BAD_REQUEST, "policy TIMESTAMP needs a timestamp")
                ms = req.timestamp.seconds * 1000 + req.timestamp.nanos // 1_000_000
                offset = await self.client.api.search_offset(addr, queue, ms)
            case _:
                raise BadRequest(Code.BAD_REQUEST, "query offset policy is unknown")
        return spb.QueryOffsetResponse(status=status(Code.OK), offset=offset)
