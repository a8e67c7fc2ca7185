"""Request-reply (RPC messages) for the project's clients: upstream DefaultMQProducer.request,
RequestFutureHolder, MessageUtil.createReplyMessage and ClientRemotingProcessor's
receiveReplyMessage.

Requester::

    reply = await producer.request(Message("Rpc", b"ping"), timeout=3.0)

Responder (any consumer; the reply goes out with the same or another producer)::

    await producer.send(create_reply_message(request_msg, b"pong"))

`request` stamps the message with CORRELATION_ID (a fresh id), REPLY_TO_CLIENT (this client's
id) and TTL (the timeout in ms), makes sure the brokers know this client as a producer (when
the topic or its cluster's reply topic is new to the client: a route fetch and a heartbeat to
every broker, like upstream, and also the route of the reply topic of the topic's cluster, so
the brokers a reply may come through are among them), registers
the request in the client's `RequestFutures` and sends it as an ordinary message. The broker
that stores it adds CLUSTER; `create_reply_message` turns that into the reply topic
``<cluster>_REPLY_TOPIC`` with MSG_TYPE=reply, which the producer sends with
SEND_REPLY_MESSAGE_V2 (send_api.py). The broker pushes the reply to this client with
PUSH_REPLY_MESSAGE_TO_CLIENT (326); `RequestFutures` (the client's handler for 326) matches it
by CORRELATION_ID and wakes the waiting request.

Timeouts as upstream: the send gets what is left of ``timeout``, and the wait for the reply what
is left after that. A failed send fails the request at once (`MQClientError` "send request
message to <topic> fail", the send's error as its cause); a sent request without a reply in
time is `RequestTimeout` (upstream REQUEST_TIMEOUT_EXCEPTION, 10006). A reply that matches no
waiting request (late, or not ours) is logged (`reply_unmatched`) and acknowledged.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import attrs
import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.queue_select import MessageQueueSelector
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.message import MessageExt
from rocketrio.protocol.message_format import (
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB_TYPE,
    decode_properties,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.reply import (
    PROPERTY_CORRELATION_ID,
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_MESSAGE_TTL,
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME,
    NotARequest,
    ReplyMessageRequestHeader,
    reply_properties,
    reply_topic,
)
from rocketrio.protocol.serde import HeaderError, from_ext

if TYPE_CHECKING:
    from rocketrio.actors.client.mq_client import MQClientInstance
    from rocketrio.actors.client.producer import Producer

REQUEST_TIMEOUT_EXCEPTION: Final = 10006  # upstream ClientErrorCode
CREATE_REPLY_MESSAGE_EXCEPTION: Final = 10007

log = structlog.get_logger("client")


class RequestTimeout(MQClientError):
    """The request was sent but no reply came within its timeout."""

    code = REQUEST_TIMEOUT_EXCEPTION


class CreateReplyError(MQClientError):
    """The message is not a request a broker stored (no CLUSTER property)."""

    code = CREATE_REPLY_MESSAGE_EXCEPTION


@attrs.define(eq=False)
class PendingRequest:
    """One request waiting for its reply (upstream RequestResponseFuture)."""

    correlation_id: str
    arrived: aio.Event = attrs.field(factory=aio.new_event)
    reply: MessageExt | None = None


def decode_reply(cmd: RemotingCommand, receive_ms: int) -> MessageExt:
    """The pushed reply as a message (ARRIVE_TIME stamped ``receive_ms``, a zlib body
    inflated); `HeaderError` / ValueError / zlib.error for a push that is not one."""
    h = from_ext(ReplyMessageRequestHeader, cmd.ext_fields)
    body = cmd.body
    if h.sysFlag & COMPRESSED_FLAG:
        if h.sysFlag & COMPRESSION_TYPE_MASK not in (0, COMPRESSION_ZLIB_TYPE):
            raise ValueError(f"unsupported compression type {h.sysFlag:#x}")
        body = zlib.decompress(body)
    props = decode_properties(h.properties or "")
    props[PROPERTY_REPLY_MESSAGE_ARRIVE_TIME] = str(receive_ms)
    return MessageExt(
        h.topic,
        body,
        flag=h.flag,
        properties=props,
        queue_id=h.queueId,
        sys_flag=h.sysFlag,
        born_timestamp=h.bornTimestamp,
        born_host=h.bornHost,
        store_timestamp=h.storeTimestamp,
        store_host=h.storeHost,
        reconsume_times=h.reconsumeTimes or 0,
    )


class RequestFutures:
    """The requests of one client instance waiting for replies, by CORRELATION_ID; the
    client answers PUSH_REPLY_MESSAGE_TO_CLIENT with it (mq_client.py)."""

    def __init__(self, now_ms: Callable[[], int] = wallclock_ms) -> None:
        self.table: dict[str, PendingRequest] = {}
        self.now_ms = now_ms

    @classmethod
    def of(cls, client: MQClientInstance) -> RequestFutures:
        """The client's table, made on first use (a reply may come before any request)."""
        if not isinstance(client.reply_waiters, RequestFutures):
            client.reply_waiters = cls()
        futures: RequestFutures = client.reply_waiters
        return futures

    def __call__(self, cmd: RemotingCommand) -> RemotingCommand:
        try:
            reply = decode_reply(cmd, self.now_ms())
        except (HeaderError, ValueError, zlib.error) as e:
            events.emit(log, events.ReplyPushBad(error=str(e)))
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation_id = reply.properties.get(PROPERTY_CORRELATION_ID, "")
        pending = self.table.pop(correlation_id, None)
        if pending is None:
            events.emit(log, events.ReplyUnmatched(correlation_id=correlation_id))
        else:
            pending.reply = reply
            pending.arrived.set()
        return cmd.make_response(ResponseCode.SUCCESS)


