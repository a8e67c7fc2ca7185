"""Cost of the broker's Prometheus exporter: produce with it on (PROM) vs off, in the same run.

Starts a NameServer and two brokers as processes on loopback, ``bench-off`` (exporter off, the
default) and ``bench-on`` (metricsExporterType=PROM: every answer timed for
rocketmq_rpc_latency), each with its own topic. While the ``on`` broker is measured, /metrics is
scraped every ``--scrape-s`` seconds over HTTP (far more often than Prometheus's usual 15 s, so
scrape costs show; ``--scrape-s 0``: not scraped). Then, alternating off/on ``--rounds`` times
(so neither side always runs first on a warm machine):

- single_produce_msgs_per_s  send_async of 1 KiB messages, 256 in flight (one request each:
  where a per-request cost would show most)
- batch_produce_msgs_per_s   SEND_BATCH_MESSAGE, 64 x 1 KiB per request
- broker_cpu_us_per_msg      the broker process's CPU time over both runs, per message sent

Prints ONE JSON line with each round's figures, the medians, the on/off ratios, the number of
scrapes, and the in-process cost of timing one answer (``held_answer_ns``: an answer given
later, which reads the clock; ``inline_answer_ns``: one given while its read is dispatched).

    .venv/bin/python bench/metrics_cost.py [--quick] [--rounds 3] [--scrape-s 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
import urllib.request
from typing import Any

import trio
from benchlib import (
    BODY,
    Proc,
    batched_sends,
    cpu_seconds,
    free_port,
    single_sends,
    stop_all,
    wait_writable,
)

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.actors.observe.rpc_metrics import Outcome, RpcLatency

SIDES = ("off", "on")


async def setup(ns: str, brokers: dict[str, str]) -> None:
    async with MQAdmin(ns) as admin:
        for side, addr in brokers.items():
            for _ in range(150):
                try:
                    await admin.update_topic(f"Bench_{side}", broker_addr=addr, read_queues=4,
                                             write_queues=4)  # fmt: skip
                    break
                except Exception:
                    await trio.sleep(0.2)
            else:
                raise RuntimeError(f"broker {addr} did not come up")
    for side in SIDES:
        await wait_writable(ns, f"Bench_{side}")


class Scraper:
    """GET /metrics every ``period_s`` in a thread while `active`."""

    def __init__(self, url: str, period_s: float) -> None:
        self.url, self.period_s = url, period_s
        self.active = threading.Event()
        self.stop = threading.Event()
        self.scrapes = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            if self.active.wait(0.1):
                with urllib.request.urlopen(self.url, timeout=10) as r:
                    assert r.status == 200 and b"rocketmq_rpc_latency_bucket" in r.read()
                self.scrapes += 1
                self.stop.wait(self.period_s)


def observe_ns(n: int = 200_000) -> dict[str, float]:
    """ns per answer of the exporter's own work: an answer given later (`observe`, plus its
    clock reading) and one given inline (its key queued, then counted with its read's others)."""
    lat = RpcLatency()
    t0 = time.perf_counter()
    for _ in range(n):
        lat.observe(310, 0, Outcome.SUCCESS, trio.current_time() - 1.0)
    held = (time.perf_counter() - t0) / n * 1e9
    keys: list[tuple[int, int, int]] = []
    t0 = time.perf_counter()
    for _ in range(n // 64):
        for _ in range(64):
            keys.append((310, 0, 0))
        lat.observe_all(keys, trio.current_time() - 1.0)
        keys.clear()
    inline = (time.perf_counter() - t0) / (n // 64 * 64) * 1e9
    return {"held_answer_ns": round(held), "inline_answer_ns": round(inline)}


async def _observe_ns() -> dict[str, float]:
    return observe_ns()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller counts (a smoke run)")
    ap.add_argument("--rounds", type=int, default=3, help="off/on pairs (max 6)")
    ap.add_argument("--scrape-s", type=float, default=1.0, help="0: never scrape")
    args = ap.parse_args()
    n_single = 5_000 if args.quick else 40_000
    n_batch = 20_000 if args.quick else 150_000
    rounds = max(1, min(args.rounds, 6))
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-metrics-")
    procs: list[Proc] = []
    result: dict[str, Any] = {"bench": "metrics_cost", "body_bytes": len(BODY),
                              "single_messages": n_single, "batch_messages": n_batch}  # fmt: skip
    try:
        taken: set[int] = set()
        ns_port, metrics_port = free_port(taken), free_port(taken)
        ns = f"127.0.0.1:{ns_port}"
        procs.append(Proc("namesrv", "ns", {"listenPort": str(ns_port), "logDir": work}, work))
        procs[-1].start()
        time.sleep(0.5)
        brokers: dict[str, str] = {}
        pids: dict[str, int] = {}
        for side in SIDES:
            port = free_port(taken)
            brokers[side] = f"127.0.0.1:{port}"
            conf = {
                "namesrvAddr": ns, "logDir": work, "brokerIP1": "127.0.0.1",
                "brokerName": f"bench-{side}", "listenPort": str(port),
                "storePathRootDir": os.path.join(work, side), "flushDiskType": "ASYNC_FLUSH",
            }  # fmt: skip
            if side == "on":
                conf.update(metricsExporterType="PROM", metricsPromExporterPort=str(metrics_port))
            proc = Proc("broker", f"bench-{side}", conf, work).start()
            procs.append(proc)
            pids[side] = proc.pid
        trio.run(setup, ns, brokers)
        scraper = Scraper(f"http://127.0.0.1:{metrics_port}/metrics", args.scrape_s)
        rows: dict[str, dict[str, list[float]]] = {
            s: {"single": [], "batch": [], "cpu_us": []} for s in SIDES
        }
        for r in range(rounds):
            order = SIDES if r % 2 == 0 else SIDES[::-1]
            for side in order:
                topic = f"Bench_{side}"
                if side == "on" and args.scrape_s > 0:
                    scraper.active.set()
                cpu0 = cpu_seconds(pids[side])
                rows[side]["single"].append(trio.run(single_sends, ns, topic, n_single))
                rows[side]["batch"].append(trio.run(batched_sends, ns, topic, n_batch))
                cpu = cpu_seconds(pids[side]) - cpu0
                rows[side]["cpu_us"].append(cpu / (n_single + n_batch) * 1e6)
                scraper.active.clear()
        scraper.stop.set()
        for side, figs in rows.items():
            for what, values in figs.items():
                key = "broker_cpu_us_per_msg" if what == "cpu_us" else f"{what}_produce_msgs_per_s"
                result[f"{side}_{key}"] = [
                    round(v, 2 if what == "cpu_us" else None) for v in values
                ]
                result[f"{side}_{key}_median"] = round(
                    statistics.median(values), 2 if what == "cpu_us" else None
                )
        for key in (
            "single_produce_msgs_per_s",
            "batch_produce_msgs_per_s",
            "broker_cpu_us_per_msg",
        ):
            result[f"{key}_on_vs_off"] = round(
                result[f"on_{key}_median"] / result[f"off_{key}_median"], 3
            )
        result["scrapes"] = scraper.scrapes
        result.update(trio.run(_observe_ns))
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
