"""The `RequestContext`: one incoming request of a `Connection` (remoting_connection.py) and
the means to answer it exactly once, with the answer timed for ``rocketmq_rpc_latency`` when
the connection's server keeps those figures."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketrio.actors.observe.rpc_metrics import Outcome
from rocketrio.protocol.codes import RPC_ONEWAY
from rocketrio.protocol.remoting import RemotingCommand

if TYPE_CHECKING:
    from rocketrio.actors.kernel.remoting_connection import Connection

_SUCCESS = int(Outcome.SUCCESS)


class RequestContext:
    """One incoming request and the means to answer it exactly once."""

    __slots__ = ("cmd", "conn", "inline", "responded", "start")

    def __init__(self, conn: Connection, cmd: RemotingCommand, start: float = 0.0) -> None:
        self.conn = conn
        self.cmd = cmd
        self.responded = False
        self.start = start  # when its bytes arrived (Trio clock; servers only)
        self.inline = True  # still inside the reader's dispatch of it

    def respond(self, response: RemotingCommand) -> None:
        if self.responded:
            return
        self.responded = True
        conn = self.conn
        oneway = self.cmd.is_oneway
        if not oneway:
            conn.send_nowait(response)
        if conn.rpc_latency is not None:
            if self.inline and not oneway and not conn.closed:  # the common case, kept short
                conn._answered_inline.append((self.cmd.code, response.code, _SUCCESS))
            else:
                conn.answered(self, response.code)

    def respond_frame(self, code: int, frame: bytes) -> None:
        """`respond` with the answer encoded already (``frame``, response code ``code``, for
        the latency figures): `encode_response` of the request (the send's hot path), or an
        answer that is one template but for the opaque (protocol/answer_frames.py)."""
        if self.responded:
            return
        self.responded = True
        conn = self.conn
        oneway = self.cmd.flag & RPC_ONEWAY
        if not oneway:
            conn.send_frame_nowait(frame)
        if conn.rpc_latency is not None:
            if self.inline and not oneway and not conn.closed:
                conn._answered_inline.append((self.cmd.code, code, _SUCCESS))
            else:
                conn.answered(self, code)

    def respond_code(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> None:
        self.respond(self.cmd.make_response(code, remark, ext_fields, body))

    @property
    def remote(self) -> str:
        return self.conn.remote
