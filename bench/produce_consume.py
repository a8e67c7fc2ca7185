"""Produce/consume benchmark against real NameServer + Broker processes on loopback.

Prints ONE JSON line with:
- batch_produce_msgs_per_s   SEND_BATCH_MESSAGE, 64 x 1 KiB per batch, several batches in flight
- single_produce_msgs_per_s  single sends (send_async) with 256 in flight, ASYNC_FLUSH broker
- sync_flush_single_msgs_per_s  the same against a SYNC_FLUSH broker (group commit), and the ratio
- consume_msgs_per_s         a push consumer group reading the whole backlog from offset 0
- latency_p50_ms / p99_ms    single sends at a fixed rate (default 5,000 msg/s)
- broker_peak_rss_mb         VmHWM of the ASYNC_FLUSH broker process at the end

    .venv/bin/python bench/produce_consume.py [--quick]

Every server runs as its own process (`python -m rocketrio.cli.main ...`), the clients in this
process, all on the same machine; so the figures include the Python client's cost.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    ap.add_argument("--rate", type=int, default=5000)
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
            async with MQAdmin(ns) as admin:
                for _ in range(100):
                    try:
                        for topic, port in (("BenchAsync", b_port), ("BenchSync", s_port)):
                            await admin.update_topic(
                                topic, broker_addr=f"127.0.0.1:{port}", read_queues=4,
                                write_queues=4,
                            )  # fmt: skip
                        break
                    except Exception:
                        await trio.sleep(0.2)
                else:
                    raise RuntimeError("brokers did not come up")
            await wait_writable(ns, "BenchAsync")
            await wait_writable(ns, "BenchSync")

        trio.run(setup)
        result["batch_produce_msgs_per_s"] = round(
            trio.run(batched_sends, ns, "BenchAsync", n_batch)
        )
        result["single_produce_msgs_per_s"] = round(
            trio.run(single_sends, ns, "BenchAsync", n_single)
        )
        p50, p99 = trio.run(
            latency_at_rate, ns, "BenchAsync", args.rate, 10 * scale if args.quick else 10
        )
        result.update(
            latency_rate_msgs_per_s=args.rate,
            latency_p50_ms=round(p50, 2),
            latency_p99_ms=round(p99, 2),
        )
        total = n_batch + n_single + 1
        consumed = trio.run(consume_backlog, ns, "BenchAsync", "bench_consumer", total)
        result["consume_msgs_per_s"] = round(consumed)
        sync_rate = trio.run(single_sends, ns, "BenchSync", n_single)
        result["sync_flush_single_msgs_per_s"] = round(sync_rate)
        result["sync_vs_async_slowdown"] = round(result["single_produce_msgs_per_s"] / sync_rate, 2)
        result["broker_peak_rss_mb"] = round(peak_rss_mb(broker.pid), 1)
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
