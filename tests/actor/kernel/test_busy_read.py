"""The remoting reader's read size: after a read that filled its buffer (a pipelining client
has more waiting) it asks for BUSY_READ, taken from the input budget when there is room; with
no room it reads READ_CHUNK and never waits for budget to read more."""

from __future__ import annotations

import trio
import trio.testing

from rocketrio.actors.kernel.remoting import Connection, RequestContext, ServerSide
from rocketrio.actors.kernel.server_limits import BUSY_READ, READ_CHUNK, ServerLimits
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command

REQUESTS = 400  # ~1 KiB each: 400 KiB written at once, many full reads


class RecordingStream(trio.abc.Stream):
    """A stream that notes every read size asked for."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.asked: list[int] = []

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        assert max_bytes is not None
        self.asked.append(max_bytes)
        return await self.inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def _echo(ctx: RequestContext) -> RemotingCommand:
    return ctx.cmd.make_response(0)


async def _serve_burst(side: ServerSide) -> list[int]:
    client, server_end = trio.testing.memory_stream_pair()
    stream = RecordingStream(server_end)
    conn = Connection(stream, _echo, remote="c", server=side)
    wire = b"".join(
        encode_command(RemotingCommand(code=1, opaque=i, body=bytes(1000))) for i in range(REQUESTS)
    )
    with trio.fail_after(60):  # a reader waiting for budget it cannot get would hang here
        await _exchange(conn, client, wire)
    return stream.asked


async def _exchange(conn: Connection, client: trio.abc.Stream, wire: bytes) -> None:
    answered = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run)
        await client.send_all(wire)
        dec = FrameDecoder()
        while answered < REQUESTS:
            data = await client.receive_some(1 << 20)
            assert data
            dec.feed(data)
            while dec.next_command() is not None:
                answered += 1
        nursery.cancel_scope.cancel()


async def test_a_full_read_is_followed_by_a_busy_read_within_the_budget(
    mock_clock: trio.testing.MockClock,
) -> None:
    side = ServerSide(ServerLimits())
    asked = await _serve_burst(side)
    assert asked[0] == READ_CHUNK
    assert BUSY_READ in asked  # the burst was read in bigger reads
    assert side.budget.peak >= BUSY_READ - READ_CHUNK  # and the budget paid for them
    assert side.budget.used == 0  # all given back when the connection closed


async def test_without_budget_room_the_reader_stays_at_read_chunk(
    mock_clock: trio.testing.MockClock,
) -> None:
    side = ServerSide(ServerLimits())
    budget = side.budget
    assert budget.try_take(budget.total - 1024)  # other connections hold nearly all of it
    asked = await _serve_burst(side)
    assert asked and max(asked) == READ_CHUNK  # every request answered, none read bigger
