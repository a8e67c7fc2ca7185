"""`rocketrio up`: a whole local cluster of separate OS processes, one command, supervised.

Plans the processes of the chosen mode from the ``deploy/<mode>/`` templates (`up_plan`; with
``--sets K`` the mode's one broker set repeated K times, each set its own processes), checks
the flags (one-line errors, exit status 2), takes ``<dir>/up.lock`` so a second `up` on the same
directory refuses before writing anything (`up_lock`), writes the configs under ``--dir``
(``conf/``, ``store/``, ``logs/``), and runs every role as its own ``rocketrio <role> -c ...``
process under one Trio nursery (`up_supervisor`): a process that dies is restarted with backoff and
given up after a limit, each exit and restart an event in ``logs/up.jsonl``. It waits until the
NameServer reports every broker, prints where everything is, serves the web console in `up`'s
own process (``--console-port``, token in ``<dir>/console.token``; ``--no-console`` leaves it out;
if the console fails once serving, a ``console_failed`` event is logged and the cluster runs on),
turns on every NameServer's, controller's and broker's Prometheus /metrics on free ports and
writes ``<dir>/prometheus.yml`` for them (`up_metrics`; ``--no-metrics`` leaves them off),
shows messages flowing (unless ``--no-demo``), prints each broker's store recovery as it goes
(`up_progress`: a slow start is visibly working), and on SIGINT, SIGTERM or SIGHUP stops the
processes in reverse order, gracefully (SIGTERM, then SIGKILL after ``--stop-grace``; a second
signal kills at once). If `up` itself is killed (kill -9), its children die with it (the
parent-death signal, `parent_death`).

Exit status: 0 after a requested stop, 1 when the cluster failed (not healthy in time, a process
given up), 2 when refused before starting anything (bad flag, directory in use, port in use).
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import signal
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, NoReturn

import attrs
import structlog
import trio

from rocketrio.actors.kernel.restart_policy import RestartPolicy
from rocketrio.actors.observe import events
from rocketrio.cli import up_lock
from rocketrio.cli.extras import missing_extra
from rocketrio.cli.up_checks import busy_ports, check_dir, port_busy
from rocketrio.cli.up_metrics import (
    PROMETHEUS_CONFIG,
    exporting,
    free_ports,
    metrics_lines,
    with_metrics,
    write_prometheus_files,
)
from rocketrio.cli.up_plan import (
    MODES,
    Layout,
    PlanError,
    ProcSpec,
    embedded_controller_addr,
    expected_replicas,
    namesrv_addr,
    plan,
    processes,
    proxy_spec,
    with_local_proxies,
)
from rocketrio.cli.up_progress import LogTail, watch_recovery
from rocketrio.cli.up_supervisor import Supervisor

# a process that dies again within STABLE_AFTER_S of its start is part of a streak; after
# --max-restarts restarts in a row `up` gives up (a configuration problem, not a crash)
STABLE_AFTER_S = 60.0
CONSOLE_TOKEN_FILE = "console.token"


class Console:
    """stdout/stderr lines that survive a closed terminal (SIGHUP): the JSON log has the facts."""

    def __init__(self) -> None:
        self.gone = False

    def _write(self, stream: Any, line: str) -> None:
        if self.gone:
            return
        try:
            print(line, file=stream, flush=True)
        except OSError:
            self.gone = True

    def out(self, line: str) -> None:
        self._write(sys.stdout, line)

    def err(self, line: str) -> None:
        self._write(sys.stderr, line)


def write_configs(specs: list[ProcSpec], base_dir: str) -> dict[str, str]:
    conf_dir = os.path.join(base_dir, "conf")
    os.makedirs(conf_dir, exist_ok=True)
    paths = {}
    for s in specs:
        path = os.path.join(conf_dir, f"{s.name}.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(s.text)
        paths[s.name] = path
    return paths


async def wait_healthy(ns_addr: str, brokers: dict[str, int], timeout_s: float) -> dict[str, Any]:
    """Poll the NameServer until every broker name has a master and all its replicas."""
    from rocketrio.actors.client.admin import MQAdmin

    deadline = trio.current_time() + timeout_s
    last_err = "no answer yet"
    async with MQAdmin(ns_addr) as admin:
        while trio.current_time() < deadline:
            try:
                info = await admin.cluster_info()
                table = info.brokerAddrTable
                have = {
                    name: len(bd.brokerAddrs) for name, bd in table.items() if 0 in bd.brokerAddrs
                }
                if all(have.get(name, 0) >= n for name, n in brokers.items()):
                    return {name: table[name].brokerAddrs[0] for name in brokers}
                last_err = f"registered so far (with a master): {have}"
            except Exception as e:
                last_err = f"{type(e).__name__}: {e}"
            await trio.sleep(0.3)
    raise TimeoutError(f"cluster not healthy after {timeout_s}s ({last_err})")


DEMO_TOPIC = "RocketrioDemo"
DEMO_QUEUES_PER_SET = 4


async def create_on_cluster(ns_addr: str, topic: str, cluster: str, queues: int) -> list[str]:
    """updateTopic -c: the topic on every master of the cluster, ``queues`` queues each (the
    route then lists every broker set, and producers spread their sends over all of them)."""
    from rocketrio.actors.client.admin import MQAdmin

    async with MQAdmin(ns_addr) as admin:
        return await admin.update_topic(
            topic, cluster=cluster, read_queues=queues, write_queues=queues
        )


async def demo(
    ns_addr: str, count: int, say: Callable[[str], None] = print, cluster: str | None = None
) -> None:
    """Send ``count`` messages and consume them back, printing the flow. With ``cluster`` the
    topic is first created on every broker set of that cluster (`up --sets`)."""
    from rocketrio.actors.client.message import Message
    from rocketrio.actors.client.producer import Producer
    from rocketrio.actors.client.push_consumer import ConsumeStatus, PushConsumer

    topic = DEMO_TOPIC
    if cluster is not None:
        addrs = await create_on_cluster(ns_addr, topic, cluster, DEMO_QUEUES_PER_SET)
        say(f"  topic {topic}: {DEMO_QUEUES_PER_SET} queues on each of {len(addrs)} broker sets")
    per_set: dict[str, int] = {}
    got: set[str] = set()
    done = trio.Event()

    def on_msgs(msgs: list[Any]) -> ConsumeStatus:
        for m in msgs:
            got.add(m.body.decode())
        if len(got) >= count:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    async with Producer("demo_producer", ns_addr) as producer:
        t0 = time.perf_counter()
        first = await producer.send(Message(topic, b"hello-0", tags="demo"))
        say(f"  sent hello-0 -> {first.message_queue} offset {first.queue_offset}")
        per_set[first.message_queue.brokerName] = 1

        async def send(i: int) -> None:
            r = await producer.send(Message(topic, f"hello-{i}".encode(), tags="demo"))
            per_set[r.message_queue.brokerName] = per_set.get(r.message_queue.brokerName, 0) + 1

        async with trio.open_nursery() as n:
            for i in range(1, count):
                n.start_soon(send, i)
        dt = time.perf_counter() - t0
        spread = ", ".join(f"{name} {n}" for name, n in sorted(per_set.items()))
        say(f"  produced {count} messages to {topic} in {dt * 1000:.0f} ms ({spread})")
    consumer = PushConsumer(
        "demo_consumer", ns_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    consumer.subscribe(topic, "demo")
    consumer.register_listener(on_msgs)
    t0 = time.perf_counter()
    async with consumer:
        with trio.move_on_after(30):
            await done.wait()
    dt = time.perf_counter() - t0
    say(f"  consumed {len(got)} distinct messages in {dt * 1000:.0f} ms (group demo_consumer)")


@attrs.define
class Outcome:
    reason: str = ""
    exit_code: int = 0

    def set(self, reason: str, exit_code: int, scope: trio.CancelScope) -> None:
        if not self.reason:
            self.reason, self.exit_code = reason, exit_code
        scope.cancel()


async def _flow(
    args: argparse.Namespace,
    specs: list[ProcSpec],
    sup: Supervisor,
    con: Console,
    outcome: Outcome,
    scope: trio.CancelScope,
    outer: trio.Nursery,
) -> None:
    """Wait for health, show where things are (and start the console in ``outer``), run the
    demo; then run until told to stop."""
    base_dir = sup.base_dir
    ns = namesrv_addr(specs)
    try:
        await wait_healthy(ns, expected_replicas(specs), args.timeout)
    except TimeoutError as e:
        con.err(f"rocketrio up: {e}; see {os.path.join(base_dir, 'logs')}")
        for slot in sup.slots:
            if slot.last_returncode is not None:
                con.err(f"  {slot.spec.name} exited with status {slot.last_returncode}")
        outcome.set("not_healthy", 1, scope)
        return
    con.out("cluster is up:")
    for slot in sup.slots:
        con.out(sup.pid_line(slot))
        for member in (s for s in specs if s.container == slot.spec.name):
            con.out(f"    holds {member.name:<10} {member.addr}")
    ctrl = embedded_controller_addr(specs)
    if ctrl is not None:
        con.out(f"  controller (embedded in namesrv)  {ctrl}")
        con.out(f"  try:   rocketrio admin getSyncStateSet -a {ctrl} -b broker-a")
    if not args.no_console:
        server = await _start_console(args, ns, ctrl, base_dir, outer)
        con.out(
            f"  console http://{server.addr}/  (actions need the token in "
            f"{os.path.join(base_dir, CONSOLE_TOKEN_FILE)})"
        )
    if not args.no_metrics:
        for line in metrics_lines(specs, os.path.join(base_dir, PROMETHEUS_CONFIG)):
            con.out(line)
    if args.proxy_mode == "local":
        for s in specs:
            if s.role == "broker":
                port = s.config["grpcServerPort"]
                con.out(f"  proxy  gRPC 127.0.0.1:{port}  (in {s.name}; RocketMQ 5 SDK endpoints)")
    elif args.proxy:
        con.out(f"  proxy  gRPC 127.0.0.1:{args.proxy_port}  (RocketMQ 5 SDK endpoints)")
    con.out(f"  logs   {os.path.join(base_dir, 'logs')}  (JSON lines, one file per process)")
    con.out(f"  data   {os.path.join(base_dir, 'store')}")
    con.out(f"  try:   rocketrio admin clusterList -n {ns}")
    if not args.no_demo:
        con.out("demo: messages flowing through the cluster")
        cluster = specs_cluster(specs) if args.sets > 1 else None
        await demo(ns, args.demo_count, con.out, cluster)
    if args.exit_after_demo:
        outcome.set("demo_done", 0, scope)
        return
    con.out("running; press Ctrl-C to stop")
    await trio.sleep_forever()


def specs_cluster(specs: list[ProcSpec]) -> str:
    """The brokers' brokerClusterName (upstream's default when the templates leave it out)."""
    names = {
        s.config.get("brokerClusterName", "DefaultCluster") for s in specs if s.role == "broker"
    }
    return min(names)


def console_token(base_dir: str) -> str:
    """The console's token: ``<dir>/console.token``, made (mode 0600) at the first `up`."""
    path = os.path.join(base_dir, CONSOLE_TOKEN_FILE)
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(24) + "\n")
    from rocketrio.actors.console.actions import load_token

    return load_token(path)


