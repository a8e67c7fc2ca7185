"""SendMessage: a gRPC message to one SEND_MESSAGE_V2 at the master of the chosen queue's
broker set, and the broker's answer back as a `SendResultEntry` (upstream's
SendMessageActivity with the ResponseBuilder's codes).

Two ways through, one mapping. `SendPath.send_message` is the task path: it may wait for a
route or a master's address (and authenticates before it, in `ProxyService.handle`). A send
whose route and master are cached and whose broker connection is open, on a proxy without
authentication, takes `SendPath.send_nowait` instead: called in the Trio thread the moment the
call crosses from grpcio (`GrpcBridge.fast`), it writes the request with
``Connection.request_nowait`` and answers the call from the response callback: no Trio task,
cancel scope or call queue per send (each costs the proxy's Trio thread tens of us per call;
docs/benchmarks.md, issue 28 item 4). Its deadline is the task path's (``timeout_s``,
`BROKER_TIMEOUT_S`), kept by `CallbackRequests` (``expire`` every `EXPIRE_PERIOD_S`); a late
or failed request answers INTERNAL_SERVER_ERROR as the task path's `RemotingError` does. At most
``max_in_flight`` sends wait this way; more take the task path, bounded by the call queue.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from rocketrio.actors.client.async_send import CallbackRequests
from rocketrio.actors.client.backend import Reply
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.proxy import mapping as mp
from rocketrio.actors.proxy.grpc_bridge import Call
from rocketrio.actors.proxy.mapping import BadRequest, Code, status
from rocketrio.actors.proxy.receipt import TransactionId
from rocketrio.protocol.bodies import TopicRouteData
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.headers import SendMessageResponseHeader
from rocketrio.protocol.message import (
    TRANSACTION_PREPARED_TYPE,
    encode_properties,
    parse_offset_msg_id,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext

BROKER_TIMEOUT_S = 3.0
EXPIRE_PERIOD_S = 0.1  # how often late task-free sends are failed (their deadline's precision)
MAX_NOWAIT_IN_FLIGHT = 1024  # task-free sends waiting for their broker at once

# the broker stored the message although it answered with one of these
_STORED = frozenset(
    {Code.MASTER_PERSISTENCE_TIMEOUT, Code.SLAVE_PERSISTENCE_TIMEOUT, Code.HA_NOT_AVAILABLE}
)

_OK = status(Code.OK)

Route = Callable[[str], Awaitable[TopicRouteData]]
Master = Callable[[str, str], Awaitable[str]]
# (method, exception) -> the call's error response (ProxyService's mapping of failures)
ErrorAnswer = Callable[[str, BaseException], Any]


@attrs.define
class PreparedSend:
    """A send ready for its broker: where, what, and what the answer needs."""

    addr: str
    cmd: RemotingCommand
    broker_name: str
    message_id: str
    half: bool


def send_ext(
    topic: str, target: mp.TargetQueue, half: bool, born_ms: int, props: dict[str, str]
) -> dict[str, str]:
    """The SEND_MESSAGE_V2 extFields of a proxied send: what ``to_ext`` gives for its
    `SendMessageRequestHeaderV2` (a test checks it), written out, as it sits on every send."""
    return {
        "a": mp.PROXY_PRODUCER_GROUP,
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(target.queue_id),
        "f": _HALF_FLAG if half else "0",
        "g": str(born_ms),
        "h": "0",
        "i": encode_properties(props),
        "j": "0",
        "k": "false",
        "m": "false",
        "n": target.broker_name,
    }


_HALF_FLAG = str(TRANSACTION_PREPARED_TYPE)


class SendPath:
    def __init__(
        self,
        client: MQClientInstance,
        local_broker_name: str,
        max_body_size: int,
        now_ms: Callable[[], int],
    ) -> None:
        self.client = client
        self.local_broker_name = local_broker_name
        self.max_body_size = max_body_size
        self.now_ms = now_ms
        self._turn = itertools.count()
        self.requests = CallbackRequests()
        self.max_in_flight = MAX_NOWAIT_IN_FLIGHT
        self.timeout_s = BROKER_TIMEOUT_S

    # -- the mapping, shared by every path (loop_remoting.py's too: pure, safe in any thread)
    def message_of(self, req: spb.SendMessageRequest) -> tuple[pb.Message, dict[str, str]]:
        if len(req.messages) != 1:
            raise BadRequest(Code.BAD_REQUEST, "exactly one message per SendMessage")
        msg = req.messages[0]
        props = mp.send_properties(msg, self.max_body_size, mp.PROXY_PRODUCER_GROUP, self.now_ms())
        return msg, props

    def target(self, msg: pb.Message, route: TopicRouteData) -> mp.TargetQueue:
        return self.target_in(msg, mp.writable_queues(route))

    def target_in(self, msg: pb.Message, queues: Sequence[mp.TargetQueue]) -> mp.TargetQueue:
        """`target` given the route's writable queues (the gRPC loop keeps them per route)."""
        group = msg.system_properties.message_group if mp.message_type_of(msg) == pb.FIFO else None
        if group is None and self.local_broker_name:
            # local mode: to the co-located broker when it has queues (in-process); a message
            # group keeps the whole route's queue, whichever proxy takes it (forwarded)
            queues = mp.prefer_broker(queues, self.local_broker_name)
        return mp.choose_queue(queues, group, next(self._turn))

    def prepare(
        self, msg: pb.Message, props: dict[str, str], target: mp.TargetQueue, addr: str
    ) -> PreparedSend:
        half = mp.message_type_of(msg) == pb.TRANSACTION
        cmd = RemotingCommand(
            code=RequestCode.SEND_MESSAGE_V2,
            ext_fields=send_ext(msg.topic.name, target, half, self.now_ms(), props),
            body=msg.body,
        )
        return PreparedSend(addr, cmd, target.broker_name, msg.system_properties.message_id, half)

    @staticmethod
    def answer(sent: PreparedSend, resp: RemotingCommand) -> spb.SendMessageResponse:
        """The gRPC answer of the broker's response ``resp`` to ``sent``."""
        code = mp.code_of_send(resp.code)
        if resp.code != ResponseCode.SUCCESS and code != Code.OK and code not in _STORED:
            entry = spb.SendResultEntry(status=status(code, resp.remark or ""))
            return spb.SendMessageResponse(status=status(code, resp.remark or ""), entries=[entry])
        h = from_ext(SendMessageResponseHeader, resp.ext_fields)
        tx = ""
        if sent.half:
            tx = TransactionId(
                sent.broker_name,
                parse_offset_msg_id(h.msgId)[2],
                h.queueOffset,
                h.transactionId or sent.message_id,
            ).encode()
        st = _OK if code == Code.OK else status(code)  # protobuf copies it into the answer
        out = spb.SendMessageResponse(status=st)
        out.entries.add(
            status=st, message_id=sent.message_id, transaction_id=tx, offset=h.queueOffset
        )
        return out

    # -- the task path
    async def send_message(self, call: Call, route_of: Route, master_of: Master) -> Any:
        msg, props = self.message_of(call.request)
        route = await route_of(msg.topic.name)
        target = self.target(msg, route)
        addr = await master_of(target.broker_name, msg.topic.name)
        sent = self.prepare(msg, props, target, addr)
        resp = await self.client.remoting.invoke(addr, sent.cmd, self.timeout_s)
        return self.answer(sent, resp)

    # -- the task-free path
    def send_nowait(self, call: Call, error_answer: ErrorAnswer) -> bool:
        """Start ``call`` (a SendMessage) without a task when everything it needs is at hand;
        False: nothing was done, the call takes the task path. Never raises: a refusal or a
        failure is the call's answer."""
        if len(self.requests) >= self.max_in_flight:
            return False
        try:
            msg, props = self.message_of(call.request)
            route = self.client.routes.get(msg.topic.name)
            if route is None:
                return False
            target = self.target(msg, route)
            addr = self.client.find_master_addr(target.broker_name)
            conn = self.client.remoting.connection_nowait(addr) if addr else None
            if addr is None or conn is None:
                return False
            sent = self.prepare(msg, props, target, addr)
            self.client.remoting.before_request(addr, sent.cmd)
        except Exception as e:
            call.respond(error_answer(call.method, e))
            return True

        def done(reply: Reply[RemotingCommand]) -> None:
            try:
                call.respond(self.answer(sent, reply.result()))
            except Exception as e:
                call.respond(error_answer(call.method, e))

        deadline = trio.current_time() + self.timeout_s
        self.requests.start(conn, sent.cmd, deadline, done)
        return True

    async def expire_late(self) -> None:
        """Fail the task-free sends whose broker has not answered by their deadline."""
        while True:
            await trio.sleep(EXPIRE_PERIOD_S)
            self.requests.expire(trio.current_time())
