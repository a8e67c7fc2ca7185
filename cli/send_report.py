"""What ``rocketrio produce -c N`` tells its user: the end-of-run summary and the progress bar.

Pure: `SendTally` counts results and failures as the shell reports them, `summary_lines` and
`progress_line` render text from it and the elapsed time (the shell passes Trio's clock, so
tests on a MockClock get exact figures). Which of per-message lines, the bar or neither is
shown is `produce_output`'s decision, from N, ``--quiet``, ``--verbose`` and whether stderr is
a terminal.
"""

from __future__ import annotations

import enum
from collections import Counter

import attrs

from rocketrio.actors.client.message import SendResult

# above this many messages, per-message lines give way to a progress bar (or to nothing)
PER_MESSAGE_LINES_MAX = 20
BAR_WIDTH = 30


class Output(enum.Enum):
    LINES = "lines"  # one line per message on stdout
    BAR = "bar"  # a progress bar redrawn on stderr
    SUMMARY_ONLY = "summary_only"


def produce_output(count: int, *, quiet: bool, verbose: bool, stderr_is_tty: bool) -> Output:
    """Per-message lines for small N (or ``--verbose``); for large N a bar on a terminal
    unless ``--quiet``; otherwise only the summary."""
    if verbose or count <= PER_MESSAGE_LINES_MAX:
        return Output.LINES
    if stderr_is_tty and not quiet:
        return Output.BAR
    return Output.SUMMARY_ONLY


@attrs.define
class SendTally:
    """Counts of one produce run."""

    topic: str
    asked: int
    statuses: Counter[str] = attrs.field(factory=Counter)
    per_queue: Counter[tuple[str, int]] = attrs.field(factory=Counter)
    failures: Counter[str] = attrs.field(factory=Counter)

    @property
    def sent(self) -> int:
        return sum(self.statuses.values())

    @property
    def failed(self) -> int:
        return sum(self.failures.values())

    @property
    def done(self) -> int:
        return self.sent + self.failed

    def record(self, result: SendResult) -> None:
        mq = result.message_queue
        self.statuses[result.send_status.name] += 1
        self.per_queue[(mq.brokerName, mq.queueId)] += 1

    def record_failure(self, reason: str) -> None:
        self.failures[reason] += 1


def rate(n: int, elapsed_s: float) -> str:
    return f"{n / elapsed_s:.1f} msgs/s" if elapsed_s > 0 else "n/a msgs/s"


def summary_lines(t: SendTally, elapsed_s: float) -> list[str]:
    """The summary printed at the end of a run."""
    lines = [
        f"sent {t.sent} of {t.asked} message(s) to {t.topic} in {elapsed_s:.3f} s "
        f"({rate(t.sent, elapsed_s)}), failed {t.failed}"
    ]
    if t.statuses:
        lines.append("status: " + ", ".join(f"{s} {n}" for s, n in sorted(t.statuses.items())))
    brokers: Counter[str] = Counter()
    for (broker, _queue), n in t.per_queue.items():
        brokers[broker] += n
    for broker in sorted(brokers):
        queues = " ".join(f"q{q}={n}" for (b, q), n in sorted(t.per_queue.items()) if b == broker)
        lines.append(f"  {broker}: {brokers[broker]} ({queues})")
    for reason, n in t.failures.most_common():
        lines.append(f"  failed {n}x: {reason}")
    return lines


def progress_line(t: SendTally, elapsed_s: float, width: int = BAR_WIDTH) -> str:
    """``[#####.....]  450/1000  45%  380.0 msgs/s  failed 0  eta 1.4 s``"""
    frac = t.done / t.asked if t.asked else 1.0
    filled = min(width, int(frac * width))
    bar = "#" * filled + "." * (width - filled)
    per_s = t.done / elapsed_s if elapsed_s > 0 else 0.0
    eta = f"{(t.asked - t.done) / per_s:.1f} s" if per_s > 0 else "?"
    return (
        f"[{bar}] {t.done}/{t.asked} {frac * 100:3.0f}%  {rate(t.done, elapsed_s)}  "
        f"failed {t.failed}  eta {eta}"
    )
