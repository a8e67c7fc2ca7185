"""Python calls per Java-client send: the broker of this checkout under cProfile while Apache's
benchmark Producer (``-w 64 -s 1024``, ASYNC_FLUSH) sends to it.

Starts a NameServer and a broker as bench/java_side_by_side.py does, the broker inside
bench/transaction_gc.py's ``--wrap`` (SIGUSR1 starts a cProfile phase, SIGUSR2 ends it), runs
the Producer, profiles ``--profile`` seconds after ``--warmup`` seconds, and prints ONE JSON
line: every call the interpreter made in the phase, and the Python functions among them, per
send (sends = the profile's count of ``send_nowait``).

    .venv/bin/python bench/java_send_calls.py --rocketmq-home DIR [--warmup 6] [--profile 8]
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time

import benchlib
import java_side_by_side as sbs

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rocketmq-home", default=os.environ.get("ROCKETMQ_HOME"))
    ap.add_argument("--cp-file", default="/tmp/rocketmq-5.2.0-home/cp2.txt")
    ap.add_argument("--warmup", type=float, default=6.0)
    ap.add_argument("--profile", type=float, default=8.0)
    args = ap.parse_args()
    if not args.rocketmq_home or not os.path.isdir(os.path.join(args.rocketmq_home, "conf")):
        print(json.dumps({"bench": "java_send_calls", "skipped": "no ROCKETMQ_HOME"}))
        return
    args.cp = sbs.java_classpath(args.rocketmq_home, args.cp_file)
    work = tempfile.mkdtemp(prefix="rr-java-calls-")
    out = os.path.join(work, "phases.jsonl")
    plain_start = benchlib.Proc.start

    def start(self: benchlib.Proc) -> benchlib.Proc:
        if self.role != "broker":
            return plain_start(self)
        with open(os.path.join(self.work, f"{self.name}.out"), "ab") as log:
            self.p = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "transaction_gc.py"), "--wrap", out,
                 "broker", "-c", self.path, "--name", self.name],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        return self

    benchlib.Proc.start = start  # type: ignore[method-assign]
    side = sbs.Side("rocketrio", args, work, "ASYNC_FLUSH")
    try:
        ns, pid = side.start()
        tool = sbs.JavaProc(args.rocketmq_home, args.cp, work, "producer", "rmq.client.logback.xml")
        tool.start(
            "org.apache.rocketmq.example.benchmark.Producer",
            ["-n", ns, "-t", sbs.TOPIC, "-w", "64", "-s", "1024"],
        )
        time.sleep(args.warmup)
        os.kill(pid, signal.SIGUSR1)
        time.sleep(args.profile)
        os.kill(pid, signal.SIGUSR2)
        tool.stop()
        for _ in range(200):
            if os.path.exists(out):
                break
            time.sleep(0.2)
        time.sleep(1.0)
        stats = pstats.Stats(f"{out}.0.prof")
        entries = stats.stats  # type: ignore[attr-defined]
        sends = sum(
            v[1]
            for k, v in entries.items()
            if k[2] == "send_nowait" and k[0].endswith("send/processor.py")
        )
        python = sum(v[1] for k, v in entries.items() if k[0] != "~")
        print(json.dumps({
            "bench": "java_send_calls", "sends": sends,
            "calls_per_send": round(stats.total_calls / sends, 1),  # type: ignore[attr-defined]
            "python_functions_per_send": round(python / sends, 1),
        }))  # fmt: skip
    finally:
        side.stop()


if __name__ == "__main__":
    main()
