"""Replication cost: a replicated broker set measured against an unreplicated broker, same run.

Processes on loopback, all started here: a NameServer with an embedded controller; an
UNREPLICATED broker (no slave) per flush type; a REPLICATED broker set per flush type (controller
mode, a master and an in-sync slave, allAckInSyncStateSet: a send is acknowledged once the slave
holds it too). Each topic lives on exactly one of them. For each flush type (ASYNC_FLUSH,
SYNC_FLUSH) it measures, alternating unreplicated and replicated runs:

- single sends, 256 in flight (send_async), 1 KiB bodies;
- batched sends, 64 x 1 KiB per SEND_BATCH_MESSAGE, 8 in flight;
and reports replicated / unreplicated as ``*_ratio`` (targets: >= 0.7 single, >= 0.6 batched),
with the CPU time each process spent per message (``cpu_us_per_msg``: client, broker / master,
slave), which says where the time goes whatever else the machine runs, and each run's
``cpu_share``: per process [% of the run on a CPU, % runnable but waiting for one] (schedstat;
the rest it slept, waiting for a peer) and the machine's busy CPUs in % of one, which say
whether a run was bound by a process at 100%, by CPUs taken by others, or by waiting
(i28-repl8); plus, against the
replicated ASYNC_FLUSH set: send latency p50/p99 at a fixed rate (default 5,000 msg/s; target
p99 <= 10 ms) and the slave's replication lag (bytes of CommitLog the slave is behind the master,
sampled every 20 ms during an extra, untimed single-send run: an upper bound, the slave is asked
first; p50/p99/max, and in ms of traffic at the measured rate). The sampler stays out of the
timed runs: a pair of status requests cost the client, the master and the slave ~0.5 ms of CPU
each (i28-repl6), 2.5-5 us a single send of each process that only the replicated side paid.

    .venv/bin/python bench/replicated.py [--quick] [--rate 5000] [--repeat 1]

``--repeat N`` measures every pair N times, the unreplicated side first in odd repeats and the
replicated side first in even ones, and reports the run at the median batched ratio plus, for
each ratio, every repeat's value and their median (``ratios``). Prints ONE JSON line.

The bench client (this process) runs with the broker's garbage-collector policy
(actors/kernel/gc_policy.py: the boot heap frozen, young collections after 10,000 new objects;
``--client-gc default`` keeps CPython's). Measured (2026-11-29, 20,000 single sends): with
CPython's settings a third of the client's CPU per single send was its collector (22-29 us),
four or five full collections of ~90 ms each walking the boot heap and the run's futures, inside
single-send phases of 1-2 s: the largest source of the single ratios' spread. The client is
the load generator here, not what is measured; the brokers keep their own policy either way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from benchlib import (
    BODY,
    Proc,
    batched_sends,
    cpu_seconds,
    free_port,
    latency_at_rate,
    machine_busy,
    own_cpu_seconds,
    pct,
    sched_seconds,
    single_sends,
    stop_all,
    wait_writable,
)

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.kernel import gc_policy
from rocketrio.actors.observe.logs import configure_logging


async def sample_lag(ns: str, master: str, slave: str, stop: trio.Event, out: list[int]) -> None:
    async with MQAdmin(ns) as admin:
        while not stop.is_set():
            # The slave first: the master can only have grown by the time it answers, so the
            # sample is an upper bound of the lag (never negative).
            s = await admin.broker_status(slave)
            m = await admin.broker_status(master)
            out.append(int(m["commitLogMaxOffset"]) - int(s["commitLogMaxOffset"]))
            await trio.sleep(0.02)


async def set_addrs(ns: str, name: str) -> tuple[str, str]:
    """(master, slave) of a replicated set, once both are registered (up to 300 s: on a host
    at load average 25 the election and both registrations took over 60 s)."""
    async with MQAdmin(ns) as admin:
        with trio.fail_after(300):
            while True:
                try:
                    bd = (await admin.cluster_info()).brokerAddrTable.get(name)
                except Exception:
                    bd = None
                if bd is not None and 0 in bd.brokerAddrs and len(bd.brokerAddrs) == 2:
                    slave = next(a for i, a in bd.brokerAddrs.items() if i != 0)
                    return bd.brokerAddrs[0], slave
                await trio.sleep(0.2)


async def make_topic(ns: str, topic: str, addr: str) -> None:
    error: Exception | None = None
    async with MQAdmin(ns) as admin:
        for _ in range(300):
            try:
                await admin.update_topic(topic, broker_addr=addr, read_queues=4, write_queues=4)
                return
            except Exception as e:
                error = e
                await trio.sleep(0.1)
    raise RuntimeError(f"cannot create {topic} on {addr}: {error}")


Measured = tuple[float, list[float], dict[str, Any]]


async def measured(
    load: Callable[[], Awaitable[float]], total: int, client: bool, *pids: int
) -> Measured:
    """Run ``load``; (its msg/s, CPU us per message of [this process,] each pid, the shares
    of the run's wall time each of them spent on a CPU and waiting for one (percent), and
    the machine's busy CPUs in percent of one: 200 is both CPUs of a 2-CPU host)."""
    procs = ([os.getpid()] if client else []) + list(pids)
    before = ([own_cpu_seconds()] if client else []) + [cpu_seconds(p) for p in pids]
    sched0, busy0, t0 = [sched_seconds(p) for p in procs], machine_busy(), time.perf_counter()
    rate = await load()
    wall = time.perf_counter() - t0
    sched1, busy1 = [sched_seconds(p) for p in procs], machine_busy()
    after = ([own_cpu_seconds()] if client else []) + [cpu_seconds(p) for p in pids]
    spent = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(sched0, sched1, strict=True)]
    share = {
        "on_cpu_pct": [round(run / wall * 100) for run, _ in spent],
        "runq_wait_pct": [round(wait / wall * 100) for _, wait in spent],
        "machine_busy_pct": round(
            (busy1[0] - busy0[0]) / max(1, busy1[1] - busy0[1]) * 100 * (os.cpu_count() or 1)
        ),
    }
    cpu = [round((a - b) / total * 1e6, 1) for a, b in zip(after, before, strict=True)]
    return rate, cpu, share


