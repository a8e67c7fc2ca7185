"""`rocketrio chaos`: the command (a thin Trio shell over the pure schedule and checkers).

One run: refuse a target that is not a running local cluster; create the run's topics; start the
consumers, then the producers; inject the planned faults; stop producing ``--drain`` before the
end and wait (up to ``--drain-timeout``) until every acknowledged message is consumed; then the
final read (a new group reads every topic from its first offset, up to ``--drain-timeout``
again); then the checkers, ``result.json``, ``report.html`` and the summary. Whatever ends the
run (its end, an error, Ctrl-C, SIGTERM, SIGHUP), every fault still injected is undone in a
shielded ``finally``: stopped processes continued, tc filters and the qdisc removed, ballast
deleted, slowed processes moved out of their I/O cgroups and those removed. Exit status: 0
clean, 1 a breach (lost acknowledged message, order violation, ...), 2 refused before starting,
130 interrupted (cleaned up; the partial result is written).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import attrs
import structlog
import trio

from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.observe import events
from rocketrio.cli.chaos import blkio, checkers, report
from rocketrio.cli.chaos.faults import Injected, Injector, unavailable_kinds
from rocketrio.cli.chaos.history import FaultWindow, History, RoutePoll, from_lines
from rocketrio.cli.chaos.schedule import STEP_GAP_S, PlannedFault, Timing, plan
from rocketrio.cli.chaos.workload import Workload

PROGRESS_S = 5.0
PRODUCERS_STOP_S = 15.0
POLL_S = 2.0
EXIT_OK, EXIT_BREACH, EXIT_REFUSED, EXIT_INTERRUPTED = 0, 1, 2, 130


def now_ms() -> int:
    return round(time.time() * 1000)


@attrs.define
class Options:
    timing: Timing
    names: tuple[str, ...]
    seed: int | None
    rate: float
    slow_kbit: int
    drain_timeout_s: float
    out_dir: str
    command: str
    throttle: blkio.Throttle = attrs.field(factory=blkio.Throttle)


class TraceTail:
    """Reads the trace lines the clients append to chaos's log, as they come."""

    def __init__(self, path: str, h: History) -> None:
        self.path, self.h, self.pos, self.bad = path, h, 0, 0
        self._rest = ""

    def read(self) -> None:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                f.seek(self.pos)
                data = f.read()
                self.pos = f.tell()
        except OSError:
            return
        data, self._rest = self._rest + data, ""
        lines = data.split("\n")
        self._rest = lines.pop()  # a line still being written
        self.bad += from_lines(lines, [t.topic for t in self.h.topics], self.h)


