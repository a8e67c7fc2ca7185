"""The client's CPU cost per message, on Trio and on asyncio, and against another checkout's
client, in one run: a figure that a busy shared machine disturbs far less than throughput.

    .venv/bin/python bench/client_cpu.py [--count 20000] [--rounds 3] [--base /work/base]

One NameServer and one ASYNC_FLUSH broker (this checkout's servers) run as processes; each
measurement is a fresh client process (``--worker``) that sends ``count`` single messages
(send_async, 256 in flight), ``count`` messages in batches of 64 and consumes them back with a
push consumer, and reports its own CPU time (``time.process_time``) per message for each phase.
The sides (this client on Trio, on asyncio, and with ``--base`` that checkout's client on Trio,
run by its own ``.venv/bin/python``) alternate within every round, in a rotating order. Prints
one JSON line: the median CPU microseconds per message per side and phase, and the speed ratios
(``asyncio_vs_trio``, ``vs_base``: the other side's CPU / this side's, so >= 1 is no slower).
The worker uses only the client API both checkouts have, so it runs against either.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchlib import free_port

BODY = b"x" * 1024
PHASES = ("single_send", "batch_send", "consume")


# ------------------------------------------------------------------ the worker (either client)
def worker(ns: str, topic: str, count: int, loop: str) -> dict[str, float]:
    from rocketrio.actors.client.config import ProducerConfig
    from rocketrio.actors.client.message import Message
    from rocketrio.actors.client.producer import Producer
    from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer

    out: dict[str, float] = {}

    async def phases(gather: Any, event: Any) -> None:
        cfg = ProducerConfig(producerGroup=f"cpu_{topic}", maxInFlight=256)
        async with Producer(f"cpu_{topic}", ns, config=cfg) as p:
            await p.send(Message(topic, BODY))  # routes and connection are warm
            t = time.process_time()
            futs = [await p.send_async(Message(topic, BODY)) for _ in range(count)]
            for f in futs:
                await f.wait()
            out["single_send"] = (time.process_time() - t) / count * 1e6
            batch = [Message(topic, BODY) for _ in range(64)]
            t = time.process_time()
            await gather([lambda: p.send_batch(batch) for _ in range(count // 64)], 8)
            out["batch_send"] = (time.process_time() - t) / (count // 64 * 64) * 1e6
        expected = 1 + count + count // 64 * 64
        seen = 0
        done = event()

        def listener(msgs: list[Any]) -> Any:
            nonlocal seen
            seen += len(msgs)
            if seen >= expected:
                done.set()
            return ConsumeStatus.CONSUME_SUCCESS

        c = PushConsumer(f"cpu_{topic}_g", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                         pull_batch_size=256, consume_batch_size=256)  # fmt: skip
        c.subscribe(topic, "*")
        c.register_listener(listener)
        t = time.process_time()
        async with c:
            await done.wait()
        out["consume"] = (time.process_time() - t) / expected * 1e6

    if loop == "trio":
        import trio

        async def trio_gather(calls: list[Any], width: int) -> None:
            todo = iter(calls)

            async def lane() -> None:
                for call in todo:
                    await call()

            async with trio.open_nursery() as n:
                for _ in range(width):
                    n.start_soon(lane)

        trio.run(phases, trio_gather, trio.Event)
    else:
        import asyncio

        async def asyncio_gather(calls: list[Any], width: int) -> None:
            todo = iter(calls)

            async def lane() -> None:
                for call in todo:
                    await call()

            await asyncio.gather(*(lane() for _ in range(width)))

        asyncio.run(phases(asyncio_gather, asyncio.Event))
    return out


# ------------------------------------------------------------------ the driver
def start(role: str, name: str, conf: dict[str, str], work: str) -> subprocess.Popen[bytes]:
    path = os.path.join(work, f"{name}.conf")
    with open(path, "w") as f:
        f.writelines(f"{k}={v}\n" for k, v in conf.items())
    with open(os.path.join(work, f"{name}.out"), "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "rocketrio.cli.main", role, "-c", path, "--name", name],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def run_side(python: str, ns: str, topic: str, count: int, loop: str) -> dict[str, float]:
    r = subprocess.run(
        [python, os.path.abspath(__file__), "--worker", "--ns", ns, "--topic", topic,
         "--count", str(count), "--loop", loop],
        capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip
    if r.returncode != 0:
        raise RuntimeError(f"worker {python} {loop} failed:\n{r.stderr[-3000:]}")
    result: dict[str, float] = json.loads(r.stdout.strip().splitlines()[-1])
    return result


def wait_ready(ns: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            run_side(sys.executable, ns, "CpuWarmup", 64, "trio")
            return
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base", help="another checkout (with .venv) whose client to compare")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ns", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--loop", default="trio", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.ns, args.topic, args.count, args.loop)))
        return
    sides = {"trio": (sys.executable, "trio"), "asyncio": (sys.executable, "asyncio")}
    if args.base:
        sides["base_trio"] = (os.path.join(args.base, ".venv", "bin", "python"), "trio")
    work = tempfile.mkdtemp(prefix="rocketrio-client-cpu-")
    taken: set[int] = set()
    ns_port, b_port = free_port(taken), free_port(taken)
    ns = f"127.0.0.1:{ns_port}"
    procs = [start("namesrv", "ns", {"listenPort": str(ns_port), "logDir": work}, work)]
    try:
        procs.append(start("broker", "b", {
            "namesrvAddr": ns, "logDir": work, "brokerIP1": "127.0.0.1", "brokerName": "cpu-b",
            "listenPort": str(b_port), "storePathRootDir": os.path.join(work, "store"),
        }, work))  # fmt: skip
        wait_ready(ns)
        runs: dict[str, list[dict[str, float]]] = {s: [] for s in sides}
        names = list(sides)
        for i in range(args.rounds):
            for side in names[i % len(names) :] + names[: i % len(names)]:  # rotate the order
                python, loop = sides[side]
                runs[side].append(run_side(python, ns, f"Cpu_{side}_{i}", args.count, loop))
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(30)
        shutil.rmtree(work, ignore_errors=True)
    med = {s: {ph: round(statistics.median(r[ph] for r in runs[s]), 1) for ph in PHASES}
           for s in sides}  # fmt: skip
    result: dict[str, Any] = {"bench": "client_cpu", "count": args.count, "rounds": args.rounds,
                              "cpu_us_per_msg": med}  # fmt: skip
    result["asyncio_vs_trio"] = {
        ph: round(med["trio"][ph] / med["asyncio"][ph], 3) for ph in PHASES
    }
    if args.base:
        result["vs_base"] = {ph: round(med["base_trio"][ph] / med["trio"][ph], 3) for ph in PHASES}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
