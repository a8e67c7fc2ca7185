"""Produce/consume benchmark against real NameServer + Broker processes on loopback.

Prints ONE JSON line with:
- batch_produce_msgs_per_s   SEND_BATCH_MESSAGE, 64 x 1 KiB per batch, several batches in flight
- single_produce_msgs_per_s  single sends (send_async) with 256 in flight, ASYNC_FLUSH broker
- sync_flush_single_msgs_per_s  the same against a SYNC_FLUSH broker (group commit), and the ratio
- consume_msgs_per_s         a push consumer group reading the whole backlog from offset 0
- latency_p50_ms / p99_ms    single sends at a fixed rate (default 5,000 msg/s)
- broker_peak_rss_mb         VmHWM of the ASYNC_FLUSH broker process at the end

    .venv/bin/python bench/produce_consume.py [--quick] [--loop trio|asyncio|both]

``--loop both`` measures the client figures with the client on Trio and on asyncio in the same
run (alternating rounds) and adds ``asyncio`` (its figures) and ``asyncio_vs_trio`` (ratios).

Every server runs as its own process (`python -m rocketrio.cli.main ...`), the clients in this
process, all on the same machine; so the figures include the Python client's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

import anyio
import trio
from benchlib import (
    BODY,
    Proc,
    batched_sends,
    consume_backlog,
    free_port,
    latency_at_rate,
    peak_rss_mb,
    single_sends,
    stop_all,
    wait_writable,
)

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.observe.logs import configure_logging


def client_figures(
    ns: str, loop: str, n_batch: int, n_single: int, args: Any, scale: float, backlog: int, i: int
) -> dict[str, float]:
    """The client-side figures with the client on ``loop`` (the same client code, anyio)."""

    def run(fn: Any, *fn_args: Any) -> Any:
        return anyio.run(fn, *fn_args, backend=loop)

    out: dict[str, float] = {}
    out["batch_produce_msgs_per_s"] = round(run(batched_sends, ns, "BenchAsync", n_batch))
    out["single_produce_msgs_per_s"] = round(run(single_sends, ns, "BenchAsync", n_single))
    seconds = 10 * scale if args.quick else 10
    p50, p99 = run(latency_at_rate, ns, "BenchAsync", args.rate, seconds)
    out.update(latency_p50_ms=round(p50, 2), latency_p99_ms=round(p99, 2))
    total = backlog + n_batch + n_single + int(args.rate * seconds)
    group = f"bench_consumer_{loop}_{i}"
    out["consume_msgs_per_s"] = round(run(consume_backlog, ns, "BenchAsync", group, total))
    return out


def median_figures(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument(
        "--loop",
        choices=["trio", "asyncio", "both"],
        default="trio",
        help="the event loop the client runs on; both: trio and asyncio in the same run, "
        "alternating, with the asyncio/trio ratio of every figure",
    )
    args = ap.parse_args()
    scale = 0.1 if args.quick else 1.0
    n_batch, n_single = int(300_000 * scale), int(100_000 * scale)
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-")
    procs: list[Proc] = []
    result: dict[str, Any] = {"bench": "produce_consume", "body_bytes": len(BODY)}
    try:
        taken: set[int] = set()
        ns_port, b_port, s_port = free_port(taken), free_port(taken), free_port(taken)
        ns = f"127.0.0.1:{ns_port}"
        procs.append(Proc("namesrv", "ns", {"listenPort": str(ns_port), "logDir": work}, work))
        procs[-1].start()
        time.sleep(0.5)
        common = {"namesrvAddr": ns, "logDir": work, "brokerIP1": "127.0.0.1"}
        broker = Proc("broker", "bench-async", {
            **common, "brokerName": "bench-async", "listenPort": str(b_port),
            "storePathRootDir": os.path.join(work, "async"), "flushDiskType": "ASYNC_FLUSH",
        }, work).start()  # fmt: skip
        procs.append(broker)
        procs.append(Proc("broker", "bench-sync", {
            **common, "brokerName": "bench-sync", "listenPort": str(s_port),
            "storePathRootDir": os.path.join(work, "sync"), "flushDiskType": "SYNC_FLUSH",
            "brokerClusterName": "SyncCluster",
        }, work).start())  # fmt: skip

        async def setup() -> None:
            # topics pinned to one broker each: create them through the broker directly
            last: Exception | None = None
            async with MQAdmin(ns) as admin:
                for _ in range(300):  # a loaded machine starts Python slowly
                    try:
                        for topic, port in (("BenchAsync", b_port), ("BenchSync", s_port)):
                            await admin.update_topic(
                                topic, broker_addr=f"127.0.0.1:{port}", read_queues=4,
                                write_queues=4,
                            )  # fmt: skip
                        break
                    except Exception as e:
                        last = e
                        await trio.sleep(0.2)
                else:
                    raise RuntimeError(f"brokers did not come up: {last!r}")
            await wait_writable(ns, "BenchAsync")
            await wait_writable(ns, "BenchSync")

        trio.run(setup)
        loops = ["trio", "asyncio"] if args.loop == "both" else [args.loop]
        rounds = [loops, loops[::-1]] if len(loops) == 2 else [loops]  # alternate the order
        by_loop: dict[str, list[dict[str, float]]] = {loop: [] for loop in loops}
        sent = 1  # wait_writable's message
        for i, order in enumerate(rounds):
            for loop in order:
                figures = client_figures(ns, loop, n_batch, n_single, args, scale, sent, i)
                sent += n_batch + n_single + int(args.rate * (10 * scale if args.quick else 10))
                by_loop[loop].append(figures)
        first = loops[0]
        result.update(median_figures(by_loop[first]))
        result["client_loop"] = first
        if len(loops) == 2:
            other = median_figures(by_loop["asyncio"])
            result["asyncio"] = other
            result["asyncio_vs_trio"] = {
                k: round(other[k] / result[k], 3) for k in other if result.get(k)
            }
        sync_rate = trio.run(single_sends, ns, "BenchSync", n_single)
        result["sync_flush_single_msgs_per_s"] = round(sync_rate)
        result["sync_vs_async_slowdown"] = round(result["single_produce_msgs_per_s"] / sync_rate, 2)
        result["broker_peak_rss_mb"] = round(peak_rss_mb(broker.pid), 1)
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
