"""The pure parts of the server limits: early frame refusal, connection admission, the log rate
limiter, the input budget's waiting rules, and the config keys."""

from __future__ import annotations

import struct

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.kernel.server_limits import (
    DEFAULT_WRITE_HIGH_WATER,
    ConnectionTable,
    InputBudget,
    LogRateLimiter,
)
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.protocol.config import ConfigError, build_config
from rocketrio.protocol.remoting import (
    FrameDecoder,
    RemoteProtocolError,
    RemotingCommand,
    encode_command,
)

# ---------------------------------------------------------------- frame length words


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        (struct.pack(">i", -7), "negative_length"),
        (struct.pack(">i", 5), "frame_too_short"),
        (struct.pack(">i", 1025), "frame_too_long"),
        (struct.pack(">ii", 50, 47), "header_longer_than_frame"),
        (struct.pack(">ii", 50, (2 << 24) | 2), "unknown_serialize_type"),
        (struct.pack(">ii", 50, 1), "header_too_short"),
        (struct.pack(">ii", 50, (1 << 24) | 20), "header_too_short"),
    ],
)
def test_length_words_are_refused_as_soon_as_they_are_in(wire: bytes, reason: str) -> None:
    dec = FrameDecoder(max_frame=1024)
    for i in range(len(wire) - 1):  # fed byte by byte: nothing is refused early
        dec.feed(wire[i : i + 1])
        if i < 3:
            assert dec.next_command() is None
    dec.feed(wire[-1:])
    with pytest.raises(RemoteProtocolError) as e:
        dec.next_command()
    assert e.value.reason == reason
    with pytest.raises(RemoteProtocolError):
        dec.feed(b"more")


@given(st.integers(0, 600), st.booleans())
@settings(max_examples=200)
def test_valid_frames_are_never_refused_by_the_early_checks(body_len: int, binary: bool) -> None:
    cmd = RemotingCommand(code=10, ext_fields={"k": "v"}, body=bytes(body_len))
    cmd.serialize_type = 1 if binary else 0
    wire = encode_command(cmd)
    dec = FrameDecoder(max_frame=1024)
    got = []
    for i in range(0, len(wire), 7):
        dec.feed(wire[i : i + 7])
        while (c := dec.next_command()) is not None:
            got.append(c)
    assert [c.body for c in got] == [bytes(body_len)]


# ---------------------------------------------------------------- admission


def test_connection_table_caps_total_and_per_address() -> None:
    t = ConnectionTable(max_total=4, max_per_address=2)
    assert t.admit("a") is None and t.admit("a") is None
    r = t.admit("a")
    assert r is not None and r.reason == "address_connection_limit"
    assert t.admit("b") is None and t.admit("c") is None
    r = t.admit("d")
    assert r is not None and r.reason == "server_connection_limit"
    assert (t.total, t.by_address) == (4, {"a": 2, "b": 1, "c": 1})
    t.release("a")
    t.release("b")
    assert t.admit("d") is None
    assert t.by_address == {"a": 1, "c": 1, "d": 1}


# ---------------------------------------------------------------- log rate


@given(st.lists(st.floats(0, 5, allow_nan=False), min_size=1, max_size=300))
def test_log_rate_limiter_bounds_lines_and_counts_every_refusal(gaps: list[float]) -> None:
    lim = LogRateLimiter(per_s=1.0, burst=10)
    now, times, reported = 0.0, [], 0
    for gap in gaps:
        now += gap
        r = lim.admit(now)
        if r is not None:
            times.append(now)
            reported += 1 + r
    # every attempt is a line or counted on a later line (or still pending)
    assert reported + lim.suppressed == len(gaps)
    # in any window of w seconds: at most burst + w lines
    for i, t0 in enumerate(times):
        for j in range(i, len(times)):
            assert j - i + 1 <= 10 + (times[j] - t0) + 1e-9


# ---------------------------------------------------------------- input budget


async def test_input_budget_serves_waiters_in_order_and_survives_cancellation(
    mock_clock: trio.testing.MockClock,
) -> None:
    b = InputBudget(100)
    await b.take(90)
    order: list[str] = []

    async def taker(name: str, n: int) -> None:
        await b.take(n)
        order.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(taker, "big", 50)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(taker, "small", 5)  # fits, but must not overtake "big"
        await trio.testing.wait_all_tasks_blocked()
        assert order == [] and b.waiting == 2
        with trio.CancelScope() as scope:
            scope.cancel()
            with pytest.raises(trio.Cancelled):
                await b.take(30)  # a cancelled waiter leaves no trace
        assert b.waiting == 2
        b.give(10)  # 20 free: "small" would fit, but it waits behind "big"
        await trio.testing.wait_all_tasks_blocked()
        assert order == [] and b.waiting == 2
        b.give(50)
    assert sorted(order) == ["big", "small"]
    assert b.used == 85 and b.peak == 90
    with pytest.raises(ValueError, match="cannot take"):
        await b.take(101)


async def test_a_cancelled_head_waiter_lets_the_next_one_in(
    mock_clock: trio.testing.MockClock,
) -> None:
    b = InputBudget(100)
    await b.take(60)
    got: list[int] = []
    head = trio.CancelScope()

    async def big() -> None:
        with head:
            await b.take(80)
            got.append(80)

    async def small() -> None:
        await b.take(30)
        got.append(30)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(big)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(small)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        head.cancel()
    assert got == [30] and b.used == 90


# ---------------------------------------------------------------- config keys


@pytest.mark.parametrize("cls", [NamesrvConfig, BrokerConfig, ControllerConfig])
def test_every_server_config_reads_the_limit_keys(cls: type) -> None:
    cfg = build_config(
        cls,
        {
            "serverChannelMaxIdleTimeSeconds": "0",
            "serverMaxConnections": "10",
            "serverMaxConnectionsPerAddress": "3",
            "serverFrameReadTimeoutMillis": "1500",
            "serverMaxBufferedInputBytes": str(64 * 1024 * 1024),
            "writeBufferHighWaterMark": "65536",
        },
        "x.conf",
    )
    lim = cfg.server_limits()
    assert lim.idle_timeout_s is None and lim.read_timeout_s == 1.5
    assert (lim.max_connections, lim.max_connections_per_address) == (10, 3)
    assert (lim.write_high_water_bytes, lim.write_low_water_bytes) == (65536, 32768)
    default = cls() if cls is not ControllerConfig else ControllerConfig()
    d = default.server_limits()
    assert d.idle_timeout_s == 120 and d.write_high_water_bytes == DEFAULT_WRITE_HIGH_WATER


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"serverMaxBufferedInputBytes": "1048576"},
            "serverMaxBufferedInputBytes must be at least",
        ),
        (
            {"writeBufferHighWaterMark": "1000", "writeBufferLowWaterMark": "2000"},
            "writeBufferLowWaterMark (2000) must not exceed",
        ),
        ({"serverMaxConnections": "0"}, "serverMaxConnections must be > 0"),
    ],
)
def test_bad_limit_values_are_start_up_errors_naming_the_key(
    values: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=r"x\.conf") as e:
        build_config(BrokerConfig, values, "x.conf")
    assert message in str(e.value)
