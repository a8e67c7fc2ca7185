"""A processor may answer without a coroutine (the broker's send path): the connection answers
a returned response, awaits a returned awaitable, and turns a synchronous raise into the same
answer as an asynchronous one (INVALID_PARAMETER for a bad header, else SYSTEM_ERROR)."""

from __future__ import annotations

from collections.abc import Awaitable

import trio
import trio.testing

from rocketrio.actors.kernel.remoting import Connection, RequestContext
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command
from rocketrio.protocol.serde import HeaderError

ANSWER_NOW, ANSWER_LATER, RESPOND_LATER, RAISE, BAD_HEADER = 1, 2, 3, 4, 5


async def _later(ctx: RequestContext) -> RemotingCommand:
    await trio.sleep(1)
    return ctx.cmd.make_response(0, remark="later")


def _processor(ctx: RequestContext) -> Awaitable[RemotingCommand | None] | RemotingCommand | None:
    code = ctx.cmd.code
    if code == ANSWER_NOW:
        return ctx.cmd.make_response(0, remark="now")
    if code == ANSWER_LATER:
        return _later(ctx)
    if code == RESPOND_LATER:
        ctx.respond(ctx.cmd.make_response(0, remark="responded"))
        return None
    if code == BAD_HEADER:
        raise HeaderError("field x is missing")
    raise RuntimeError("boom")


async def test_sync_and_async_answers_in_order(mock_clock: trio.testing.MockClock) -> None:
    client, server_end = trio.testing.memory_stream_pair()
    conn = Connection(server_end, _processor, remote="c")
    codes = [ANSWER_NOW, ANSWER_LATER, RESPOND_LATER, RAISE, BAD_HEADER, ANSWER_NOW]
    wire = b"".join(encode_command(RemotingCommand(code=c, opaque=i)) for i, c in enumerate(codes))
    got: list[RemotingCommand] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.run)
        await client.send_all(wire)
        dec = FrameDecoder()
        with trio.fail_after(10):
            while len(got) < len(codes):
                data = await client.receive_some(65536)
                assert data
                dec.feed(data)
                while (cmd := dec.next_command()) is not None:
                    got.append(cmd)
        nursery.cancel_scope.cancel()
    # the reader awaited the slow request before reading on: answers keep the requests' order
    assert [c.opaque for c in got] == list(range(len(codes)))
    assert [c.remark for c in got[:3]] == ["now", "later", "responded"]
    assert got[3].code == ResponseCode.SYSTEM_ERROR and "RuntimeError: boom" in (
        got[3].remark or ""
    )
    assert got[4].code == ResponseCode.INVALID_PARAMETER and "field x" in (got[4].remark or "")
    assert got[5].remark == "now"
