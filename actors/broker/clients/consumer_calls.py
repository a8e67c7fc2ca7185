"""Admin questions about a consumer that the broker answers: GET_CONSUMER_RUNNING_INFO (307),
passed on to the consumer itself, and QUERY_CONSUME_TIME_SPAN (303), from the store
(upstream AdminBrokerProcessor.getConsumerRunningInfo / callConsumer / queryConsumeTimeSpan,
Broker2Client.callClient).

307: the broker finds the member's connection by group and client id and sends it the request
(same extFields and body) as a synchronous call over the client's own connection, with
upstream's 10 s timeout, then answers the admin with the client's answer. The call runs as a
task of `Broker2Client` (bounded: at most ``MAX_CALLS_IN_FLIGHT``), so the admin's connection
keeps being served meanwhile. Refusals carry upstream's codes and remarks: a member not
online or too old is SYSTEM_ERROR, a client that does not answer in time CONSUME_MSG_TIMEOUT,
a broken connection SYSTEM_ERROR ``invoke consumer ... Exception``.

303: per write queue of the topic, the store times of its first and last message, of the last
message the group consumed (the first message's when the group committed nothing) and, when
the group is behind, how long the next message to consume has waited (``delayTime``). A time
the store cannot give is -1, as upstream's store answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

from rocketrio.actors.broker.clients.client_manager import ConsumerManager
from rocketrio.actors.broker.dispatch.table import Handler
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.tables import OffsetTable, TopicTable
from rocketrio.actors.kernel.remoting import (
    Connection,
    RemotingError,
    RemotingTimeout,
    RequestContext,
)
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.running_info import (
    GetConsumerRunningInfoRequestHeader,
    QueryConsumeTimeSpanBody,
    QueryConsumeTimeSpanRequestHeader,
    QueueTimeSpan,
)
from rocketrio.protocol.serde import from_ext

CALL_CLIENT_TIMEOUT_S = 10.0  # upstream Broker2Client.callClient
MAX_CALLS_IN_FLIGHT = 64
V3_1_8_SNAPSHOT = 62  # MQVersion ordinal: older clients cannot answer 307


class Broker2Client:
    """Runs the broker's synchronous calls to clients, each as a task of its nursery."""

    def __init__(self, timeout_s: float = CALL_CLIENT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self.in_flight = 0
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    def call_client(
        self,
        conn: Connection,
        request: RemotingCommand,
        on_done: Callable[[RemotingCommand | RemotingError], None],
    ) -> str | None:
        """Start the call; ``on_done`` gets the client's answer or the failure. Returns why
        the call cannot start (not running, too many in flight), else None."""
        if self._nursery is None:
            return "the broker is not ready to call clients"
        if self.in_flight >= MAX_CALLS_IN_FLIGHT:
            return f"{MAX_CALLS_IN_FLIGHT} calls to clients are in flight already"
        self.in_flight += 1
        self._nursery.start_soon(self._call, conn, request, on_done)
        return None

    async def _call(
        self,
        conn: Connection,
        request: RemotingCommand,
        on_done: Callable[[RemotingCommand | RemotingError], None],
    ) -> None:
        try:
            outcome: RemotingCommand | RemotingError = await conn.request(request, self.timeout_s)
        except RemotingError as e:
            outcome = e
        finally:
            self.in_flight -= 1
        on_done(outcome)


def _simple_desc(e: Exception) -> str:
    return f"{type(e).__name__}: {e}"


def forwarded(ctx: RequestContext, resp: RemotingCommand) -> RemotingCommand:
    """The client's answer, as the answer to the admin's request."""
    return ctx.cmd.make_response(resp.code, resp.remark, dict(resp.ext_fields), resp.body)


def call_consumer(
    ctx: RequestContext,
    consumers: ConsumerManager,
    b2c: Broker2Client,
    group: str,
    client_id: str,
    *,
    request: RemotingCommand | None = None,
) -> RemotingCommand | None:
    """upstream callConsumer: an answer now (a refusal), or None when the call was started.
    The client gets ``request`` (default: the admin's request as it came)."""
    cmd = ctx.cmd
    info = consumers.find_channel(group, client_id)
    if info is None:
        return cmd.make_response(
            ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
        )
    if info.version < V3_1_8_SNAPSHOT:
        return cmd.make_response(
            ResponseCode.SYSTEM_ERROR,
            f"The Consumer <{client_id}> Version <{info.version}> too low to finish, "
            "please upgrade it to V3_1_8_SNAPSHOT",
        )
    conn = info.conn
    assert isinstance(conn, Connection)
    if request is None:
        request = RemotingCommand(cmd.code, ext_fields=dict(cmd.ext_fields), body=cmd.body)

    def on_done(outcome: RemotingCommand | RemotingError) -> None:
        if isinstance(outcome, RemotingCommand):
            ctx.respond(forwarded(ctx, outcome))
        elif isinstance(outcome, RemotingTimeout):
            ctx.respond_code(
                ResponseCode.CONSUME_MSG_TIMEOUT,
                f"consumer <{group}> <{client_id}> Timeout: {_simple_desc(outcome)}",
            )
        else:
            ctx.respond_code(
                ResponseCode.SYSTEM_ERROR,
                f"invoke consumer <{group}> <{client_id}> Exception: {_simple_desc(outcome)}",
            )

    why_not = b2c.call_client(conn, request, on_done)
    if why_not is not None:
        return cmd.make_response(ResponseCode.SYSTEM_BUSY, why_not)
    return None


def consume_time_span(
    h: QueryConsumeTimeSpanRequestHeader,
    *,
    broker_name: str,
    topics: TopicTable,
    offsets: OffsetTable,
    store: StoreView,
    now_ms: int,
) -> QueryConsumeTimeSpanBody | None:
    """The body of 303; None when the topic does not exist."""
    tc = topics.select(h.topic)
    if tc is None:
        return None

    def store_ts(qid: int, offset: int) -> int:
        ts = store.get_message_store_timestamp(h.topic, qid, offset)
        return -1 if ts is None else ts

    body = QueryConsumeTimeSpanBody()
    for qid in range(tc.writeQueueNums):
        earliest = store.get_earliest_msg_store_time(h.topic, qid)
        min_time = -1 if earliest is None else earliest
        max_offset = store.get_max_offset(h.topic, qid)
        consumer_offset = offsets.query(h.group, h.topic, qid)
        consume_time = store_ts(qid, consumer_offset - 1) if consumer_offset > 0 else min_time
        delay = 0
        if consumer_offset < max_offset:
            delay = now_ms - store_ts(qid, consumer_offset)
        body.consumeTimeSpanSet.append(
            QueueTimeSpan(
                messageQueue=MessageQueue(h.topic, broker_name, qid),
                minTimeStamp=min_time,
                maxTimeStamp=store_ts(qid, max_offset - 1),
                consumeTimeStamp=consume_time,
                delayTime=delay,
            )
        )
    return body


def consumer_call_handlers(
    broker_name: Callable[[], str],
    *,
    consumers: ConsumerManager,
    b2c: Broker2Client,
    topics: TopicTable,
    offsets: OffsetTable,
    store: StoreView,
    now_ms: Callable[[], int],
) -> dict[int, Handler]:
    async def running_info(ctx: RequestContext) -> RemotingCommand | None:
        h = from_ext(GetConsumerRunningInfoRequestHeader, ctx.cmd.ext_fields)
        return call_consumer(ctx, consumers, b2c, h.consumerGroup, h.clientId)

    async def time_span(ctx: RequestContext) -> RemotingCommand:
        h = from_ext(QueryConsumeTimeSpanRequestHeader, ctx.cmd.ext_fields)
        body: Any = consume_time_span(
            h,
            broker_name=broker_name(),
            topics=topics,
            offsets=offsets,
            store=store,
            now_ms=now_ms(),
        )
        if body is None:
            return ctx.cmd.make_response(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist"
            )
        return ctx.cmd.make_response(ResponseCode.SUCCESS, body=fastjson.encode(body))

    return {
        RequestCode.GET_CONSUMER_RUNNING_INFO: running_info,
        RequestCode.QUERY_CONSUME_TIME_SPAN: time_span,
    }
