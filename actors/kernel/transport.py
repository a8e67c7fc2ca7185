"""Byte-stream transports.

Actors see only `Transport`: ``serve(addr, handler)`` and ``connect(addr)`` returning a
`trio.abc.Stream`. `TcpTransport` is the production one; the tests' simulated network
(`SimNetwork`, a whole network inside one Trio run that delays, partitions, cuts and crashes)
is its twin in tests/harness/sim_network.py.
"""

from __future__ import annotations

import abc
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import trio

Handler = Callable[[trio.abc.Stream], Awaitable[None]]


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host, int(port)


class Transport(abc.ABC):
    @abc.abstractmethod
    async def serve(
        self,
        addr: str,
        handler: Handler,
        *,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections on ``addr`` forever; ``task_status.started(bound_addr)``."""

    @abc.abstractmethod
    async def connect(self, addr: str) -> trio.abc.Stream:
        """Open a stream to ``addr``; raises OSError if it cannot."""


class TcpTransport(Transport):
    async def serve(
        self,
        addr: str,
        handler: Handler,
        *,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        host, port = split_addr(addr)

        async def on_conn(stream: trio.SocketStream) -> None:
            stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await handler(stream)

        listeners = await trio.open_tcp_listeners(port, host=host or None)
        bound = listeners[0].socket.getsockname()
        await trio.serve_listeners(
            on_conn, listeners, task_status=_Rewrite(task_status, f"{host}:{bound[1]}")
        )

    async def connect(self, addr: str) -> trio.abc.Stream:
        host, port = split_addr(addr)
        stream = await trio.open_tcp_stream(host, port)
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return stream


class _Rewrite:
    """Report our own value to ``task_status`` instead of the listeners list."""

    def __init__(self, inner: trio.TaskStatus[str], value: str) -> None:
        self._inner, self._value = inner, value

    def started(self, _value: Any = None) -> None:
        self._inner.started(self._value)
