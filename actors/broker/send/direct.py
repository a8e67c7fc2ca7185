"""A Java client's plain single send in one handler: SEND_MESSAGE_V2 from the decoded frame to
the store's inbox.

The generic path of a SEND_MESSAGE_V2 passes three handlers: the static-topic wrapper (is the
topic static here?), the send package's ``send_message`` (the header, a batch or a single send)
and its `send_header` (the compiled header or the Python parse). `direct_send` is those three
folded into one function for the request the Java benchmark Producer sends: a header the
compiled `send_header_v2` takes (protocol/speedups/send_header.c), not a batch, to a topic that
has no static mapping here. Everything else goes to ``generic``, the handler the table would
have used without it (the static wrapper's, or the plain one), so a static topic, a batch, a
header that needs the Python parse (and its error answer) are served exactly as before.

What it does not skip: every check of the send is `SendMessageProcessor.send_nowait`'s, the
same call the generic handler makes with the same arguments (role, permissions, topic exists or
auto-created, queue id range, body size, transaction rejection, retry / DLQ / delay routing, a
full store inbox); the ACL gate and the stopping broker stay in `RequestTable.process_nowait`
in front of every handler. The static-topic decision is the mapping table's membership test,
read at each send from the manager (which replaces its table on a reload): a topic made static
after its first plain send is seen at its next send, no cache to invalidate. The answer is the
same `StoredAnswer`, so the answer bytes are the generic path's
(tests/unit/actors/broker/send/test_direct_send.py sends the same requests both ways).

`DirectSend` is the same send one step earlier: the connection's direct path
(actors/kernel/remoting_connection.py `DirectHandler`, as pop/direct_ack.py for ACKs), from the
decoded frame without the RequestContext, the request table's `process_nowait` and the
handler call; its answer (`FrameAnswer`) writes the stored send's frame to the connection
itself. `direct_send_handlers` installs it only where that skips nothing: the table's
SEND_MESSAGE_V2 handler is a `direct_send` one (no wrapper replaced it: the static-topic
wrapper's is one too, with its mappings) and no ACL gate judges requests; the connection uses
it only when answers are not timed (remoting_connection.ServerSide). A broker that is stopping,
and everything `direct_send` hands to ``generic``, it declines (`NOT_DIRECT`) before touching
anything, and the request goes the generic way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Literal, Protocol

from rocketrio.actors.broker.dispatch.answers import born_host, refused
from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.dispatch.table import Answer, Handler
from rocketrio.actors.broker.send.completions import DirectAnswer, PendingSend
from rocketrio.actors.broker.send.handlers import SendAnswer, StoredAnswer
from rocketrio.actors.broker.send.processor import BlockedSend, SendMessageProcessor
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.actors.kernel.remoting import Connection, DirectHandler, RequestContext
from rocketrio.actors.kernel.remoting_connection import NOT_DIRECT
from rocketrio.protocol.codes import RPC_TYPE_RESPONSE, SERIALIZE_ROCKETMQ, RequestCode
from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.headers import SendMessageRequestHeader
from rocketrio.protocol.remoting import DirectRequest, RemotingCommand, command_of
from rocketrio.protocol.send_answer import HEAD as _HEAD
from rocketrio.protocol.send_answer import send_answer_frame
from rocketrio.storage.message_store import PutResult

# protocol/speedups/send_header.c; without the compiled module there is no direct path
_send_header_v2: Callable[..., SendMessageRequestHeader | None] | None = (
    None if _speedups is None else _speedups.send_header_v2
)
# protocol/speedups/answer.c: `send_answer_frame` of a ROCKETMQ request (None: declined)
_answer_c = None if _speedups is None else _speedups.send_answer_frame
_PUT_OK = PutStatus.PUT_OK
_V2 = int(RequestCode.SEND_MESSAGE_V2)


class DirectSendHandler:
    """The SEND_MESSAGE_V2 handler of the request table (module docstring)."""

    def __init__(
        self,
        send: SendMessageProcessor,
        generic: Handler,
        mappings: TopicQueueMappingManager | None,
    ) -> None:
        self.send = send
        self.generic = generic
        self.mappings = mappings

    def __call__(self, ctx: RequestContext) -> Awaitable[Answer] | Answer:
        cmd = ctx.cmd
        h = _send_header_v2(cmd.ext_fields, SendMessageRequestHeader)  # type: ignore[misc]
        mappings = self.mappings
        if h is None or h.batch or (mappings is not None and h.topic in mappings.table):
            return self.generic(ctx)  # a header to parse in Python, a batch, a static topic
        conn = ctx.conn
        born = conn.attrs.get("born_host") or born_host(conn)
        r = self.send.send_nowait(h, cmd.body, born, conn.remote, StoredAnswer(ctx))
        if r is None:
            return None
        if isinstance(r, BlockedSend):
            return _blocked(self.send, cmd, r)
        return refused(cmd, r)


def direct_send(
    send: SendMessageProcessor,
    generic: Handler,
    mappings: TopicQueueMappingManager | None,
) -> Handler:
    """The SEND_MESSAGE_V2 handler (module docstring); ``generic`` when nothing is compiled.
    ``mappings`` None: no static topic can reach ``send`` (the generic handler is the plain
    one)."""
    if _send_header_v2 is None:
        return generic
    return DirectSendHandler(send, generic, mappings)


class Stopping(Protocol):
    """The request table as the direct path sees it (it answers SYSTEM_BUSY when stopping)."""

    stopping: bool


class FrameAnswer(DirectAnswer):
    """`StoredAnswer` for a send served from its frame: the same frame, written to the
    connection (no RequestContext to answer through: not timed, not oneway, answered once);
    any other answer through a RequestContext made then, as the generic path answers it."""

    __slots__ = ("cmd", "conn")

    def __init__(self, conn: Connection, cmd: RemotingCommand) -> None:
        self.conn = conn
        self.cmd = cmd

    def __call__(self, results: list[PutResult], status: PutStatus, remark: str | None) -> None:
        if status is _PUT_OK and results:
            r = results[0]
            cmd = self.cmd
            frame = None
            if _answer_c is not None and cmd.serialize_type == SERIALIZE_ROCKETMQ:
                frame = _answer_c(
                    _HEAD, cmd.opaque, RPC_TYPE_RESPONSE, remark, r.msg_id, self.queue_id,
                    r.queue_offset, self.uniq,
                )  # fmt: skip
            if frame is None:  # a JSON request, or one the compiled call declines
                frame = send_answer_frame(
                    cmd, remark, r.msg_id, self.queue_id, r.queue_offset, self.uniq
                )
            self.conn.send_frame_nowait(frame)
            return
        ctx = RequestContext(self.conn, self.cmd)
        PendingSend(SendAnswer(ctx), self.queue_id, self.uniq)(results, status, remark)


class DirectSend:
    """SEND_MESSAGE_V2's direct path (module docstring): `DirectSendHandler`'s send from the
    decoded frame."""

    def __init__(self, handler: DirectSendHandler, requests: Stopping) -> None:
        self.send = handler.send
        self.mappings = handler.mappings
        self.requests = requests

    def __call__(
        self, conn: Connection, req: DirectRequest
    ) -> Awaitable[None] | Literal[False] | None:
        if self.requests.stopping:
            return NOT_DIRECT  # the table answers SYSTEM_BUSY
        h = _send_header_v2(req[2], SendMessageRequestHeader)  # type: ignore[misc]
        mappings = self.mappings
        if h is None or h.batch or (mappings is not None and h.topic in mappings.table):
            return NOT_DIRECT  # the table's handler hands it to its generic one
        source = req[5]
        cmd = source if source.__class__ is RemotingCommand else command_of(req)
        born = conn.attrs.get("born_host") or born_host(conn)
        r = self.send.send_nowait(h, req[3], born, conn.remote, FrameAnswer(conn, cmd))
        if r is None:
            return None
        if isinstance(r, BlockedSend):
            return _blocked_direct(self.send, conn, cmd, r)
        conn.send_nowait(refused(cmd, r))
        return None


async def _blocked_direct(
    send: SendMessageProcessor, conn: Connection, cmd: RemotingCommand, r: BlockedSend
) -> None:
    answer = await _blocked(send, cmd, r)
    if answer is not None:
        conn.send_nowait(answer)


def direct_send_handlers(
    table: Mapping[int, object], *, gated: bool, requests: Stopping
) -> dict[int, DirectHandler]:
    """SEND_MESSAGE_V2's direct path when the built ``table`` serves it with a
    `DirectSendHandler` and no ACL gate judges requests (module docstring); else none."""
    handler = table.get(_V2)
    if gated or not isinstance(handler, DirectSendHandler):
        return {}
    return {_V2: DirectSend(handler, requests)}


async def _blocked(send: SendMessageProcessor, cmd: RemotingCommand, r: BlockedSend) -> Answer:
    """A full store inbox: the reader waits for room (the generic handler's ``blocked``)."""
    refusal = await send.put_blocked(r)
    return None if refusal is None else refused(cmd, refusal)
