"""ack_answers.py: `answer_stored` gives each connection the bytes, in the order, that calling
every ``on_done`` of the batch with `Done` one by one gives it (the direct ACKs' answers of a
connection merely handed over as one run), whatever mix of direct ACKs, other answers and
serialize types the batch holds."""

from __future__ import annotations

from functools import partial
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.broker.dispatch.outcomes import Done, Refusal
from rocketrio.actors.broker.pop.ack_answers import answer_one, answer_stored
from rocketrio.protocol.codes import SERIALIZE_JSON, SERIALIZE_ROCKETMQ
from rocketrio.protocol.remoting import RemotingCommand, encode_command


class Conn:
    """A connection as the answers see it: the frames handed to it, in order."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send_frame_nowait(self, frame: bytes) -> None:
        self.frames.append(frame)

    def send_nowait(self, cmd: RemotingCommand) -> None:
        self.frames.append(encode_command(cmd))


# (connection 0-2, a direct ACK (else another answer to that connection), serialize type, opaque)
ITEMS = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.booleans(),
        st.sampled_from([SERIALIZE_JSON, SERIALIZE_JSON, SERIALIZE_ROCKETMQ, 7]),
        st.integers(-(2**31), 2**31 - 1),
    ),
    max_size=40,
)


def on_dones(conns: list[Conn], items: list[tuple[int, bool, int, int]]) -> list[Any]:
    out: list[Any] = []
    for c, direct, serialize_type, opaque in items:
        if direct:
            out.append(partial(answer_one, conns[c], opaque, serialize_type))
        else:

            def other(outcome: Done | Refusal, conn: Conn = conns[c], o: int = opaque) -> None:
                conn.send_frame_nowait(b"<other %d>" % o)

            out.append(other)
    return out


@given(ITEMS)
def test_a_batchs_answers_are_each_on_dones(items: list[tuple[int, bool, int, int]]) -> None:
    one_by_one, batched = [Conn() for _ in range(3)], [Conn() for _ in range(3)]
    for on_done in on_dones(one_by_one, items):
        on_done(Done())
    answer_stored(on_dones(batched, items))
    for a, b in zip(one_by_one, batched, strict=True):
        assert b"".join(a.frames) == b"".join(b.frames)


def test_a_connections_direct_acks_are_one_run() -> None:
    conn = Conn()
    answer_stored([partial(answer_one, conn, o, SERIALIZE_JSON) for o in range(1, 33)])
    assert len(conn.frames) == 1 and conn.frames[0].count(b'"opaque":') == 32
