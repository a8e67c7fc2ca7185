"""CPU of a turn's direct ACK answers: each ACK's ``on_done`` called one by one (the path before
ack_answers.answer_stored) against `answer_stored` (one run of frames per connection).

A fake connection keeps the frames as the real one queues them (a deque, its byte count); the
turn is ``--acks`` direct ACKs of ``--conns`` connections. Prints ONE JSON line: CPU per ACK
(``time.process_time``, best of ``--repeat``) of each way and their ratio.

    .venv/bin/python bench/ack_answers_micro.py [--acks 32] [--conns 4] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import deque
from functools import partial
from typing import Any

from rocketrio.actors.broker.dispatch.outcomes import Done
from rocketrio.actors.broker.pop.ack_answers import answer_one, answer_stored
from rocketrio.protocol.codes import SERIALIZE_JSON


class Conn:
    closed = False

    def __init__(self) -> None:
        self.out: deque[bytes] = deque()
        self.out_bytes = 0

    def send_frame_nowait(self, frame: bytes) -> None:
        if self.closed:
            return
        self.out.append(frame)
        self.out_bytes += len(frame)


def real_conn() -> Any:
    """A server-side `Connection` over a memory stream, not started: frames stay queued."""
    import trio.testing

    from rocketrio.actors.kernel.remoting import Connection, ServerSide
    from rocketrio.actors.kernel.server_limits import ServerLimits

    _, server = trio.testing.memory_stream_pair()
    return Connection(server, lambda ctx: None, server=ServerSide(ServerLimits(), None, None))


def clear(c: Any) -> None:
    out = c.out if isinstance(c, Conn) else c._out
    out.clear()
    if not isinstance(c, Conn):
        c._out_bytes = 0


def per_ack_us(fn: Any, turns: int, acks: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(turns):
            fn()
        best = min(best, time.process_time() - t0)
    return best / turns / acks * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--acks", type=int, default=32)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--turns", type=int, default=5000)
    ap.add_argument("--real", action="store_true", help="server Connections (not started)")
    args = ap.parse_args()
    conns: list[Any] = [Conn() for _ in range(args.conns)]
    if args.real:
        conns = [real_conn() for _ in range(args.conns)]
    on_dones = [
        partial(answer_one, conns[i % args.conns], 1000 + i, SERIALIZE_JSON)
        for i in range(args.acks)
    ]
    done = Done()

    def one_by_one() -> None:
        for on_done in on_dones:
            on_done(done)
        for c in conns:
            clear(c)

    def batched() -> None:
        answer_stored(on_dones)
        for c in conns:
            clear(c)

    a = per_ack_us(one_by_one, args.turns, args.acks, args.repeat)
    b = per_ack_us(batched, args.turns, args.acks, args.repeat)
    print(json.dumps({
        "one_by_one_us_per_ack": round(a, 3), "answer_stored_us_per_ack": round(b, 3),
        "ratio": round(b / a, 3), "load_avg_1m": round(os.getloadavg()[0], 2),
    }))  # fmt: skip


if __name__ == "__main__":
    import trio

    async def _main() -> None:
        main()

    trio.run(_main)
