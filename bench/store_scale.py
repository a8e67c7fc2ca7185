"""One broker's store at scale (issue 14): memory, restarts, key queries, produce, retention.

A NameServer and one broker run as processes of the launcher (``python -m rocketrio.cli.main``,
what the ``rocketrio`` script runs), ASYNC_FLUSH, in a temporary directory under /tmp that is
removed at the end. The store is filled with messages of ``--body`` bytes, each with a unique
KEYS value (``k000000042``), through SEND_BATCH_MESSAGE (``--batch`` messages per request,
``--producers`` producers with ``--inflight`` requests each, in this process). The fill is not
measured; at each of ``--sizes`` stored messages the script measures, in this order:

- rss_after_fill_mb            the broker's VmRSS right after the fill
- query_first_ms               one queryMsgByKey of an existing key (the client function the
                               ``rocketrio admin queryMsgByKey`` command calls, route lookup
                               included), with a long timeout: the store's key index catches up
                               with the puts on the first lookup after them
                               (``query_first_over_cli_timeout``: the command would have failed;
                               ``query_route_lost_s``: the broker stalled past its heartbeat
                               timeout, the NameServer dropped its route, back after so long;
                               ``namesrv_broker_expired``: the NameServer's expiry events)
- query_p50_ms / query_p99_ms  ``--query-keys`` random existing keys, one at a time, with the
                               command's own 3 s timeout (a timeout counts as 3 s and in
                               ``query_errors``); ``query_missing_max_ms`` over ``--missing-keys``
                               keys never sent; ``query_wrong`` answers without exactly the key
- rss_mb, rss_anon_mb          VmRSS and RssAnon (/proc/<pid>/status) once the index is loaded
                               (rss_file_mb, vm_hwm_mb too)
- burst_msgs_per_s             ``--burst`` more messages sent the way the fill sends them, timed;
                               the median of ``--burst-repeat`` bursts, and the broker's CPU
                               time per message (``burst_broker_cpu_us_per_msg``, less
                               sensitive to other load on the machine than the rate)
- clean_restart, kill9_restart SIGTERM (graceful) and SIGKILL of the broker, then a new process
                               on the same store, timed until it answers a send and a pull
                               (``ready_s``) with what its log says (bench/broker_restart.py);
                               then ``query_first_after_restart_ms``, ``rss_after_restart_mb``

Same-run references (absolute figures differ about 2x between machines): before the fill, the
empty store's clean and kill -9 restarts, the idle broker's memory after them, and the burst
rate; the query reference is the first size's p99. Each size carries its ratios to them
(``*_vs_empty``, ``query_p99_vs_first``); ``largest_meets`` checks the largest size against
the issue's absolute targets.

The server processes cache their bytecode (PYTHONPYCACHEPREFIX inside the work directory), as
an installed package does, even where the environment sets PYTHONDONTWRITEBYTECODE (recorded
under ``machine``): otherwise each restart would recompile the project, about 0.8 s.

Retention, after the last size: the broker is restarted with fileReservedTime=
``--reserved-hours``, deleteWhen covering every hour, cleanResourceInterval=1000 and
destroyMapedFileIntervalForcibly=1000, less each key its config loader refuses (named in
``refused_keys``). CommitLog bytes (allocated, as ``du``) before and after waiting up to
``--retention-wait-s`` (until they fell and stayed put for 3 s; no wait when fileReservedTime
itself was refused). ``deleted`` says whether anything was removed; nothing is faked.

Prints ONE JSON line: machine, command, settings, the references (``empty``), one record per
size, the retention record, the targets, ``largest_meets``, the seconds per phase, and the
work directory (already removed). Progress goes to stderr.

    .venv/bin/python bench/store_scale.py                        # 1M, 5M, 10M x 1 KiB (~11 GB)
    .venv/bin/python bench/store_scale.py --sizes 1000000,2000000
    .venv/bin/python bench/store_scale.py --quick                # 50k, 100k; 16 MiB segments
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import random
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import trio
from benchlib import Proc, cpu_seconds, free_port, pct, stop_all
from broker_restart import READY_TIMEOUT_S, Broker, NotReady, restart, wait_ready

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.config import ProducerConfig
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.protocol.config import ConfigError, build_config

TOPIC = "StoreScale"
QUEUES = 4
KEY_FORMAT = "k{:09d}"
MISSING_KEY_FORMAT = "missing-{:04d}"
CLI_QUERY_TIMEOUT_S = 3.0  # MQAdmin's default, which `rocketrio admin` uses
FIRST_QUERY_TIMEOUT_S = 600.0
ROUTE_WAIT_S = 120.0
TARGETS = {"rss_mb_max": 150, "restart_s_max": 3.0, "query_p99_ms_max": 50, "burst_ratio_min": 0.9}
RETENTION_EVENT_WORDS = ("delet", "clean", "expir", "destroy", "retention", "reserved")
_STARTED = time.monotonic()


def progress(what: str) -> None:
    """One line on stderr (stdout carries only the JSON line)."""
    print(f"[store_scale {time.monotonic() - _STARTED:7.1f} s] {what}", file=sys.stderr, flush=True)


@dataclasses.dataclass
class Settings:
    sizes: list[int]
    body_bytes: int
    burst: int
    burst_repeat: int
    segment_mb: int
    producers: int
    inflight: int
    batch: int
    query_keys: int
    missing_keys: int
    reserved_hours: float
    retention_wait_s: float
    seed: int


@dataclasses.dataclass
class QueryFigures:
    first_ms: float
    first_over_cli_timeout: bool
    route_lost_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    missing_max_ms: float
    errors: int
    wrong: int


# --- disk use ------------------------------------------------------------------------------


def commitlog_bytes(store: str) -> tuple[int, int]:
    """(allocated bytes, apparent bytes) of the CommitLog segments (closed ones are sparse)."""
    allocated = apparent = 0
    path = os.path.join(store, "commitlog")
    for entry in os.scandir(path):
        if entry.is_file() and entry.name.isdigit():
            st = entry.stat()
            allocated += st.st_blocks * 512
            apparent += st.st_size
    return allocated, apparent


def tree_bytes(path: str) -> int:
    """Allocated bytes under ``path`` (as ``du``)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def namesrv_events(work: str, event: str) -> int:
    """How many ``event`` records the NameServer's JSON log holds so far."""
    with open(os.path.join(work, "ns.jsonl"), "rb") as f:
        return sum(1 for line in f if f'"event":"{event}"'.encode() in line)


