"""Actor runtime and transports under MockClock: supervision, ask timeouts, partitions."""

from __future__ import annotations

import itertools

import attrs
import pytest
import trio

from rocketrio.actors.kernel.remoting import (
    RemotingClient,
    RemotingError,
    RemotingServer,
    RequestContext,
)
from rocketrio.actors.kernel.runtime import Actor, AskTimeout, Reply, every, supervise
from rocketrio.actors.kernel.transport import TcpTransport
from rocketrio.protocol.remoting import RemotingCommand
from tests.harness.sim_network import SimNetwork


@attrs.frozen
class Add:
    n: int
    reply: Reply[int]


@attrs.frozen
class Ignore:
    reply: Reply[int]


Msg = Add | Ignore


class Counter(Actor[Msg]):
    def __init__(self) -> None:
        super().__init__("counter")
        self.total = 0

    async def handle(self, msg: Msg) -> None:
        match msg:
            case Add(n, reply):
                self.total += n
                reply.set(self.total)
            case Ignore():
                pass


async def test_ask_reply_and_timeout(mock_clock: trio.testing.MockClock) -> None:
    c = Counter()
    async with trio.open_nursery() as n:
        await n.start(c.run)
        assert await c.ask(lambda r: Add(2, r), timeout=1) == 2
        assert await c.ask(lambda r: Add(3, r), timeout=1) == 5
        t0 = trio.current_time()
        with pytest.raises(AskTimeout):
            await c.ask(lambda r: Ignore(r), timeout=2.5)
        assert trio.current_time() - t0 == pytest.approx(2.5)
        n.cancel_scope.cancel()


async def test_supervise_restarts_with_backoff(mock_clock: trio.testing.MockClock) -> None:
    starts: list[float] = []

    async def flaky() -> None:
        starts.append(trio.current_time())
        if len(starts) < 4:
            raise RuntimeError("boom")
        await trio.sleep(1)

    await supervise("flaky", flaky, restart=True, backoff_min_s=0.1, backoff_max_s=5)
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(starts)]
    assert gaps == [0.1, 0.2, 0.4]


async def test_supervise_without_restart_fails_loudly(mock_clock: trio.testing.MockClock) -> None:
    async def broken() -> None:
        raise ValueError("bad state")

    with pytest.raises(ValueError, match="bad state"):
        await supervise("broken", broken, restart=False)


async def test_supervise_gives_up_after_max_restarts(mock_clock: trio.testing.MockClock) -> None:
    calls = 0

    async def broken() -> None:
        nonlocal calls
        calls += 1
        raise OSError("down")

    with pytest.raises(OSError):
        await supervise("broken", broken, restart=True, max_restarts=3)
    assert calls == 4


async def test_every_runs_on_trio_clock(mock_clock: trio.testing.MockClock) -> None:
    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(trio.current_time())

    with trio.move_on_after(5.05):
        await every(1.0, tick)
    assert [round(t) for t in ticks] == [1, 2, 3, 4, 5]


async def _echo(ctx: RequestContext) -> RemotingCommand:
    return ctx.cmd.make_response(0, remark="echo", body=ctx.cmd.body)


async def test_sim_partition_then_heal(mock_clock: trio.testing.MockClock) -> None:
    net = SimNetwork(seed=7)
    server = RemotingServer(net.transport("10.0.0.1"), "10.0.0.1:9876", _echo)
    async with trio.open_nursery() as n:
        await n.start(server.run)
        async with RemotingClient(net.transport("10.0.0.2")) as client:
            resp = await client.invoke("10.0.0.1:9876", RemotingCommand(code=1, body=b"hi"), 1)
            assert resp.body == b"hi"
            net.partition(["10.0.0.1"], ["10.0.0.2"])
            with pytest.raises(RemotingError):
                await client.invoke("10.0.0.1:9876", RemotingCommand(code=1, body=b"x"), 1)
            net.heal()
            resp = await client.invoke("10.0.0.1:9876", RemotingCommand(code=1, body=b"back"), 1)
            assert resp.body == b"back"
            # a cut resets the connection; the client reconnects on the next call
            net.cut("10.0.0.1", "10.0.0.2")
            await trio.sleep(0.01)
            resp = await client.invoke("10.0.0.1:9876", RemotingCommand(code=1, body=b"again"), 1)
            assert resp.body == b"again"
        n.cancel_scope.cancel()


async def test_sim_delay_keeps_order(mock_clock: trio.testing.MockClock) -> None:
    net = SimNetwork(seed=3, base_delay_s=0.01, jitter_s=0.05)
    server = RemotingServer(net.transport("h1"), "h1:1", _echo)
    async with trio.open_nursery() as n:
        await n.start(server.run)
        async with RemotingClient(net.transport("h2")) as client:
            results: list[bytes] = []

            async def call(i: int) -> None:
                r = await client.invoke("h1:1", RemotingCommand(code=1, body=str(i).encode()), 5)
                results.append(r.body)

            async with trio.open_nursery() as calls:
                for i in range(50):
                    calls.start_soon(call, i)
            assert sorted(results, key=int) == [str(i).encode() for i in range(50)]
        n.cancel_scope.cancel()


async def test_tcp_roundtrip_and_pipelining() -> None:
    server = RemotingServer(TcpTransport(), "127.0.0.1:0", _echo)
    async with trio.open_nursery() as n:
        addr = await n.start(server.run)
        async with RemotingClient(TcpTransport()) as client:
            out: list[bytes] = []

            async def call(i: int) -> None:
                r = await client.invoke(addr, RemotingCommand(code=1, body=b"%d" % i), 5)
                out.append(r.body)

            async with trio.open_nursery() as calls:
                for i in range(200):
                    calls.start_soon(call, i)
            assert len(out) == 200
        n.cancel_scope.cancel()


async def test_sim_heal_between_lifts_one_partition_only(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(seed=7)
    net.partition(["a"], ["b", "c"])
    net.heal_between(["b"], ["a"])
    assert not net.blocked("a", "b") and net.blocked("a", "c")


async def test_supervise_limit_counts_restarts_in_a_row(mock_clock: trio.testing.MockClock) -> None:
    """A child that ran longer than the backoff cap was healthy: its next crash starts a new
    count, so a long-lived service is not given up for crashes spread over its life."""
    runs = iter([10, 10, 10, 0, 0])  # seconds each run lasts before crashing
    calls = 0

    async def child() -> None:
        nonlocal calls
        calls += 1
        await trio.sleep(next(runs))
        raise OSError("down")

    with pytest.raises(OSError):
        await supervise("svc", child, restart=True, backoff_max_s=5, max_restarts=1)
    # each crash after a healthy run is restart 1 of a new streak; the quick crash after the
    # last of them exceeds the limit of 1 (a lifetime count would have stopped at call 2)
    assert calls == 4