class Run:
    def __init__(self, injector: Injector, workload: Workload, opts: Options,
                 say: Callable[[str], None]) -> None:  # fmt: skip
        self.inj, self.wl, self.opts, self.say = injector, workload, opts, say
        self.h = History(topics=workload.specs(), intents=workload.intents)
        self.log = structlog.get_logger("chaos").bind(actor="chaos")
        self.run_id = workload.run_id
        self.current = ""
        self.done_faults = 0
        self.faults_over = False
        self.skipped: list[str] = []  # "<fault> #<i>: <step> skipped: <why>", said as it happens

    # ------------------------------------------------------------------ faults

    async def faults(self, planned: list[PlannedFault], t0: float, nursery: trio.Nursery) -> None:
        for pf in planned:
            await trio.sleep_until(t0 + pf.at_s)
            injected: list[Injected] = []
            targets: list[str] = []
            started = now_ms()
            # every step's target is who plays its role when the fault starts: killing the
            # controller first must not leave the next step unable to find the master
            resolved = [await self.inj.resolve_step(step) for step in pf.steps]
            for i, step in enumerate(pf.steps):
                if i:
                    await trio.sleep(STEP_GAP_S)
                r = await self.inj.inject(step, nursery, resolved[i])
                if isinstance(r, str):
                    targets.append(f"({step.name} skipped)")
                    self.skipped.append(f"{pf.name} #{pf.index}: {step.name} skipped: {r}")
                    self.say(f"  {self.skipped[-1]}")
                    events.emit(self.log, events.ChaosFaultSkipped(
                        run_id=self.run_id, fault_index=pf.index, fault=pf.name,
                        step=step.name, reason=r))  # fmt: skip
                    continue
                injected.append(r)
                targets.append(r.proc.name)
                events.emit(self.log, events.ChaosFaultInjected(
                    run_id=self.run_id, fault_index=pf.index, fault=pf.name, step=step.name,
                    child=r.proc.name, pid=r.pid))  # fmt: skip
            if not injected:
                continue
            kind = injected[0].step.kind.value
            window = FaultWindow(pf.index, pf.name, kind, tuple(targets), started, started)
            self.h.faults.append(window)
            self.current = f"{pf.name} on {', '.join(targets)}"
            await trio.sleep_until(t0 + pf.ends_s)
            for r in injected:
                self.inj.heal(r)
            self.h.faults[-1] = attrs.evolve(window, healed_ms=now_ms())
            events.emit(self.log, events.ChaosFaultHealed(
                run_id=self.run_id, fault_index=pf.index, fault=pf.name))  # fmt: skip
            self.current = ""
            self.done_faults += 1

    # ------------------------------------------------------------------ watchers

    async def poll_routes(self) -> None:
        async with MQAdmin(self.inj.cluster.namesrv) as admin:
            while True:
                for spec in self.h.topics:
                    try:
                        route = await admin.topic_route(spec.topic)
                    except Exception:  # mid-failover, or the NameServer is down: next round
                        continue
                    ts = now_ms()
                    masters = self._masters(route)
                    for q in route.queueDatas:
                        self.h.polls.append(RoutePoll(
                            ts, spec.topic, q.brokerName, q.readQueueNums, q.writeQueueNums,
                            q.perm, q.brokerName in masters))  # fmt: skip
                await trio.sleep(POLL_S)

    def _masters(self, route: Any) -> set[str]:
        """Broker sets the route lists a master for: id 0, unless id 0 is a classic slave acting
        as master (RIP-32: its queues read-only; the checkers count that as masterless)."""
        out = set()
        for b in route.brokerDatas:
            addr = b.brokerAddrs.get(0)
            proc = self.inj.cluster.by_addr(addr) if addr else None
            if addr and not (proc is not None and proc.classic_slave):
                out.add(b.brokerName)
        return out

    async def progress(self, t0: float, total: int) -> None:
        while True:
            await trio.sleep(PROGRESS_S)
            c = self.wl.counters
            el = trio.current_time() - t0
            acked = " ".join(f"{k} {v}" for k, v in sorted(c.acked.items()))
            cons = " ".join(f"{k} {v}" for k, v in sorted(c.consumed.items()))
            line = (f"[{el:5.0f}s/{self.opts.timing.duration_s:.0f}s] faults {self.done_faults}/"
                    f"{total}{' now: ' + self.current if self.current else ''} | acked {acked} | "
                    f"consumed {cons} | failed {sum(c.failed.values())}")  # fmt: skip
            self.say(line)

    async def drain(self, tail: TraceTail) -> bool:
        """Wait until every acknowledged message is consumed (True) or the drain timeout."""
        with trio.move_on_after(self.opts.drain_timeout_s):
            while True:
                await trio.to_thread.run_sync(tail.read)
                if checkers.lost(self.h).count == 0:
                    return True
                await trio.sleep(1.0)
        return False


async def _setup_topics(ns: str, wl: Workload) -> None:
    async with MQAdmin(ns) as admin:
        info = await admin.cluster_info()
        cluster = sorted(info.clusterAddrTable)[0]
        for spec in wl.specs():
            await admin.update_topic(spec.topic, cluster=cluster, read_queues=spec.read_queues,
                                     write_queues=spec.write_queues, perm=spec.perm)  # fmt: skip
        with trio.fail_after(30):
            for spec in wl.specs():
                while True:
                    try:
                        if (await admin.topic_route(spec.topic)).queueDatas:
                            break
                    except Exception:  # not routed yet
                        pass
                    await trio.sleep(0.3)


async def _watch_signals(sigs: Any, faults: trio.CancelScope, everything: trio.CancelScope,
                         run: Run, flag: list[bool]) -> None:  # fmt: skip
    """The first signal ends the fault phase (the producers then stop cleanly); a signal
    once the faults are over, or a second one, ends everything at once."""
    async for sig in sigs:
        run.say(f"chaos: {signal.Signals(sig).name}: healing every fault and stopping")
        if flag or faults.cancelled_caught or run.faults_over:
            everything.cancel()
        flag.append(True)
        faults.cancel()


async def _phases(run: Run, planned: list[PlannedFault], sigs: Any, n: trio.Nursery,
                  tail: TraceTail, interrupted: list[bool]) -> bool:  # fmt: skip
    """Faults under the workload, then (unless interrupted) the drain and the final read.
    A signal cancels only the fault phase: the producers then stop as at a normal end (the
    clients are never cancelled mid-request), and every fault is healed at once."""
    wl, opts, say = run.wl, run.opts, run.say
    await n.start(wl.run_consumers)
    t0 = trio.current_time()
    producers_done = trio.Event()

    async def produce() -> None:
        try:
            await wl.run_producers()
        finally:
            producers_done.set()

    n.start_soon(produce)
    n.start_soon(run.poll_routes)
    n.start_soon(run.progress, t0, len(planned))
    with trio.CancelScope() as faults_scope:
        n.start_soon(_watch_signals, sigs, faults_scope, n.cancel_scope, run, interrupted)
        await run.faults(planned, t0, n)
        await trio.sleep_until(t0 + opts.timing.duration_s - opts.timing.drain_s)
    run.faults_over = True
    wl.producing = False
    run.inj.heal_all()
    with trio.move_on_after(PRODUCERS_STOP_S):  # the last sends end (their timeouts are 3 s)
        await producers_done.wait()
    if interrupted:
        return False
    say("chaos: producers stopped; waiting for the consumers to catch up")
    drained = await run.drain(tail)
    say("chaos: the final read: a new group reads every topic from the start")
    run.h.topics = wl.specs(final=True)
    run.h.late_groups = (wl.group["final"],)
    await n.start(wl.run_final)
    return await run.drain(tail) and drained


