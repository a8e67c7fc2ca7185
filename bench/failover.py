"""Failover benchmark: how long writes stop when a replicated broker set loses its master.

A NameServer with an embedded controller and a broker set of two replicas in controller mode
(allAckInSyncStateSet, the timings `rocketrio up` uses), all real processes on loopback. Four
producers send synchronously in a loop; each trial then
- kill:  SIGKILL the master, restart it (as `up` does) and wait until it is back in sync;
- hang:  SIGSTOP the master, SIGCONT it once a new master took writes, wait until back in sync.
Per trial: the write gap (last acknowledgement before the fault to the first one after it),
the time until the NameServer's route names the new master; for the run the acknowledged-but-lost
count (every acknowledged message is consumed at the end of the run; must be 0) and the
duplicates (messages stored twice: a send unanswered by a hung master is re-sent to the new one
once the route changes, actors/client/stuck_sends.py). The producers use the client's default
send timeout (3 s; ``--send-timeout``); ``--kinds hang`` runs only the hang trials.

Reference, measured in the same run: `restart_reference_s`, the time from SIGKILL to the first
acknowledgement of a LONE broker that is restarted in place (what a user waits without
failover). The gaps are reported also as a ratio to it.

    .venv/bin/python bench/failover.py [--trials 20] [--quick]

Prints ONE JSON line.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import signal
import statistics
import tempfile
import time
from collections import Counter
from datetime import datetime
from typing import Any

import trio
from benchlib import Proc, free_port, stop_all

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.controller_admin import ControllerAdmin
from rocketrio.actors.client.message import Message
from rocketrio.actors.client.producer import Producer
from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer
from rocketrio.actors.observe.logs import configure_logging
from rocketrio.protocol.message import parse_offset_msg_id

TOPIC = "FailoverBench"
SENDERS = 4


class Senders:
    """SENDERS producers' loops of synchronous sends; records every acknowledgement with the
    broker that stored it (the store host in its offsetMsgId)."""

    def __init__(self, ns: str, send_timeout: float) -> None:
        self.ns = ns
        self.send_timeout = send_timeout
        self.acked: set[str] = set()
        self.acks: list[tuple[float, int]] = []  # (time, port of the storing broker)
        self.seq = 0

    async def run(self, stop: trio.Event) -> None:
        async with Producer("fo_bench", self.ns, send_timeout=self.send_timeout, retries=6) as p:

            async def loop(k: int) -> None:
                while not stop.is_set():
                    self.seq += 1
                    body = f"s{k}-{self.seq}"
                    try:
                        r = await p.send(Message(TOPIC, body.encode()))
                    except Exception:
                        await trio.sleep(0.01)
                        continue
                    if r.send_status.name == "SEND_OK":
                        self.acked.add(body)
                        port = parse_offset_msg_id(r.offset_msg_id)[1]
                        self.acks.append((time.monotonic(), port))

            async with trio.open_nursery() as n:
                for k in range(SENDERS):
                    n.start_soon(loop, k)

    def first_ack_after(self, t: float, port: int) -> float | None:
        return next((x for x, p in self.acks if x > t and p == port), None)

    def gap(self, t: float, old_port: int, new_port: int) -> float:
        """From the last acknowledgement by the old master to the first by the new one after
        the fault at ``t`` (sends in flight at the fault may still be answered by the old
        master after ``t``; they count on its side)."""
        first_new = self.first_ack_after(t, new_port)
        if first_new is None:
            return float("nan")
        last_old = max((x for x, p in self.acks if x < first_new and p == old_port), default=t)
        return first_new - last_old


async def master_addr(admin: MQAdmin, name: str = "broker-a") -> str | None:
    try:
        info = await admin.cluster_info()
    except Exception:
        return None
    bd = info.brokerAddrTable.get(name)
    return None if bd is None else bd.brokerAddrs.get(0)


async def wait_in_sync(admin: MQAdmin, ctrl: str, replicas: int, timeout: float = 120) -> None:
    """Both replicas registered and in the controller's SyncStateSet (a kill with a set of one
    would rightly elect nobody: enableElectUncleanMaster=false)."""
    with trio.fail_after(timeout):
        while True:
            try:
                info = await admin.cluster_info()
                bd = info.brokerAddrTable.get("broker-a")
                async with ControllerAdmin(ctrl, timeout=2.0) as ca:
                    table = (await ca.get_sync_state_set(["broker-a"])).replicasInfoTable
            except Exception:  # the NameServer or controller still starting on a loaded host
                await trio.sleep(0.2)
                continue
            sss = table.get("broker-a")
            if (
                bd is not None
                and 0 in bd.brokerAddrs
                and len(bd.brokerAddrs) >= replicas
                and sss is not None
                and len(sss.inSyncReplicas) >= replicas
            ):
                return
            await trio.sleep(0.2)


async def trials(
    ns: str,
    ctrl: str,
    brokers: dict[str, Proc],
    kind: str,
    n: int,
    senders: Senders,
    log_dir: str,
) -> list[dict[str, float]]:
    out = []
    async with MQAdmin(ns) as admin:
        for _ in range(n):
            await wait_in_sync(admin, ctrl, 2)
            await trio.sleep(1.0)  # writes flowing to the settled set
            old = await master_addr(admin)
            assert old is not None
            victim = next(b for b in brokers.values() if b.name == _name_of(brokers, old))
            await trio.sleep(0.5)
            t0, t0_wall = time.monotonic(), time.time()
            victim.signal(signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
            new = old
            with trio.fail_after(60):  # a trial that never fails over is a loud failure
                while new == old or new is None:
                    await trio.sleep(0.01)
                    new = await master_addr(admin)
                in_route = time.monotonic() - t0
                old_port, new_port = (int(a.rpartition(":")[2]) for a in (old, new))
                while senders.first_ack_after(t0, new_port) is None:  # writes on the new one
                    await trio.sleep(0.01)
            gap = senders.gap(t0, old_port, new_port)
            if kind == "kill":
                victim.start()
            else:
                victim.signal(signal.SIGCONT)
            out.append(
                {"gap_s": gap, "new_master_in_route_s": in_route, **stage_times(log_dir, t0_wall)}
            )
    return out


# where a hang's time goes: the first line of each event after the fault, from the processes' logs
STAGES = (
    ("detected_s", "broker_heartbeat_timeout"),  # the controller found the master silent
    ("elected_s", "elect_master"),  # the election applied
    ("new_master_role_s", "broker_role_changed"),  # the new master took the role
    ("first_write_s", "master_first_write"),  # its first write in the new epoch
)


def stage_times(log_dir: str, t0_wall: float) -> dict[str, float]:
    """Seconds from the fault to each stage (STAGES), read from every *.jsonl log in log_dir."""
    firsts: dict[str, float] = {}
    names = {event: key for key, event in STAGES}
    for path in glob.glob(os.path.join(log_dir, "*.jsonl")):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not any(e in line for e in names):
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                key = names.get(rec.get("event", ""))
                if key is None or (key == "new_master_role_s" and "MASTER" not in str(
                        rec.get("broker_role"))):  # fmt: skip
                    continue
                t = datetime.fromisoformat(rec["ts"].replace("Z", "+00:00")).timestamp() - t0_wall
                if t >= 0 and t < firsts.get(key, math.inf):
                    firsts[key] = round(t, 3)
    return firsts


def _name_of(brokers: dict[str, Proc], addr: str) -> str:
    port = addr.rpartition(":")[2]
    for name, b in brokers.items():
        with open(b.path) as f:
            if f"listenPort={port}\n" in f.read():
                return name
    raise KeyError(addr)


async def consume_all(ns: str, acked: set[str]) -> Counter[str]:
    """Every message of the topic, with how often it was stored (a re-sent one: twice)."""
    got: Counter[str] = Counter()
    done = trio.Event()

    def listener(msgs: list[Any]) -> ConsumeStatus:
        for m in msgs:
            got[m.body.decode()] += 1
        if acked <= got.keys():
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    c = PushConsumer("fo_bench_c", ns, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.subscribe(TOPIC, "*")
    c.register_listener(listener)
    async with c:
        with trio.move_on_after(120):
            await done.wait()
        await trio.sleep(2)  # duplicates stored after the last new message
    return got


async def restart_reference(ns: str, lone: Proc) -> float:
    """SIGKILL a lone broker, restart it at once: time until a send is acknowledged again."""
    async with Producer("fo_ref", ns, send_timeout=1.0, retries=0) as p:
        for _ in range(100):
            try:
                await p.send(Message("RefTopic", b"x"))
                break
            except Exception:
                await trio.sleep(0.2)
        t0 = time.monotonic()
        lone.signal(signal.SIGKILL)
        lone.start()
        while True:
            try:
                await p.send(Message("RefTopic", b"y"))
                return time.monotonic() - t0
            except Exception:
                await trio.sleep(0.01)


def summary(values: list[float]) -> dict[str, float]:
    v = sorted(x for x in values if x == x)
    if not v:
        return {}
    p99 = v[min(len(v) - 1, round(0.99 * (len(v) - 1)))]
    return {
        "p50": round(statistics.median(v), 3),
        "p99": round(p99, 3),
        "max": round(v[-1], 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="3 trials of each kind")
    ap.add_argument("--kinds", default="kill,hang", help="which trials: kill, hang or both")
    ap.add_argument(
        "--send-timeout", type=float, default=3.0,
        help="the producers' sendMsgTimeout in seconds (default: the client's 3 s)",
    )  # fmt: skip
    args = ap.parse_args()
    n = 3 if args.quick else args.trials
    configure_logging("bench", "bench", None, console=None)
    work = tempfile.mkdtemp(prefix="rocketrio-fobench-")
    taken: set[int] = set()
    ns_port, ctrl_port, a0, a1, lone_port = (free_port(taken) for _ in range(5))
    ns = f"127.0.0.1:{ns_port}"
    ctrl = f"127.0.0.1:{ctrl_port}"
    procs: list[Proc] = []
    result: dict[str, Any] = {
        "bench": "failover", "trials": n, "senders": SENDERS, "send_timeout_s": args.send_timeout,
    }  # fmt: skip
    try:
        nsp = Proc("namesrv", "namesrv", {
            "listenPort": str(ns_port), "logDir": work, "enableControllerInNamesrv": "true",
            "controllerDLegerGroup": "g", "controllerDLegerPeers": f"n0-127.0.0.1:{ctrl_port}",
            "controllerDLegerSelfId": "n0", "controllerStorePath": os.path.join(work, "ctrl"),
            "scanNotActiveBrokerInterval": "100", "scanInactiveMasterInterval": "100",
        }, work)  # fmt: skip
        nsp.start()
        procs.append(nsp)
        time.sleep(0.5)
        brokers = {}
        for name, port in (("broker-a-0", a0), ("broker-a-1", a1)):
            b = Proc("broker", name, {
                "brokerName": "broker-a", "brokerIP1": "127.0.0.1", "listenPort": str(port),
                "namesrvAddr": ns, "storePathRootDir": os.path.join(work, name),
                "logDir": work, "enableControllerMode": "true",
                "controllerAddr": f"127.0.0.1:{ctrl_port}", "allAckInSyncStateSet": "true",
                "brokerHeartbeatInterval": "200", "controllerHeartBeatTimeoutMills": "1000",
                "flushDiskType": "ASYNC_FLUSH",
            }, work)  # fmt: skip
            b.start()
            brokers[name] = b
            procs.append(b)
        lone = Proc("broker", "lone", {
            "brokerName": "lone", "brokerClusterName": "Ref", "brokerIP1": "127.0.0.1",
            "listenPort": str(lone_port), "namesrvAddr": ns,
            "storePathRootDir": os.path.join(work, "lone"), "logDir": work,
            "autoCreateTopicEnable": "false",  # only RefTopic lives here
        }, work)  # fmt: skip
        lone.start()
        procs.append(lone)

        async def run_all() -> None:
            senders = Senders(ns, args.send_timeout)
            stop = trio.Event()
            async with MQAdmin(ns) as admin:
                await wait_in_sync(admin, ctrl, 2)
                master = await master_addr(admin)
                for topic, addr, queues in (
                    ("RefTopic", f"127.0.0.1:{lone_port}", 1),
                    (TOPIC, master, 4),  # on broker-a only (its slave copies the config)
                ):
                    for _ in range(200):
                        try:
                            await admin.update_topic(
                                topic, broker_addr=addr, read_queues=queues, write_queues=queues
                            )
                            break
                        except Exception:
                            await trio.sleep(0.1)
                await trio.sleep(4)  # the slave's metadata sync copies the topic
            result["restart_reference_s"] = round(await restart_reference(ns, lone), 3)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(senders.run, stop)
                await trio.sleep(2)
                for kind in args.kinds.split(","):
                    rows = await trials(ns, ctrl, brokers, kind, n, senders, work)
                    for key, _event in STAGES:
                        result[f"{kind}_{key}"] = summary([r.get(key, math.nan) for r in rows])
                    gaps = [r["gap_s"] for r in rows]
                    result[f"{kind}_write_gap_s"] = summary(gaps)
                    result[f"{kind}_new_master_in_route_s"] = summary(
                        [r["new_master_in_route_s"] for r in rows]
                    )
                    ref = result["restart_reference_s"]
                    result[f"{kind}_gap_p99_vs_restart"] = round(
                        result[f"{kind}_write_gap_s"]["p99"] / ref, 3
                    )
                stop.set()
            got = await consume_all(ns, senders.acked)
            result["acked"] = len(senders.acked)
            result["acked_but_lost"] = len(senders.acked - got.keys())
            # a send re-sent after its master changed may be stored twice (at least once)
            result["duplicates"] = sum(c - 1 for c in got.values() if c > 1)

        trio.run(run_all)
    finally:
        stop_all(procs, work)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