# --- client loads -----------------------------------------------------------------------------


async def create_topic(ns: str, broker_addr: str, timeout_s: float = 120) -> None:
    """Create the topic on the broker, then wait until the NameServer routes it."""
    async with MQAdmin(ns) as admin:
        with trio.fail_after(timeout_s):
            while True:
                try:
                    await admin.update_topic(
                        TOPIC, broker_addr=broker_addr, read_queues=QUEUES, write_queues=QUEUES
                    )
                    break
                except (RemotingError, MQClientError):
                    await trio.sleep(0.1)
            while True:
                try:
                    await admin.topic_route(TOPIC)
                    return
                except (RemotingError, MQClientError):
                    await trio.sleep(0.1)


async def produce(ns: str, first: int, count: int, body: bytes, s: Settings) -> float:
    """Send keys ``first .. first+count-1`` as batches from ``s.producers`` producers with
    ``s.inflight`` requests each; msg/s over the whole send (each producer's route lookup
    included: one request)."""
    next_key = first
    end = first + count

    async def worker(p: Producer) -> None:
        nonlocal next_key
        while next_key < end:
            lo, next_key = next_key, min(end, next_key + s.batch)
            msgs = [Message(TOPIC, body, keys=KEY_FORMAT.format(i)) for i in range(lo, next_key)]
            await p.send_batch(msgs)

    producers = [
        Producer(f"scale_{i}", ns, config=ProducerConfig(producerGroup=f"scale_{i}"))
        for i in range(s.producers)
    ]
    async with contextlib.AsyncExitStack() as stack:
        for p in producers:
            await stack.enter_async_context(p)
        t0 = time.perf_counter()
        async with trio.open_nursery() as n:
            for p in producers:
                for _ in range(s.inflight):
                    n.start_soon(worker, p)
        return count / (time.perf_counter() - t0)


