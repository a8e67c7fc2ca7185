"""rocketmq_rpc_latency as a RemotingServer measures it, on the simulated network with MockClock:
every answer is counted once under its request and response code, an inline answer takes the
time of its read's dispatch, a held answer the time until it is given (a held pull is long
polling), a oneway request counts as ``oneway``; a server without an RpcLatency times nothing."""

from __future__ import annotations

import trio
import trio.testing

from rocketrio.actors.kernel.remoting import RemotingClient, RemotingServer, RequestContext
from rocketrio.actors.observe.rpc_metrics import Outcome, RpcLatency, Series
from rocketrio.protocol.answer_frames import empty_answer_frame
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.sim_network import SimNetwork

HOST = "10.0.0.1"
ADDR = f"{HOST}:10911"
SEND, PULL, HEARTBEAT = RequestCode.SEND_MESSAGE, RequestCode.PULL_MESSAGE, RequestCode.HEART_BEAT
HOLD_S = 0.25


def by_key(lat: RpcLatency) -> dict[tuple[int, int, Outcome], Series]:
    return {(s.request_code, s.response_code, s.outcome): s for s in lat.series()}


async def test_answers_are_timed_inline_held_and_oneway(
    mock_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    net = SimNetwork(seed=3)
    lat = RpcLatency()
    oneway_seen = trio.Event()

    async def process(ctx: RequestContext) -> RemotingCommand | None:
        if ctx.cmd.code == HEARTBEAT:
            oneway_seen.set()
            return ctx.cmd.make_response(ResponseCode.SUCCESS)  # not sent: oneway
        if ctx.cmd.body == b"hold":

            async def later() -> None:
                await trio.sleep(HOLD_S)
                ctx.respond_code(ResponseCode.SUCCESS)

            nursery.start_soon(later)
            return None
        return ctx.cmd.make_response(ResponseCode.SUCCESS)

    server = RemotingServer(net.transport(HOST), ADDR, process, rpc_latency=lat)
    await nursery.start(server.run)
    async with RemotingClient(net.transport("10.0.0.9")) as client:
        for _ in range(3):
            await client.invoke(ADDR, RemotingCommand(code=SEND, body=b"now"))
        await client.invoke(ADDR, RemotingCommand(code=SEND, body=b"hold"))
        await client.invoke(ADDR, RemotingCommand(code=PULL, body=b"hold"))
        await client.invoke(ADDR, RemotingCommand(code=PULL, body=b"now"))
        await client.invoke(ADDR, RemotingCommand(code=9999, body=b"now"))
        await client.invoke_oneway(ADDR, RemotingCommand(code=HEARTBEAT))
        await oneway_seen.wait()
        await trio.testing.wait_all_tasks_blocked()
    ok = ResponseCode.SUCCESS
    got = by_key(lat)
    inline_send = got[(SEND, ok, Outcome.SUCCESS)]
    assert inline_send.count == 4  # three inline, one held (a held send is no long poll)
    assert inline_send.buckets[0] == 3  # inline: within the first bucket (1 ms)
    assert inline_send.buckets[BUCKETS_INDEX_1000] == 1  # held 250 ms: le=1000
    assert 250 <= inline_send.sum_ms <= 252
    held_pull = got[(PULL, ok, Outcome.LONG_POLLING)]
    assert held_pull.count == 1 and 250 <= held_pull.sum_ms <= 252
    assert got[(PULL, ok, Outcome.SUCCESS)].count == 1  # answered at once: not long polling
    assert got[(HEARTBEAT, ok, Outcome.ONEWAY)].count == 1
    assert got[(9999, ok, Outcome.SUCCESS)].count == 1
    assert sum(s.count for s in got.values()) == 8  # every answer once


BUCKETS_INDEX_1000 = 6  # (1, 3, 5, 7, 10, 100, 1000, ...)[6] == 1000


async def test_a_held_answer_to_a_closed_connection_is_write_channel_failed(
    mock_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    net = SimNetwork(seed=4)
    lat = RpcLatency()
    held: list[RequestContext] = []

    async def process(ctx: RequestContext) -> RemotingCommand | None:
        held.append(ctx)
        return None

    server = RemotingServer(net.transport(HOST), ADDR, process, rpc_latency=lat)
    await nursery.start(server.run)
    async with RemotingClient(net.transport("10.0.0.9")) as client:
        conn = await client.get_connection(ADDR)
        await conn.oneway(RemotingCommand(code=SEND))
        conn.request_nowait(RemotingCommand(code=PULL), lambda _reply: None)
        await trio.sleep(0.1)
        assert len(held) == 2  # both held at the server
    await trio.sleep(1)  # the client has gone; the server saw its connection close
    for ctx in held:
        ctx.respond_code(ResponseCode.SUCCESS)
    got = by_key(lat)
    assert got[(SEND, ResponseCode.SUCCESS, Outcome.ONEWAY)].count == 1
    failed = got[(PULL, ResponseCode.SUCCESS, Outcome.WRITE_CHANNEL_FAILED)]
    assert failed.count == 1 and failed.sum_ms >= 1000


async def test_without_an_rpc_latency_nothing_is_timed(
    mock_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    net = SimNetwork(seed=5)

    async def process(ctx: RequestContext) -> RemotingCommand:
        return ctx.cmd.make_response(ResponseCode.SUCCESS)

    server = RemotingServer(net.transport(HOST), ADDR, process)
    await nursery.start(server.run)
    assert server.side.rpc_latency is None
    async with RemotingClient(net.transport("10.0.0.9")) as client:
        resp = await client.invoke(ADDR, RemotingCommand(code=SEND))
    assert resp.code == ResponseCode.SUCCESS
    (conn,) = server.connections or [None]
    assert conn is None or conn.rpc_latency is None


async def test_an_answer_given_as_a_frame_arrives_and_is_timed_once(
    mock_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """`respond_frame` (an answer from protocol/answer_frames.py): the client gets it under its
    opaque, inline or held; a second answer to the same request is not sent; each is timed."""
    net = SimNetwork(seed=6)
    lat = RpcLatency()
    ack = RequestCode.ACK_MESSAGE

    async def process(ctx: RequestContext) -> RemotingCommand | None:
        def answer() -> None:
            frame = empty_answer_frame(ctx.cmd, ResponseCode.SUCCESS)
            assert frame is not None
            ctx.respond_frame(ResponseCode.SUCCESS, frame)
            ctx.respond_code(ResponseCode.SYSTEM_ERROR)  # ignored: answered already

        if ctx.cmd.body == b"hold":

            async def later() -> None:
                await trio.sleep(HOLD_S)
                answer()

            nursery.start_soon(later)
        else:
            answer()
        return None

    server = RemotingServer(net.transport(HOST), ADDR, process, rpc_latency=lat)
    await nursery.start(server.run)
    async with RemotingClient(net.transport("10.0.0.9")) as client:
        for body in (b"now", b"hold", b"now"):
            resp = await client.invoke(ADDR, RemotingCommand(code=ack, body=body))
            assert resp.code == ResponseCode.SUCCESS
    got = by_key(lat)
    assert list(got) == [(ack, ResponseCode.SUCCESS, Outcome.SUCCESS)]
    series = got[(ack, ResponseCode.SUCCESS, Outcome.SUCCESS)]
    assert series.count == 3 and 250 <= series.sum_ms <= 252
