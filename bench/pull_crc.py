"""Consume with the pull-side record check on and off, same run, real processes on loopback.

A NameServer and one broker (64 MiB CommitLog segments) take ``--count`` batched 1 KiB
messages; the broker is stopped cleanly. Then, ``--pairs`` times: the broker is started with
checkCRCOnPull=true and a fresh push-consumer group reads the whole backlog, then the same with
checkCRCOnPull=false. A clean start checks only the last segment, so every pull with the key on
checks the records of the older segments (most of the backlog): the worst case of the check.
(Messages a broker wrote itself are never checked again: the usual consume bench pays nothing.)
Prints ONE JSON line: each run's msg/s, the medians, and on/off.

    .venv/bin/python bench/pull_crc.py [--count 300000] [--pairs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

import trio
from benchlib import Proc, batched_sends, consume_backlog, free_port, stop_all, wait_writable

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.observe.logs import configure_logging


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=300_000)
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-pullcrc-")
    procs: list[Proc] = []
    result: dict[str, Any] = {"bench": "pull_crc", "messages": args.count}
    try:
        taken: set[int] = set()
        ns_port, b_port = free_port(taken), free_port(taken)
        ns = f"127.0.0.1:{ns_port}"
        procs.append(Proc("namesrv", "ns", {"listenPort": str(ns_port), "logDir": work}, work))
        procs[-1].start()
        time.sleep(0.5)

        def broker(check: bool) -> Proc:
            conf = {
                "namesrvAddr": ns, "logDir": work, "brokerIP1": "127.0.0.1",
                "brokerName": "bench-crc", "listenPort": str(b_port),
                "storePathRootDir": os.path.join(work, "store"),
                "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
                "checkCRCOnPull": "true" if check else "false",
            }  # fmt: skip
            return Proc("broker", f"bench-crc-{check}", conf, work).start()

        async def setup() -> None:
            async with MQAdmin(ns) as admin:
                for _ in range(100):
                    try:
                        await admin.update_topic("BenchCrc", broker_addr=f"127.0.0.1:{b_port}",
                                                 read_queues=4, write_queues=4)  # fmt: skip
                        break
                    except Exception:
                        await trio.sleep(0.2)
                else:
                    raise RuntimeError("broker did not come up")
            await wait_writable(ns, "BenchCrc")

        b = broker(True)
        trio.run(setup)
        trio.run(batched_sends, ns, "BenchCrc", args.count)
        b.stop()
        runs: dict[str, list[float]] = {"on": [], "off": []}
        for pair in range(args.pairs):
            for check in (True, False):
                b = broker(check)
                trio.run(wait_writable, ns, "BenchCrc")
                group = f"bench_crc_{pair}_{check}"
                rate = trio.run(consume_backlog, ns, "BenchCrc", group, args.count)
                runs["on" if check else "off"].append(round(rate))
                b.stop()
        on, off = statistics.median(runs["on"]), statistics.median(runs["off"])
        result.update(
            consume_check_on_msgs_per_s=round(on),
            consume_check_off_msgs_per_s=round(off),
            on_vs_off=round(on / off, 3),
            runs=runs,
        )
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