async def _start_console(
    args: argparse.Namespace, ns: str, ctrl: str | None, base_dir: str, nursery: trio.Nursery
) -> Any:
    """The web console, in `up`'s own process (it dies and stops with `up`)."""
    from rocketrio.actors.console.service import ConsoleOptions, run_console
    from rocketrio.actors.kernel.transport import TcpTransport

    opts = ConsoleOptions(
        namesrv=ns,
        controller=ctrl or "",
        listen=f"127.0.0.1:{args.console_port}",
        token=console_token(base_dir),
    )

    async def guarded(*, task_status: trio.TaskStatus[Any]) -> None:
        started = False
        try:
            async with trio.open_nursery() as inner:
                server = await inner.start(run_console, opts, TcpTransport())
                started = True
                task_status.started(server)
        except Exception as e:  # once serving, a viewer's failure must not stop the cluster
            if not started:
                raise
            leaf = e.exceptions[0] if isinstance(e, ExceptionGroup) else e
            events.emit(
                structlog.get_logger("up").bind(actor="console"),
                events.ConsoleFailed(
                    error=f"{type(leaf).__name__}: {leaf}",
                    traceback="".join(traceback.format_exception(leaf)).rstrip(),
                ),
            )

    return await nursery.start(guarded)


async def run_cluster(
    args: argparse.Namespace, specs: list[ProcSpec], sup: Supervisor, con: Console
) -> int:
    log = structlog.get_logger("up").bind(actor="up")
    outcome = Outcome()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as sigs:
        async with trio.open_nursery() as outer:

            async def on_signal(scope: trio.CancelScope) -> None:
                async for sig in sigs:
                    outcome.set(signal.Signals(sig).name, 0, scope)
                    return

            async def on_give_up(scope: trio.CancelScope) -> None:
                await sup.gave_up.wait()
                con.err(f"rocketrio up: {sup.gave_up_line}")
                outcome.set("gave_up", 1, scope)

            try:
                # every child started, in plan order (a signal meanwhile waits in `sigs`); the
                # supervisor lives in the outer nursery, so ending the race does not end it
                tail = LogTail(os.path.join(sup.base_dir, "logs"))
                tail.skip_existing()  # an earlier run's lines are not news
                await outer.start(sup.run)
                async with trio.open_nursery() as race:
                    race.start_soon(watch_recovery, tail, con.out)
                    race.start_soon(on_signal, race.cancel_scope)
                    race.start_soon(on_give_up, race.cancel_scope)
                    race.start_soon(_flow, args, specs, sup, con, outcome, race.cancel_scope, outer)
            finally:
                with trio.CancelScope(shield=True):
                    reason = outcome.reason or "error"
                    events.emit(log, events.UpStopping(reason=reason))
                    con.out(f"stopping the cluster ({reason})")

                    async def hurry_on_signal() -> None:
                        async for _sig in sigs:
                            con.err("  second signal: killing what is left")
                            sup.hurry()

                    async with trio.open_nursery() as stopping:
                        stopping.start_soon(hurry_on_signal)
                        await sup.stop(args.stop_grace)
                        stopping.cancel_scope.cancel()
                    outer.cancel_scope.cancel()
                    con.out("cluster stopped")
                    events.emit(log, events.UpStopped(reason=reason, exit_code=outcome.exit_code))
    return outcome.exit_code