async def timed_queries(
    ns: str, first_key: str, present: list[str], missing: list[str]
) -> QueryFigures:
    """queryMsgByKey latencies through MQAdmin.query_msg_by_key (see the module docstring)."""
    async with MQAdmin(ns, timeout=FIRST_QUERY_TIMEOUT_S) as admin:
        t0 = time.perf_counter()
        found = await admin.query_msg_by_key(TOPIC, first_key)
        first_ms = (time.perf_counter() - t0) * 1000
        route_lost_s = await wait_for_route(admin)
    wrong = 0 if [m.keys for m in found] == [[first_key]] else 1
    errors = 0
    lat: dict[str, list[float]] = {"present": [], "missing": []}
    async with MQAdmin(ns, timeout=CLI_QUERY_TIMEOUT_S) as admin:
        for kind, keys in (("present", present), ("missing", missing)):
            for key in keys:
                t0 = time.perf_counter()
                try:
                    found = await admin.query_msg_by_key(TOPIC, key)
                    took = time.perf_counter() - t0
                    ok = [m.keys for m in found] == ([[key]] if kind == "present" else [])
                    wrong += 0 if ok else 1
                except (RemotingError, MQClientError):
                    took, errors = time.perf_counter() - t0, errors + 1
                lat[kind].append(took * 1000)
    return QueryFigures(
        first_ms=round(first_ms, 1),
        first_over_cli_timeout=first_ms > CLI_QUERY_TIMEOUT_S * 1000,
        route_lost_s=round(route_lost_s, 1),
        p50_ms=round(pct(lat["present"], 0.5), 2),
        p99_ms=round(pct(lat["present"], 0.99), 2),
        max_ms=round(max(lat["present"]), 2),
        missing_max_ms=round(max(lat["missing"], default=-1), 2),
        errors=errors,
        wrong=wrong,
    )


async def wait_for_route(admin: MQAdmin, timeout_s: float = ROUTE_WAIT_S) -> float:
    """0 when the NameServer routes the topic; else seconds until it does again (a broker
    silent past its heartbeat timeout, 10 s, is dropped until it registers again)."""
    t0 = time.monotonic()
    with trio.fail_after(timeout_s):
        while True:
            try:
                await admin.topic_route(TOPIC)
                return 0.0 if time.monotonic() - t0 < 0.5 else time.monotonic() - t0
            except (RemotingError, MQClientError):
                await trio.sleep(0.1)


async def first_query_ms(ns: str, key: str) -> float:
    async with MQAdmin(ns, timeout=FIRST_QUERY_TIMEOUT_S) as admin:
        t0 = time.perf_counter()
        found = await admin.query_msg_by_key(TOPIC, key)
        took = (time.perf_counter() - t0) * 1000
    assert [m.keys for m in found] == [[key]], f"query of {key} after restart found {found}"
    return round(took, 1)


@dataclasses.dataclass
class Bursts:
    """``--burst-repeat`` timed bursts: msg/s and the broker's CPU time per message of each."""

    rates: list[float]
    broker_cpu_us: list[float]

    def figures(self) -> dict[str, Any]:
        return {
            "burst_msgs_per_s": round(statistics.median(self.rates)),
            "bursts_msgs_per_s": [round(r) for r in self.rates],
            "burst_broker_cpu_us_per_msg": round(statistics.median(self.broker_cpu_us), 2),
        }


def bursts(broker: Broker, ns: str, first: int, body: bytes, s: Settings) -> Bursts:
    """Send ``s.burst_repeat`` bursts of ``s.burst`` messages from key ``first`` on."""
    out = Bursts([], [])
    for i in range(s.burst_repeat):
        cpu0 = cpu_seconds(broker.pid)
        out.rates.append(trio.run(produce, ns, first + i * s.burst, s.burst, body, s))
        out.broker_cpu_us.append((cpu_seconds(broker.pid) - cpu0) / s.burst * 1e6)
    return out


# --- one size ---------------------------------------------------------------------------------


