"""The CLI's pure parts: failure lines and exit codes, dates, the produce summary and bar."""

from __future__ import annotations

import datetime as dt

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from rocketrio.actors.client.errors import MQBrokerError, NotFound, TopicRouteNotFound, UsageError
from rocketrio.actors.client.message import SendResult, SendStatus
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.cli.dates import dated_kv, format_ms
from rocketrio.cli.failure import describe_failure
from rocketrio.cli.send_report import (
    Output,
    SendTally,
    produce_output,
    progress_line,
    summary_lines,
)
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.serde import HeaderError

IST = dt.timezone(dt.timedelta(hours=5, minutes=30))


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        (UsageError("give -t"), 2, "tool: give -t"),
        (NotFound("group G is unknown"), 1, "tool: group G is unknown"),
        (TopicRouteNotFound("T"), 1, "tool: no route for topic T"),
        (
            MQBrokerError(ResponseCode.TOPIC_NOT_EXIST, "no\ntopic", "1.2.3.4:10911"),
            1,
            "tool: TOPIC_NOT_EXIST (17) from 1.2.3.4:10911: no topic",
        ),
        (
            RemotingError("cannot connect to 1.2.3.4:9876: all attempts to connect to x failed"),
            1,
            "tool: cannot connect to 1.2.3.4:9876",
        ),
        (HeaderError("bad field x"), 1, "tool: bad field x"),
        (trio.TooSlowError(), 1, "tool: no answer in time"),
        (ConnectionRefusedError("refused"), 1, "tool: ConnectionRefusedError: refused"),
        (KeyError("k"), 1, "tool: unexpected error (a bug): KeyError: 'k'"),
        # a nursery wraps the one real error in exception groups
        (ExceptionGroup("g", [ExceptionGroup("h", [NotFound("x")])]), 1, "tool: x"),
    ],
)
def test_describe_failure(exc: BaseException, code: int, line: str) -> None:
    f = describe_failure("tool", exc)
    assert (f.exit_code, f.line) == (code, line)


def test_format_ms_is_local_iso_with_ms_and_offset() -> None:
    assert format_ms(1_700_000_000_123, dt.UTC) == "2023-11-14T22:13:20.123+00:00"
    assert format_ms(1_700_000_000_123, IST) == "2023-11-15T03:43:20.123+05:30"
    assert format_ms("1700000000005", IST) == "2023-11-15T03:43:20.005+05:30"
    assert format_ms(0) == format_ms(-1) == format_ms(None) == format_ms("") == "-"


@given(st.integers(min_value=1, max_value=4_102_444_800_000))
def test_format_ms_round_trips_to_the_millisecond(ms: int) -> None:
    text = format_ms(ms, IST)
    back = dt.datetime.fromisoformat(text)
    assert round(back.timestamp() * 1000) == ms


def test_dated_kv_converts_only_timestamp_keys() -> None:
    kv = {"bootTimestamp": "1700000000123", "commitLogMaxOffset": "1700000000123", "x": "y"}
    assert dated_kv(kv, dt.UTC) == {
        "bootTimestamp": "2023-11-14T22:13:20.123+00:00",
        "commitLogMaxOffset": "1700000000123",
        "x": "y",
    }


@pytest.mark.parametrize(
    ("count", "quiet", "verbose", "tty", "want"),
    [
        (20, False, False, True, Output.LINES),
        (21, False, False, True, Output.BAR),
        (21, True, False, True, Output.SUMMARY_ONLY),
        (21, False, False, False, Output.SUMMARY_ONLY),
        (1000, False, True, True, Output.LINES),
        (1000, True, True, False, Output.LINES),
    ],
)
def test_produce_output(count: int, quiet: bool, verbose: bool, tty: bool, want: Output) -> None:
    assert produce_output(count, quiet=quiet, verbose=verbose, stderr_is_tty=tty) is want


def _result(broker: str, queue: int, status: SendStatus = SendStatus.SEND_OK) -> SendResult:
    return SendResult(status, "id", "oid", MessageQueue("T", broker, queue), 0)


def test_summary_counts_statuses_queues_and_failures() -> None:
    t = SendTally("T", 10)
    for b, q in [("b", 1), ("a", 0), ("a", 0), ("a", 1)]:
        t.record(_result(b, q))
    t.record(_result("b", 1, SendStatus.FLUSH_SLAVE_TIMEOUT))
    t.record_failure("SYSTEM_BUSY (2): busy")
    t.record_failure("SYSTEM_BUSY (2): busy")
    assert summary_lines(t, 2.0) == [
        "sent 5 of 10 message(s) to T in 2.000 s (2.5 msgs/s), failed 2",
        "status: FLUSH_SLAVE_TIMEOUT 1, SEND_OK 4",
        "  a: 3 (q0=2 q1=1)",
        "  b: 2 (q1=2)",
        "  failed 2x: SYSTEM_BUSY (2): busy",
    ]
    assert summary_lines(SendTally("T", 1), 0.0)[0].endswith("(n/a msgs/s), failed 0")


def test_progress_line() -> None:
    t = SendTally("T", 100)
    for _ in range(25):
        t.record(_result("a", 0))
    assert progress_line(t, 0.5, width=20) == (
        "[#####...............] 25/100  25%  50.0 msgs/s  failed 0  eta 1.5 s"
    )
    assert progress_line(SendTally("T", 5), 0.0, width=4) == (
        "[....] 0/5   0%  n/a msgs/s  failed 0  eta ?"
    )