def _refuse(con: Console, line: str) -> int:
    con.err(f"rocketrio up: {line}")
    return 2


def cmd_up(args: argparse.Namespace) -> int:
    con = Console()
    if args.proxy_mode == "local" or args.proxy:
        if (missing := missing_extra("proxy", "--proxy")) is not None:
            return _refuse(con, missing)
    base_dir = os.path.abspath(args.dir)
    layout = Layout(base_dir, namesrv_port=args.namesrv_port, broker_port=args.broker_port,
                    flush=args.flush)  # fmt: skip
    try:
        specs = plan(args.mode, layout, args.sets)
        if args.proxy_mode == "local":
            specs = with_local_proxies(specs, args.proxy_port)
        elif args.proxy:
            specs.append(
                proxy_spec(specs, "127.0.0.1", args.proxy_port, os.path.join(base_dir, "logs"))
            )
        if not args.no_metrics:  # every exporter on a port free now
            planned = [u.port for s in specs for u in s.listens]
            ports = free_ports(len(exporting(specs)), taken=planned)
            specs = with_metrics(specs, layout.host, ports)
    except PlanError as e:
        return _refuse(con, str(e))
    if (bad := check_dir(base_dir)) is not None:
        return _refuse(con, bad)
    try:
        lock = up_lock.acquire(base_dir)  # before anything is written
    except up_lock.ClusterBusy as e:
        return _refuse(con, e.one_line())
    except OSError as e:
        return _refuse(con, f"--dir {base_dir}: cannot create {up_lock.LOCK_FILE}: {e.strerror}")
    try:
        busy = busy_ports(specs)
        if not args.no_console and (why := port_busy("127.0.0.1", args.console_port)):
            busy.append(f"127.0.0.1:{args.console_port} (console) {why}")
        if busy:
            return _refuse(
                con,
                f"{'; '.join(busy)} (another cluster running?); stop it or choose other ports "
                "with --namesrv-port / --broker-port / --console-port (or --no-console)",
            )
        ports = {f"{s.name} {u.what}": u.port for s in specs for u in s.listens}
        started = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        command = shlex.join(["rocketrio", *sys.argv[1:]])
        lock.publish(up_lock.LockInfo(os.getpid(), started, args.mode, ports, command))
        paths = write_configs(specs, base_dir)
        if not args.no_metrics:
            write_prometheus_files(specs, base_dir)
        from rocketrio.actors.observe.logs import configure_logging

        # up's own events and the demo's and health check's client logs: logs/up.jsonl
        configure_logging("up", "launcher", os.path.join(base_dir, "logs"), console=None)
        events.emit(
            structlog.get_logger("up"),
            events.UpStarted(mode=args.mode, dir=base_dir, pid=os.getpid(), ports=ports),
            actor="up",
        )
        policy = RestartPolicy(
            args.restart_backoff, max(args.restart_backoff, args.restart_backoff_max),
            args.max_restarts, STABLE_AFTER_S,
        )  # fmt: skip
        sup = Supervisor(processes(specs), paths, base_dir, policy, say=con.out, say_err=con.err)
        con.out(
            f"rocketrio up --mode {args.mode}"
            + (f" --sets {args.sets}" if args.sets > 1 else "")
            + f": starting {len(processes(specs))} processes under "
            f"{base_dir}"
        )
        return trio.run(run_cluster, args, specs, sup, con)
    finally:
        lock.release()