def create_reply_message(request: MessageExt, body: bytes) -> Message:
    """The reply to a received request (upstream MessageUtil.createReplyMessage)."""
    try:
        topic, props = reply_properties(request.properties)
    except NotARequest as e:
        raise CreateReplyError(str(e)) from None
    return Message(topic, body, properties=props)


def _new_correlation_id() -> str:
    return str(uuid.uuid4())


def _reply_routes_known(producer: Producer, topic: str) -> bool:
    """Whether the client knows the topic's route and the reply topic route of its clusters."""
    routes = producer.client.routes
    route = routes.get(topic)
    return route is not None and all(reply_topic(b.cluster) in routes for b in route.brokerDatas)


async def _known_to_reply_brokers(producer: Producer, topic: str) -> None:
    """Make every broker a reply may come through know this client as a producer, before
    the first request to ``topic``: upstream fetches the topic's route and heartbeats to the
    brokers it knows; this also follows the reply topic of each cluster in that route (a
    responder sends to any broker of ``<cluster>_REPLY_TOPIC``, not only to the request's)."""
    client = producer.client
    await producer.publish_info(topic)
    route = client.routes.get(topic)
    for cluster in sorted({b.cluster for b in route.brokerDatas} if route else ()):
        client.watch_topic(reply_topic(cluster))
        await client.update_route(reply_topic(cluster))
    await client.send_heartbeat_to_all()


async def request(
    producer: Producer,
    msg: Message,
    timeout: float,
    queue_selector: MessageQueueSelector | None = None,
    arg: Any = None,
    *,
    queue: MessageQueue | None = None,
    new_correlation_id: Callable[[], str] = _new_correlation_id,
) -> MessageExt:
    """Send ``msg`` as a request and wait for its reply (module docstring); to the queue
    ``queue_selector`` picks, or to ``queue``, else like any send."""
    started = aio.current_time()
    client = producer.client
    correlation_id = new_correlation_id()
    props = {
        **(msg.properties or {}),
        PROPERTY_CORRELATION_ID: correlation_id,
        PROPERTY_MESSAGE_REPLY_TO_CLIENT: client.client_id,
        PROPERTY_MESSAGE_TTL: str(int(timeout * 1000)),
    }
    msg = attrs.evolve(msg, properties=props)
    futures = RequestFutures.of(client)
    pending = futures.table[correlation_id] = PendingRequest(correlation_id)
    try:
        try:
            if not _reply_routes_known(producer, msg.topic):
                await _known_to_reply_brokers(producer, msg.topic)
            left = max(timeout - (aio.current_time() - started), 0.0)
            if queue is not None:
                await producer.send_to_queue(msg, queue, timeout=left)
            else:
                await producer.send(msg, queue_selector, arg, timeout=left)
        except Exception as e:
            raise MQClientError(f"send request message to <{msg.topic}> fail: {e}") from e
        with aio.move_on_after(timeout - (aio.current_time() - started)):
            await pending.arrived.wait()
        if pending.reply is None:
            raise RequestTimeout(
                f"send request message to <{msg.topic}> OK, but wait reply message timeout, "
                f"{int(timeout * 1000)} ms."
            )
        return pending.reply
    finally:
        futures.table.pop(correlation_id, None)
