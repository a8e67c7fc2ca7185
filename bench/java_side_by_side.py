"""Apache RocketMQ 5.2.0's own benchmark tools against the Java broker and against rocketrio's.

Starts, round by round and alternating which goes first, a Java 5.2.0 NameServer + broker and a
rocketrio NameServer + broker (single master, ASYNC_FLUSH, then SYNC_FLUSH), runs Apache's
``org.apache.rocketmq.example.benchmark.Producer -w 64 -s 1024`` against each for a while, then
the benchmark ``Consumer`` on the backlog, parses their per-second TPS lines and samples the
broker process's CPU (``/proc/<pid>/stat``) over the measured window to give broker CPU us per
send. Prints ONE JSON line: per-round figures, per side medians and ranges, and the ratio
rocketrio/java of the medians.

    .venv/bin/python bench/java_side_by_side.py --rocketmq-home DIR [--rounds 2] [--seconds 40]

``--sides java,rocketrio,base --base-tree DIR`` adds a third broker, rocketrio from another
checkout (its own ``.venv``), so a change is measured against the code before it in the same
sitting (``ratio_*_rocketrio_over_base``).

``--rocketmq-home`` defaults to ``$ROCKETMQ_HOME``; the Java classpath file defaults to
``/tmp/rocketmq-5.2.0-home/cp2.txt`` (see /work/shared/tools/rocketmq-5.2.0/README.md; any
``lib/*`` of a complete distribution works too). Nothing is downloaded: when the distribution is
absent the script prints why and exits 0 with ``{"skipped": ...}``.
"""

from __future__ import annotations

import argparse
import bisect
import datetime
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import trio
from benchlib import Proc, cpu_seconds, free_port, stop_all

from rocketrio.actors.client.admin import MQAdmin