def measure_size(
    broker: Broker, ns: str, stored: int, size: int, body: bytes, s: Settings, rng: random.Random
) -> tuple[dict[str, Any], int]:
    """Fill to ``size`` messages, then every figure of one size; returns (record, stored)."""
    t0 = time.monotonic()
    fill_rate = trio.run(produce, ns, stored, size - stored, body, s) if size > stored else 0.0
    fill_s = time.monotonic() - t0
    stored = max(stored, size)
    progress(f"filled to {stored} messages in {fill_s:.1f} s ({fill_rate:.0f} msg/s)")
    after_fill = broker.memory()
    present = [KEY_FORMAT.format(rng.randrange(stored)) for _ in range(s.query_keys)]
    missing = [MISSING_KEY_FORMAT.format(i) for i in range(s.missing_keys)]
    first_key = KEY_FORMAT.format(rng.randrange(stored))
    expired = namesrv_events(broker.work, "broker_expired")
    queries = trio.run(timed_queries, ns, first_key, present, missing)
    expired = namesrv_events(broker.work, "broker_expired") - expired
    loaded = broker.memory()
    allocated, _ = commitlog_bytes(broker.store)
    progress(f"queries: first {queries.first_ms} ms, p99 {queries.p99_ms} ms; {loaded}")
    burst = bursts(broker, ns, stored, body, s)
    stored += s.burst * s.burst_repeat
    clean = restart(broker, ns, TOPIC, "clean")
    kill9 = restart(broker, ns, TOPIC, "kill9")
    progress(f"bursts {[round(b) for b in burst.rates]} msg/s; restarts: clean {clean.ready_s} s, "
             f"kill -9 {kill9.ready_s} s")  # fmt: skip
    after_restart_query = trio.run(first_query_ms, ns, KEY_FORMAT.format(rng.randrange(size)))
    record: dict[str, Any] = {
        "messages": size,
        "commitlog_bytes": allocated,
        "fill_msgs_per_s": round(fill_rate),
        "fill_s": round(fill_s, 1),
        "rss_after_fill_mb": after_fill.rss_mb,
        **dataclasses.asdict(loaded),
        **{f"query_{k}": v for k, v in dataclasses.asdict(queries).items()},
        "namesrv_broker_expired": expired,
        **burst.figures(),
        "messages_at_restart": stored,
        "clean_restart": dataclasses.asdict(clean),
        "kill9_restart": dataclasses.asdict(kill9),
        "query_first_after_restart_ms": after_restart_query,
        "rss_after_restart_mb": broker.memory().rss_mb,
    }
    return record, stored


def measure_empty(broker: Broker, ns: str, body: bytes, s: Settings) -> tuple[dict[str, Any], int]:
    """The same-run references on the empty store: the restarts, the idle broker's memory
    after them (the first process compiled the bytecode cache), then the bursts."""
    clean = restart(broker, ns, TOPIC, "clean")
    kill9 = restart(broker, ns, TOPIC, "kill9")
    memory = broker.memory()
    burst = bursts(broker, ns, 0, body, s)
    record = {
        **dataclasses.asdict(memory),
        "rss_after_bursts_mb": broker.memory().rss_mb,
        "clean_restart": dataclasses.asdict(clean),
        "kill9_restart": dataclasses.asdict(kill9),
        **burst.figures(),
    }
    return record, s.burst * s.burst_repeat


def add_ratios(record: dict[str, Any], empty: dict[str, Any], first_p99_ms: float) -> None:
    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 3) if b > 0 else None

    record["rss_vs_empty"] = ratio(record["rss_mb"], empty["rss_mb"])
    record["rss_anon_vs_empty"] = ratio(record["rss_anon_mb"], empty["rss_anon_mb"])
    record["burst_vs_empty"] = ratio(record["burst_msgs_per_s"], empty["burst_msgs_per_s"])
    record["burst_broker_cpu_vs_empty"] = ratio(
        record["burst_broker_cpu_us_per_msg"], empty["burst_broker_cpu_us_per_msg"]
    )
    for how in ("clean_restart", "kill9_restart"):
        record[f"{how}_vs_empty"] = ratio(record[how]["ready_s"], empty[how]["ready_s"])
    record["query_p99_vs_first"] = ratio(record["query_p99_ms"], first_p99_ms)


# --- retention --------------------------------------------------------------------------------

REFUSED_KEY = re.compile(r"(?:unknown key|bad value for) (\w+)")


def config_refusals(extra: dict[str, str]) -> dict[str, str]:
    """{key: message} for each key the broker's config loader refuses on its own (unknown or
    a bad value): the loader `rocketrio broker` runs, asked here to save a process start per
    refused key."""
    refused: dict[str, str] = {}
    for key, value in extra.items():
        try:
            build_config(BrokerConfig, {key: value}, "retention config")
        except ConfigError as e:
            refused[key] = str(e)
    return refused


def start_with_refusals(broker: Broker, ns: str, extra: dict[str, str]) -> dict[str, str]:
    """Start the broker with the ``extra`` keys its config loader accepts, dropping any other
    key the process refuses at start-up; returns {refused key: message}."""
    refused = config_refusals(extra)
    keys = {k: v for k, v in extra.items() if k not in refused}
    while True:
        t0 = broker.start(keys)
        while broker.exited() is None and time.monotonic() - t0 < READY_TIMEOUT_S:
            try:
                trio.run(wait_ready, ns, broker.addr, TOPIC, t0, 0.5)
                return refused
            except NotReady:
                continue
        line = broker.console_tail()
        m = REFUSED_KEY.search(line)
        if broker.exited() is None or m is None or m.group(1) not in keys:
            raise RuntimeError(f"the broker did not start for retention: {line}")
        refused[m.group(1)] = line
        del keys[m.group(1)]