async def in_order(
    first_a: bool, a: Callable[[], Awaitable[Measured]], b: Callable[[], Awaitable[Measured]]
) -> tuple[Measured, Measured]:
    """Run ``a`` and ``b`` one after the other, ``a`` first when ``first_a``; (a's, b's)."""
    if first_a:
        ra = await a()
        return ra, await b()
    rb = await b()
    return await a(), rb


def named(values: list[float], *names: str) -> dict[str, float]:
    return dict(zip(names, values, strict=True))


def shares(share: dict[str, Any], *names: str) -> dict[str, Any]:
    """Per process: [% of the run on a CPU, % runnable and waiting for one]; the rest of the
    run it slept (waiting for the network or a peer). Plus the machine's busy CPUs."""
    per = zip(share["on_cpu_pct"], share["runq_wait_pct"], strict=True)
    out: dict[str, Any] = {n: list(x) for n, x in zip(names, per, strict=True)}
    out["machine"] = share["machine_busy_pct"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--client-gc", choices=("tuned", "default"), default="tuned")
    args = ap.parse_args()
    scale = 0.2 if args.quick else 1.0
    n_single, n_batch = int(50_000 * scale), int(200_000 * scale)
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-replbench-")
    taken: set[int] = set()
    ns_port, ctrl_port = free_port(taken), free_port(taken)
    ns = f"127.0.0.1:{ns_port}"
    procs: list[Proc] = []
    result: dict[str, Any] = {
        "bench": "replicated", "body_bytes": len(BODY), "client_gc": args.client_gc,
    }  # fmt: skip
    try:
        procs.append(Proc("namesrv", "namesrv", {
            "listenPort": str(ns_port), "logDir": work, "enableControllerInNamesrv": "true",
            "controllerDLegerGroup": "g", "controllerDLegerPeers": f"n0-127.0.0.1:{ctrl_port}",
            "controllerDLegerSelfId": "n0", "controllerStorePath": os.path.join(work, "ctrl"),
        }, work).start())  # fmt: skip
        time.sleep(0.5)
        lone: dict[str, tuple[str, Proc]] = {}
        repl: dict[str, dict[str, Proc]] = {}
        for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
            tag = flush.split("_")[0].lower()
            port = free_port(taken)
            p = Proc("broker", f"lone-{tag}", {
                "brokerClusterName": f"LoneCluster{tag}", "brokerName": f"lone-{tag}",
                "brokerIP1": "127.0.0.1", "listenPort": str(port), "namesrvAddr": ns,
                "storePathRootDir": os.path.join(work, f"lone-{tag}"), "logDir": work,
                "flushDiskType": flush, "autoCreateTopicEnable": "false",
            }, work).start()  # fmt: skip
            procs.append(p)
            lone[flush] = (f"127.0.0.1:{port}", p)
            repl[flush] = {}
            for i in range(2):
                port = free_port(taken)
                p = Proc("broker", f"repl-{tag}-{i}", {
                    "brokerClusterName": f"ReplCluster{tag}", "brokerName": f"repl-{tag}",
                    "brokerIP1": "127.0.0.1", "listenPort": str(port), "namesrvAddr": ns,
                    "storePathRootDir": os.path.join(work, f"repl-{tag}-{i}"), "logDir": work,
                    "flushDiskType": flush, "autoCreateTopicEnable": "false",
                    "enableControllerMode": "true", "controllerAddr": f"127.0.0.1:{ctrl_port}",
                    "allAckInSyncStateSet": "true",
                }, work).start()  # fmt: skip
                procs.append(p)
                repl[flush][f"127.0.0.1:{port}"] = p

        async def pair(flush: str, tag: str) -> dict[str, Any]:
            master, slave = await set_addrs(ns, f"repl-{tag}")
            mpid, spid = repl[flush][master].pid, repl[flush][slave].pid
            lone_addr, lone_proc = lone[flush]
            t_lone, t_repl = f"BenchLone{tag}", f"BenchRepl{tag}"
            await make_topic(ns, t_lone, lone_addr)
            await make_topic(ns, t_repl, master)
            await wait_writable(ns, t_lone)
            await wait_writable(ns, t_repl)
            await trio.sleep(4)  # the slave copied the topic and is in the SyncStateSet
            runs: list[dict[str, Any]] = []
            for i in range(args.repeat):
                lone_first = i % 2 == 0  # the side that goes first alternates between repeats
                (base_single, cpu_ls, sh_ls), (repl_single, cpu_rs, sh_rs) = await in_order(
                    lone_first,
                    lambda: measured(
                        lambda: single_sends(ns, t_lone, n_single), n_single, True, lone_proc.pid
                    ),
                    lambda: measured(
                        lambda: single_sends(ns, t_repl, n_single), n_single, True, mpid, spid
                    ),
                )
                (base_batch, cpu_lb, sh_lb), (repl_batch, cpu_rb, sh_rb) = await in_order(
                    lone_first,
                    lambda: measured(
                        lambda: batched_sends(ns, t_lone, n_batch), n_batch, True, lone_proc.pid
                    ),
                    lambda: measured(
                        lambda: batched_sends(ns, t_repl, n_batch), n_batch, True, mpid, spid
                    ),
                )
                # the lag in a run of its own: its status requests (a pair every 20 ms, ~0.5 ms of
                # CPU each for the client, the master and the slave) stay out of the timed runs
                lags: list[int] = []
                stop = trio.Event()
                async with trio.open_nursery() as n:
                    n.start_soon(sample_lag, ns, master, slave, stop, lags)
                    await single_sends(ns, t_repl, n_single)
                    stop.set()
                runs.append({
                    "unreplicated_single_msgs_per_s": round(base_single),
                    "replicated_single_msgs_per_s": round(repl_single),
                    "single_ratio": round(repl_single / base_single, 3),
                    "unreplicated_batched_msgs_per_s": round(base_batch),
                    "replicated_batched_msgs_per_s": round(repl_batch),
                    "batched_ratio": round(repl_batch / base_batch, 3),
                    "cpu_us_per_msg": {
                        "single_unreplicated": named(cpu_ls, "client", "broker"),
                        "single_replicated": named(cpu_rs, "client", "master", "slave"),
                        "batched_unreplicated": named(cpu_lb, "client", "broker"),
                        "batched_replicated": named(cpu_rb, "client", "master", "slave"),
                    },
                    "cpu_share": {
                        "single_unreplicated": shares(sh_ls, "client", "broker"),
                        "single_replicated": shares(sh_rs, "client", "master", "slave"),
                        "batched_unreplicated": shares(sh_lb, "client", "broker"),
                        "batched_replicated": shares(sh_rb, "client", "master", "slave"),
                    },
                    "slave_lag_bytes": {
                        "p50": pct(lags, 0.5), "p99": pct(lags, 0.99),
                        "max": max(lags, default=-1), "samples": len(lags),
                    },
                    "slave_lag_p99_ms_of_traffic": round(
                        pct(lags, 0.99) / (repl_single * (len(BODY) + 200)) * 1000, 2
                    ),
                })  # fmt: skip
            median = statistics.median_low(r["batched_ratio"] for r in runs)
            chosen = next(r for r in runs if r["batched_ratio"] == median)
            if args.repeat > 1:
                chosen["ratios"] = {
                    key: {
                        "runs": [r[key] for r in runs],
                        "median": round(statistics.median(r[key] for r in runs), 3),
                    }
                    for key in ("single_ratio", "batched_ratio")
                }
            return chosen

        async def run() -> None:
            for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
                tag = flush.split("_")[0].lower()
                result[f"{tag}_flush"] = await pair(flush, tag)
            seconds = 2 if args.quick else 10
            p50, p99 = await latency_at_rate(ns, "BenchReplasync", args.rate, seconds)
            base50, base99 = await latency_at_rate(ns, "BenchLoneasync", args.rate, seconds)
            result["latency_at_rate"] = {
                "rate_msgs_per_s": args.rate,
                "replicated_p50_ms": round(p50, 2),
                "replicated_p99_ms": round(p99, 2),
                "unreplicated_p50_ms": round(base50, 2),
                "unreplicated_p99_ms": round(base99, 2),
            }

        if args.client_gc == "tuned":
            gc_policy.tune_server_gc()  # the load generator's collector (module doc)
        trio.run(run)
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