TOPIC = "BenchTopic"  # BenchmarkTest is a system topic (1024 queues) on the Java broker
QUEUES = 8
OPENS = [
    f"--add-opens=java.base/{p}=ALL-UNNAMED"
    for p in ("java.lang", "java.util", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.math")
] + ["--add-exports=java.base/sun.nio.ch=ALL-UNNAMED"]
TPS_RE = re.compile(r"Send TPS:\s*([\d.]+)")
CONSUME_TPS_RE = re.compile(r"Consume TPS:\s*([\d.]+)")
TIME_RE = re.compile(r"Current Time:\s*([\d-]+ [\d:,]+)")
AVG_RT_RE = re.compile(r"Average RT\(ms\):\s*([\d.]+)")
# --probe: the syscalls counted on each process (perf's tracepoints; root or a low
# perf_event_paranoid): how many reads and writes an answer costs each side
PROBE_EVENTS = ",".join(
    f"syscalls:sys_enter_{n}"
    for n in ("read", "write", "recvfrom", "sendto", "recvmsg", "sendmsg", "writev",
              "epoll_wait", "epoll_pwait", "futex")
) + ",context-switches"  # fmt: skip


def java_classpath(home: str, cp_file: str) -> str:
    if os.path.exists(cp_file):
        with open(cp_file) as f:
            jars = f.read().strip()
    else:
        jars = ":".join(sorted(glob.glob(os.path.join(home, "lib", "*.jar"))))
    return f"{os.path.join(home, 'conf')}:{jars}"


class JavaProc:
    """One Java process of the distribution (NameServer, broker or a benchmark tool)."""

    def __init__(self, home: str, cp: str, work: str, name: str, logback: str) -> None:
        self.home, self.cp, self.work, self.name, self.logback = home, cp, work, name, logback
        self.p: subprocess.Popen[bytes] | None = None

    def start(self, main: str, args: list[str], heap: str = "-Xmx1g") -> JavaProc:
        cmd = [
            "java", "-Xms512m", heap, "-XX:+UseG1GC", *OPENS,
            f"-Duser.home={os.path.join(self.work, 'javahome')}",
            f"-Drmq.logback.configurationFile={self.home}/conf/{self.logback}",
            "-cp", self.cp, main, *args,
        ]  # fmt: skip
        env = {**os.environ, "ROCKETMQ_HOME": self.home}
        self.out = os.path.join(self.work, f"{self.name}.out")
        with open(self.out, "ab") as out:
            self.p = subprocess.Popen(
                cmd, cwd=self.home, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        return self

    @property
    def pid(self) -> int:
        assert self.p is not None
        return self.p.pid

    def stop(self) -> None:
        if self.p is not None and self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def write_conf(path: str, conf: dict[str, str]) -> str:
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in conf.items())
    return path


async def create_topic(ns: str, broker: str) -> None:
    """UPDATE_AND_CREATE_TOPIC on ``broker`` (both brokers speak it) once it answers."""
    last: Exception | None = None
    async with MQAdmin(ns) as admin:
        for _ in range(600):  # 120 s: a loaded machine starts a JVM slowly
            try:
                await admin.update_topic(
                    TOPIC, broker_addr=broker, read_queues=QUEUES, write_queues=QUEUES
                )
                return
            except Exception as e:
                last = e
                await trio.sleep(0.2)
    raise RuntimeError(f"broker {broker} did not come up: {last!r}")


class TreeProc:
    """A launcher process of another rocketrio checkout (``--base-tree``: its ``.venv``)."""

    def __init__(self, tree: str, proc: Proc) -> None:
        self.tree, self.proc = tree, proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self) -> TreeProc:
        p = self.proc
        with open(os.path.join(p.work, f"{p.name}.out"), "ab") as out:
            p.p = subprocess.Popen(
                [os.path.join(self.tree, ".venv/bin/python"), "-m", "rocketrio.cli.main",
                 p.role, "-c", p.path, "--name", p.name],
                cwd=self.tree, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        return self

    def stop(self) -> None:
        self.proc.stop()


class Side:
    """Start/stop of one side's NameServer + broker in ``work``; ``broker_pid`` for CPU."""

    def __init__(self, kind: str, args: argparse.Namespace, work: str, flush: str) -> None:
        self.kind, self.args, self.work, self.flush = kind, args, work, flush
        self.stoppers: list[Any] = []

    def start(self) -> tuple[str, int]:
        taken: set[int] = set()
        ns_port, b_port = free_port(taken), free_port(taken)
        ns = f"127.0.0.1:{ns_port}"
        store = os.path.join(self.work, "store")
        broker_conf = {
            "brokerClusterName": "DefaultCluster", "brokerName": f"{self.kind}-broker",
            "brokerId": "0", "brokerRole": "ASYNC_MASTER", "flushDiskType": self.flush,
            "namesrvAddr": ns, "brokerIP1": "127.0.0.1", "listenPort": str(b_port),
            "storePathRootDir": store,
        }  # fmt: skip
        if self.kind == "java":
            a = self.args
            ns_proc = JavaProc(
                a.rocketmq_home, a.cp, self.work, "java-ns", "rmq.namesrv.logback.xml"
            )
            ns_conf = write_conf(
                os.path.join(self.work, "namesrv.conf"),
                {"listenPort": str(ns_port), "bindAddress": "127.0.0.1"},
            )
            self.stoppers.append(
                ns_proc.start("org.apache.rocketmq.namesrv.NamesrvStartup", ["-c", ns_conf])
            )
            broker_conf.update(
                bindAddress="127.0.0.1", haListenPort=str(b_port + 1),
                storePathCommitLog=os.path.join(store, "commitlog"), autoCreateTopicEnable="true",
            )  # fmt: skip
            b_conf = write_conf(os.path.join(self.work, "broker.conf"), broker_conf)
            broker = JavaProc(
                a.rocketmq_home, a.cp, self.work, "java-broker", "rmq.broker.logback.xml"
            )
            broker.start("org.apache.rocketmq.broker.BrokerStartup", ["-c", b_conf], heap="-Xmx2g")
            self.stoppers.append(broker)
            pid = broker.pid
        else:
            ns_proc2 = Proc(
                "namesrv", "rr-ns", {"listenPort": str(ns_port), "logDir": self.work}, self.work
            )
            self.stoppers.append(ns_proc2.start())
            time.sleep(0.5)
            broker_conf.update(logDir=self.work)
            rr = Proc("broker", "rr-broker", broker_conf, self.work)
            if self.kind == "base":  # the same launcher from another checkout's venv
                rr = TreeProc(self.args.base_tree, rr)
            rr.start()
            self.stoppers.append(rr)
            pid = rr.pid
        trio.run(create_topic, ns, f"127.0.0.1:{b_port}")
        time.sleep(2.0)  # the topic reaches the NameServer with the next registration
        return ns, pid

    def stop(self) -> None:
        for p in reversed(self.stoppers):
            p.stop()


def tps_lines(path: str, pattern: re.Pattern[str]) -> list[tuple[float, float]]:
    """(wall time, TPS) of each report line; the tools print, every ``-ri`` ms, the mean over
    the last 10 one-second snapshots, so a line at time T covers [T - 10 s, T]."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            m, t = pattern.search(line), TIME_RE.search(line)
            if m and t:
                when = datetime.datetime.strptime(t.group(1), "%Y-%m-%d %H:%M:%S,%f")
                out.append((when.timestamp(), float(m.group(1))))
    return out


def run_tool(
    args: argparse.Namespace, work: str, tool: str, ns: str, seconds: float, pid: int,
    extra: list[str], warmup_s: float,
) -> list[tuple[float, float]]:  # fmt: skip
    """Run a benchmark tool for ``seconds``, sampling the broker's CPU; returns, per report
    line whose 10-s window starts at least ``warmup_s`` after the tool started, (TPS, broker
    CPU us per message over that window)."""
    main = f"org.apache.rocketmq.example.benchmark.{tool}"
    tool_proc = JavaProc(
        args.rocketmq_home, args.cp, work, f"tool-{tool}", "rmq.client.logback.xml"
    )
    started = time.time()
    tool_proc.start(main, ["-n", ns, "-t", TOPIC, "-ri", "1000", *extra])
    samples: list[tuple[float, float, float, float, float]] = []
    probes: list[subprocess.Popen[bytes]] = []
    while time.time() < started + seconds:
        now = time.time()
        if args.probe and not probes and now >= started + warmup_s and tool == "Producer":
            probes = [perf_stat(p, 10.0, work, name) for p, name in
                      ((pid, "broker"), (tool_proc.pid, "client"))]  # fmt: skip
            probes.append(perf_timeline(pid, 3.0, work))
        samples.append((now, cpu_seconds(pid), cpu_seconds(tool_proc.pid), *machine_cpu()))
        time.sleep(0.25)
    tool_proc.stop()
    for p in probes:
        p.wait()
    times = [t[0] for t in samples]

    def at(t: float) -> tuple[float, float, float, float, float]:
        return samples[min(bisect.bisect_left(times, t), len(samples) - 1)]

    out = []
    pattern = TPS_RE if tool == "Producer" else CONSUME_TPS_RE
    for when, tps in tps_lines(tool_proc.out, pattern):
        if when - 10 >= started + warmup_s and tps > 0:
            a, b = at(when - 10), at(when)
            out.append((tps, (b[1] - a[1]) * 1e6 / (tps * 10)))
            if args.probe:
                machine_busy = 1 - (b[4] - a[4]) / max(b[3] - a[3], 1e-9)
                probe.append({"client_us": (b[2] - a[2]) * 1e6 / (tps * 10),
                              "machine_busy": machine_busy})  # fmt: skip
    if args.probe and tool == "Producer":
        with open(tool_proc.out, errors="replace") as f:
            rts = [float(m.group(1)) for m in map(AVG_RT_RE.search, f) if m]
        probe.append({"avg_rt_ms": rts[len(rts) // 2 :]})
        for name in ("broker", "client"):
            probe.append({name: read_perf_stat(os.path.join(work, f"perf-{name}.txt"))})
        probe.append({"timeline": read_timeline(os.path.join(work, "perf-timeline.data"))})
    return out


_READS = ("read", "recvfrom", "recvmsg")
_WRITES = ("write", "sendto", "sendmsg", "writev")


def perf_timeline(pid: int, seconds: float, work: str) -> subprocess.Popen[bytes]:
    """The broker's socket reads and writes, each with its time, for ``seconds``."""
    events = ",".join(f"syscalls:sys_enter_{n}" for n in (*_READS, *_WRITES))
    return subprocess.Popen(
        ["perf", "record", "-q", "-e", events, "-p", str(pid),
         "-o", os.path.join(work, "perf-timeline.data"), "--", "sleep", str(seconds)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def read_timeline(path: str) -> dict[str, float]:
    """Per write of the broker's (any thread): the time since the first read after the write
    before it (the oldest request it could answer arrived then), and since the last read before
    it; medians and 90th percentiles in us, and writes per second."""
    try:
        text = subprocess.run(
            ["perf", "script", "-i", path, "-F", "time,event"],
            capture_output=True, text=True, timeout=120,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return {}
    first_read: float | None = None
    last_read: float | None = None
    since_first: list[float] = []
    since_last: list[float] = []
    times: list[float] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        t, name = float(parts[0].rstrip(":")), parts[1].rsplit("sys_enter_", 1)[-1].rstrip(":")
        times.append(t)
        if name in _READS:
            last_read = t
            first_read = t if first_read is None else first_read
        elif name in _WRITES and first_read is not None and last_read is not None:
            since_first.append((t - first_read) * 1e6)
            since_last.append((t - last_read) * 1e6)
            first_read = None
    if not since_first or len(times) < 2:
        return {}

    def q(vals: list[float], f: float) -> float:
        return round(sorted(vals)[int(f * (len(vals) - 1))], 1)

    return {
        "writes_per_s": round(len(since_first) / (times[-1] - times[0]), 1),
        "first_read_to_write_us_p50": q(since_first, 0.5),
        "first_read_to_write_us_p90": q(since_first, 0.9),
        "last_read_to_write_us_p50": q(since_last, 0.5),
        "last_read_to_write_us_p90": q(since_last, 0.9),
    }


probe: list[dict[str, Any]] = []  # --probe's figures of the round under way


def machine_cpu() -> tuple[float, float]:
    """(all, idle+iowait) jiffies of the whole machine so far (/proc/stat)."""
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    return float(sum(vals)), float(vals[3] + vals[4])


def perf_stat(pid: int, seconds: float, work: str, name: str) -> subprocess.Popen[bytes]:
    out = os.path.join(work, f"perf-{name}.txt")
    return subprocess.Popen(
        ["perf", "stat", "-x", ",", "-o", out, "-e", PROBE_EVENTS, "-p", str(pid),
         "--", "sleep", str(seconds)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def read_perf_stat(path: str) -> dict[str, int]:
    """Per event, its count over the probe's 10 s (events perf could not count are left out)."""
    counts: dict[str, int] = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.strip().split(",")
                if len(parts) > 2 and parts[0].isdigit():
                    counts[parts[2].removeprefix("syscalls:sys_enter_")] = int(parts[0])
    except OSError:
        pass
    return counts


def one_round(args: argparse.Namespace, kind: str, flush: str) -> dict[str, Any]:
    work = tempfile.mkdtemp(prefix=f"rr-java-sbs-{kind}-")
    side = Side(kind, args, work, flush)
    try:
        ns, pid = side.start()
        send = run_tool(
            args, work, "Producer", ns, args.seconds, pid,
            ["-w", str(args.threads), "-s", str(args.size)], args.warmup,
        )  # fmt: skip
        # the consumer drains a backlog: only its start-up is skipped
        probed = list(probe)
        probe.clear()
        consume = run_tool(args, work, "Consumer", ns, args.consume_seconds, pid, [], 3.0)
        probe.clear()
        extra = {"probe": summarize_probe(probed)} if args.probe else {}
        return {**extra,
            "side": kind, "flush": flush,
            # the mean of the non-overlapping 10-s windows after the warm-up
            "send_tps": round(statistics.mean(t for t, _ in send[::10])) if send else 0,
            "broker_cpu_us_per_send": round(statistics.median(c for _, c in send), 1)
            if send else None,
            # the backlog drains: the best 10-s window of the consumer
            "consume_tps": round(max(t for t, _ in consume)) if consume else 0,
            "consume_broker_cpu_us_per_msg": round(min(c for _, c in consume), 1)
            if consume else None,
        }  # fmt: skip
    finally:
        side.stop()
        if not args.keep:
            stop_all([], work)


def summarize_probe(probed: list[dict[str, Any]]) -> dict[str, Any]:
    """The --probe figures of a round: medians over its windows, syscalls per 10 s."""
    out: dict[str, Any] = {}
    for key in ("client_us", "machine_busy"):
        vals = [p[key] for p in probed if key in p]
        if vals:
            out[f"{key}_per_send" if key == "client_us" else key] = round(
                statistics.median(vals), 3
            )
    for p in probed:
        if p.get("avg_rt_ms"):
            out["avg_rt_ms"] = statistics.median(p["avg_rt_ms"])
        for name in ("broker", "client"):
            if name in p:
                out[f"{name}_syscalls_10s"] = p[name]
        if "timeline" in p:
            out["broker_timeline"] = p["timeline"]
    return out


def summary(rounds: list[dict[str, Any]], flush: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("send_tps", "broker_cpu_us_per_send", "consume_tps"):
        per: dict[str, float] = {}
        for kind in ("java", "rocketrio", "base"):
            vals = [
                r[key] for r in rounds if r["side"] == kind and r["flush"] == flush and r.get(key)
            ]
            if vals:
                per[kind] = statistics.median(vals)
                out[f"{kind}_{key}_median"] = round(per[kind], 1)
                out[f"{kind}_{key}_range"] = [min(vals), max(vals)]
        for other in ("java", "base"):
            if per.get(other) and "rocketrio" in per:
                ratio = round(per["rocketrio"] / per[other], 3)
                out[f"ratio_{key}_rocketrio_over_{other}"] = ratio
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rocketmq-home", default=os.environ.get("ROCKETMQ_HOME"))
    ap.add_argument("--cp-file", default="/tmp/rocketmq-5.2.0-home/cp2.txt")
    ap.add_argument("--rounds", type=int, default=2, help="rounds per side and flush mode")
    ap.add_argument("--seconds", type=float, default=40.0, help="producer run per round")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds not measured")
    ap.add_argument("--consume-seconds", type=float, default=30.0)
    ap.add_argument("--threads", type=int, default=64)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--flush", default="ASYNC_FLUSH,SYNC_FLUSH")
    ap.add_argument("--keep", action="store_true", help="keep the work directories")
    ap.add_argument(
        "--sides", default="java,rocketrio",
        help="which brokers alternate: java, rocketrio (this checkout), base (--base-tree)",
    )  # fmt: skip
    ap.add_argument("--base-tree", help="another rocketrio checkout, e.g. /work/base")
    ap.add_argument(
        "--probe", action="store_true",
        help="also the client's CPU per send, the machine's busy share, the Producer's Average"
        " RT and 10 s of syscall counts (perf) on the broker and the client",
    )  # fmt: skip
    args = ap.parse_args()
    home = args.rocketmq_home
    if not home or not os.path.isdir(os.path.join(home or "", "conf")):
        print(f"skipped: no Apache RocketMQ 5.2.0 distribution at {home!r} "
              "(pass --rocketmq-home or set ROCKETMQ_HOME)", file=sys.stderr)  # fmt: skip
        print(json.dumps({"bench": "java_side_by_side", "skipped": "no ROCKETMQ_HOME"}))
        return
    args.cp = java_classpath(home, args.cp_file)
    rounds: list[dict[str, Any]] = []
    flushes = args.flush.split(",")
    sides = tuple(args.sides.split(","))
    if "base" in sides and not args.base_tree:
        sys.exit("--sides with base needs --base-tree (a checkout with its own .venv)")
    for flush in flushes:
        for i in range(args.rounds):
            order = sides if i % 2 == 0 else sides[::-1]
            for kind in order:
                try:
                    r = {"round": i, **one_round(args, kind, flush)}
                except RuntimeError as e:  # a broker that never came up: reported, not fatal
                    r = {"round": i, "side": kind, "flush": flush, "error": str(e)}
                print(json.dumps(r), file=sys.stderr, flush=True)
                rounds.append(r)
    result = {
        "bench": "java_side_by_side", "threads": args.threads, "size": args.size,
        "seconds": args.seconds, "warmup": args.warmup, "rounds": rounds,
        **{flush: summary(rounds, flush) for flush in flushes},
    }  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
