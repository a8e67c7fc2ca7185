"""Incident-job throughput on synthetic logs of a large cluster (SPEC T4).

Generates JSON-line logs as a real cluster writes them (one file per node under one directory
per host): ``--brokers`` broker sets of 3 replicas, 3 controllers, ``--hours`` of traced
traffic (trace_send_acked / trace_consumed are the bulk, as with client tracing on), SyncStateSet
changes, and a failover every ``--failover-every-min`` minutes per broker set with the whole
sequence (heartbeat timeout, election, role changes, first write, old master back with a
truncation). Then, in one local Spark session (``local[*]``):

- reference_lines_per_s  Spark parsing the same files into every catalogue column and writing
                         them nowhere (``read.schema(...).json(...).write.format("noop")``):
                         the cost of reading the lines at all
- job_lines_per_s        `analysis.incidents.run` over them (every table, Parquet, summary);
                         its steps go to stderr, and ``spark_jobs`` counts the Spark jobs it ran

and prints ONE JSON line with both, their ratio, a check that the job found every failover
the generator wrote, and the load average at the start and the end (on a loaded machine the
ratio moves with the load; a start above half the cores is warned about on stderr).

    .venv/bin/python bench/analyze_scale.py --lines 10000000   # 50 sets, 24 h, 10 M lines
    .venv/bin/python bench/analyze_scale.py --quick            # 200 k lines
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from typing import TextIO

from rocketrio.analysis.incidents import run, session
from rocketrio.analysis.schema import log_schema

T0 = 1_795_000_000_000


def iso(ms: int) -> str:
    t = datetime.fromtimestamp(ms / 1000, UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def line(ms: int, node: str, role: str, event: str, fields: str) -> str:
    return (
        f'{{"ts":"{iso(ms)}","level":"info","node":"{node}","role":"{role}",'
        f'"actor":"bench","event":"{event}",{fields}}}\n'
    )


def generate(out: str, lines: int, brokers: int, hours: float, every_min: float, seed: int) -> int:
    """Write the logs; returns how many failovers they hold."""
    rng = random.Random(seed)
    span = int(hours * 3600_000)
    files: dict[str, TextIO] = {}

    def w(node: str, s: str) -> None:
        f = files.get(node)
        if f is None:
            host = os.path.join(out, f"host-{node.split('-')[0]}")
            os.makedirs(host, exist_ok=True)
            f = files[node] = open(os.path.join(host, f"{node}.jsonl"), "w", buffering=1 << 20)
        f.write(s)

    failovers = 0
    fixed = 0
    for b in range(brokers):
        name = f"broker-{b}"
        master, epoch, t = 1, 1, 0
        w(
            "ctl-0",
            line(
                T0,
                "ctl-0",
                "controller",
                "elect_master",
                f'"broker":"{name}","master_id":1,"master_addr":"h:1","epoch":1,'
                f'"sync_state_set":[1,2,3],"reason":"first_register","term":1,"candidates":[1,2,3]',
            ),
        )
        for r in (1, 2, 3):
            role = "SYNC_MASTER" if r == 1 else "SLAVE"
            w(
                f"{name}-{r}",
                line(
                    T0 + 5,
                    f"{name}-{r}",
                    "broker",
                    "broker_role_changed",
                    f'"broker":"{name}","broker_id":{r},"broker_role":"{role}","epoch":1,'
                    f'"master_id":1,"master_addr":"h:1","sync_state_set":[1,2,3]',
                ),
            )
        fixed += 4
        step = int(every_min * 60_000)
        t = step + rng.randrange(step)
        while t < span:
            old, new = master, master % 3 + 1
            epoch += 1
            at = T0 + t
            w(
                "ctl-0",
                line(
                    at,
                    "ctl-0",
                    "controller",
                    "broker_heartbeat_timeout",
                    f'"cluster":"C","broker":"{name}","broker_id":{old},"addr":"h:{old}",'
                    f'"silent_ms":1500,"reason":"heartbeat_timeout"',
                ),
            )
            for c in range(3):
                reason = "master_heartbeat_timeout" if c == 0 else "unknown"
                w(
                    f"ctl-{c}",
                    line(
                        at + 10 + c,
                        f"ctl-{c}",
                        "controller",
                        "elect_master",
                        f'"broker":"{name}","master_id":{new},"master_addr":"h:{new}",'
                        f'"epoch":{epoch},"sync_state_set":[{new}],"reason":"{reason}","term":1',
                    ),
                )
            w(
                f"{name}-{new}",
                line(
                    at + 20,
                    f"{name}-{new}",
                    "broker",
                    "broker_role_changed",
                    f'"broker":"{name}","broker_id":{new},"broker_role":"SYNC_MASTER",'
                    f'"epoch":{epoch},"master_id":{new},"master_addr":"h:{new}","sync_state_set":[{new}]',
                ),
            )
            w(
                f"{name}-{new}",
                line(
                    at + 60,
                    f"{name}-{new}",
                    "broker",
                    "master_first_write",
                    f'"epoch":{epoch},"offset":{t}',
                ),
            )
            w(
                f"{name}-{old}",
                line(
                    at + 3000,
                    f"{name}-{old}",
                    "broker",
                    "broker_role_changed",
                    f'"broker":"{name}","broker_id":{old},"broker_role":"SLAVE","epoch":{epoch},'
                    f'"master_id":{new},"master_addr":"h:{new}","sync_state_set":[{new}]',
                ),
            )
            w(
                f"{name}-{old}",
                line(
                    at + 3010,
                    f"{name}-{old}",
                    "broker",
                    "ha_truncated",
                    f'"broker":"{name}","from_offset":{t + 100},"to_offset":{t},"matched_epoch":'
                    f'{epoch - 1},"master_max":{t + 500},"master_epochs":[],"epochs_now":[]',
                ),
            )
            w(
                "ctl-0",
                line(
                    at + 15,
                    "ctl-0",
                    "controller",
                    "sync_state_set_changed",
                    f'"broker":"{name}","sync_state_set":[{new}],"epoch":{epoch}',
                ),
            )
            fixed += 9
            failovers += 1
            master = new
            t += step + rng.randrange(step)
    traced = max(0, lines - fixed) // 2
    for i in range(traced):
        b = rng.randrange(brokers)
        ms = T0 + rng.randrange(span)
        mid = f"{i:016X}"
        fields = f'"msg_id":"{mid}","topic":"T{b % 20}","broker":"broker-{b}","queue_id":{i % 8},'
        w(
            f"producer-{b % 10}",
            line(
                ms,
                f"producer-{b % 10}",
                "client",
                "trace_send_acked",
                fields + f'"queue_offset":{i},"producer_group":"pg","client_id":"p{b % 10}",'
                f'"latency_ms":{1 + i % 5}',
            ),
        )
        w(
            f"consumer-{b % 10}",
            line(
                ms + 5,
                f"consumer-{b % 10}",
                "client",
                "trace_consumed",
                fields
                + f'"queue_offset":{i},"group":"g","client_id":"c{b % 10}","reconsume_times":0',
            ),
        )
    for f in files.values():
        f.close()
    return failovers


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=10_000_000)
    p.add_argument("--brokers", type=int, default=50)
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--failover-every-min", type=float, default=120.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="200 k lines")
    p.add_argument("--keep", help="generate into this directory and keep it")
    p.add_argument("--logs", help="read these logs (of an earlier --keep DIR/logs), no generating")
    p.add_argument("--out", help="write the job's tables here (bench/analyze_compare.py)")
    a = p.parse_args()
    if a.quick:
        a.lines = 200_000
    d = a.keep or tempfile.mkdtemp(prefix="analyze-scale-")
    try:
        t = time.monotonic()
        logs = a.logs or os.path.join(d, "logs")
        expected = -1 if a.logs else generate(logs, a.lines, a.brokers, a.hours,
                                              a.failover_every_min, a.seed)  # fmt: skip
        gen_s = time.monotonic() - t
        spark = session()
        files = [os.path.join(r, f) for r, _, fs in os.walk(logs) for f in fs]

        def reference() -> float:
            # every line parsed into every catalogue column, written nowhere
            t = time.monotonic()
            df = spark.read.schema(log_schema()).json(files)
            df.write.format("noop").mode("overwrite").save()
            return time.monotonic() - t

        load_start = os.getloadavg()
        if load_start[0] > (os.cpu_count() or 1) / 2:
            print(f"warning: load average {load_start[0]:.1f} at the start on {os.cpu_count()} "
                  "cores: the ratio moves with the load, see docs/benchmarks.md",
                  file=sys.stderr)  # fmt: skip
        n = 0
        for f in files:
            with open(f, "rb") as fh:
                n += sum(1 for _ in fh)
        ref_before = reference()
        tracker = spark.sparkContext.statusTracker()
        jobs_before = len(tracker.getJobIdsForGroup(None))
        t = last = time.monotonic()

        def step(msg: str) -> None:  # the job's progress, with the time of the step before
            nonlocal last
            now = time.monotonic()
            print(f"  [{now - t:7.1f}s, +{now - last:6.1f}s] {msg}", file=sys.stderr, flush=True)
            last = now

        s = run(spark, [logs], a.out or os.path.join(d, "out"), progress=step)
        job_s = time.monotonic() - t
        spark_jobs = len(tracker.getJobIdsForGroup(None)) - jobs_before
        # the faster of a cold and a warm reference: the job is not credited for JVM warm-up
        ref_s = min(ref_before, reference())
        spark.stop()
        print(json.dumps({
            "bench": "analyze_scale",
            "lines": n,
            "brokers": a.brokers,
            "hours": a.hours,
            "cores": os.cpu_count(),
            "generate_s": round(gen_s, 1),
            "reference_s": round(ref_s, 2),
            "reference_lines_per_s": round(n / ref_s),
            "job_s": round(job_s, 2),
            "job_lines_per_s": round(n / job_s),
            "job_vs_reference": round(ref_s / job_s, 3),
            "spark_jobs": spark_jobs,
            "failovers_generated": expected,
            "failovers_found": len(s["failovers"]),
            "lost_found": len(s["lost"]),
            "loadavg_at_start": [round(x, 2) for x in load_start],
            "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        }))  # fmt: skip
    finally:
        if not a.keep:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
