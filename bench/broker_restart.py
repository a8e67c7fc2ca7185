"""A broker process on its store, started, stopped, killed and timed until it answers again.

Used by bench/store_scale.py. `Broker` wraps one launcher process (`benchlib.Proc`, a fresh one
per start) with its config, store and JSON log; `restart` stops it cleanly (SIGTERM) or kills
it (SIGKILL), starts a new process on the same store and returns a `Restart`:

- ready_s: from just before the process is spawned until the broker has answered a direct
  SEND_MESSAGE_V2 (queue 0 of ``topic``) with SUCCESS and then a PULL_MESSAGE (queue 0,
  offset 0, subscription "*") with any pull status, probing every PROBE_PERIOD_S; send_ok_s is
  the first half. No NameServer route is involved: the address is known.
- from the new process's JSON log, as seconds from spawn: its first line, the start of
  recovery (``commitlog_recovered`` minus its took_ms: everything before is the interpreter,
  imports, config and store lock), the end of recovery and the ``broker_boot`` line (written
  after the first registration, so it may follow ready_s), plus the recovery record's fields.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import signal
import time
from typing import Any

import trio
from benchlib import Proc

from rocketrio.actors.client.api import MQClientAPI, request
from rocketrio.actors.client.errors import MQBrokerError
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingError
from rocketrio.actors.kernel.transport import TcpTransport
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    PULL_FLAG_SUBSCRIPTION,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
)

READY_TIMEOUT_S = 600.0
PROBE_PERIOD_S = 0.01
BOOT_LINE_WAIT_S = 30.0
PROBE_GROUP = "restart_probe"


@dataclasses.dataclass
class Memory:
    rss_mb: float
    rss_anon_mb: float
    rss_file_mb: float
    vm_hwm_mb: float


@dataclasses.dataclass
class Restart:
    """One restart of the broker process on its store (see the module docstring); seconds
    from spawn, ``recovery`` = fields of the ``commitlog_recovered`` record."""

    how: str
    ready_s: float
    send_ok_s: float
    pull_ok_s: float
    shutdown_s: float | None
    log_first_line_s: float | None
    recovery_began_s: float | None
    recovered_at_s: float | None
    boot_at_s: float | None
    recovery: dict[str, Any]


class Broker:
    """The broker process on its store: start, stop, kill, and what its log says since a start."""

    def __init__(self, conf: dict[str, str], work: str, name: str) -> None:
        self.conf, self.work, self.name = conf, work, name
        self.addr = f"127.0.0.1:{conf['listenPort']}"
        self.store = conf["storePathRootDir"]
        self.log_path = os.path.join(conf["logDir"], f"{name}.jsonl")
        self.proc: Proc | None = None
        self.started_wall = 0.0
        self._log_from = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, extra: dict[str, str] | None = None) -> float:
        """Spawn the process (config = base + ``extra``); returns the monotonic spawn time."""
        self._log_from = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        self.proc = Proc("broker", self.name, {**self.conf, **(extra or {})}, self.work)
        self.started_wall = time.time()
        t0 = time.monotonic()
        self.proc.start()
        return t0

    def stop(self) -> float:
        """SIGTERM (a clean shutdown); seconds until the process exited."""
        assert self.proc is not None and self.proc.p is not None
        t0 = time.monotonic()
        self.proc.signal(signal.SIGTERM)
        self.proc.p.wait(300)
        return time.monotonic() - t0

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.signal(signal.SIGKILL)

    def exited(self) -> int | None:
        assert self.proc is not None and self.proc.p is not None
        return self.proc.p.poll()

    def console_tail(self) -> str:
        path = os.path.join(self.work, f"{self.name}.out")
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().strip().splitlines()
        return lines[-1] if lines else ""

    def events(self) -> list[dict[str, Any]]:
        """The JSON log records written since the last start (a line still being written,
        without its newline, is left for the next call)."""
        if not os.path.exists(self.log_path):
            return []
        with open(self.log_path, "rb") as f:
            f.seek(self._log_from)
            return [json.loads(line) for line in f if line.endswith(b"\n")]

    def since_start_s(self, record: dict[str, Any]) -> float:
        ts = datetime.datetime.fromisoformat(record["ts"].replace("Z", "+00:00")).timestamp()
        return round(ts - self.started_wall, 3)

    def memory(self) -> Memory:
        fields: dict[str, float] = {}
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                    fields[key] = round(int(rest.split()[0]) / 1024, 1)
        return Memory(fields["VmRSS"], fields["RssAnon"], fields["RssFile"], fields["VmHWM"])


def probe_send(topic: str) -> Any:
    """SEND_MESSAGE_V2 of a small body to queue 0 of ``topic``."""
    v1 = SendMessageRequestHeader(
        producerGroup=PROBE_GROUP, topic=topic, defaultTopic="TBW102",
        defaultTopicQueueNums=4, queueId=0, sysFlag=0,
        bornTimestamp=int(time.time() * 1000), flag=0,
    )  # fmt: skip
    return request(RequestCode.SEND_MESSAGE_V2, SendMessageRequestHeaderV2.from_v1(v1), b"probe")


class NotReady(Exception):
    """The broker did not answer a send and a pull in time; says what it answered last."""


async def wait_ready(
    ns: str, addr: str, topic: str, t0: float, timeout_s: float
) -> tuple[float, float]:
    """Seconds from ``t0`` (monotonic) until the broker at ``addr`` acknowledged a send, then
    answered a pull (any pull status, subscription "*"); probes every PROBE_PERIOD_S. Raises
    NotReady after ``timeout_s``."""
    pull = PullMessageRequestHeader(
        consumerGroup=PROBE_GROUP, topic=topic, queueId=0, queueOffset=0, maxMsgNums=1,
        sysFlag=PULL_FLAG_SUBSCRIPTION, commitOffset=0, suspendTimeoutMillis=0, subVersion=0,
        subscription="*", expressionType="TAG",
    )  # fmt: skip
    last = "nothing yet"
    times: list[float] = []
    with trio.move_on_after(timeout_s):
        async with RemotingClient(TcpTransport(), connect_timeout=1.0) as client:
            api = MQClientAPI(client, [ns], 5.0)
            while not times:
                try:
                    resp = await client.invoke(addr, probe_send(topic), 5.0)
                    if resp.code == ResponseCode.SUCCESS:
                        times.append(time.monotonic() - t0)
                        break
                    last = f"send answered {resp.code}: {resp.remark}"
                except RemotingError as e:
                    last = f"send: {e}"
                await trio.sleep(PROBE_PERIOD_S)
            while len(times) < 2:
                try:
                    await api.pull(addr, pull, 5.0)
                    times.append(time.monotonic() - t0)
                    break
                except (RemotingError, MQBrokerError) as e:
                    last = f"pull: {e}"
                await trio.sleep(PROBE_PERIOD_S)
    if len(times) < 2:
        raise NotReady(f"{addr} not ready after {timeout_s} s; last: {last}")
    return times[0], times[1]


def restart(broker: Broker, ns: str, topic: str, how: str) -> Restart:
    """Stop the broker (``how``: "clean" = SIGTERM, "kill9" = SIGKILL), start it on the same
    store and time it until it answers (see the module docstring)."""
    shutdown_s = None
    if how == "clean":
        shutdown_s = round(broker.stop(), 3)
    else:
        broker.kill()
    t0 = broker.start()
    send_ok, pull_ok = trio.run(wait_ready, ns, broker.addr, topic, t0, READY_TIMEOUT_S)
    return restart_figures(broker, how, send_ok, pull_ok, shutdown_s)


def restart_figures(
    broker: Broker, how: str, send_ok: float, pull_ok: float, shutdown_s: float | None
) -> Restart:
    """The timed readiness plus what the broker's log says about this start (the boot line
    comes after the first registration, which may follow the first answers: waited for)."""
    deadline = time.monotonic() + BOOT_LINE_WAIT_S
    records = broker.events()
    while not any(r["event"] == "broker_boot" for r in records) and time.monotonic() < deadline:
        time.sleep(0.05)
        records = broker.events()
    by_event = {r["event"]: r for r in records}
    recovered = by_event.get("commitlog_recovered")
    boot = by_event.get("broker_boot")
    keep = ("took_ms", "bytes_scanned", "scanned_from", "unclean_shutdown", "redispatched",
            "dropped_bytes", "cq_entries_dropped", "checkpoint", "max_offset")  # fmt: skip
    return Restart(
        how=how,
        ready_s=round(pull_ok, 3),
        send_ok_s=round(send_ok, 3),
        pull_ok_s=round(pull_ok, 3),
        shutdown_s=shutdown_s,
        log_first_line_s=broker.since_start_s(records[0]) if records else None,
        recovery_began_s=(
            round(broker.since_start_s(recovered) - recovered["took_ms"] / 1000, 3)
            if recovered
            else None
        ),
        recovered_at_s=broker.since_start_s(recovered) if recovered else None,
        boot_at_s=broker.since_start_s(boot) if boot else None,
        recovery={k: recovered.get(k) for k in keep} if recovered else {},
    )