def measure_retention(broker: Broker, ns: str, s: Settings) -> dict[str, Any]:
    """Restart with a tiny fileReservedTime and wait for the CommitLog to shrink."""
    broker.stop()
    before, before_apparent = commitlog_bytes(broker.store)
    store_before = tree_bytes(broker.store)
    extra = {
        "fileReservedTime": f"{s.reserved_hours:g}",
        "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
        "cleanResourceInterval": "1000",
        "destroyMapedFileIntervalForcibly": "1000",
    }
    refused = start_with_refusals(broker, ns, extra)
    progress(f"retention: restarted without {sorted(refused)}; waiting")
    # without fileReservedTime nothing can expire within the wait (the default keeps 72 h)
    wait_s = 0.0 if "fileReservedTime" in refused else s.retention_wait_s
    waited, after = wait_for_shrink(broker.store, before, wait_s)
    events = [r["event"] for r in broker.events()]
    retention_events = sorted({e for e in events if any(w in e for w in RETENTION_EVENT_WORDS)})
    after_apparent = commitlog_bytes(broker.store)[1]
    try:
        trio.run(wait_ready, ns, broker.addr, TOPIC, time.monotonic(), 10.0)
        answers = True
    except NotReady:
        answers = False
    return {
        "keys": extra,
        "refused_keys": refused,
        "commitlog_bytes_before": before,
        "commitlog_bytes_after": after,
        "commitlog_apparent_bytes_before": before_apparent,
        "commitlog_apparent_bytes_after": after_apparent,
        "store_bytes_before": store_before,
        "store_bytes_after": tree_bytes(broker.store),
        "deleted": after < before,
        "waited_s": round(waited, 1),
        "log_events": retention_events,
        "answers_after": answers,
        "note": "" if after < before else "nothing deleted: figures as measured, no retention",
    }


def wait_for_shrink(store: str, before: int, wait_s: float) -> tuple[float, int]:
    """Poll the CommitLog size every 0.5 s for up to ``wait_s``; stop once it has fallen below
    ``before`` and not changed for 3 s. Returns (seconds waited, bytes)."""
    t0 = time.monotonic()
    last, stable_since = before, t0
    while time.monotonic() - t0 < wait_s:
        time.sleep(0.5)
        now, _ = commitlog_bytes(store)
        if now != last:
            last, stable_since = now, time.monotonic()
        elif now < before and time.monotonic() - stable_since >= 3:
            break
    return time.monotonic() - t0, last


# --- main -------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
        cwd=os.path.dirname(os.path.abspath(__file__)), check=False,
    ).stdout.strip()  # fmt: skip
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model(),
        "mem_total_gb": round(mem_kb / 1024 / 1024, 1),
        "python": platform.python_version(),
        "env_PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "platform": platform.platform(),
        "git_commit": commit,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def cpu_model() -> str:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor()


@contextlib.contextmanager
def cluster(s: Settings, work: str) -> Iterator[tuple[str, Broker]]:
    """A NameServer and the broker in ``work``, which is removed afterwards."""
    # servers cache their bytecode as an installed package does, even where the environment
    # turns that off (PYTHONDONTWRITEBYTECODE): otherwise every restart recompiles the project
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = os.path.join(work, "pycache")
    procs: list[Proc] = []
    broker: Broker | None = None
    try:
        taken: set[int] = set()
        ns_port, broker_port = free_port(taken), free_port(taken)
        ns = f"127.0.0.1:{ns_port}"
        procs.append(Proc("namesrv", "ns", {"listenPort": str(ns_port), "logDir": work}, work))
        procs[-1].start()
        broker = Broker({
            "namesrvAddr": ns, "logDir": work, "brokerIP1": "127.0.0.1",
            "brokerName": "broker-scale", "listenPort": str(broker_port),
            "storePathRootDir": os.path.join(work, "store"), "flushDiskType": "ASYNC_FLUSH",
            "mappedFileSizeCommitLog": str(s.segment_mb * 1024 * 1024),
        }, work, "scale")  # fmt: skip
        broker.start()
        trio.run(create_topic, ns, broker.addr)
        yield ns, broker
    finally:
        if broker is not None and broker.proc is not None:
            procs.append(broker.proc)
        stop_all(procs, work)


