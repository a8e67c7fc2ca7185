"""Answers written by the turn that made them (actors/kernel/answer_flush.py): inside
``with ANSWERS:`` a server connection whose writer is idle does not wake it; the block's end
hands everything queued to the socket with one non-blocking send, and what the socket does not
take goes through the writer after it, in order."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
import structlog
import trio
import trio.testing

from rocketrio.actors.broker.dispatch.outcomes import PutStatus
from rocketrio.actors.broker.store.ack_log import AckLog
from rocketrio.actors.kernel.answer_flush import ANSWERS, Buffers
from rocketrio.actors.kernel.remoting import Connection, ServerSide
from rocketrio.actors.kernel.server_limits import ServerLimits


class InlineStream(trio.abc.Stream):
    """A stream with its own non-blocking send taking at most ``room`` bytes per call; its
    ``send_all`` waits on ``gate`` while ``hold`` is set (a writer caught mid-write)."""

    def __init__(self, room: int = 1 << 20) -> None:
        self.room = room
        self.wire = b""  # everything sent, in the order it was sent
        self.nowait_calls = 0
        self.send_all_calls = 0
        self.hold = False
        self.gate = trio.Event()
        self.closed = False

    def send_nowait(self, buffers: Buffers) -> int:
        self.nowait_calls += 1
        data = b"".join(bytes(b) for b in buffers)[: self.room]
        self.wire += data
        return len(data)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.send_all_calls += 1
        if self.hold:
            await self.gate.wait()
        self.wire += bytes(data)

    async def wait_send_all_might_not_block(self) -> None:
        pass

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.sleep_forever()
        return b""  # pragma: no cover

    async def aclose(self) -> None:
        self.closed = True


def _server_conn(stream: trio.abc.Stream) -> Connection:
    return Connection(stream, None, remote="c", server=ServerSide(ServerLimits()))


async def test_answers_of_a_block_go_out_in_one_send_as_it_ends_not_on_the_writers_turn() -> None:
    stream = InlineStream()
    conn = _server_conn(stream)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn._writer)
        await trio.testing.wait_all_tasks_blocked()
        with ANSWERS:
            for i in range(5):
                conn.send_frame_nowait(b"answer%d;" % i)
            assert stream.wire == b""  # nothing before the block ends
        assert stream.wire == b"answer0;answer1;answer2;answer3;answer4;"
        assert stream.nowait_calls == 1 and conn.pending_output_bytes == 0
        await trio.testing.wait_all_tasks_blocked()
        assert stream.send_all_calls == 0  # the writer had nothing left to write
        conn.send_frame_nowait(b"later;")  # outside a block: the writer, as before
        await trio.testing.wait_all_tasks_blocked()
        assert stream.send_all_calls == 1 and stream.wire.endswith(b"answer4;later;")
        nursery.cancel_scope.cancel()


async def test_what_the_socket_does_not_take_the_writer_sends_after_it() -> None:
    stream = InlineStream(room=7)
    conn = _server_conn(stream)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn._writer)
        await trio.testing.wait_all_tasks_blocked()
        with ANSWERS:
            conn.send_frame_nowait(b"0123456789")
            conn.send_frame_nowait(b"abcdef")
        assert stream.wire == b"0123456"
        assert conn.pending_output_bytes == 9
        await trio.testing.wait_all_tasks_blocked()
        assert stream.wire == b"0123456789abcdef" and conn.pending_output_bytes == 0
        stream.room = 0  # a full socket buffer: the writer sends it all
        with ANSWERS:
            conn.send_frame_nowait(b"XY")
        await trio.testing.wait_all_tasks_blocked()
        assert stream.wire == b"0123456789abcdefXY"
        nursery.cancel_scope.cancel()


async def test_a_writer_in_the_middle_of_a_write_keeps_the_later_answers() -> None:
    stream = InlineStream()
    stream.hold = True
    conn = _server_conn(stream)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn._writer)
        conn.send_frame_nowait(b"first;")
        await trio.testing.wait_all_tasks_blocked()  # the writer is in send_all
        with ANSWERS:
            conn.send_frame_nowait(b"second;")
        assert stream.nowait_calls == 0  # not sent past the write under way
        stream.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert stream.wire == b"first;second;"
        nursery.cancel_scope.cancel()


async def test_blocks_nest_and_the_outermost_one_flushes() -> None:
    stream = InlineStream()
    conn = _server_conn(stream)
    with ANSWERS:
        with ANSWERS:
            conn.send_frame_nowait(b"a;")
        assert stream.wire == b""
        conn.send_frame_nowait(b"b;")
    assert stream.wire == b"a;b;" and stream.nowait_calls == 1


async def test_a_connection_closed_before_the_block_ends_sends_nothing() -> None:
    stream = InlineStream()
    conn = _server_conn(stream)
    with ANSWERS:
        conn.send_frame_nowait(b"a;")
        conn._close("test")
    assert stream.wire == b"" and stream.nowait_calls == 0


async def test_a_client_connection_and_a_memory_stream_keep_the_writer() -> None:
    stream = InlineStream()
    client = Connection(stream, None, remote="s")  # a client's: no inline send
    with ANSWERS:
        client.send_frame_nowait(b"a;")
    assert stream.nowait_calls == 0 and ANSWERS.pending == []
    left, _right = trio.testing.memory_stream_pair()
    conn = _server_conn(left)
    with ANSWERS:
        conn.send_frame_nowait(b"a;")
    assert ANSWERS.pending == [] and conn.pending_output_bytes == 2


async def test_a_tcp_connection_s_answers_are_on_the_wire_when_the_block_ends() -> None:
    """A real socket pair: the bytes are readable by the peer before the task yields."""
    a, b = socket.socketpair()
    left = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    b.setblocking(False)
    conn = _server_conn(left)
    with ANSWERS:
        conn.send_frame_nowait(b"hello;")
        conn.send_frame_nowait(b"world;")
    assert b.recv(100) == b"hello;world;"  # read at once: no checkpoint in between
    conn._close("test")
    await left.aclose()
    b.close()


async def test_a_stream_closed_under_the_connection_is_never_written_through_its_old_number() -> (
    None
):
    """A stream closed without the connection knowing (the NameServer closes a silent
    broker's stream itself): the inline send fails and leaves the answer queued; a socket that
    got the closed descriptor's number since receives nothing."""
    a, b = socket.socketpair()
    old_fd = a.fileno()
    left = trio.SocketStream(trio.socket.from_stdlib_socket(a))
    conn = _server_conn(left)
    await left.aclose()
    c, d = socket.socketpair()  # most likely reuses old_fd
    d.setblocking(False)
    with ANSWERS:
        conn.send_frame_nowait(b"late;")
    assert conn.pending_output_bytes == 5  # left to the writer (which fails and closes)
    if old_fd in (c.fileno(), d.fileno()):
        peer = d if c.fileno() == old_fd else c
        peer.setblocking(False)
        with pytest.raises(BlockingIOError):
            peer.recv(100)
    for s in (b, c, d):
        s.close()


async def test_the_store_s_answers_are_given_inside_a_block_and_flushed_after() -> None:
    """`AckLog.answer`, the store turn's answers: each put is answered inside ``ANSWERS``."""
    stream = InlineStream()
    conn = _server_conn(stream)
    depths: list[int] = []

    class Put:
        messages = [SimpleNamespace(topic="t", queue_id=0)]

        def on_done(self, stored: object, status: object, remark: object) -> None:
            depths.append(ANSWERS.depth)
            conn.send_frame_nowait(b"ok;")

    stored = [SimpleNamespace(queue_offset=0, commitlog_offset=0)]
    done = [(Put(), stored), (Put(), stored)]
    AckLog(structlog.get_logger("test"), None).answer(done, PutStatus.PUT_OK, None, 0.0)  # type: ignore[arg-type]
    assert depths == [1, 1] and ANSWERS.depth == 0
    assert stream.wire == b"ok;ok;" and stream.nowait_calls == 1
