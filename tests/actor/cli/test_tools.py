"""`rocketrio produce` / `rocketrio consume` run in-process (cli.main.main_async) against a
NameServer and Brokers on the simulated network with a MockClock: exit codes, the one-line
reasons, the summary and the progress bar."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import structlog
import structlog.testing
import trio
import trio.testing

from rocketrio.actors.client.config import ClientConfig
from rocketrio.cli.failure import Wiring
from rocketrio.cli.main import main_async
from tests.harness.clients import Cluster, cluster, create_topic

Capture = pytest.CaptureFixture[str]


async def run_cli(
    c: Cluster, capsys: Capture, *argv: str, host: str | None = None
) -> tuple[int, str, str]:
    host = host or c.client_host()
    wiring = Wiring(c.net.transport(host), ClientConfig(clientIP=host, instanceName="cli"))
    capsys.readouterr()
    with structlog.testing.capture_logs():  # the servers' log lines stay out of stdout
        code = await main_async(list(argv), wiring)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


async def test_unreachable_name_server_is_one_line_and_exit_1(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path) as c:
        for tool in ("consume", "produce"):
            code, out, err = await run_cli(c, capsys, tool, "-n", "10.0.0.99:9876", "-t", "T")
            line = one_line(err)
            assert code == 1 and out == ""
            assert line.startswith(f"rocketrio {tool}: ") and "10.0.0.99:9876" in line
            assert "Traceback" not in err


async def test_missing_topic_exits_1_with_the_reason(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path) as c:
        t0 = trio.current_time()
        code, out, err = await run_cli(c, capsys, "consume", "-n", c.ns_addr, "-t", "Nope")
        line = one_line(err)
        assert code == 1 and out == ""
        assert "topic Nope does not exist" in line and "updateTopic" in line
        assert trio.current_time() - t0 < 1.0  # refused at once, not after --idle


async def test_produce_to_a_missing_topic_without_auto_create_exits_1(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ()) as c:
        await c.start_broker("broker-a", "10.0.1.1", autoCreateTopicEnable=False)
        code, out, err = await run_cli(c, capsys, "produce", "-n", c.ns_addr, "-t", "Nope")
        line = one_line(err)
        assert code == 1 and out == ""
        assert "topic Nope does not exist" in line and "autoCreateTopicEnable=false" in line


async def test_produce_to_a_missing_topic_with_auto_create_says_so(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path) as c:
        code, out, err = await run_cli(
            c, capsys, "produce", "-n", c.ns_addr, "-t", "Fresh", "-c", "3"
        )
        assert code == 0, err
        assert "topic Fresh does not exist yet: broker-a will create it" in err
        assert out.count("SEND_OK") == 3


async def test_consume_of_an_empty_topic_is_exit_0_and_says_what_it_saw(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "Empty", queues=4)
        code, out, err = await run_cli(
            c, capsys, "consume", "-n", c.ns_addr, "-t", "Empty", "--idle", "3"
        )
        assert code == 0, err
        assert out == ""
        assert "consumed 0 message(s) from Empty; stopped after 3 s without a message" in err
        assert "topic Empty: 4 queue(s) on broker-a holding 0 message(s)" in err
        assert "this consumer held 4 of them" in err


async def test_produce_small_count_lines_and_summary_then_consume(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
        await create_topic(c, "T", queues=2)
        code, out, err = await run_cli(c, capsys, "produce", "-n", c.ns_addr, "-t", "T", "-c", "8")
        assert code == 0, err
        assert out.count("sent #") == 8 and out.count("SEND_OK") == 8
        summary = err.splitlines()
        assert re.fullmatch(
            r"sent 8 of 8 message\(s\) to T in \d+\.\d{3} s \(\d+\.\d msgs/s\), failed 0",
            summary[0],
        ), summary
        assert "status: SEND_OK 8" in err
        # per broker and queue: 8 sends round robin over 2 brokers x 2 queues
        assert re.search(r"^  broker-a: 4 \(q0=2 q1=2\)$", err, re.M), err
        assert re.search(r"^  broker-b: 4 \(q0=2 q1=2\)$", err, re.M), err

        code, out, err = await run_cli(
            c, capsys, "consume", "-n", c.ns_addr, "-t", "T", "--from-first", "--count", "8"
        )
        assert code == 0, err
        assert out.count("recv T") == 8
        assert "consumed 8 message(s) from T (--count 8 reached)" in err


async def test_produce_large_count_shows_a_bar_on_a_terminal_instead_of_lines(
    tmp_path: Path,
    mock_clock: trio.testing.MockClock,
    capsys: Capture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
        code, out, err = await run_cli(c, capsys, "produce", "-n", c.ns_addr, "-t", "T", "-c", "40")
        assert code == 0, err
        assert out == ""  # no per-message lines
        assert "\r[" + "#" * 30 + "] 40/40 100%" in err  # the bar, drawn in place, finished
        assert "sent 40 of 40 message(s) to T" in err
        assert re.search(r"^  broker-a: 40 \(q0=20 q1=20\)$", err, re.M), err

        code, out, err = await run_cli(
            c, capsys, "produce", "-n", c.ns_addr, "-t", "T", "-c", "40", "--quiet"
        )
        assert code == 0 and out == "" and "\r" not in err and "[#" not in err
        assert "sent 40 of 40 message(s) to T" in err

        monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
        code, out, err = await run_cli(c, capsys, "produce", "-n", c.ns_addr, "-t", "T", "-c", "40")
        assert code == 0 and out == "" and "[#" not in err  # a pipe gets no bar
        assert "sent 40 of 40 message(s) to T" in err
        code, out, err = await run_cli(
            c, capsys, "produce", "-n", c.ns_addr, "-t", "T", "-c", "21", "--verbose"
        )
        assert code == 0 and out.count("sent #") == 21


async def test_failed_sends_are_counted_and_exit_1(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path) as c:
        await create_topic(c, "T", queues=2)
        host = c.client_host()
        c.net.partition([host], [c.hosts["broker-a"]])  # routed, but out of this client's reach
        code, out, err = await run_cli(
            c, capsys, "produce", "-n", c.ns_addr, "-t", "T", "-c", "5", host=host
        )
        assert code == 1
        assert out == ""
        assert err.count("failed #") == 3
        assert "giving up after 3 failed sends in a row; 2 message(s) not attempted" in err
        assert re.search(r"^sent 0 of 5 message\(s\) to T in .*failed 3$", err, re.M), err


async def test_usage_errors_exit_2(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path) as c:
        code, _out, err = await run_cli(c, capsys, "produce", "-n", c.ns_addr, "-t", "T", "-c", "0")
        assert code == 2 and one_line(err) == "rocketrio produce: --count must be at least 1, got 0"
        with pytest.raises(SystemExit) as e:
            await run_cli(c, capsys, "consume", "-n", c.ns_addr)  # -t missing
        assert e.value.code == 2


def trace_lines(log_dir: Path, event: str) -> list[dict[str, object]]:
    import json

    out = []
    for f in sorted(log_dir.glob("*.jsonl")):
        out += [json.loads(x) for x in f.read_text().splitlines()]
    return [x for x in out if x["event"] == event]


async def test_traced_produce_and_consume_log_one_line_per_message_with_matching_ids(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    saved = structlog.get_config()
    logs = tmp_path / "logs"
    try:
        async with cluster(tmp_path, ("broker-a", "broker-b")) as c:
            await create_topic(c, "T", queues=2)
            code, out, err = await run_cli(
                c, capsys, "produce", "-n", c.ns_addr, "-t", "T", "-c", "8", "--trace",
                "--log-dir", str(logs),
            )  # fmt: skip
            assert code == 0, err
            sent = re.findall(r"broker=(\S+) queue=(\d+) offset=(\d+) msgId=(\S+)", out)
            code, out, err = await run_cli(
                c, capsys, "consume", "-n", c.ns_addr, "-t", "T", "--from-first", "--count",
                "8", "--trace", "--log-dir", str(logs),
            )  # fmt: skip
            assert code == 0, err
            # without a log directory the traces would go nowhere: a usage error
            code, _, err = await run_cli(
                c, capsys, "produce", "-n", c.ns_addr, "-t", "T", "--trace"
            )
            assert code == 2 and "--log-dir" in err
    finally:
        structlog.configure(**saved)
    acked = trace_lines(logs, "trace_send_acked")
    consumed = trace_lines(logs, "trace_consumed")
    assert len(sent) == 8 and len(acked) == 8 and len(consumed) == 8
    assert sorted((a["broker"], a["queue_id"], a["queue_offset"], a["msg_id"]) for a in acked) == (
        sorted((b, int(q), int(o), m) for b, q, o, m in sent)
    )
    assert {a["msg_id"] for a in acked} == {x["msg_id"] for x in consumed}
    by_id = {a["msg_id"]: a for a in acked}
    for x in consumed:
        a = by_id[x["msg_id"]]
        assert (x["broker"], x["queue_id"], x["queue_offset"]) == (
            a["broker"], a["queue_id"], a["queue_offset"],
        )  # fmt: skip
        assert x["group"] == "cli_consumer" and x["topic"] == "T"
    assert all(a["producer_group"] == "cli_producer" and a["topic"] == "T" for a in acked)
    assert all(isinstance(a["latency_ms"], int) and a["latency_ms"] >= 0 for a in acked)


async def test_untraced_clients_log_no_trace_lines(
    tmp_path: Path, mock_clock: trio.testing.MockClock, capsys: Capture
) -> None:
    async with cluster(tmp_path, ("broker-a",)) as c:
        await create_topic(c, "T", queues=2)
        with structlog.testing.capture_logs() as logs:
            wiring = Wiring(c.net.transport(c.client_host()), ClientConfig(instanceName="cli"))
            assert await main_async(["produce", "-n", c.ns_addr, "-t", "T", "-c", "3"], wiring) == 0
    assert not [x for x in logs if str(x["event"]).startswith("trace_")]
