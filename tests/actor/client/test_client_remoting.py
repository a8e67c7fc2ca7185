"""The client's own connection (actors/client/remoting.py) on both loops, against a scripted
peer over an in-memory byte stream: answers matched by opaque in any order, timeouts, a closed
connection failing what is pending, oneways, and requests the server pushes to the client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest
from anyio.abc import ByteStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.remoting import (
    ClientConnection,
    ClientRequestContext,
    RemotingError,
    RemotingTimeout,
)
from rocketrio.protocol.codes import RPC_ONEWAY, ResponseCode
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command

pytestmark = pytest.mark.anyio

PING, NOTIFY = 34, 40  # any request codes: the peer here answers by script, not by code


class MemoryByteStream(ByteStream):
    """One end of an in-memory byte pipe (each send arrives as one receive)."""

    def __init__(self, send: MemoryObjectSendStream[bytes], recv: MemoryObjectReceiveStream[bytes]):
        self._send, self._recv = send, recv

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._recv.receive()

    async def send(self, item: bytes) -> None:
        await self._send.send(item)

    async def send_eof(self) -> None:
        await self._send.aclose()

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._recv.aclose()


def pipe() -> tuple[MemoryByteStream, MemoryByteStream]:
    a_send, b_recv = anyio.create_memory_object_stream[bytes](16)
    b_send, a_recv = anyio.create_memory_object_stream[bytes](16)
    return MemoryByteStream(a_send, a_recv), MemoryByteStream(b_send, b_recv)


class Peer:
    """The server end: reads whole commands, sends what the test tells it to."""

    def __init__(self, stream: MemoryByteStream) -> None:
        self.stream = stream
        self.decoder = FrameDecoder(1 << 20)

    async def next_command(self) -> RemotingCommand:
        while (cmd := self.decoder.next_command()) is None:
            self.decoder.feed(await self.stream.receive())
        return cmd

    async def send(self, cmd: RemotingCommand) -> None:
        await self.stream.send(encode_command(cmd))


async def with_connection(
    body: Callable[[ClientConnection, Peer], Awaitable[None]],
    processor: Callable[[ClientRequestContext], Awaitable[RemotingCommand | None]] | None = None,
) -> None:
    ours, theirs = pipe()
    conn = ClientConnection(ours, processor, remote="peer")
    async with anyio.create_task_group() as tg:
        tg.start_soon(conn.run)
        await body(conn, Peer(theirs))
        tg.cancel_scope.cancel()


async def test_answers_are_matched_by_opaque_in_any_order() -> None:
    async def body(conn: ClientConnection, peer: Peer) -> None:
        got: dict[str, bytes] = {}

        async def ask(name: str) -> None:
            resp = await conn.request(RemotingCommand(PING, remark=name), 5.0)
            got[name] = resp.body

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "a")
            first = await peer.next_command()
            tg.start_soon(ask, "b")
            second = await peer.next_command()
            # answer the later request first
            await peer.send(second.make_response(ResponseCode.SUCCESS, body=second.remark.encode()))
            await peer.send(first.make_response(ResponseCode.SUCCESS, body=first.remark.encode()))
        assert got == {"a": b"a", "b": b"b"}

    await with_connection(body)


async def test_an_unanswered_request_times_out_and_a_close_fails_what_is_pending() -> None:
    async def body(conn: ClientConnection, peer: Peer) -> None:
        with pytest.raises(RemotingTimeout):
            await conn.request(RemotingCommand(PING), 0.05)
        failed: list[BaseException] = []

        async def ask() -> None:
            try:
                await conn.request(RemotingCommand(PING), 30.0)
            except RemotingError as e:
                failed.append(e)

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await peer.next_command()  # the timed-out one
            await peer.next_command()  # the pending one
            await peer.stream.aclose()  # the server goes away
        assert len(failed) == 1 and "closed" in str(failed[0])
        assert conn.closed
        with pytest.raises(RemotingError):
            await conn.request(RemotingCommand(PING), 1.0)

    await with_connection(body)


async def test_a_request_in_flight_is_awaited_in_pieces_until_released() -> None:
    """`begin` writes the request and leaves it pending: a wait that times out keeps it (the
    answer, when it comes, is the next wait's), `release` forgets it and a later answer to it
    is dropped."""

    async def body(conn: ClientConnection, peer: Peer) -> None:
        call = await conn.begin(RemotingCommand(PING))
        sent = await peer.next_command()
        with pytest.raises(aio.WaitTimeout):
            await call.wait(0.02)
        assert sent.opaque in conn._pending  # still in flight
        await peer.send(sent.make_response(ResponseCode.SUCCESS, "late"))
        assert (await call.wait(5.0)).remark == "late"
        assert (await call.wait(0.0)).remark == "late"  # an answer there is kept, any timeout
        call.release()
        assert sent.opaque not in conn._pending
        gone = await conn.begin(RemotingCommand(PING))
        sent = await peer.next_command()
        gone.release()
        await peer.send(sent.make_response(ResponseCode.SUCCESS, "dropped"))

        async def answer_next() -> None:
            nxt = await peer.next_command()
            await peer.send(nxt.make_response(ResponseCode.SUCCESS, "mine"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_next)
            assert (await conn.request(RemotingCommand(PING), 5.0)).remark == "mine"
        assert not conn._pending

    await with_connection(body)


async def test_oneway_and_a_request_pushed_by_the_server() -> None:
    pushed: list[int] = []

    async def processor(ctx: ClientRequestContext) -> RemotingCommand | None:
        pushed.append(ctx.cmd.code)
        return ctx.cmd.make_response(ResponseCode.SUCCESS, remark="handled")

    async def body(conn: ClientConnection, peer: Peer) -> None:
        await conn.oneway(RemotingCommand(PING))
        sent = await peer.next_command()
        assert sent.flag & RPC_ONEWAY
        await peer.send(RemotingCommand(NOTIFY, opaque=77))
        answer = await peer.next_command()
        assert (answer.is_response, answer.opaque, answer.remark) == (True, 77, "handled")
        assert pushed == [NOTIFY]

    await with_connection(body, processor)
