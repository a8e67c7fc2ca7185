"""gRPC proxy benchmark: send and receive+ack through the proxy, with the official RocketMQ 5
Python SDK and with a lean grpc.aio driver, against direct remoting to the broker; real
NameServer, Broker and Proxy processes on loopback, 1 KiB bodies.

Prints ONE JSON line with:
- direct_send_msgs_per_s            rocketrio's remoting Producer, send_async, 64 in flight
- grpc_lean_send_msgs_per_s         SendMessage from grpc.aio, 64 in flight
- sdk_send_msgs_per_s               the official SDK's Producer.send_async, 64 in flight
- direct_receive_ack_msgs_per_s     rocketrio's SimpleConsumer (POP 32 + BATCH_ACK), 4 workers
- grpc_lean_receive_ack_msgs_per_s  ReceiveMessage(32) + one AckMessage per batch, 4 workers
- sdk_receive_ack_msgs_per_s        the SDK's SimpleConsumer receive(32) + ack each, 1 thread
- *_overhead                        direct rate / proxy rate (how many times slower)
- cpu_us_per_msg                    where the time goes, per message and side: CPU of the
                                    proxy process, of the client (the lean driver's process or
                                    the SDK's child process) and of the broker, each phase
- proxy_threads_us_per_msg          the proxy's CPU per message and phase by thread: "trio" (the
                                    main thread), "grpc" (the gRPC server's Python thread(s)),
                                    grpcio's C threads by their own names (event_engine, ...)
- sdk_proxy_share                   the proxy's part of proxy + SDK client CPU, send / receive

    .venv/bin/python bench/proxy.py [--count N] [--py-spy OUT]

``--py-spy OUT`` records the proxy with py-spy (``--threads --format raw``, 200 Hz) during the
SDK's receive+ack phase only, into OUT (py-spy from this venv; the figures of that run are
not comparable, py-spy costs the proxy CPU).

The SDK runs in a child process: its generated protos cannot share a process with
rocketrio's (one protobuf descriptor pool).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import grpc
import trio
from benchlib import (
    BODY,
    Proc,
    cpu_seconds,
    create_topics,
    free_port,
    one_broker,
    single_sends,
    stop_all,
)
from pop import pop_consume

from rocketrio.actors.observe.logs import configure_logging
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.grpc_v2 import service_pb2 as spb
from rocketrio.protocol.grpc_v2 import service_pb2_grpc as sgrpc

TOPIC = "BenchPop"  # pop_consume reads this topic
META = (("x-mq-client-id", "bench-lean"),)
SDK_SCRIPT = r"""
import json, sys, time
from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer
from rocketmq import SimpleConsumer
endpoint, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = bytes.fromhex(sys.argv[4])
config = ClientConfiguration(endpoint, Credentials())
p = Producer(config, (topic,))
p.startup()
def mark(tag):
    print(tag, flush=True)
    sys.stdin.readline()  # the parent has read the proxy's CPU
    return time.process_time()
c0 = mark("send")
t0 = time.perf_counter()
window = []
for _ in range(count):
    m = Message()
    m.topic, m.body = topic, body
    window.append(p.send_async(m))
    if len(window) >= 64:
        window.pop(0).result()
for f in window:
    f.result()
send = count / (time.perf_counter() - t0)
send_cpu = mark("sent") - c0
p.shutdown()
c = SimpleConsumer(config, "bench_sdk", {topic: FilterExpression("*")}, 5)
c.startup()
c0 = mark("receive")
got, t0 = 0, time.perf_counter()
while got < count:
    msgs = c.receive(32, 30)
    for m in msgs:
        c.ack(m)
    got += len(msgs)
recv = got / (time.perf_counter() - t0)
recv_cpu = mark("received") - c0
c.shutdown()
print(json.dumps({"send": send, "receive_ack": recv, "send_cpu_s": send_cpu,
                  "receive_cpu_s": recv_cpu, "received": got}))
