"""Interop of slave acting master (RIP-32) with Apache RocketMQ 5.2.0, real processes.

Part 1 (``java-ns``): a Java 5.2 NameServer (supportActingMaster=true; notifyMinBrokerIdChanged
in the BROKER_HEARTBEAT mode only, as a new NameServer; off in the old-NameServer mode) and
rocketrio brokers broker-a id 0 (ASYNC_MASTER) and id 1 (SLAVE), enableSlaveActingMaster=true,
once per heartbeat mode (compatibleWithOldNameSrv=false: BROKER_HEARTBEAT; true:
QUERY_DATA_VERSION, members polled through the route of rmq_sys_SYNC_BROKER_MEMBER_broker-a).
The Java NameServer must route both and keep them routed past their brokerNotActiveTimeoutMillis
(4 s) on that mode's heartbeats; after kill -9 of the master its route for the topic must show
the slave as brokerId 0 with the write bit cleared (read by the rocketrio client and by the Java
client: mqadmin topicRoute), and the rocketrio slave must log ``acting_master_changed``
(acting=true). Last, the slave is stopped (SIGSTOP): the seconds until the NameServer drops it
show the timeout was in effect.

Part 2 (``rr-ns``): the reverse: a rocketrio NameServer (supportActingMaster=true) and Java 5.2
brokers (master id 0, slave id 1, enableSlaveActingMaster=true); after kill -9 of the Java
master the rocketrio NameServer's route must have upstream's shape (slave as id 0, write bit
cleared), read by the rocketrio client and by the Java client.

    .venv/bin/python bench/interop_acting_master.py [DIST] [--parts java-ns,rr-ns]
        [--modes false,true]

DIST defaults to /tmp/rocketmq-5.2.0/rocketmq-all-5.2.0-bin-release (see
../shared/tools/rocketmq-5.2.0/README.md: setup.sh unpacks it and writes the classpath file);
without it the script prints a JSON line with ``skipped`` and exits 0. Prints ONE JSON line:
per part and mode the routes before and after the kill, the seconds from the kill to the acting
route, and ``ok``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any

import trio
from benchlib import Proc

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.observe.logs import configure_logging

DEFAULT_DIST = "/tmp/rocketmq-5.2.0/rocketmq-all-5.2.0-bin-release"
DEFAULT_CP = "/tmp/rocketmq-5.2.0-home/cp2.txt"
TOPIC = "InteropActingTopic"
GROUP = "broker-a"
PERM_WRITE = 2
# Brokers ask to be dropped after 4 s of silence; the check waits past that plus one scan (5 s,
# both NameServers' default), so both stay routed only if this mode's heartbeats reach the
# NameServer (registration alone repeats every 30 s).
NOT_ACTIVE_MS = 4000
HEARTBEAT_CHECK_S = 11
OPENS = (
    "--add-opens java.base/java.lang=ALL-UNNAMED --add-opens java.base/java.util=ALL-UNNAMED "
    "--add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED "
    "--add-opens java.base/java.lang.reflect=ALL-UNNAMED "
    "--add-opens java.base/java.math=ALL-UNNAMED "
    "--add-exports java.base/sun.nio.ch=ALL-UNNAMED"
).split()


PORT_RANGE = [12_000, 31_000]  # --port-range: a test worker passes its own slice


def port_bases(count: int) -> list[int]:
    """``count`` ports P, each with P-2..P+2 free (Java's fast port P-2, HA port P+1)."""
    rng, out = random.Random(), list[int]()
    while len(out) < count:
        p = rng.randrange(PORT_RANGE[0] + 2, PORT_RANGE[1] - 3)
        if any(abs(p - q) < 10 for q in out):
            continue
        try:
            for q in range(p - 2, p + 3):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", q))
        except OSError:
            continue
        out.append(p)
    return out


class Java:
    """The Java side: a NameServer or broker process, and mqadmin runs."""

    def __init__(self, dist: str, cp_file: str, work: str) -> None:
        self.dist, self.work = dist, work
        with open(cp_file, encoding="utf-8") as f:
            self.cp = "conf:" + f.read().strip()

    def _cmd(self, name: str, heap: str, logback: str, main: str) -> list[str]:
        home = os.path.join(self.work, f"javahome-{name}")
        os.makedirs(home, exist_ok=True)
        return [
            "java", f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", *OPENS,
            f"-Duser.home={home}", f"-Drmq.logback.configurationFile={self.dist}/conf/{logback}",
            "-cp", self.cp, main,
        ]  # fmt: skip

    def start(self, name: str, kind: str, conf: dict[str, str]) -> subprocess.Popen[bytes]:
        path = os.path.join(self.work, f"{name}.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{k}={v}\n" for k, v in conf.items())
        if kind == "namesrv":
            cmd = self._cmd(name, "256m", "rmq.namesrv.logback.xml",
                            "org.apache.rocketmq.namesrv.NamesrvStartup")  # fmt: skip
        else:
            cmd = self._cmd(name, "512m", "rmq.broker.logback.xml",
                            "org.apache.rocketmq.broker.BrokerStartup")  # fmt: skip
            cmd.insert(1, "-XX:MaxDirectMemorySize=512m")
        with open(os.path.join(self.work, f"{name}.out"), "ab") as out:
            return subprocess.Popen(
                [*cmd, "-c", path], cwd=self.dist, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "ROCKETMQ_HOME": self.dist},
            )  # fmt: skip

    def mqadmin(self, *args: str) -> str:
        cmd = self._cmd("mqadmin", "128m", "rmq.tools.logback.xml",
                        "org.apache.rocketmq.tools.command.MQAdminStartup")  # fmt: skip
        out = subprocess.run(
            [*cmd, *args], cwd=self.dist, capture_output=True, text=True, timeout=120,
            env={**os.environ, "ROCKETMQ_HOME": self.dist}, check=False,
        )  # fmt: skip
        return out.stdout

    def topic_route(self, ns: str, topic: str) -> dict[str, Any] | None:
        """The route as the Java client reads it (mqadmin topicRoute prints its JSON)."""
        text = self.mqadmin("topicRoute", "-n", ns, "-t", topic)
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            return None
        body = text[start : end + 1]  # fastjson writes integer map keys unquoted
        return json.loads(re.sub(r"([{,]\s*)(-?\d+)(\s*:)", r'\1"\2"\3', body))


