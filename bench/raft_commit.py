"""Controller Raft benchmark: 3 controller processes on loopback, figures as ONE JSON line.

Starts three standalone replicas (`python -m rocketrio.cli.main controller -c ...`, default Raft
timeouts) in a temporary directory, then measures through the real request path:

- throughput: a client keeps `--window` requests in flight to the leader for `--seconds`; each is
  the internal CONTROLLER_BENCH_PROPOSE (1199) with a 256-byte body, which the leader proposes as
  a no-op entry and answers once it is committed (fsynced on a majority) and applied;
- latency: one request every 1/`--rate` s for `--seconds` (open loop: the schedule never waits
  for answers), p50/p99 from each send to its answer;
- failover: kill -9 the leader, then the time until a survivor first commits a proposal.

    .venv/bin/python bench/raft_commit.py [--window 512] [--rate 1000] [--seconds 3]

Requests use the ROCKETMQ binary header so the client spends little CPU per request (it shares
the machine with the three replicas).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
from typing import Any

import trio
from benchlib import free_port

from rocketrio.actors.controller.bench_hook import CONTROLLER_BENCH_PROPOSE
from rocketrio.protocol.codes import SERIALIZE_ROCKETMQ, ResponseCode
from rocketrio.protocol.remoting import FrameDecoder, RemotingCommand, encode_command

IDS = ("n0", "n1", "n2")
ENTRY_BYTES = 256
_OPAQUE = struct.Struct(">i")
_OPAQUE_AT = 8 + 5  # frame length + header length/type, then code(2) language(1) version(2)


def _free_ports(count: int) -> list[int]:
    taken: set[int] = set()
    return [free_port(taken) for _ in range(count)]


def _start_cluster(workdir: str) -> dict[str, tuple[str, subprocess.Popen[bytes]]]:
    addrs = {nid: f"127.0.0.1:{p}" for nid, p in zip(IDS, _free_ports(len(IDS)), strict=True)}
    peers = ";".join(f"{nid}-{addrs[nid]}" for nid in IDS)
    procs = {}
    for nid in IDS:
        conf = os.path.join(workdir, f"{nid}.conf")
        with open(conf, "w") as f:
            f.write(
                f"controllerDLegerGroup=bench\ncontrollerDLegerPeers={peers}\n"
                f"controllerDLegerSelfId={nid}\ncontrollerStorePath={workdir}/store\n"
                f"logDir={workdir}/logs\n"
            )
        out = open(os.path.join(workdir, f"{nid}.out"), "wb")
        cmd = [sys.executable, "-m", "rocketrio.cli.main", "controller", "-c", conf]
        procs[nid] = (addrs[nid], subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT))
    return procs


def _frame(opaque: int) -> bytearray:
    cmd = RemotingCommand(
        code=CONTROLLER_BENCH_PROPOSE,
        opaque=opaque,
        body=os.urandom(ENTRY_BYTES),
        serialize_type=SERIALIZE_ROCKETMQ,
    )
    frame = bytearray(encode_command(cmd))
    assert _OPAQUE.unpack_from(frame, _OPAQUE_AT)[0] == opaque
    return frame


class Pipe:
    """A raw connection that sends pre-encoded bench frames and reads answers by opaque."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.template = _frame(1)
        self.decoder = FrameDecoder()
        self.next_opaque = 1

    @classmethod
    async def open(cls, addr: str) -> Pipe:
        host, port = addr.rsplit(":", 1)
        stream = await trio.open_tcp_stream(host, int(port))
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(stream)

    def frames(self, n: int) -> tuple[bytes, list[int]]:
        out, ids = [], []
        for _ in range(n):
            self.next_opaque += 1
            _OPAQUE.pack_into(self.template, _OPAQUE_AT, self.next_opaque)
            out.append(bytes(self.template))
            ids.append(self.next_opaque)
        return b"".join(out), ids

    async def answers(self) -> list[RemotingCommand]:
        data = await self.stream.receive_some(256 * 1024)
        if not data:
            raise ConnectionError("controller closed the connection")
        self.decoder.feed(data)
        out = []
        while (cmd := self.decoder.next_command()) is not None:
            out.append(cmd)
        return out


