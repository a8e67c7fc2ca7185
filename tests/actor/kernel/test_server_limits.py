"""A remoting server's limits under attack, on the simulated network with MockClock.

Each test plays one attacker from the hardening issue against a `RemotingServer` and asserts
what a user would notice: memory accounted and bounded, connections closed when the limit says
(to the tick: the watchdog wakes at the deadline, and simulated links add well under 2 ms), a
log line naming the remote and the reason, and an honest client still served afterwards.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
import structlog
import trio
import trio.testing

from rocketrio.actors.kernel.remoting import RemotingClient, RemotingServer, RequestContext
from rocketrio.actors.kernel.server_limits import MAX_READ, READ_CHUNK, ServerLimits
from rocketrio.actors.observe import events
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command
from tests.harness.sim_network import SimNetwork

MiB = 1024 * 1024
HOST = "10.0.0.1"
ADDR = f"{HOST}:9876"
LINK_SLACK_S = 0.002  # a simulated hop is 0.2-0.5 ms; a few hops at most


async def _echo(ctx: RequestContext) -> RemotingCommand:
    return ctx.cmd.make_response(0, remark="echo", body=ctx.cmd.body)


async def _wait_closed(stream: trio.abc.Stream) -> None:
    """Read until the server closes the stream (EOF or reset); anything sent is discarded."""
    try:
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def _echo_once(stream: trio.abc.Stream, rest: bytes | None = None) -> RemotingCommand:
    """Send an echo request of b"ping" (or the ``rest`` of one already begun), read the answer."""
    if rest is None:
        rest = encode_command(RemotingCommand(code=1, opaque=1, body=b"ping"))
    await stream.send_all(rest)
    dec = FrameDecoder()
    while True:
        data = await stream.receive_some(65536)
        assert data, "the server closed a connection it should serve"
        dec.feed(data)
        if (cmd := dec.next_command()) is not None:
            return cmd


def _events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name]


# ---------------------------------------------------------------- partial frames and the budget

FRAME = 15 * MiB
BUDGET = 64 * MiB
READ_TIMEOUT_S = 5.0


async def test_twenty_half_frames_stay_within_the_budget_and_close_at_the_read_timeout(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(seed=1)
    limits = ServerLimits(read_timeout_s=READ_TIMEOUT_S, input_budget_bytes=BUDGET)
    server = RemotingServer(net.transport(HOST), ADDR, _echo, limits=limits)
    header = b'{"code":1,"flag":0,"opaque":1}'
    half = struct.pack(">ii", FRAME, len(header)) + header + bytes(FRAME // 2)
    closed_after: dict[int, float] = {}
    peak_buffered = 0

    async def sample() -> None:
        # what the connections really hold, against what the budget accounts for
        nonlocal peak_buffered
        while True:
            conns = server.connections
            buffered = sum(c.buffered_input_bytes for c in conns)
            # each connection's first 16 KiB are outside the budget
            assert buffered <= server.budget.used + len(conns) * READ_CHUNK
            assert server.budget.used <= BUDGET
            peak_buffered = max(peak_buffered, buffered)
            await trio.sleep(0.001)

    async def attacker(i: int) -> None:
        stream = await net.transport(f"10.0.7.{i}").connect(ADDR)
        t0 = trio.current_time()
        await stream.send_all(half)
        await _wait_closed(stream)
        closed_after[i] = trio.current_time() - t0

    async with trio.open_nursery() as n:
        await n.start(server.run)
        n.start_soon(sample)
        with structlog.testing.capture_logs() as logs, trio.fail_after(2 * READ_TIMEOUT_S):
            async with trio.open_nursery() as attack:
                for i in range(20):
                    attack.start_soon(attacker, i)
        assert sorted(closed_after) == list(range(20))
        for i, after in closed_after.items():
            assert READ_TIMEOUT_S <= after <= READ_TIMEOUT_S + LINK_SLACK_S, (i, after)
        # the attack did fill the budget (20 x 7.5 MiB wanted), and never more than it
        assert BUDGET - 2 * MiB <= server.budget.peak <= BUDGET
        assert BUDGET // 2 < peak_buffered <= BUDGET + 20 * READ_CHUNK
        await trio.sleep(0.01)
        assert server.budget.used == 0 and not server.connections
        timeouts = _events(logs, events.ConnectionReadTimeout.NAME)
        assert timeouts and {e["remote"] for e in timeouts} <= {f"10.0.7.{i}" for i in range(20)}
        assert all(
            e["log_level"] == "warning" and e["timeout_s"] == READ_TIMEOUT_S for e in timeouts
        )
        # and the server still takes a big honest frame afterwards
        async with RemotingClient(net.transport("10.0.0.9")) as client:
            body = bytes(10 * MiB)
            resp = await client.invoke(ADDR, RemotingCommand(code=1, body=body), 5)
            assert resp.body == body
        n.cancel_scope.cancel()


async def test_a_reader_waits_for_budget_and_proceeds_when_a_stalled_frame_times_out(
    mock_clock: trio.testing.MockClock,
) -> None:
    """A stalled partial frame holds most of the budget; an honest big frame waits for budget
    (it does not grow memory), and goes through when the read timeout frees the budget."""
    net = SimNetwork(seed=2)
    budget = 17 * MiB
    limits = ServerLimits(read_timeout_s=READ_TIMEOUT_S, input_budget_bytes=budget)
    server = RemotingServer(net.transport(HOST), ADDR, _echo, limits=limits)
    header = b'{"code":1,"flag":0,"opaque":1}'
    stalled = struct.pack(">ii", 16 * MiB, len(header)) + header + bytes(12 * MiB)
    async with trio.open_nursery() as n:
        await n.start(server.run)
        bad = await net.transport("10.0.7.1").connect(ADDR)
        await bad.send_all(stalled)
        await trio.sleep(0.1)
        assert server.budget.used >= 12 * MiB
        async with RemotingClient(net.transport("10.0.0.9")) as client:
            t0 = trio.current_time()
            body = bytes(8 * MiB)
            resp = await client.invoke(ADDR, RemotingCommand(code=1, body=body), 30)
            assert resp.body == body
            # it had to wait for the stalled frame's read timeout, then went through
            assert READ_TIMEOUT_S - 0.1 <= trio.current_time() - t0 <= READ_TIMEOUT_S + 0.1
        assert server.budget.peak <= budget
        n.cancel_scope.cancel()


# ---------------------------------------------------------------- connection caps


async def test_connection_caps_total_and_per_address(mock_clock: trio.testing.MockClock) -> None:
    net = SimNetwork(seed=3)
    limits = ServerLimits(max_connections=5, max_connections_per_address=3)
    server = RemotingServer(net.transport(HOST), ADDR, _echo, limits=limits)
    async with trio.open_nursery() as n:
        await n.start(server.run)
        with structlog.testing.capture_logs() as logs:
            a = [await net.transport("10.0.1.1").connect(ADDR) for _ in range(3)]
            for s in a:
                assert (await _echo_once(s)).body == b"ping"
            # a fourth from the same address is closed at once
            extra = await net.transport("10.0.1.1").connect(ADDR)
            t0 = trio.current_time()
            await _wait_closed(extra)
            assert trio.current_time() - t0 <= LINK_SLACK_S
            b = [await net.transport("10.0.1.2").connect(ADDR) for _ in range(2)]
            for s in b:
                assert (await _echo_once(s)).body == b"ping"
            # five in all: a new address is refused too
            other = await net.transport("10.0.1.3").connect(ADDR)
            await _wait_closed(other)
            assert len(server.connections) == 5
            # one leaves: the new address gets in
            await a[0].aclose()
            await trio.sleep(0.01)
            late = await net.transport("10.0.1.3").connect(ADDR)
            assert (await _echo_once(late)).body == b"ping"
        refused = _events(logs, events.ConnectionRefused.NAME)
        assert [(e["remote"], e["reason"]) for e in refused] == [
            ("10.0.1.1", "address_connection_limit"),
            ("10.0.1.3", "server_connection_limit"),
        ]
        assert "serverMaxConnectionsPerAddress=3" in refused[0]["why"]
        assert "serverMaxConnections=5" in refused[1]["why"]
        n.cancel_scope.cancel()


async def test_a_flood_of_refused_connections_does_not_flood_the_log(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(seed=4)
    limits = ServerLimits(max_connections=1, max_connections_per_address=1)
    server = RemotingServer(net.transport(HOST), ADDR, _echo, limits=limits)
    async with trio.open_nursery() as n:
        await n.start(server.run)
        keep = await net.transport("10.0.1.1").connect(ADDR)
        with structlog.testing.capture_logs() as logs:
            for _ in range(500):
                s = await net.transport("10.0.1.1").connect(ADDR)
                await _wait_closed(s)
            lines = _events(logs, events.ConnectionRefused.NAME)
            assert 1 <= len(lines) <= 12  # a burst of 10, then about one a second
            await trio.sleep(2)
            s = await net.transport("10.0.1.1").connect(ADDR)
            await _wait_closed(s)
        lines = _events(logs, events.ConnectionRefused.NAME)
        # the next line after the flood says how many were not written
        assert sum(e["suppressed"] for e in lines) + len(lines) == 501
        assert lines[-1]["suppressed"] > 0
        await keep.aclose()
        n.cancel_scope.cancel()


# ---------------------------------------------------------------- bad length words


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        (struct.pack(">i", -1), "negative_length"),
        (struct.pack(">i", -(2**31)), "negative_length"),
        (struct.pack(">i", 3), "frame_too_short"),
        (struct.pack(">i", 16 * MiB + 1), "frame_too_long"),
        (struct.pack(">ii", 100, 97), "header_longer_than_frame"),
        (struct.pack(">ii", 100, (9 << 24) | 10), "unknown_serialize_type"),
        (struct.pack(">ii", 100, (1 << 24) | 3), "header_too_short"),
    ],
)
async def test_bad_length_words_are_refused_before_the_frame_arrives(
    mock_clock: trio.testing.MockClock, wire: bytes, reason: str
) -> None:
    """Only the length words are sent (4 or 8 bytes): the server must not wait for the rest."""
    net = SimNetwork(seed=5)
    server = RemotingServer(net.transport(HOST), ADDR, _echo)
    async with trio.open_nursery() as n:
        await n.start(server.run)
        with structlog.testing.capture_logs() as logs:
            s = await net.transport("10.0.6.6").connect(ADDR)
            t0 = trio.current_time()
            await s.send_all(wire)
            await _wait_closed(s)
            assert trio.current_time() - t0 <= LINK_SLACK_S
        [line] = _events(logs, events.BadFrame.NAME)
        assert line["remote"] == "10.0.6.6" and line["reason"] == reason
        assert line["log_level"] == "warning"
        assert server.budget.used == 0
        n.cancel_scope.cancel()


# ---------------------------------------------------------------- idle connections


async def test_idle_connection_closed_after_the_idle_timeout(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(seed=6)
    server = RemotingServer(net.transport(HOST), ADDR, _echo)  # upstream's default: 120 s
    async with trio.open_nursery() as n:
        await n.start(server.run)
        with structlog.testing.capture_logs() as logs:
            t0 = trio.current_time()
            silent = await net.transport("10.0.1.1").connect(ADDR)
            chatty = await net.transport("10.0.1.2").connect(ADDR)

            async def talk() -> None:
                frame = encode_command(RemotingCommand(code=1, opaque=1, body=b"ping"))
                while True:  # a heartbeat every 100 s keeps a connection open
                    await trio.sleep(100)
                    # sent in two parts: a frame once partly received is not held against the
                    # connection (by the read timeout) after it is complete
                    await chatty.send_all(frame[:10])
                    await trio.sleep(1)
                    assert (await _echo_once(chatty, frame[10:])).body == b"ping"

            n.start_soon(talk)
            with trio.fail_after(130):
                await _wait_closed(silent)
            assert 120 <= trio.current_time() - t0 <= 120 + LINK_SLACK_S
            await trio.sleep(300)
            assert len(server.connections) == 1  # the chatty one
        [line] = _events(logs, events.ConnectionIdleClosed.NAME)
        assert line["remote"] == "10.0.1.1" and line["idle_s"] == 120
        n.cancel_scope.cancel()


def test_legitimate_peers_talk_more_often_than_the_idle_timeout() -> None:
    """The idle timeout must not close a quiet but healthy peer: every periodic call that keeps
    a rocketrio connection open comes well within 120 s (upstream's default)."""
    from rocketrio.actors.broker.boot.config import BrokerConfig
    from rocketrio.actors.client.config import ClientConfig, PushConsumerConfig

    idle_ms = BrokerConfig().serverChannelMaxIdleTimeSeconds * 1000
    broker = BrokerConfig()
    client = ClientConfig()
    periods = {
        "broker -> namesrv registration": broker.registerNameServerPeriod,
        "broker -> controller heartbeat": broker.brokerHeartbeatInterval,
        "client -> broker heartbeat": client.heartbeatBrokerInterval,
        "client -> namesrv route poll": client.pollNameServerInterval,
        "long-polling pull held": PushConsumerConfig("g").brokerSuspendMaxTimeMillis,
    }
    assert all(p < idle_ms / 2 for p in periods.values()), periods


# ---------------------------------------------------------------- a client that never reads


async def test_a_client_that_never_reads_does_not_grow_the_servers_memory(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(seed=7, window_bytes=256 * 1024)  # TCP-like buffers each way
    high = 1 * MiB
    limits = ServerLimits(write_high_water_bytes=high, write_low_water_bytes=high // 2)
    server = RemotingServer(net.transport(HOST), ADDR, _echo, limits=limits)
    body = bytes(64 * 1024)
    requests = 200  # 12.8 MiB of requests, each answered with as much
    async with trio.open_nursery() as n:
        await n.start(server.run)
        s = await net.transport("10.0.1.1").connect(ADDR)
        sent = 0

        async def send_all_requests() -> None:
            nonlocal sent
            for i in range(requests):
                await s.send_all(encode_command(RemotingCommand(code=1, opaque=i, body=body)))
                sent += 1

        n.start_soon(send_all_requests)
        peak = 0
        for _ in range(1000):  # 10 s
            await trio.sleep(0.01)
            [conn] = server.connections
            peak = max(peak, conn.pending_output_bytes)
        # the server stopped reading: the client's sends are held back, not the server's memory
        assert sent < requests // 2
        # bound: the high mark, plus the answers to the requests of the read that crossed it
        assert high < peak <= high + MAX_READ + len(body)
        # once the client reads, everything is answered: backpressure, not a deadlock
        dec = FrameDecoder()
        got = 0
        with trio.fail_after(30):
            while got < requests:
                dec.feed(await s.receive_some(65536))
                while dec.next_command() is not None:
                    got += 1
        assert sent == requests
        n.cancel_scope.cancel()


async def test_a_stuck_non_reading_client_is_closed_by_the_idle_timeout(
    mock_clock: trio.testing.MockClock,
) -> None:
    net = SimNetwork(seed=8, window_bytes=256 * 1024)
    server = RemotingServer(net.transport(HOST), ADDR, _echo)
    async with trio.open_nursery() as n:
        await n.start(server.run)
        s = await net.transport("10.0.1.1").connect(ADDR)
        body = bytes(64 * 1024)

        async def flood() -> None:
            try:
                for i in range(200):
                    await s.send_all(encode_command(RemotingCommand(code=1, opaque=i, body=body)))
            except trio.BrokenResourceError:
                pass

        n.start_soon(flood)
        await trio.sleep(10)
        assert len(server.connections) == 1
        await trio.sleep(120)  # no progress either way: idle
        assert not server.connections
        assert server.budget.used == 0
        n.cancel_scope.cancel()


# ---------------------------------------------------------------- the controller's requests


async def test_controller_over_its_in_flight_limit_answers_system_busy(
    tmp_path: Any, mock_clock: trio.testing.MockClock
) -> None:
    from rocketrio.protocol.codes import RequestCode, ResponseCode
    from rocketrio.protocol.controller_headers import GetReplicaInfoRequestHeader
    from tests.harness.controller import ADDRS, HOSTS, IDS, call, group, register_new_broker

    async with group(tmp_path, 11) as g, RemotingClient(g.net.transport("10.0.9.1")) as client:
        leader = await g.leader()
        at = ADDRS[leader.self_id]
        await register_new_broker(client, at, "broker-a", "10.0.2.1:10911")
        leader.config.controllerRequestThreadPoolQueueCapacity = 2
        # cut off from its followers, the leader's reads wait for a read barrier: in flight
        g.net.isolate(HOSTS[leader.self_id], [HOSTS[n] for n in IDS if n != leader.self_id])
        header = GetReplicaInfoRequestHeader("broker-a")
        answers: list[tuple[int, float]] = []

        async def read() -> None:
            r = await call(client, at, RequestCode.CONTROLLER_GET_REPLICA_INFO, header)
            answers.append((r.code, trio.current_time()))

        with structlog.testing.capture_logs() as logs:
            t0 = trio.current_time()
            async with trio.open_nursery() as n:
                n.start_soon(read)
                n.start_soon(read)
                await trio.sleep(0.05)
                r = await call(client, at, RequestCode.CONTROLLER_GET_REPLICA_INFO, header)
                # refused at once, with a remark naming the limit
                assert trio.current_time() - t0 < 0.1
                assert r.code == ResponseCode.SYSTEM_BUSY
                assert "controllerRequestThreadPoolQueueCapacity=2" in (r.remark or "")
        assert len(answers) == 2 and all(code != ResponseCode.SYSTEM_BUSY for code, _ in answers)
        [line] = _events(logs, events.RequestRefusedBusy.NAME)
        assert line["in_flight"] == 2 and line["limit"] == 2
        # the two answered: room again (the counter went back down)
        assert leader._in_flight == 0
        g.net.heal()
        now_leader = await g.leader()
        r = await call(
            client, ADDRS[now_leader.self_id], RequestCode.CONTROLLER_GET_REPLICA_INFO, header
        )
        assert r.code == ResponseCode.SUCCESS, r.remark
