"""`bulk_receiver` (actors/kernel/stream_read.py): a TCP stream read into one reused buffer
returns what was sent, in order, each read its own bytes (a later read never changes an earlier
one's), b"" at the end of the stream, a reset as trio's stream reports it; any other stream is
read through its own receive_some."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from rocketrio.actors.kernel.stream_read import bulk_receiver


def _tcp_pair() -> tuple[trio.SocketStream, socket.socket]:
    """A loopback TCP connection: our end as a trio stream, the peer's as a plain socket."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        peer = socket.create_connection(server.getsockname())
        ours, _ = server.accept()
    return trio.SocketStream(trio.socket.from_stdlib_socket(ours)), peer


async def test_reads_return_what_was_sent_each_its_own_copy() -> None:
    stream, peer = _tcp_pair()
    receive = bulk_receiver(stream, 64)
    got: list[bytes] = []
    with peer:
        for i in range(5):
            peer.sendall(bytes([i]) * 40)
            while sum(map(len, got)) < 40 * (i + 1):
                got.append(await receive())
        peer.shutdown(socket.SHUT_WR)
        assert await receive() == b""
    assert all(isinstance(g, bytes) and len(g) <= 64 for g in got)
    assert b"".join(got) == b"".join(bytes([i]) * 40 for i in range(5))
    await stream.aclose()


async def test_a_read_takes_at_most_the_buffer() -> None:
    stream, peer = _tcp_pair()
    receive = bulk_receiver(stream, 10)
    with peer:
        peer.sendall(b"0123456789abcdef")
        first = await receive()
        assert first == b"0123456789"
        assert await receive() == b"abcdef"
        assert first == b"0123456789"  # the buffer was reused; the first read's bytes were not
    await stream.aclose()


async def test_a_reset_is_a_broken_stream() -> None:
    stream, peer = _tcp_pair()
    receive = bulk_receiver(stream, 10)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    peer.sendall(b"x")
    peer.close()
    with pytest.raises((trio.BrokenResourceError, trio.ClosedResourceError)):
        while await receive():
            pass
    await stream.aclose()


async def test_another_stream_is_read_through_its_receive_some() -> None:
    left, right = trio.testing.memory_stream_pair()
    receive = bulk_receiver(right, 4)
    await left.send_all(b"abcdef")
    assert await receive() == b"abcd"
    assert await receive() == b"ef"