"""


def duration(seconds: int) -> Any:
    from google.protobuf.duration_pb2 import Duration

    return Duration(seconds=seconds)


async def lean_send(endpoint: str, count: int, inflight: int = 64) -> float:
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        sem = asyncio.Semaphore(inflight)

        async def one(i: int) -> None:
            async with sem:
                m = pb.Message(
                    topic=pb.Resource(name=TOPIC),
                    system_properties=pb.SystemProperties(
                        message_id=f"LEAN{i:012d}", message_type=pb.NORMAL
                    ),
                    body=BODY,
                )
                r = await stub.SendMessage(spb.SendMessageRequest(messages=[m]), metadata=META)
                assert r.status.code == pb.OK, r.status

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(count)))
        return count / (time.perf_counter() - t0)


async def lean_receive_ack(endpoint: str, count: int, workers: int = 4) -> float:
    """msg/s of ``workers`` receivers: ReceiveMessage(32) of the queue QueryAssignment names
    (its broker set, as the SDKs ask for it: the proxy can then POP from its gRPC loop), then one
    AckMessage with an entry per received message."""
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        got = 0
        assigned = await stub.QueryAssignment(
            spb.QueryAssignmentRequest(
                topic=pb.Resource(name=TOPIC), group=pb.Resource(name="bench_lean")
            ),
            metadata=META,
        )
        assert assigned.status.code == pb.OK and assigned.assignments, assigned.status
        queue = assigned.assignments[0].message_queue

        async def worker() -> None:
            nonlocal got
            while got < count:
                req = spb.ReceiveMessageRequest(
                    group=pb.Resource(name="bench_lean"),
                    message_queue=queue,
                    filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
                    batch_size=32,
                    invisible_duration=duration(30),
                    long_polling_timeout=duration(1),
                )
                msgs = [r.message async for r in stub.ReceiveMessage(req, metadata=META)
                        if r.HasField("message")]  # fmt: skip
                if not msgs:
                    continue
                got += len(msgs)
                entries = [
                    spb.AckMessageEntry(
                        message_id=m.system_properties.message_id,
                        receipt_handle=m.system_properties.receipt_handle,
                    )
                    for m in msgs
                ]
                ack = spb.AckMessageRequest(
                    group=pb.Resource(name="bench_lean"),
                    topic=pb.Resource(name=TOPIC),
                    entries=entries,
                )
                r = await stub.AckMessage(ack, metadata=META)
                assert r.status.code == pb.OK, r.status

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(workers)))
        return got / (time.perf_counter() - t0)


def thread_cpu_seconds(pid: int) -> dict[str, float]:
    """CPU seconds per thread of ``pid``, summed by name: the main thread is "trio", Python
    threads named "grpc..." by the proxy are "grpc", other Python threads "python", grpcio's
    own threads keep their names (their last digits dropped)."""
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1 : stat.rindex(")")].rstrip("0123456789")
        if tid == str(pid):
            name = "trio"
        elif name.startswith("grpc-"):
            name = "grpc"
        fields = stat.rsplit(")", 1)[1].split()
        used = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        out[name] = out.get(name, 0.0) + used
    return out


class CpuMeter:
    """CPU seconds of the server processes (and of this process, the client) per phase, as
    microseconds per message; the proxy's also by thread (``threads``)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.per_msg: dict[str, dict[str, int]] = {}
        self.threads: dict[str, dict[str, int]] = {}
        self._start: dict[str, float] = {}
        self._threads: dict[str, float] = {}

    def begin(self) -> None:
        self._start = {k: cpu_seconds(p) for k, p in self.pids.items()}
        self._threads = thread_cpu_seconds(self.pids["proxy"])

    def end(self, name: str, messages: int, client_s: float) -> None:
        used = {k: cpu_seconds(p) - self._start[k] for k, p in self.pids.items()}
        used["client"] = client_s
        n = max(1, messages)
        self.per_msg[name] = {k: round(v / n * 1e6) for k, v in used.items()}
        now = thread_cpu_seconds(self.pids["proxy"])
        self.threads[name] = {
            k: round((v - self._threads.get(k, 0.0)) / n * 1e6) for k, v in now.items()
        }

    @contextlib.contextmanager
    def phase(self, name: str, messages: int) -> Iterator[None]:
        c0 = time.process_time()
        self.begin()
        yield
        self.end(name, messages, time.process_time() - c0)


