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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rocketrio.actors.broker.dispatch.answers import born_host, refused
from rocketrio.actors.broker.dispatch.table import Answer, Handler
from rocketrio.actors.broker.send.handlers import StoredAnswer
from rocketrio.actors.broker.send.processor import BlockedSend, SendMessageProcessor
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingManager
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.compiled import speedups as _speedups
from rocketrio.protocol.headers import SendMessageRequestHeader
from rocketrio.protocol.remoting import RemotingCommand

# protocol/speedups/send_header.c; without the compiled module there is no direct path
_send_header_v2: Callable[..., SendMessageRequestHeader | None] | None = (
    None if _speedups is None else _speedups.send_header_v2
)


def direct_send(
    send: SendMessageProcessor,
    generic: Handler,
    mappings: TopicQueueMappingManager | None,
) -> Handler:
    """The SEND_MESSAGE_V2 handler (module docstring); ``generic`` when nothing is compiled.
    ``mappings`` None: no static topic can reach ``send`` (the generic handler is the plain
    one)."""
    header_v2 = _send_header_v2
    if header_v2 is None:
        return generic
    send_nowait = send.send_nowait
    header_class = SendMessageRequestHeader

    def handle(ctx: RequestContext) -> Awaitable[Answer] | Answer:
        cmd = ctx.cmd
        h = header_v2(cmd.ext_fields, header_class)
        if h is None or h.batch or (mappings is not None and h.topic in mappings.table):
            return generic(ctx)  # a header to parse in Python, a batch, a static topic
        conn = ctx.conn
        born = conn.attrs.get("born_host") or born_host(conn)
        r = send_nowait(h, cmd.body, born, conn.remote, StoredAnswer(ctx))
        if r is None:
            return None
        if isinstance(r, BlockedSend):
            return _blocked(send, cmd, r)
        return refused(cmd, r)

    return handle


async def _blocked(send: SendMessageProcessor, cmd: RemotingCommand, r: BlockedSend) -> Answer:
    """A full store inbox: the reader waits for room (the generic handler's ``blocked``)."""
    refusal = await send.put_blocked(r)
    return None if refusal is None else refused(cmd, refusal)