def shape(route: Any) -> dict[str, Any]:
    """broker-a's addresses by id and its queue perm, from a rocketrio or a Java route."""
    if route is None:
        return {}
    if isinstance(route, dict):  # Java JSON: keys are strings
        bds = {b["brokerName"]: {int(k): v for k, v in b["brokerAddrs"].items()}
               for b in route.get("brokerDatas", [])}  # fmt: skip
        perms = {q["brokerName"]: q["perm"] for q in route.get("queueDatas", [])}
    else:
        bds = {b.brokerName: dict(b.brokerAddrs) for b in route.brokerDatas}
        perms = {q.brokerName: q.perm for q in route.queueDatas}
    return {"addrs": bds.get(GROUP, {}), "perm": perms.get(GROUP)}


async def rr_route(ns: str) -> dict[str, Any]:
    try:
        async with MQAdmin(ns) as admin:
            return shape(await admin.topic_route(TOPIC))
    except Exception as e:  # not routed yet, NameServer not up yet
        return {"error": type(e).__name__}


async def wait_shape(ns: str, want: Any, timeout_s: float) -> tuple[dict[str, Any], float]:
    """Poll the NameServer's route (rocketrio client) until ``want(shape)``; (last, seconds)."""
    t0 = time.monotonic()
    last: dict[str, Any] = {}
    while time.monotonic() - t0 < timeout_s:
        last = await rr_route(ns)
        if want(last):
            break
        await trio.sleep(0.2)
    return last, round(time.monotonic() - t0, 2)


async def create_topic(ns: str, master: str) -> None:
    for _ in range(100):
        try:
            async with MQAdmin(ns) as admin:
                await admin.update_topic(TOPIC, broker_addr=master, read_queues=2, write_queues=2)
            return
        except Exception:
            await trio.sleep(0.5)
    raise RuntimeError(f"could not create {TOPIC} on {master}")


async def silent_drop_s(ns: str, pid: int) -> float | None:
    """SIGSTOP the (acting) slave: seconds until the NameServer drops it by its timeout (shows
    that the heartbeat check above had a timeout to beat); None if never within 30 s."""
    os.kill(pid, signal.SIGSTOP)
    try:
        gone, took = await wait_shape(ns, lambda sh: not sh.get("addrs"), 30)
        return took if not gone.get("addrs") else None
    finally:
        os.kill(pid, signal.SIGCONT)


def both_routed(m: str, s: str) -> Any:
    return lambda sh: sh.get("addrs") == {0: m, 1: s} and sh.get("perm", 0) & PERM_WRITE


def acting_shape(s: str) -> Any:
    return lambda sh: sh.get("addrs") == {0: s} and not sh.get("perm", PERM_WRITE) & PERM_WRITE


def log_events(log_dir: str, name: str, event: str) -> list[dict[str, Any]]:
    out = []
    for path in glob.glob(os.path.join(log_dir, f"{name}*.jsonl")):
        with open(path, encoding="utf-8") as f:
            out += [json.loads(ln) for ln in f if f'"{event}"' in ln]
    return out


