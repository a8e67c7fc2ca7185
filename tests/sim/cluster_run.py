"""Running one whole-cluster simulation (SPEC F1): start, chaos, heal, liveness, final checks.

`run_seed(seed)` builds the `World` of ``SimSpec.draw(seed)`` (cluster_sim.py) under the test's
MockClock with Trio's scheduler seeded, starts every process, waits for both sets to have a
master, creates the topic on every broker, starts the clients (cluster_clients.py; a seed's
PushConsumer and orderly groups, cluster_push.py, with the offset watch, offset_watch.py), then runs
the chaos steps (cluster_faults.py; scenario tests pass their own script): after every step the
checker looks at every live replica. Then everything is healed and restarted; within
`LIVENESS_BOUND_S` every set must acknowledge a probe write; the clients stop, the replicas
converge (bounded), the final checks read every queue back from each set's master, and the
consumer groups must have consumed every acknowledged message within their drain bound. A
failure raises `ClusterFailure` naming the seed ("reproduce with --seed N") and the last steps;
with ``CLUSTER_SIM_LOG=path`` the product's last log events are written there too. A `Watchdog`
turns a livelock (tasks spinning while the mock clock stands still) into a failure, not a hang.
"""

from __future__ import annotations

import json
import os
import random
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import attrs
import structlog
import trio

from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.observe import logs
from rocketrio.actors.observe.logs import check_catalogued, json_line
from tests.harness.clock import EPOCH_MS
from tests.harness.trio_seed import seed_trio_scheduler
from tests.sim import cluster_clients
from tests.sim.acting_world import ActingWorld, is_acting
from tests.sim.cluster_checks import ClusterChecker, ClusterFailure
from tests.sim.cluster_clients import TOPIC, ConsumerDriver, ProducerDriver, probe, read_queue
from tests.sim.cluster_faults import heal_everything, seeded_chaos
from tests.sim.cluster_push import (
    ORDERLY_HOST,
    PUSH_GROUP,
    PUSH_HOST,
    OrderlyDriver,
    PushDriver,
)
from tests.sim.cluster_sim import SETS, SimSpec, World
from tests.sim.offset_watch import OffsetWatch

# after healing and restarting everything: a dead master is noticed after
# controllerHeartBeatTimeoutMills (2 s) + the controller's scan (1 s); a new controller leader
# first listens for one broker heartbeat timeout (2 s) before it deposes a silent master; a
# broker's start-up retries back off to at most 10 s + 1 s jitter: 20 s leaves room for one of
# the long waits
LIVENESS_BOUND_S = 20.0
CONVERGE_BOUND_S = 30.0


@attrs.define
class RunStats:
    spec: str
    stats: dict[str, int]
    liveness_s: dict[str, float]


def _cluster_failure(exc: BaseException) -> ClusterFailure | None:
    """The first `ClusterFailure` inside ``exc`` (nurseries wrap it in exception groups)."""
    if isinstance(exc, ClusterFailure):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            found = _cluster_failure(sub)
            if found is not None:
                return found
    return None


class Watchdog(trio.abc.Instrument):
    """Livelock detector: the mock clock jumps whenever every task is blocked, so a run whose
    clock stands still for `STUCK_LOOPS` scheduler passes has tasks spinning (a timer loop that
    never sleeps, a retry without a pause). It cancels the run and says where the clock stood."""

    STUCK_LOOPS = 400_000

    def __init__(self, scope: trio.CancelScope, stuck_loops: int = STUCK_LOOPS) -> None:
        self.scope = scope
        self.stuck_loops = stuck_loops
        self.loops = 0
        self.last_time = -1.0
        self.same = 0
        self.fired: str | None = None

    def after_io_wait(self, timeout: float) -> None:
        self.loops += 1
        if self.loops & 1023:
            return
        now = trio.current_time()
        if now != self.last_time:
            self.last_time, self.same = now, 0
            return
        self.same += 1024
        if self.same >= self.stuck_loops and self.fired is None:
            self.fired = (
                f"livelock: the simulated clock stood still at t={now:.3f} for "
                f"{self.same} scheduler passes (some task loops without sleeping)"
            )
            self.scope.cancel()


class LogTail:
    """structlog sink for the run: keeps the last events (dumped on failure), prints nothing."""

    def __init__(self, size: int = 3000) -> None:
        self.events: deque[str] = deque(maxlen=size)

    def __call__(self, _logger: Any, method: str, ed: dict[str, Any]) -> Any:
        self.events.append(f"{trio.current_time():9.3f} {method} {ed}")
        raise structlog.DropEvent