def run(s: Settings) -> dict[str, Any]:
    body = random.Random(s.seed).randbytes(s.body_bytes)
    rng = random.Random(s.seed)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-store-scale-", dir="/tmp")
    result: dict[str, Any] = {"bench": "store_scale", "work_dir": work}
    t0 = time.monotonic()
    with cluster(s, work) as (ns, broker):
        phases: dict[str, float] = {"start": time.monotonic() - t0}
        progress(f"NameServer {ns} and broker {broker.addr} up in {work}")
        empty, stored = measure_empty(broker, ns, body, s)
        progress(f"empty store: burst {empty['burst_msgs_per_s']} msg/s")
        phases["empty"] = time.monotonic() - t0 - sum(phases.values())
        result["empty"] = empty
        sizes: list[dict[str, Any]] = []
        for size in s.sizes:
            record, stored = measure_size(broker, ns, stored, size, body, s, rng)
            add_ratios(record, empty, sizes[0]["query_p99_ms"] if sizes else record["query_p99_ms"])
            sizes.append(record)
            phases[str(size)] = time.monotonic() - t0 - sum(phases.values())
        result["sizes"] = sizes
        result["retention"] = measure_retention(broker, ns, s)
        phases["retention"] = time.monotonic() - t0 - sum(phases.values())
    result["phases_s"] = {k: round(v, 1) for k, v in phases.items()}
    result["targets"] = TARGETS
    result["largest_meets"] = verdict(sizes[-1], empty)
    result["total_s"] = round(time.monotonic() - t0, 1)
    return result


def verdict(largest: dict[str, Any], empty: dict[str, Any]) -> dict[str, bool]:
    restart_s = max(largest["clean_restart"]["ready_s"], largest["kill9_restart"]["ready_s"])
    return {
        "rss_mb": largest["rss_mb"] <= TARGETS["rss_mb_max"],
        "restart_s": restart_s <= TARGETS["restart_s_max"],
        "query_p99_ms": largest["query_p99_ms"] <= TARGETS["query_p99_ms_max"],
        "burst_ratio": (largest["burst_vs_empty"] or 0) >= TARGETS["burst_ratio_min"],
    }


def parse_args(argv: list[str] | None = None) -> Settings:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument(
        "--sizes",
        default="1000000,5000000,10000000",
        help="stored messages at which to measure, ascending",
    )
    ap.add_argument("--body", type=int, default=1024, help="body bytes per message")
    ap.add_argument("--burst", type=int, default=50_000, help="messages per timed burst")
    ap.add_argument("--burst-repeat", type=int, default=3, help="bursts per point (median)")
    ap.add_argument("--segment-mb", type=int, default=1024, help="mappedFileSizeCommitLog")
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--inflight", type=int, default=2, help="batch requests per producer")
    ap.add_argument("--batch", type=int, default=256, help="messages per SEND_BATCH_MESSAGE")
    ap.add_argument("--query-keys", type=int, default=200)
    ap.add_argument("--missing-keys", type=int, default=5)
    ap.add_argument("--reserved-hours", type=float, default=0.0003, help="fileReservedTime")
    ap.add_argument("--retention-wait-s", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: sizes 50000,100000, burst 10000, 16 MiB segments",
    )
    a = ap.parse_args(argv)  # fmt: skip
    if a.quick:
        a.sizes, a.burst, a.segment_mb, a.retention_wait_s = "50000,100000", 10_000, 16, 20.0
    sizes = [int(x) for x in a.sizes.split(",")]
    if sizes != sorted(sizes) or sizes[0] <= 0:
        ap.error("--sizes must be positive and ascending")
    return Settings(
        sizes=sizes, body_bytes=a.body, burst=a.burst, burst_repeat=max(1, a.burst_repeat),
        segment_mb=a.segment_mb, producers=a.producers, inflight=a.inflight, batch=a.batch,
        query_keys=a.query_keys, missing_keys=a.missing_keys, reserved_hours=a.reserved_hours,
        retention_wait_s=a.retention_wait_s, seed=a.seed,
    )  # fmt: skip


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through `cluster`, which stops and removes all


def main() -> None:
    s = parse_args()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    configure_logging("bench", "bench", None, console=None)
    result: dict[str, Any] = {
        "command": shlex.join([os.path.relpath(sys.executable), *sys.argv]),
        "machine": machine(),
        "settings": dataclasses.asdict(s),
    }
    result.update(run(s))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