def acting_events(log_dir: str, name: str) -> list[bool]:
    return [bool(r.get("acting")) for r in log_events(log_dir, name, "acting_master_changed")]


def java_acting_lines(work: str) -> list[str]:
    """The Java slave's log lines saying its group's smallest id moved to it (upstream
    onMinBrokerChange: it then runs the special services as acting master)."""
    path = os.path.join(work, "javahome-java-s", "logs", "rocketmqlogs", "broker.log")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [ln.strip()[20:] for ln in f if "Min broker changed" in ln and "new 1-" in ln]


def java_ns_case(java: Java, work: str, compatible: bool) -> dict[str, Any]:
    """Part 1 in one heartbeat mode (module docstring)."""
    ns_port, m_port, s_port = port_bases(3)
    ns, m, s = (f"127.0.0.1:{p}" for p in (ns_port, m_port, s_port))
    logs = os.path.join(work, "logs")
    jns = java.start("java-ns", "namesrv", {
        "listenPort": str(ns_port), "bindAddress": "127.0.0.1", "supportActingMaster": "true",
        "notifyMinBrokerIdChanged": str(not compatible).lower(),  # a new-style NameServer pushes
    })  # fmt: skip
    common = {
        "namesrvAddr": ns, "brokerIP1": "127.0.0.1", "logDir": logs, "brokerName": GROUP,
        "enableSlaveActingMaster": "true", "compatibleWithOldNameSrv": str(compatible).lower(),
        "brokerNotActiveTimeoutMillis": str(NOT_ACTIVE_MS),
    }  # fmt: skip
    procs = [
        Proc("broker", "rr-m", {**common, "brokerId": "0", "brokerRole": "ASYNC_MASTER",
             "listenPort": str(m_port), "storePathRootDir": os.path.join(work, "m")}, work),
        Proc("broker", "rr-s", {**common, "brokerId": "1", "brokerRole": "SLAVE",
             "listenPort": str(s_port), "storePathRootDir": os.path.join(work, "s")}, work),
    ]  # fmt: skip
    try:
        for p in procs:
            p.start()
        return trio.run(_java_ns_flow, java, ns, m, s, procs[0], procs[1], logs)
    finally:
        for p in reversed(procs):
            p.stop()
        jns.terminate()
        jns.wait(20)


async def _java_ns_flow(
    java: Java, ns: str, m: str, s: str, master: Proc, slave: Proc, logs: str
) -> dict[str, Any]:
    await create_topic(ns, m)
    before, t_before = await wait_shape(ns, both_routed(m, s), 90)
    res: dict[str, Any] = {"before": before, "routed_both_s": t_before}
    if not both_routed(m, s)(before):
        return {**res, "ok": False, "why": "the Java NameServer did not route both brokers"}
    await trio.sleep(HEARTBEAT_CHECK_S)  # only this mode's heartbeats keep them routed
    res["still_routed_after_heartbeat_timeout"] = bool(both_routed(m, s)(await rr_route(ns)))
    res["before_java_client"] = shape(await trio.to_thread.run_sync(java.topic_route, ns, TOPIC))
    master.signal(signal.SIGKILL)
    after, t_after = await wait_shape(ns, acting_shape(s), 60)
    res.update(after=after, kill_to_acting_route_s=t_after)
    t0 = time.monotonic()
    while True not in acting_events(logs, "rr-s") and time.monotonic() - t0 < 20:
        await trio.sleep(0.2)
    res["slave_acting_events"] = acting_events(logs, "rr-s")
    moved = log_events(logs, "rr-s", "group_min_broker_id_moved")  # poll or the NameServer's 905
    res["slave_min_id_moved_by"] = [r.get("source") for r in moved]
    res["after_java_client"] = shape(await trio.to_thread.run_sync(java.topic_route, ns, TOPIC))
    res["silent_slave_dropped_s"] = await silent_drop_s(ns, slave.pid)
    res["ok"] = bool(
        res["still_routed_after_heartbeat_timeout"]
        and acting_shape(s)(after)
        and acting_shape(s)(res["after_java_client"])
        and True in res["slave_acting_events"]
        and res["silent_slave_dropped_s"] is not None
    )
    return res


