"""The ceiling of issue 28 item 4 on this machine: what grpcio itself costs, with no proxy and no
broker behind it, against remoting to a real broker, in the same run.

An echo server answers the lean driver of bench/proxy.py (the same `lean_send` and
`lean_receive_ack`) without doing anything else: SendMessage gets one OK entry per message,
QueryAssignment one queue, ReceiveMessage streams ``batch`` ready-made 1 KiB messages (as the
proxy streams them: the delivery timestamp, one message a response, the status), AckMessage an
OK per entry. It runs as the proxy does: its own process, grpc.aio on uvloop, the proxy's server
options and grpc core experiments (actors/proxy/grpc_env.py). The remoting side is
bench/proxy.py's direct phases against a NameServer and a broker: rocketrio's Producer with 64
sends in flight, and 4 SimpleConsumers (POP 32 + BATCH_ACK).

Prints ONE JSON line:
- remoting_send_msgs_per_s, grpc_echo_send_msgs_per_s and echo_send_vs_remoting: the lean
  driver's sends to a server that does nothing, against remoting's sends that are stored
- remoting_receive_ack_msgs_per_s, grpc_echo_receive_ack_msgs_per_s and
  echo_receive_ack_vs_remoting: the same for receive 32 + one AckMessage a batch
- cpu_us_per_msg: per phase, the echo server's (or the broker's) CPU and the client's
A proxied path costs at least the echo's gRPC work on both ends, so the ``*_vs_remoting``
ratios bound what bench/proxy.py's lean driver can reach through any proxy on this machine.

    .venv/bin/python bench/grpc_floor.py [--count N] [--repeat R]

``--repeat`` runs the four phases R times, alternating which side goes first, and reports
each repeat and the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

ECHO_BATCH = 32


def serve(port: int) -> None:
    """The echo server's process: the proxy's grpc environment, then grpcio (module
    docstring)."""
    from rocketrio.actors.proxy.grpc_env import prepare_grpc_environment

    prepare_grpc_environment()
    import grpc
    import uvloop

    from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
    from rocketrio.protocol.grpc_v2 import service_pb2 as spb
    from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc

    ok = pb.Status(code=pb.OK, message="OK")
    streamed = [spb.ReceiveMessageResponse(delivery_timestamp={"seconds": 1})]
    for i in range(ECHO_BATCH):
        r = spb.ReceiveMessageResponse()
        sp = r.message.system_properties
        sp.message_id, sp.receipt_handle = f"ECHO{i:08d}", f"receipt-{i}"
        sp.message_type, sp.queue_offset = pb.NORMAL, i
        r.message.topic.name, r.message.body = "echo", b"x" * 1024
        streamed.append(r)
    streamed.append(spb.ReceiveMessageResponse(status=ok))

    class Echo(sgrpc.MessagingServiceServicer):
        async def SendMessage(self, request: Any, context: Any) -> Any:
            out = spb.SendMessageResponse(status=ok)
            for m in request.messages:
                out.entries.add(status=ok, message_id=m.system_properties.message_id, offset=1)
            return out

        async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
            for r in streamed:
                yield r

        async def QueryAssignment(self, request: Any, context: Any) -> Any:
            queue = pb.MessageQueue(topic=request.topic, id=-1, broker=pb.Broker(name="echo"))
            return spb.QueryAssignmentResponse(
                status=ok, assignments=[pb.Assignment(message_queue=queue)]
            )

        async def AckMessage(self, request: Any, context: Any) -> Any:
            out = spb.AckMessageResponse(status=ok)
            for e in request.entries:
                out.entries.add(message_id=e.message_id, receipt_handle=e.receipt_handle, status=ok)
            return out

    async def main() -> None:
        # the proxy's options (actors/proxy/grpc_bridge.py)
        server = grpc.aio.server(
            options=[("grpc.so_reuseport", 0), ("grpc.max_receive_message_length", -1)]
        )
        sgrpc.add_MessagingServiceServicer_to_server(Echo(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()

    uvloop.install()
    asyncio.run(main())


def one_repeat(
    count: int, ns: str, broker_pid: int, echo: str, echo_pid: int, echo_first: bool
) -> dict[str, Any]:
    import trio
    from benchlib import cpu_seconds, single_sends
    from pop import pop_consume
    from proxy import TOPIC, lean_receive_ack, lean_send

    def phase(pid: int, run: Any) -> tuple[float, dict[str, float]]:
        s0, c0 = cpu_seconds(pid), time.process_time()
        rate = run()
        server = (cpu_seconds(pid) - s0) / count * 1e6
        return rate, {
            "server": round(server),
            "client": round((time.process_time() - c0) / count * 1e6),
        }

    sides = {
        "remoting_send": lambda: phase(
            broker_pid, lambda: trio.run(single_sends, ns, TOPIC, count, 64)
        ),
        "echo_send": lambda: phase(echo_pid, lambda: asyncio.run(lean_send(echo, count))),
        # each remoting group reads the whole backlog: the warm-up message and every send so far
        "remoting_receive_ack": lambda: phase(
            broker_pid,
            lambda: trio.run(pop_consume, ns, f"floor_{time.monotonic_ns()}", count, 4, True),
        ),
        "echo_receive_ack": lambda: phase(
            echo_pid, lambda: asyncio.run(lean_receive_ack(echo, count))
        ),
    }
    order = ["send", "receive_ack"]
    out: dict[str, Any] = {"cpu_us_per_msg": {}}
    for what in order:
        pair = [f"echo_{what}", f"remoting_{what}"]
        for name in pair if echo_first else pair[::-1]:
            rate, cpu = sides[name]()
            out[f"{name}_msgs_per_s"] = round(rate)
            out["cpu_us_per_msg"][name] = cpu
        out[f"echo_{what}_vs_remoting"] = round(
            out[f"echo_{what}_msgs_per_s"] / out[f"remoting_{what}_msgs_per_s"], 3
        )
    return out


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    import trio
    from benchlib import Proc, create_topics, free_port, one_broker, stop_all
    from proxy import TOPIC

    from rocketrio.actors.observe.logs import configure_logging

    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-grpc-floor-")
    procs: list[Proc] = []
    server: subprocess.Popen[str] | None = None
    result: dict[str, Any] = {"bench": "grpc_floor", "body_bytes": 1024, "messages": args.count}
    try:
        ns, broker = one_broker(procs, work, "bench-floor")
        trio.run(create_topics, ns, broker, [TOPIC])
        port = free_port({int(ns.rsplit(":", 1)[1]), int(broker.rsplit(":", 1)[1])})
        server = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", str(port)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError("the echo server did not start")
        repeats = [
            one_repeat(args.count, ns, procs[-1].pid, f"127.0.0.1:{port}", server.pid, i % 2 == 0)
            for i in range(args.repeat)
        ]
    finally:
        if server is not None:
            server.kill()
            server.wait()
        stop_all(procs, work)
    if args.repeat == 1:
        result.update(repeats[0])
    else:
        result["repeats"] = repeats
        for key in ("echo_send_vs_remoting", "echo_receive_ack_vs_remoting"):
            result[f"{key}_median"] = round(statistics.median(r[key] for r in repeats), 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
