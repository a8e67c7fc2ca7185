"""Answers written by the turn that made them: one non-blocking send per connection.

A server connection's answers normally reach its socket through the connection's writer task,
which the first queued frame wakes (remoting_connection.py): they leave on a later round of
Trio's scheduler, after whatever else was woken meanwhile (on a busy broker, the readers' next
requests). A turn that answers many requests at once (the store actor's: every put of the turn,
store/ack_log.py) answers inside ``with ANSWERS:`` instead: a connection whose writer is not
writing then does not wake it, and when the block ends each such connection hands all it has
queued to its socket with ONE non-blocking send (`Connection.flush_inline`, `fd_sender`),
leaving what the socket did not take to its writer, so the bytes keep the writer's order. A
connection without a non-blocking send (a memory or TLS stream), or whose writer is writing,
is served by its writer as before. The HA master ships a turn's bytes the same way
(ha/master_service.py, through `nowait_sender`).

The block must not yield (everything answered inside it is answered synchronously), so one
flush object serves every connection of the process, however many brokers it runs.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Protocol

import trio

Buffers = list[bytes | memoryview]
SendNowait = Callable[[Buffers], int]


def nowait_sender(stream: trio.abc.Stream) -> tuple[SendNowait | None, Callable[[], None]]:
    """A non-blocking gathered send on ``stream`` (the buffers go out in order as one write;
    returns the bytes the socket took: 0 when its buffer is full) and the function that
    releases it; (None, no-op) for a stream without one. A stream may offer its own
    ``send_nowait``; a TCP stream gets a duplicate of its socket's descriptor, which shares the
    non-blocking connection Trio's stream writes to."""
    own = getattr(stream, "send_nowait", None)
    if own is not None:
        return own, lambda: None
    if not isinstance(stream, trio.SocketStream):
        return None, lambda: None
    dup = socket.socket(fileno=os.dup(stream.socket.fileno()))

    def send(buffers: Buffers) -> int:
        try:
            return dup.sendmsg(buffers, (), socket.MSG_DONTWAIT)
        except BlockingIOError:
            return 0

    return send, dup.close


def fd_sender(stream: trio.abc.Stream) -> SendNowait | None:
    """`nowait_sender` for a remoting connection, without a second descriptor per connection:
    a TCP stream's gathered non-blocking write goes to its socket's descriptor, read at each
    call (-1 once the stream is closed: the write fails, it never reaches a descriptor number
    reused since). A stream's own ``send_nowait`` as there; None for any other stream."""
    own = getattr(stream, "send_nowait", None)
    if own is not None:
        return own  # type: ignore[no-any-return]
    if not isinstance(stream, trio.SocketStream):
        return None
    sock = stream.socket

    def send(buffers: Buffers) -> int:
        try:
            return os.writev(sock.fileno(), buffers)
        except BlockingIOError:
            return 0

    return send


class _Flushable(Protocol):
    def flush_inline(self) -> None: ...


class AnswerFlush:
    """The connections that queued answers inside the block (each once), flushed at its end.
    Blocks nest: the outermost one flushes."""

    __slots__ = ("depth", "pending")

    def __init__(self) -> None:
        self.depth = 0
        self.pending: list[_Flushable] = []

    def __enter__(self) -> None:
        self.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth:
            return
        pending, self.pending = self.pending, []
        for conn in pending:
            conn.flush_inline()


ANSWERS = AnswerFlush()
