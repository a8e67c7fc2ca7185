"""Remoting micro benchmark: CPU per request through a server `Connection`, one JSON line.

A client writes pre-encoded 1 KiB requests (64 per write, like a pipelining producer) into an
in-memory stream; a server-side `Connection` (with the default `ServerLimits`: input budget,
watchdog, read backpressure) decodes each, calls a processor that answers at once, and writes
the answers back, which the client decodes. ``us_per_request`` is process CPU time per
request and answer, both ends included; it measures the per-read and per-frame bookkeeping of
the remoting layer with nothing else in the way (no sockets, no store).

    .venv/bin/python bench/remoting_micro.py [--count 102400]
"""

from __future__ import annotations

import argparse
import json
import time

import trio
import trio.testing

from rocketrio.actors import remoting
from rocketrio.actors.server_limits import ServerLimits
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command

BATCH = 64


async def _processor(ctx: remoting.RequestContext) -> RemotingCommand:
    return ctx.cmd.make_response(0)


async def run(count: int) -> float:
    client, server = trio.testing.memory_stream_pair()
    conn = remoting.Connection(
        server, _processor, remote="bench", server=remoting.ServerSide(ServerLimits())
    )
    frame = encode_command(
        RemotingCommand(code=310, ext_fields={"a": "g", "b": "T"}, body=bytes(1024))
    )
    chunk = frame * BATCH
    writes = count // BATCH
    total = writes * BATCH
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
    args = ap.parse_args()
    per = trio.run(run, args.count)
    print(json.dumps({"bench": "remoting_micro", "us_per_request": round(per * 1e6, 3)}))


if __name__ == "__main__":
    main()