class _UpParser(argparse.ArgumentParser):
    """Flag errors as one line (no usage dump), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"rocketrio up: {message}\n")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is outside 1..65535")
    return port


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be > 0")
    return value


def _mode(text: str) -> str:
    if text not in MODES:
        raise argparse.ArgumentTypeError(f"unknown mode {text!r}; choose one of {', '.join(MODES)}")
    return text


def add_parser(sub: Any) -> None:
    sp = sub.add_parser("up", help="start a local cluster of separate processes, supervised")
    sp.__class__ = _UpParser  # add_parser takes no parser class; this one only changes error()
    sp.add_argument(
        "--mode",
        type=_mode,
        default="controller",
        help="controller: NameServer with an embedded controller and a broker set of two "
        "replicas (one master, one in-sync slave; automatic failover); single: one master; "
        "2m-noslave: two masters; 2m-2s-async / 2m-2s-sync: two fixed master/slave pairs "
        "(asynchronous / synchronous replication, no failover); container-2m-2s: the 2m-2s-async "
        "pairs in two broker containers, each holding one group's master and the other's slave. "
        "Configs come from deploy/<mode>/",
    )
    sp.add_argument(
        "--sets", type=int, default=1,
        help="run K broker sets (broker-a, broker-b, ...) of the mode's one set, each its own "
        "processes (ports +20 per set); the demo topic gets queues on every set (updateTopic -c)",
    )  # fmt: skip
    sp.add_argument("--dir", default="rocketrio-local", help="where configs, data and logs go")
    sp.add_argument("--namesrv-port", type=_port, default=9876)
    sp.add_argument("--broker-port", type=_port, default=10911)
    sp.add_argument(
        "--flush",
        choices=("ASYNC_FLUSH", "SYNC_FLUSH"),
        default=None,
        help="flushDiskType of the brokers (default: the mode's template)",
    )
    sp.add_argument(
        "--console-port", type=_port, default=8080,
        help="port of the web console (on 127.0.0.1; the token is in <dir>/console.token)",
    )  # fmt: skip
    sp.add_argument("--no-console", action="store_true", help="do not start the web console")
    sp.add_argument(
        "--no-metrics",
        action="store_true",
        help="do not serve Prometheus /metrics (default: every NameServer, controller and broker "
        "serves it on a free port, listed at start; <dir>/prometheus.yml scrapes them all)",
    )
    sp.add_argument(
        "--proxy", action="store_true", help="add a gRPC proxy (RocketMQ 5 SDKs, cluster mode)"
    )
    sp.add_argument(
        "--proxy-mode",
        choices=("cluster", "local"),
        default=None,
        help="local: each broker runs the proxy in its process (grpcServerPort = --proxy-port"
        " + its index); implies --proxy. Default cluster: one proxy process",
    )
    sp.add_argument("--proxy-port", type=_port, default=8081, help="the proxy's gRPC port")
    sp.add_argument("--timeout", type=_positive, default=30.0, help="seconds to wait for health")
    _add_run_flags(sp)
    sp.set_defaults(func=cmd_up)


def _add_run_flags(sp: Any) -> None:
    """The demo and supervision flags of `up`."""
    sp.add_argument("--no-demo", action="store_true", help="do not run the produce/consume demo")
    sp.add_argument("--demo-count", type=int, default=1000)
    sp.add_argument(
        "--exit-after-demo", action="store_true", help="stop the cluster after the demo"
    )
    sp.add_argument(
        "--max-restarts",
        type=int,
        default=5,
        help="restarts in a row (each run shorter than 60 s) before up gives up on a process "
        "and stops the cluster",
    )
    sp.add_argument(
        "--restart-backoff", type=_positive, default=1.0,
        help="seconds before the first restart; doubled for each further one in a row",
    )  # fmt: skip
    sp.add_argument(
        "--restart-backoff-max", type=_positive, default=30.0, help="cap of the restart backoff"
    )
    sp.add_argument(
        "--stop-grace", type=_positive, default=15.0,
        help="seconds a process gets to stop after SIGTERM before SIGKILL",
    )  # fmt: skip
