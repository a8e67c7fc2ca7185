"""A plain single send's answer taken straight from the put (send/handlers.py `StoredAnswer`,
send/completions.py `DirectAnswer`): a Java client (ROCKETMQ header) and the project's client
(JSON header) get byte for byte the frame of the generic path (`PendingSend` -> `SendStored` ->
`send_response` -> `encode_command`) for the same request and put result, whatever the status;
so does `SendAnswer` (the static topic's answer)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.dispatch.outcomes import PutStatus, SendOutcome
from rocketrio.actors.broker.send.completions import PendingSend
from rocketrio.actors.broker.send.handlers import SendAnswer, StoredAnswer, send_response
from rocketrio.actors.kernel.remoting import RequestContext
from rocketrio.protocol.codes import RPC_ONEWAY, RequestCode
from rocketrio.protocol.remoting import (
    SERIALIZE_JSON,
    SERIALIZE_ROCKETMQ,
    RemotingCommand,
    encode_command,
)
from rocketrio.storage.message_store import PutResult


class _Conn:
    """What a RequestContext answers through: the frames it was given."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.rpc_latency = None
        self.closed = False

    def send_frame_nowait(self, frame: bytes) -> None:
        self.frames.append(frame)

    def send_nowait(self, cmd: RemotingCommand) -> None:
        self.frames.append(encode_command(cmd))


def _ctx(cmd: RemotingCommand) -> tuple[RequestContext, _Conn]:
    conn = _Conn()
    return RequestContext(conn, cmd), conn  # type: ignore[arg-type]


def _direct(cmd: RemotingCommand, queue_id: int, uniq: str, *put: Any) -> list[bytes]:
    ctx, conn = _ctx(cmd)
    answer = StoredAnswer(ctx)
    answer.queue_id, answer.uniq = queue_id, uniq  # what the processor sets before the put
    answer(*put)
    return conn.frames


def _older(cmd: RemotingCommand, queue_id: int, uniq: str, *put: Any) -> list[bytes]:
    """The generic path: PendingSend's outcome as a response command, encoded."""
    got: list[SendOutcome] = []
    PendingSend(got.append, queue_id, uniq)(*put)
    (outcome,) = got
    return [encode_command(send_response(cmd, outcome))]


def _answered(cmd: RemotingCommand, queue_id: int, uniq: str, *put: Any) -> list[bytes]:
    """`SendAnswer` (the static topic's and the older path's answer) of PendingSend's outcome."""
    ctx, conn = _ctx(cmd)
    PendingSend(SendAnswer(ctx), queue_id, uniq)(*put)
    return conn.frames


_text = st.text(max_size=40)
_int64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=400, deadline=None)
@given(
    stype=st.sampled_from([SERIALIZE_ROCKETMQ, SERIALIZE_JSON]),
    opaque=st.integers(-(2**31), 2**31 - 1),
    status=st.sampled_from(list(PutStatus)),
    stored=st.booleans(),
    remark=st.none() | _text,
    queue_id=st.integers(-1, 2**31 - 1),
    queue_offset=_int64,
    msg_id=_text,
    uniq=_text,
)
def test_the_direct_answer_is_the_older_paths_frame(
    stype: int,
    opaque: int,
    status: PutStatus,
    stored: bool,
    remark: str | None,
    queue_id: int,
    queue_offset: int,
    msg_id: str,
    uniq: str,
) -> None:
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=opaque, serialize_type=stype)
    results = [PutResult(4096, 1200, queue_offset, msg_id, 17)] if stored else []
    put = (results, status, remark)
    want = _older(cmd, queue_id, uniq, *put)
    assert _direct(cmd, queue_id, uniq, *put) == want
    assert _answered(cmd, queue_id, uniq, *put) == want


def test_a_oneway_send_gets_no_frame_and_a_second_answer_none() -> None:
    result = [PutResult(0, 100, 5, "ID", 1)]
    oneway = RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=1, flag=RPC_ONEWAY)
    assert _direct(oneway, 2, "U", result, PutStatus.PUT_OK, None) == []
    ctx, conn = _ctx(RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=2))
    answer = StoredAnswer(ctx)
    answer.queue_id, answer.uniq = 2, "U"
    answer(result, PutStatus.PUT_OK, None)
    answer(result, PutStatus.PUT_OK, None)  # answered once only
    assert len(conn.frames) == 1