def py_spy(pid: int, out: str) -> subprocess.Popen[bytes]:
    """py-spy recording ``pid`` into ``out`` until it is sent SIGINT: BENCH_PY_SPY_RATE
    samples a second (200), ``--native`` too when BENCH_PY_SPY_NATIVE=1 (C frames, at a tenth
    of the proxy's speed)."""
    exe = os.path.join(os.path.dirname(sys.executable), "py-spy")
    rate = os.environ.get("BENCH_PY_SPY_RATE", "200")
    args = [exe, "record", "-r", rate, "--threads", "-f", "raw", "-o", out, "-p", str(pid)]
    if os.environ.get("BENCH_PY_SPY_NATIVE") == "1":
        args.append("--native")
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_sdk(endpoint: str, count: int, cpu: CpuMeter, spy_out: str = "") -> dict[str, Any]:
    """The SDK's sends and receives in a child process, its CPU and the servers' per phase
    (``spy_out``: py-spy records the proxy during the receive+ack phase into it)."""
    spy: subprocess.Popen[bytes] | None = None
    child = subprocess.Popen(
        [sys.executable, "-c", SDK_SCRIPT, endpoint, TOPIC, str(count), BODY.hex()],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    lines: list[str] = []
    for line in child.stdout:
        lines.append(line)
        tag = line.strip()
        if tag in ("send", "receive"):
            if tag == "receive" and spy_out:
                spy = py_spy(cpu.pids["proxy"], spy_out)
                time.sleep(1.0)  # py-spy attaches
            cpu.begin()
        elif tag in ("sent", "received"):
            cpu.end(f"sdk_{'send' if tag == 'sent' else 'receive_ack'}", count, 0.0)
            if spy is not None:
                spy.send_signal(signal.SIGINT)
                spy.wait(60)
                spy = None
        else:
            continue
        child.stdin.write("\n")
        child.stdin.flush()
    if child.wait(600) != 0:
        raise RuntimeError(f"the SDK run failed: {''.join(lines)[-2000:]}")
    rates: dict[str, Any] = json.loads(lines[-1])
    for name, key, n in (("sdk_send", "send_cpu_s", count),
                         ("sdk_receive_ack", "receive_cpu_s", rates["received"])):  # fmt: skip
        cpu.per_msg[name]["client"] = round(rates[key] / max(1, n) * 1e6)
        if name == "sdk_receive_ack":  # the servers' figures were divided by count
            for k in ("proxy", "broker"):
                cpu.per_msg[name][k] = round(cpu.per_msg[name][k] * count / max(1, n))
            threads = cpu.threads[name]
            cpu.threads[name] = {k: round(v * count / max(1, n)) for k, v in threads.items()}
    return rates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=5_000)
    ap.add_argument("--py-spy", default="", help="record the proxy's SDK receive+ack here")
    args = ap.parse_args()
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-bench-proxy-")
    procs: list[Proc] = []
    result: dict[str, Any] = {"bench": "proxy", "body_bytes": len(BODY), "messages": args.count}
    try:
        ns, broker = one_broker(procs, work, "bench-proxy")
        g_port = free_port({int(ns.rsplit(":", 1)[1]), int(broker.rsplit(":", 1)[1])})
        endpoint = f"127.0.0.1:{g_port}"
        procs.append(Proc("proxy", "proxy", {
            "namesrvAddr": ns, "grpcServerPort": str(g_port), "proxyHost": "127.0.0.1",
            "logDir": work,
        }, work).start())  # fmt: skip
        trio.run(create_topics, ns, broker, [TOPIC])
        cpu = CpuMeter({"proxy": procs[-1].pid, "broker": procs[1].pid})
        with cpu.phase("direct_send", args.count):
            direct_send = trio.run(single_sends, ns, TOPIC, args.count, 64)
        # the backlog: warm-up + direct sends; each consumer group reads all of it
        backlog = args.count + 1
        with cpu.phase("direct_receive_ack", backlog):
            direct_recv = trio.run(pop_consume, ns, "bench_direct", backlog, 4, True)
        with cpu.phase("lean_send", args.count):
            lean_send_rate = asyncio.run(lean_send(endpoint, args.count))
        backlog += args.count
        with cpu.phase("lean_receive_ack", backlog):
            lean_recv = asyncio.run(lean_receive_ack(endpoint, backlog))
        sdk_rates = run_sdk(endpoint, args.count, cpu, args.py_spy)
        result.update(
            direct_send_msgs_per_s=round(direct_send),
            grpc_lean_send_msgs_per_s=round(lean_send_rate),
            sdk_send_msgs_per_s=round(sdk_rates["send"]),
            direct_receive_ack_msgs_per_s=round(direct_recv),
            grpc_lean_receive_ack_msgs_per_s=round(lean_recv),
            sdk_receive_ack_msgs_per_s=round(sdk_rates["receive_ack"]),
            lean_send_overhead=round(direct_send / lean_send_rate, 2),
            sdk_send_overhead=round(direct_send / sdk_rates["send"], 2),
            lean_receive_ack_overhead=round(direct_recv / lean_recv, 2),
            sdk_receive_ack_overhead=round(direct_recv / sdk_rates["receive_ack"], 2),
            cpu_us_per_msg=cpu.per_msg,
            proxy_threads_us_per_msg={k: v for k, v in cpu.threads.items() if "direct" not in k},
            sdk_proxy_share=[
                round(p["proxy"] / (p["proxy"] + p["client"]), 2)
                for p in (cpu.per_msg["sdk_send"], cpu.per_msg["sdk_receive_ack"])
            ],
        )
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