def rr_ns_case(java: Java, work: str, compatible: bool) -> dict[str, Any]:
    """Part 2 in one heartbeat mode (module docstring)."""
    ns_port, m_port, s_port = port_bases(3)
    ns, m, s = (f"127.0.0.1:{p}" for p in (ns_port, m_port, s_port))
    rns = Proc("namesrv", "rr-ns", {
        "listenPort": str(ns_port), "logDir": os.path.join(work, "logs"),
        "supportActingMaster": "true",
    }, work).start()  # fmt: skip
    common = {
        "brokerClusterName": "DefaultCluster", "brokerName": GROUP, "namesrvAddr": ns,
        "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1", "flushDiskType": "ASYNC_FLUSH",
        "autoCreateTopicEnable": "true", "enableSlaveActingMaster": "true",
        "compatibleWithOldNameSrv": str(compatible).lower(),
        "mappedFileSizeCommitLog": str(64 << 20), "timerWheelEnable": "false",
        "brokerNotActiveTimeoutMillis": str(NOT_ACTIVE_MS),
    }  # fmt: skip
    confs = {}
    for name, bid, port in (("java-m", 0, m_port), ("java-s", 1, s_port)):
        store = os.path.join(work, name)
        confs[name] = {**common, "brokerId": str(bid),
                       "brokerRole": "SLAVE" if bid else "ASYNC_MASTER",
                       "listenPort": str(port), "haListenPort": str(port + 1),
                       "storePathRootDir": store,
                       "storePathCommitLog": os.path.join(store, "commitlog")}  # fmt: skip
    brokers = [java.start(n, "broker", c) for n, c in confs.items()]
    try:
        return trio.run(_rr_ns_flow, java, work, ns, m, s, brokers[0], brokers[1])
    finally:
        for b in reversed(brokers):
            if b.poll() is None:
                b.terminate()
                b.wait(30)
        rns.stop()


async def _rr_ns_flow(
    java: Java,
    work: str,
    ns: str,
    m: str,
    s: str,
    master: subprocess.Popen[bytes],
    slave: subprocess.Popen[bytes],
) -> dict[str, Any]:
    await create_topic(ns, m)
    before, t_before = await wait_shape(ns, both_routed(m, s), 120)
    res: dict[str, Any] = {"before": before, "routed_both_s": t_before}
    if not both_routed(m, s)(before):
        return {**res, "ok": False, "why": "the rocketrio NameServer did not route both brokers"}
    await trio.sleep(HEARTBEAT_CHECK_S)  # only this mode's heartbeats keep them routed
    res["still_routed_after_heartbeat_timeout"] = bool(both_routed(m, s)(await rr_route(ns)))
    master.send_signal(signal.SIGKILL)
    master.wait(10)
    after, t_after = await wait_shape(ns, acting_shape(s), 60)
    res.update(after=after, kill_to_acting_route_s=t_after)
    res["after_java_client"] = shape(await trio.to_thread.run_sync(java.topic_route, ns, TOPIC))
    t0 = time.monotonic()
    while not java_acting_lines(work) and time.monotonic() - t0 < 20:
        await trio.sleep(0.5)
    res["java_slave_log"] = java_acting_lines(work)
    res["silent_slave_dropped_s"] = await silent_drop_s(ns, slave.pid)
    res["ok"] = bool(
        res["still_routed_after_heartbeat_timeout"]
        and acting_shape(s)(after)
        and acting_shape(s)(res["after_java_client"])
        and res["java_slave_log"]
        and res["silent_slave_dropped_s"] is not None
    )
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dist", nargs="?", default=DEFAULT_DIST)
    ap.add_argument("--cp-file", default=DEFAULT_CP)
    ap.add_argument("--parts", default="java-ns,rr-ns")
    ap.add_argument("--modes", default="false,true", help="compatibleWithOldNameSrv values")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--port-range", default="12000-31000", help="ports drawn from FIRST-END")
    a = ap.parse_args()
    PORT_RANGE[:] = [int(x) for x in a.port_range.split("-")]
    for path, what in ((a.dist, "RocketMQ 5.2.0 dist"), (a.cp_file, "classpath file")):
        if not os.path.exists(path):
            why = f"{what} absent: {path} (see ../shared/tools/rocketmq-5.2.0/README.md)"
            print(json.dumps({"skipped": why}))
            return
    configure_logging("bench", "bench", None, console=None)
    cases = {"java-ns": java_ns_case, "rr-ns": rr_ns_case}
    out: dict[str, Any] = {}
    for part in a.parts.split(","):
        for mode in a.modes.split(","):
            work = tempfile.mkdtemp(prefix=f"interop-{part}-{mode}-")
            t0 = time.monotonic()
            try:
                res = cases[part](Java(a.dist, a.cp_file, work), work, mode == "true")
            except Exception as e:
                res = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            res["seconds"] = round(time.monotonic() - t0, 1)
            if res["ok"] and not a.keep:
                shutil.rmtree(work, ignore_errors=True)
            else:
                res["work"] = work
            out[f"{part}/compatibleWithOldNameSrv={mode}"] = res
    out["ok"] = all(v["ok"] for v in out.values() if isinstance(v, dict))
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
