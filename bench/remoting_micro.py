"""Remoting micro benchmark: CPU per request through a server `Connection`, one JSON line.

A client writes pre-encoded 1 KiB requests (64 per write, like a pipelining producer) into an
in-memory stream; a server-side `Connection` (with the default `ServerLimits`: input budget,
watchdog, read backpressure) decodes each, calls a processor that answers at once, and writes
the answers back, which the client decodes. ``us_per_request`` is process CPU time per
request and answer, both ends included; it measures the per-read and per-frame bookkeeping of
the remoting layer with nothing else in the way (no sockets, no store).

With ``--rpc-latency``, the same run is repeated with the server timing every answer for
rocketmq_rpc_latency (as with metricsExporterType=PROM) and without, alternated ``--pairs``
times, at 64 requests per write and at 1 (where a per-read cost would show most); the medians
and the difference per request are printed too.

    .venv/bin/python bench/remoting_micro.py [--count 102400] [--rpc-latency --pairs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import trio
import trio.testing

from rocketrio.actors.kernel import remoting
from rocketrio.actors.kernel.server_limits import ServerLimits
from rocketrio.actors.observe.rpc_metrics import RpcLatency
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command

BATCH = 64


async def _processor(ctx: remoting.RequestContext) -> RemotingCommand:
    return ctx.cmd.make_response(0)


async def run(count: int, batch: int = BATCH, rpc_latency: RpcLatency | None = None) -> float:
    client, server = trio.testing.memory_stream_pair()
    side = remoting.ServerSide(ServerLimits(), rpc_latency)
    conn = remoting.Connection(server, _processor, remote="bench", server=side)
    frame = encode_command(
        RemotingCommand(code=310, ext_fields={"a": "g", "b": "T"}, body=bytes(1024))
    )
    chunk = frame * batch
    writes = count // batch
    total = writes * batch
    got = 0

    async def drain() -> None:
        nonlocal got
        dec = FrameDecoder()
        while got < total:
            dec.feed(await client.receive_some(1 << 20))
            while dec.next_command() is not None:
                got += 1

    async with trio.open_nursery() as n:
        n.start_soon(conn.run)
        t0 = time.process_time()
        async with trio.open_nursery() as m:
            m.start_soon(drain)
            for _ in range(writes):
                await client.send_all(chunk)
        took = time.process_time() - t0
        n.cancel_scope.cancel()
    return took / total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=102_400)
    ap.add_argument("--rpc-latency", action="store_true", help="also time answers, on vs off")
    ap.add_argument("--pairs", type=int, default=5)
    args = ap.parse_args()
    per = trio.run(run, args.count)
    result: dict[str, object] = {"bench": "remoting_micro", "us_per_request": round(per * 1e6, 3)}
    if args.rpc_latency:
        for batch in (BATCH, 1):
            rows: dict[str, list[float]] = {"off": [], "on": []}
            for i in range(args.pairs):
                for side in ("off", "on") if i % 2 == 0 else ("on", "off"):
                    lat = RpcLatency() if side == "on" else None
                    rows[side].append(trio.run(run, args.count, batch, lat) * 1e6)
            off, on = statistics.median(rows["off"]), statistics.median(rows["on"])
            result[f"batch{batch}_off_us_per_request"] = round(off, 3)
            result[f"batch{batch}_on_us_per_request"] = round(on, 3)
            result[f"batch{batch}_rpc_latency_cost_us"] = round(on - off, 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
