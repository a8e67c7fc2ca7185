"""`rocketrio analyze` on a real failover (SPEC T4): `rocketrio up` in controller mode, a traced
producer and consumer in this process, kill -9 of the master under load; the job must report
one failover of broker-a with the right broker ids, a write gap matching the producer's own
measurement (within 100 ms: both read the same wall clock, the log line carries ms), and 0
acknowledged messages lost. Then a fixture deletes one consumed message from the consumer's
trace and the job must report exactly that message as acknowledged-but-lost."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import structlog
import trio
from pyspark.sql import SparkSession

from rocketrio.actors.client.config import ClientConfig
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.analysis.incidents import run
from tests.harness.spark import quick_jvm_env
from tests.harness.system import UpProcess, master_name, role_changes, start_up, wait_for

pytestmark = pytest.mark.system

TOPIC = "AnalyzeTopic"
TRACE = ClientConfig(trace=True)


async def traced_produce(
    up: UpProcess, total: int, fault_at: int, fault: Any
) -> tuple[set[str], float]:
    """Send ``total`` messages (32 in flight), kill at ``fault_at`` acks; returns the acked
    message ids and the write gap the producer saw (wall clock, seconds)."""
    acked: set[str] = set()
    ack_times: list[float] = []
    fault_time: float | None = None
    async with Producer(
        "analyze_producer", up.namesrv, send_timeout=1.0, retries=4, client_config=TRACE
    ) as producer:
        limiter = trio.CapacityLimiter(32)

        async def one(i: int) -> None:
            async with limiter:
                try:
                    r = await producer.send(Message(TOPIC, f"m{i}".encode()))
                except Exception:
                    return
                if r.send_status.name == "SEND_OK":
                    acked.add(r.msg_id)
                    ack_times.append(time.time())

        seq = 0
        while seq < total:
            async with trio.open_nursery() as n:
                for _ in range(min(100, total - seq)):
                    n.start_soon(one, seq)
                    seq += 1
            if fault_time is None and len(acked) >= fault_at:
                fault_time = time.time()
                fault()
    assert fault_time is not None
    before = max(t for t in ack_times if t <= fault_time)
    after = min(t for t in ack_times if t > fault_time)
    return acked, after - before


async def traced_consume(up: UpProcess, acked: set[str]) -> set[str]:
    seen: set[str] = set()
    done = trio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        seen.update(m.msg_id for m in msgs)
        if acked <= seen:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "analyze_group",
        up.namesrv,
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        client_config=TRACE,
    )
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    async with consumer:
        with trio.move_on_after(90):
            await done.wait()
        await trio.sleep(1)  # let the last offsets commit
    return seen


def analyze(logs: str, out: str, *extra: str) -> dict[str, Any]:
    rocketrio = os.path.join(os.path.dirname(sys.executable), "rocketrio")
    run = subprocess.run(
        [rocketrio, "analyze", logs, "--out", out, "--json", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=quick_jvm_env(os.environ),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "finding incidents" in run.stderr  # the progress lines
    return json.loads(run.stdout)


def test_analyze_reports_a_kill9_failover_and_a_deleted_acked_message(
    tmp_path: Path, spark: SparkSession
) -> None:
    up = start_up(str(tmp_path / "cluster"), "controller", "--flush", "SYNC_FLUSH")
    logs = os.path.join(up.base_dir, "logs")
    saved = structlog.get_config()
    configure_logging("test-clients", "client", logs, console=None)
    try:
        old = trio.run(master_name, up, 2)
        old_id = role_changes(up, old)[-1]["broker_id"]
        acked, gap = trio.run(
            traced_produce, up, 3000, 1200, lambda: os.kill(up.pid_of(old), signal.SIGKILL)
        )
        new = trio.run(master_name, up)
        assert new != old
        new_id = role_changes(up, new)[-1]["broker_id"]
        wait_for(
            lambda: role_changes(up, old)[-1]["broker_role"] == "SLAVE",
            30,
            "the old master back as a slave",
        )
        seen = trio.run(traced_consume, up, acked)
        assert acked <= seen
    finally:
        structlog.configure(**saved)
        # stopping `up` stops the new master first, which is a failover of its own: --until
        stop_ms = int(time.time() * 1000)
        up.stop()

    s = analyze(logs, str(tmp_path / "out"), "--until", str(stop_ms))
    assert s["lines"]["skipped"] == {
        "malformed": 0, "unknown_event": 0, "bad_field": 0, "empty_files": 0,
    }, s["lines"]["skipped_examples"]  # fmt: skip
    [f] = s["failovers"]
    assert (f["broker"], f["old_master_id"], f["new_master_id"]) == ("broker-a", old_id, new_id)
    assert f["lost_ms"] <= f["elected_ms"] <= f["writable_ms"] <= f["first_write_ms"]
    assert f["old_back_ms"] is not None and f["acked_lost"] == 0
    assert abs(f["write_gap_ms"] - gap * 1000) <= 100, (f["write_gap_ms"], gap)
    assert s["acked"] == len(acked) and s["lost"] == []
    assert f["headline"].startswith(f"broker-a: master {old_id} lost at ")
    assert (tmp_path / "out" / "report.html").exists()

    # the fixture: one acknowledged message disappears from what the consumer saw
    cut = tmp_path / "cut-logs"
    shutil.copytree(logs, cut)
    trace = cut / "test-clients.jsonl"
    lines = trace.read_text().splitlines(keepends=True)
    victim = next(i for i, x in enumerate(lines) if '"trace_consumed"' in x)
    victim_id = json.loads(lines[victim])["msg_id"]
    dropped = [
        x for x in lines if json.loads(x).get("msg_id") == victim_id and "trace_consumed" in x
    ]
    trace.write_text("".join(x for x in lines if x not in dropped))
    # in this process's warm Spark session: the command itself was proven above
    s2 = run(spark, [str(cut)], str(tmp_path / "out2"), until_ms=stop_ms)
    assert [m["msg_id"] for m in s2["lost"]] == [victim_id]
