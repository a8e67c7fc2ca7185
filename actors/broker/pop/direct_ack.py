"""ACK_MESSAGE straight from the decoded frame (the connection's direct path, one per
acknowledged message: the POP consumer's hot path).

`DirectAck` is a `DirectHandler` (actors/kernel/remoting_connection.py): it gets the request as
a `DirectRequest` (code, opaque, extFields, body, serialize type, source) and does what the
generic path's ``ack_message`` handler (handlers.py) does, without the RemotingCommand (for a
JSON header), the RequestContext, the request table and the handler's closure: the five
fields and the receipt read from the extFields in one call (`ack_request`, compiled; what it
declines goes through `ack_fields` and `PopAckProcessor.ack_nowait`'s own parse, whose values or
refusals are theirs), `PopAckProcessor.ack_parsed`, and the answer written to the connection:
SUCCESS from its template (`answer_frame_of`) once the ACK's record is stored, a refusal
encoded as the generic path encodes it (`answer_done` of the request's command). The promises
are the processor's and unchanged: the answer only once the record is stored (or merged into a
stored ``bAck`` record, ack_batch.py), the same code and remark for every refusal.

What the direct path does not take it declines (`NOT_DIRECT`) before touching anything, and the
request goes the generic way: extFields `ack_fields` cannot read plainly (the generic path's
`from_ext` then answers or refuses them) and a broker that is stopping (the request table's
SYSTEM_BUSY). `direct_handlers` installs it only where the generic path would add nothing:
no ACL gate (the gate judges every request) and the table's ACK_MESSAGE entry the POP
package's own (no wrapper replaced it). The connection uses it only when answers are not
timed (no rocketmq_rpc_latency; see remoting_connection.ServerSide).
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Mapping
from functools import partial
from typing import Literal, Protocol

from rocketrio.actors.broker.dispatch.answers import answer_done
from rocketrio.actors.broker.dispatch.outcomes import Done, Refusal
from rocketrio.actors.broker.pop.ack import PopAckProcessor
from rocketrio.actors.kernel.remoting import Connection, DirectHandler
from rocketrio.actors.kernel.remoting_connection import NOT_DIRECT
from rocketrio.protocol.answer_frames import answer_frame_of, json_template
from rocketrio.protocol.codes import SERIALIZE_JSON, RequestCode, ResponseCode
from rocketrio.protocol.pop_headers import ack_fields, ack_request
from rocketrio.protocol.remoting import DirectRequest, RemotingCommand

_SUCCESS = int(ResponseCode.SUCCESS)
_HDR = struct.Struct(">ii")  # a frame's total length and header length
_OK_BEFORE, _OK_AFTER, _OK_FIXED = json_template(_SUCCESS)  # a JSON SUCCESS (answer_frames.py)


class Stopping(Protocol):
    """The request table as the direct path sees it: whether the broker is stopping (then
    the table answers SYSTEM_BUSY)."""

    stopping: bool


def _stub(req: DirectRequest) -> RemotingCommand:
    """The request as far as a response reads it (its opaque and serialize type): a refusal's
    answer is then `encode_command` of `answer_done` of it, as on the generic path."""
    return RemotingCommand(req[0], opaque=req[1], serialize_type=req[4])


def _answer(conn: Connection, opaque: int, st: int, outcome: Done | Refusal) -> None:
    """One ACK's answer, given once its outcome is known (the processor's ``on_done``). A JSON
    SUCCESS is `answer_frame_of`'s frame built here (one call per ACK less)."""
    if outcome.__class__ is Done:  # nothing subclasses Done
        if st == SERIALIZE_JSON:
            digits = b"%d" % opaque
            hlen = _OK_FIXED + len(digits)
            conn.send_frame_nowait(_HDR.pack(4 + hlen, hlen) + _OK_BEFORE + digits + _OK_AFTER)
            return
        frame = answer_frame_of(st, opaque, _SUCCESS)
        if frame is not None:
            conn.send_frame_nowait(frame)
            return
    stub = RemotingCommand(RequestCode.ACK_MESSAGE, opaque=opaque, serialize_type=st)
    conn.send_nowait(answer_done(stub, outcome))


class DirectAck:
    """ACK_MESSAGE's direct path (module docstring)."""

    def __init__(self, acks: PopAckProcessor, requests: Stopping) -> None:
        self.acks = acks
        self.requests = requests

    def __call__(
        self, conn: Connection, req: DirectRequest
    ) -> Awaitable[None] | Literal[False] | None:
        if self.requests.stopping:
            return NOT_DIRECT  # the table answers SYSTEM_BUSY
        on_done = partial(_answer, conn, req[1], req[4])
        r = ack_request(req[2])  # compiled: fields and receipt in one read, or None
        if r is not None:
            result = self.acks.ack_parsed(*r, on_done)
        else:
            f = ack_fields(req[2])
            if f is None:
                return NOT_DIRECT  # the generic path's from_ext: its value or HeaderError
            result = self.acks.ack_nowait(*f, on_done)
        if result is None:
            return None
        if isinstance(result, Refusal):
            conn.send_nowait(answer_done(_stub(req), result))
            return None
        return _after(conn, req, result)


async def _after(conn: Connection, req: DirectRequest, waiting: Awaitable[Refusal | None]) -> None:
    """The ACK's record put alone (the batcher full or stopped): a refusal answered here, a
    stored record by the processor's ``on_done``."""
    refusal = await waiting
    if refusal is not None:
        conn.send_nowait(answer_done(_stub(req), refusal))


def direct_handlers(
    acks: PopAckProcessor,
    table: Mapping[int, object],
    ack_handler: object,
    *,
    gated: bool,
    requests: Stopping,
) -> dict[int, DirectHandler]:
    """ACK_MESSAGE's direct path, when the generic path would add nothing to the handler
    ``ack_handler`` (module docstring); else none."""
    if gated or table.get(RequestCode.ACK_MESSAGE) is not ack_handler:
        return {}
    return {int(RequestCode.ACK_MESSAGE): DirectAck(acks, requests)}
