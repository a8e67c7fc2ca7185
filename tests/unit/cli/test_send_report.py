"""`rocketrio produce`'s output (cli/send_report.py): the summary and the progress line."""

from __future__ import annotations

import pytest

from rocketrio.actors.client.message import SendResult, SendStatus
from rocketrio.cli.send_report import (
    Output,
    SendTally,
    produce_output,
    progress_line,
    summary_lines,
)
from rocketrio.protocol.bodies import MessageQueue


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