async def _leader(procs: dict[str, tuple[str, subprocess.Popen[bytes]]], timeout_s: float) -> str:
    """The replica whose bench proposal commits (it is the ready leader)."""
    deadline = trio.current_time() + timeout_s
    while trio.current_time() < deadline:
        for nid, (addr, proc) in procs.items():
            if proc.poll() is not None:
                continue
            try:
                with trio.move_on_after(0.5):
                    pipe = await Pipe.open(addr)
                    data, _ = pipe.frames(1)
                    await pipe.stream.send_all(data)
                    answers: list[RemotingCommand] = []
                    while not answers:
                        answers = await pipe.answers()
                    await pipe.stream.aclose()
                    if answers[0].code == ResponseCode.SUCCESS:
                        return nid
            except OSError:
                pass
        await trio.sleep(0.005)
    raise RuntimeError(f"no controller leader within {timeout_s}s")


async def _throughput(addr: str, window: int, seconds: float) -> tuple[float, int]:
    pipe = await Pipe.open(addr)
    done = errors = 0
    counting_from = trio.current_time() + 0.5  # warm-up
    counted = 0
    stop_at = counting_from + seconds
    data, _ = pipe.frames(window)
    await pipe.stream.send_all(data)
    while trio.current_time() < stop_at:
        answers = await pipe.answers()
        ok = sum(1 for a in answers if a.code == ResponseCode.SUCCESS)
        errors += len(answers) - ok
        done += len(answers)
        if trio.current_time() >= counting_from:
            counted += ok
        data, _ = pipe.frames(len(answers))
        await pipe.stream.send_all(data)
    await pipe.stream.aclose()
    return counted / seconds, errors


async def _latency(addr: str, rate: float, seconds: float) -> tuple[float, float, int, float]:
    pipe = await Pipe.open(addr)
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    errors = 0
    lag_max = 0.0
    total = int(rate * seconds)
    period = 1 / rate

    async def sender() -> None:
        nonlocal lag_max
        start = trio.current_time() + 0.05
        for i in range(total):
            at = start + i * period
            await trio.sleep_until(at)
            data, ids = pipe.frames(1)
            # open loop: the schedule never waits for answers; latency runs from the actual
            # send (epoll rounds timeouts up to whole ms, which is the client's lateness, not
            # the cluster's); how late the client ever was is reported as sender_lag_max_ms
            now = trio.current_time()
            lag_max = max(lag_max, now - at)
            sent_at[ids[0]] = now
            await pipe.stream.send_all(data)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sender)
        while len(latencies) + errors < total:
            for a in await pipe.answers():
                if a.code == ResponseCode.SUCCESS:
                    latencies.append(trio.current_time() - sent_at.pop(a.opaque))
                else:
                    errors += 1
    await pipe.stream.aclose()
    latencies.sort()
    p50 = latencies[len(latencies) // 2]
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return p50 * 1000, p99 * 1000, errors, lag_max * 1000


async def _failover(procs: dict[str, tuple[str, subprocess.Popen[bytes]]], leader: str) -> float:
    proc = procs[leader][1]
    killed_at = trio.current_time()
    os.kill(proc.pid, signal.SIGKILL)
    survivors = {nid: v for nid, v in procs.items() if nid != leader}
    await _leader(survivors, 10)
    failover = trio.current_time() - killed_at
    proc.wait()
    return failover


async def _run(args: argparse.Namespace, workdir: str) -> dict[str, Any]:
    procs = _start_cluster(workdir)
    try:
        leader = await _leader(procs, 30)
        addr = procs[leader][0]
        commits, t_errors = await _throughput(addr, args.window, args.seconds)
        await trio.sleep(0.5)
        p50, p99, l_errors, lag = await _latency(addr, args.rate, args.seconds)
        failover = await _failover(procs, leader)
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    return {
        "bench": "raft_commit",
        "replicas": len(IDS),
        "entry_bytes": ENTRY_BYTES,
        "window": args.window,
        "commits_per_s": round(commits),
        "throughput_errors": t_errors,
        "rate_per_s": args.rate,
        "commit_latency_p50_ms": round(p50, 3),
        "commit_latency_p99_ms": round(p99, 3),
        "latency_errors": l_errors,
        "sender_lag_max_ms": round(lag, 3),
        "failover_s": round(failover, 3),
        "request_code": CONTROLLER_BENCH_PROPOSE,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--window", type=int, default=512, help="requests in flight (throughput)")
    p.add_argument("--rate", type=float, default=1000.0, help="requests/s (latency phase)")
    p.add_argument("--seconds", type=float, default=3.0, help="length of each phase")
    p.add_argument("--keep", action="store_true", help="keep the work dir (logs) afterwards")
    args = p.parse_args()
    workdir = tempfile.mkdtemp(prefix="raft_commit_")
    try:
        result = trio.run(_run, args, workdir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.keep:
        result["workdir"] = workdir
    print(json.dumps(result, separators=(",", ":")))


if __name__ == "__main__":
    main()
