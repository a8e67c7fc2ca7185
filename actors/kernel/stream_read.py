"""Large reads from a stream into one buffer reused for every read.

`trio.SocketStream.receive_some(n)` allocates a new n-byte object for every read. At the HA
slave's 1 MiB reads that object lies above the C allocator's mmap threshold: the kernel maps it
fresh for each read, faults in every 4 KiB page the data lands on (zeroing it) and unmaps it
when it is freed, about 60 page faults a read of 240 KiB, which cost more than the read's copy
(i28-repl7: 109-148 us against 38-40 us a 240 KiB read on a socket pair). `bulk_receiver`
reads a TCP stream's socket into one bytearray made once (`recv_into`) and returns a copy of
just the bytes read; any other stream (a memory or simulated one) reads as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

Receive = Callable[[], Awaitable[bytes]]


def bulk_receiver(stream: trio.abc.Stream, max_bytes: int) -> Receive:
    """A ``receive_some(max_bytes)`` for ``stream`` (b"" at the end of the stream) that reuses
    one buffer for a TCP stream (module doc). One task may read through it at a time."""
    if not isinstance(stream, trio.SocketStream):
        return lambda: stream.receive_some(max_bytes)
    sock = stream.socket
    buf = bytearray(max_bytes)
    view = memoryview(buf)

    async def receive() -> bytes:
        try:
            n = await sock.recv_into(buf)
        except OSError as e:  # as trio's SocketStream reports them
            raise trio.BrokenResourceError(f"socket read failed: {e}") from e
        return bytes(view[:n])

    return receive