class NodeLogFiles:
    """structlog processor for ``run_seed(log_dir=...)``: every line goes to
    ``<log_dir>/<node>.jsonl`` as the real processes write it (actors/observe/logs.py's line,
    the node and role bound by each simulated process; the clients' lines go to ``sim-clients``)."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.files: dict[str, Any] = {}
        os.makedirs(log_dir, exist_ok=True)

    def __call__(self, _logger: Any, method: str, ed: dict[str, Any]) -> dict[str, Any]:
        line = json_line("sim-clients", "client", method, dict(ed))
        f = self.files.get(line["node"])
        if f is None:
            path = os.path.join(self.log_dir, f"{line['node']}.jsonl")
            f = self.files[line["node"]] = open(path, "a", encoding="utf-8")
        f.write(json.dumps(line, default=str, separators=(",", ":")) + "\n")
        return ed

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def write_ground_truth(log_dir: str, world: World) -> None:
    """What the run knows happened: the first write of every (set, epoch), by whom, when (the
    mock clock, in the logs' epoch ms), and the checker's counts."""
    first = [
        {"broker": s, "epoch": e, "broker_id": bid, "at_ms": EPOCH_MS + ms}
        for (s, e), (ms, bid) in sorted(world.tap.first_writes.items())
    ]
    truth = {
        "first_writes": first,
        "acked": len(world.checker.acked),
        "stats": dict(world.checker.stats),
    }
    with open(os.path.join(log_dir, "ground_truth.json"), "w", encoding="utf-8") as f:
        json.dump(truth, f, indent=1)


async def run_seed(
    seed: int,
    *,
    spec: SimSpec | None = None,
    chaos: Callable[[World], Awaitable[None]] | None = None,
    replay: str | None = None,
    log_dir: str | None = None,
) -> RunStats:
    """One whole run (see module docstring); ``chaos`` replaces the seeded fault steps (the
    scenario tests script theirs). ``log_dir``: every process writes its JSON log lines there
    (timestamps from the mock clock), clients trace their messages, and ``ground_truth.json``
    records what the run knows happened."""
    seed_trio_scheduler(seed)
    spec = spec or SimSpec.draw(seed)
    checker = ClusterChecker(seed)
    checker.weak_sets = spec.options.weak_sets(spec.set_sizes)
    if replay is not None:
        checker.replay = replay
    checker.note(f"spec: {spec.describe()}")
    tail = LogTail()
    old_config = structlog.get_config()
    old_clock = logs.wallclock_source()
    files = NodeLogFiles(log_dir) if log_dir else None
    if files is not None:
        logs.set_wallclock(lambda: EPOCH_MS + int(trio.current_time() * 1000))
        cluster_clients.TRACING = True
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            check_catalogued(True),
            *([files] if files is not None else []),
            tail,
        ]
    )
    failure: BaseException | None = None
    liveness: dict[str, float] = {}
    watchdog: Watchdog | None = None
    try:
        async with trio.open_nursery() as nursery:
            watchdog = Watchdog(nursery.cancel_scope)
            trio.lowlevel.add_instrument(watchdog)
            world = (ActingWorld if is_acting(spec) else World)(spec, nursery, checker)
            try:
                await _drive(world, chaos or seeded_chaos, liveness)
            except ClusterFailure as e:
                failure = e
            if log_dir is not None:
                write_ground_truth(log_dir, world)
            nursery.cancel_scope.cancel()
    except Exception as e:  # a failure inside a task group, or a test-side task crashed
        failure = failure or _cluster_failure(e) or e
    finally:
        structlog.configure(**old_config)
        if files is not None:
            files.close()
            logs.set_wallclock(old_clock)
            cluster_clients.TRACING = False
        if watchdog is not None:
            trio.lowlevel.remove_instrument(watchdog)
    if watchdog is not None and watchdog.fired is not None and failure is None:
        failure = ClusterFailure(watchdog.fired)
        try:
            checker.fail(watchdog.fired)
        except ClusterFailure as e:
            failure = e
    if failure is not None:
        path = os.environ.get("CLUSTER_SIM_LOG")
        if path:
            with open(path, "w") as f:
                f.write("\n".join(tail.events) + "\n")
        if isinstance(failure, ClusterFailure):
            raise failure
        try:
            checker.fail(f"the simulation itself raised {failure!r}")
        except ClusterFailure as e:
            raise e from failure
    return RunStats(spec.describe(), dict(checker.stats), liveness)


async def _drive(
    world: World, chaos: Callable[[World], Awaitable[None]], liveness: dict[str, float]
) -> None:
    checker = world.checker
    await world.start()
    checker.note("started")
    world.check_step()
    push = None
    if world.spec.push:
        push = PushDriver(
            checker, ";".join(world.ns_addrs), world.net.transport(PUSH_HOST), world.spec.seed,
            world.spec.options.push_fail_share,
        )  # fmt: skip
        await world.nursery.start(push.run)
        watch = OffsetWatch(checker, PUSH_GROUP, world.spec.queues)
        world.step_hooks.append(partial(watch.on_step, world))
    orderly = None
    if world.spec.push and world.spec.options.orderly:
        orderly = OrderlyDriver(
            checker, ";".join(world.ns_addrs), world.net.transport(ORDERLY_HOST)
        )
        await world.nursery.start(orderly.run)
    clients = trio.CancelScope()
    await world.nursery.start(_run_clients, world, clients)
    try:
        await chaos(world)
        checker.note("healing")
        await heal_everything(world)
    finally:
        clients.cancel()  # no new sends: what is acknowledged is known
    async with RemotingClient(world.net.transport(world.client_ip)) as client:
        await _liveness(world, client, liveness)
        await _converge(world)
        await _final_checks(world, client)
    if push is not None:
        await push.drain(world.check_step)
    if orderly is not None:
        await orderly.drain(world.check_step)


async def _run_clients(
    world: World, scope: trio.CancelScope, *, task_status: trio.TaskStatus[None]
) -> None:
    spec, checker = world.spec, world.checker
    hosts = [f"10.0.9.{k + 1}" for k in range(spec.producers)]
    producers = ProducerDriver(
        checker,
        world.tap,
        ";".join(world.ns_addrs),
        [world.net.transport(h) for h in hosts],
        hosts,
        random.Random(world.rng.getrandbits(32)),
        spec.queues,
        spec.max_messages,
        batch=spec.batch_sends,
        batch_share=spec.options.batch_share,
    )
    consumer_rng = random.Random(world.rng.getrandbits(32))
    with scope:
        async with (
            RemotingClient(world.net.transport("10.0.9.50")) as consumer_client,
            trio.open_nursery() as n,
        ):
            consumer = ConsumerDriver(
                checker, consumer_client, lambda s: world.brokers[s], SETS, spec.queues,
                consumer_rng,
            )  # fmt: skip
            n.start_soon(producers.run, spec.senders)
            n.start_soon(consumer.run)
            task_status.started()


async def _liveness(world: World, client: RemotingClient, out: dict[str, float]) -> None:
    """Every set acknowledges a probe write within LIVENESS_BOUND_S of healing."""
    checker = world.checker
    began = trio.current_time()
    for s in SETS:
        checker.note(f"liveness: probing {s}")
        while True:
            world.check_step()
            await world.restart_down()
            world.probe_seq += 1
            body = b"probe-%s-%d" % (s.encode(), world.probe_seq)
            master = world.master_of(s)
            order = [master] if master is not None else []
            order += [p for p in world.brokers[s] if p is not master]
            with trio.move_on_at(began + LIVENESS_BOUND_S):
                if await probe(client, checker, world.tap, s, order, body):
                    out[s] = trio.current_time() - began
                    break
                await trio.sleep(0.2)
                continue
            checker.fail(
                f"liveness: {s} acknowledged no probe write within {LIVENESS_BOUND_S}s of "
                f"healing (master: {master.name if master else None})"
            )


async def _converge(world: World) -> None:
    """Bounded wait until every replica holds and confirmed its master's whole log."""
    deadline = trio.current_time() + CONVERGE_BOUND_S
    world.checker.note("converging")
    while trio.current_time() < deadline:
        world.check_step()
        await world.restart_down()
        if all(_converged(world, s) for s in SETS):
            return
        await trio.sleep(0.25)
    lag = {s: _lag(world, s) for s in SETS}
    world.checker.fail(f"replicas did not converge within {CONVERGE_BOUND_S}s: {lag}")


def _converged(world: World, s: str) -> bool:
    return not _lag(world, s)


def _lag(world: World, s: str) -> dict[str, tuple[int, int, int]]:
    master = world.master_of(s)
    if master is None:
        return {"no master": (0, 0, 0)}
    got = world.replica(master)
    if got is None:
        return {"master not open": (0, 0, 0)}
    end = got[0].max_offset
    out = {}
    for p in world.brokers[s]:
        r = world.replica(p)
        if r is None:
            out[p.name] = (-1, -1, end)
        elif r[0].max_offset != end or r[0].confirm_offset != end:
            out[p.name] = (r[0].max_offset, r[0].confirm_offset, end)
    return out


async def _final_checks(world: World, client: RemotingClient) -> None:
    checker = world.checker
    checker.note("final checks")
    seen: set[bytes] = set()  # a retried send may be stored twice (even in both sets): allowed
    for s in SETS:
        master = world.master_of(s)
        if master is None:
            checker.fail(f"{s} has no master after converging")
        got = world.replica(master)
        assert got is not None
        m_state, m_read = got
        checker.check_master_holds_golden(m_state, m_read)
        for p in world.brokers[s]:
            r = world.replica(p)
            if r is not None and p is not master:
                checker.check_final_replica(r[0], r[1], m_state, m_read)
        for qid in range(world.spec.queues):
            bodies = await read_queue(client, master.addr, qid, s)
            if bodies is None:
                checker.fail(f"could not read {s} queue {qid} from the master {master.name}")
            checker.check_final_queue(s, TOPIC, qid, bodies)
            for body in bodies.values():
                if body in seen:
                    checker.count("duplicates")
                seen.add(body)
    checker.raise_problems()
    checker.count("acking_epochs", len(checker.epoch_owner))