async def execute(injector: Injector, opts: Options, say: Callable[[str], None]) -> int:
    """The run (see the module docstring); returns the exit status."""
    unavailable = unavailable_kinds(injector.cluster)
    run_id = secrets.token_hex(3)
    wl = Workload(injector.cluster.namesrv, run_id, opts.rate)
    run = Run(injector, wl, opts, say)
    planned = plan(opts.timing, opts.names, opts.seed)
    events.emit(run.log, events.ChaosStarted(
        run_id=run_id, seed=opts.seed, planned=len(planned),
        unavailable={k.value: v for k, v in unavailable.items()}))  # fmt: skip
    say(f"chaos run {run_id}: {len(planned)} faults planned over {opts.timing.duration_s:g}s "
        f"(seed {opts.seed}); results in {opts.out_dir}")  # fmt: skip
    for k, why in unavailable.items():
        say(f"  unavailable: {k.value}: {why}")
    tail = TraceTail(os.path.join(opts.out_dir, "chaos.jsonl"), run.h)
    interrupted: list[bool] = []
    drained = False
    run.h.start_ms = now_ms()
    try:
        await _setup_topics(injector.cluster.namesrv, wl)
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as sigs:
            async with trio.open_nursery() as n:
                drained = await _phases(run, planned, sigs, n, tail, interrupted)
                n.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            injector.heal_all()
    run.h.end_ms = now_ms()
    tail.read()
    return _finish(run, opts, unavailable, bool(interrupted), drained, say, len(planned))


def _finish(run: Run, opts: Options, unavailable: dict[Any, str], interrupted: bool,
            drained: bool, say: Callable[[str], None], planned: int) -> int:  # fmt: skip
    """Checks, result.json, intents.jsonl, report.html, the summary; the exit status. A run
    that planned faults and could inject none proved nothing: EXIT_REFUSED, said as such."""
    checks, recs = checkers.run_all(run.h)
    meta = {
        "run_id": run.run_id, "command": opts.command, "seed": opts.seed,
        "duration_s": opts.timing.duration_s, "interrupted": interrupted, "drained": drained,
        "unavailable": {k.value: v for k, v in unavailable.items()},
        "send_failures": dict(run.wl.counters.failed), "last_error": run.wl.counters.last_error,
        "topics": [attrs.asdict(t) for t in run.h.topics], "planned": planned,
        "skipped": run.skipped, "start_ms": run.h.start_ms, "end_ms": run.h.end_ms,
    }  # fmt: skip
    res = report.result(run.h, checks, recs, meta)
    untested = planned > 0 and not run.h.faults
    code = EXIT_INTERRUPTED if interrupted else (EXIT_OK if res["ok"] else EXIT_BREACH)
    if code == EXIT_OK and untested:
        code = EXIT_REFUSED
    res["exit_code"] = code
    with open(os.path.join(opts.out_dir, "result.json"), "w", encoding="utf-8") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    with open(os.path.join(opts.out_dir, "intents.jsonl"), "w", encoding="utf-8") as f:
        for i in run.wl.intents.values():
            f.write(json.dumps(attrs.asdict(i)) + "\n")
    with open(os.path.join(opts.out_dir, "report.html"), "w", encoding="utf-8") as f:
        f.write(report.html_report(run.h, res))
    for line in report.summary(res):
        say(line)
    if interrupted:
        say("  interrupted: the checks above cover only what happened before the stop")
    elif untested:
        say(f"  none of the {planned} planned faults could be injected (see the skipped lines "
            "above): this run tested nothing; exit 2")  # fmt: skip
    say(f"  {os.path.join(opts.out_dir, 'result.json')}, report.html")
    events.emit(run.log, events.ChaosFinished(
        run_id=run.run_id, acked=res["acked"], breaches=res["breaches"], exit_code=code,
        interrupted=interrupted))  # fmt: skip
    return code


def default_out_dir(up_dir: str | None, run_tag: str) -> str:
    base = os.path.join(up_dir, "chaos") if up_dir else os.path.abspath("chaos-runs")
    return os.path.join(base, run_tag)


def command_line() -> str:
    return " ".join(["rocketrio", *sys.argv[1:]])
