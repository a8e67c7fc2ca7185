"""The whole-cluster deterministic simulation (SPEC F1): one seed, one Trio process, every fault.

`SimSpec.draw(seed)` turns a seed into the cluster: a controller group of 1 or 3 replicas,
embedded in the NameServers or standalone (then with one NameServer of its own), two broker sets
of 2 or 3 replicas in controller mode, SYNC_FLUSH or ASYNC_FLUSH, CommitLog segments of 16-64
KiB and ConsumeQueue files of 32-100 entries (both roll), the index on or off, how many
producers send how many messages, and how many chaos steps run. `World` runs it: every process
is the production class (`NameServer`, `Controller` with its real `RaftNode`, `Broker` with its
ReplicasManager, AutoSwitchHAService, HA master service and slave client, store actor) on the
seeded `SimNetwork` and its host's own `SimFileSystem` (cluster_nodes.py), under
`trio.testing.MockClock(autojump_threshold=0)` with Trio's scheduler seeded, so a seed replays
exactly.

`run_seed`: start everything, wait for both sets to have a master, create the topic on every
broker, start the clients (cluster_clients.py), then run the chaos steps (cluster_faults.py):
after every step the checker (cluster_checks.py) looks at every live replica. Then everything
is healed and restarted; within `LIVENESS_BOUND_S` every set must acknowledge a probe write;
the clients stop, the replicas converge (bounded), and the final checks read every queue back
from each set's master. A failure raises `ClusterFailure` naming the seed ("reproduce with
--seed N") and the last steps; with ``CLUSTER_SIM_LOG=path`` the product's last log events are
written there too.

Timings are small so that one run covers many failovers in tens of simulated seconds:
brokerHeartbeatInterval 500 ms, controllerHeartBeatTimeoutMills 2 s, syncBrokerMetadataPeriod
and checkSyncStateSetPeriod 1 s, haMaxTimeSlaveNotCatchup 3 s, haSendHeartbeatInterval 1 s,
haHousekeepingInterval 4 s, syncFlushTimeout 3 s; allAckInSyncStateSet stays true (default).
"""

from __future__ import annotations

import math
import os
import random
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import attrs
import structlog
import trio

from rocketrio.actors.broker.config import BrokerConfig, FlushDiskType
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.actors.remoting import RemotingClient, RemotingError
from rocketrio.actors.transport import SimNetwork
from rocketrio.protocol.message import decode_stored
from rocketrio.storage.message_store import MessageStore
from tests.conftest import seed_trio_scheduler
from tests.sim.cluster_checks import ClusterChecker, ClusterFailure, ReplicaState
from tests.sim.cluster_clients import (
    TOPIC,
    AckTap,
    ConsumerDriver,
    ProducerDriver,
    probe,
    read_queue,
)
from tests.sim.cluster_nodes import BrokerProc, ControlProc, Host, Process, SlowDisk
from tests.sim.sim_disk import SimFileSystem

SETS = ("broker-a", "broker-b")
NS_PORT, CTRL_PORT = 9876, 9878
STORE = "/store"
START_BOUND_S = 60.0  # every set has a master after the cold start
# after healing and restarting everything: a dead master is noticed after
# controllerHeartBeatTimeoutMills (2 s) + the controller's scan (1 s), the Raft group needs ~1 s
# to elect a leader, a broker's start-up retries back off to at most 10 s + 1 s jitter, an
# election answer and the role change take a round trip: 20 s leaves room for one retry more
LIVENESS_BOUND_S = 20.0
CONVERGE_BOUND_S = 30.0


# ---------------------------------------------------------------------------- the spec


@attrs.frozen
class SimSpec:
    seed: int
    controllers: int
    embedded: bool
    sync_flush: bool
    set_sizes: tuple[int, int]
    segment_size: int
    cq_entries: int
    index: bool
    queues: int
    producers: int
    senders: int
    max_messages: int
    steps: int
    focus: str = "mixed"  # which faults the schedule favours: mixed, controllers, replication

    @classmethod
    def draw(cls, seed: int) -> SimSpec:
        rng = random.Random(seed)
        return cls(
            seed=seed,
            controllers=1 if rng.random() < 0.4 else 3,
            embedded=rng.random() < 0.5,
            sync_flush=rng.random() < 0.5,
            set_sizes=(rng.choice((2, 3)), rng.choice((2, 3))),
            segment_size=rng.choice((16, 32, 64)) * 1024,
            cq_entries=rng.choice((32, 100)),
            index=rng.random() < 0.5,
            queues=rng.choice((2, 4)),
            producers=rng.choice((1, 2)),
            senders=rng.choice((1, 2, 3)),
            max_messages=rng.randint(60, 200),
            steps=rng.randint(10, 22),
            focus=("mixed", "mixed", "controllers", "replication")[rng.randrange(4)],
        )

    def describe(self) -> str:
        mode = "embedded" if self.embedded else "standalone"
        flush = "SYNC_FLUSH" if self.sync_flush else "ASYNC_FLUSH"
        return (
            f"{self.controllers} controller(s) {mode}, sets {self.set_sizes}, {flush}, "
            f"segment {self.segment_size // 1024} KiB, cq {self.cq_entries}, "
            f"index {self.index}, {self.queues} queues, {self.producers}x{self.senders} "
            f"senders, <= {self.max_messages} msgs, {self.steps} steps, focus {self.focus}"
        )


class SimNet(SimNetwork):
    """`SimNetwork` whose link delays are rounded up to whole `QUANTUM_S` steps: messages sent
    together arrive together, so the mock clock stops once per step instead of once per
    message (most of a run's cost), while their order within a step stays the seeded
    scheduler's choice."""

    QUANTUM_S = 0.001

    def delay(self, a: str, b: str) -> float:
        return math.ceil(super().delay(a, b) / self.QUANTUM_S) * self.QUANTUM_S


# ---------------------------------------------------------------------------- the world


class World:
    """Every process, the network and the clients of one run (see module docstring)."""

    def __init__(self, spec: SimSpec, nursery: trio.Nursery, checker: ClusterChecker) -> None:
        self.spec = spec
        self.nursery = nursery
        self.checker = checker
        self.rng = random.Random(spec.seed ^ 0x5EED)
        self.net = SimNet(self.rng.getrandbits(32))
        self.tap = AckTap(checker)
        self.controls: list[ControlProc] = []
        self.brokers: dict[str, list[BrokerProc]] = {s: [] for s in SETS}
        self._build()
        self.client_ip = "10.0.9.60"
        self.clients: trio.Nursery | None = None
        self.probe_seq = 0

    def _host(self, ip: str) -> Host:
        r = random.Random(self.rng.getrandbits(32))
        return Host(ip, SimFileSystem(random.Random(r.getrandbits(32))), SlowDisk(r))

    def _build(self) -> None:
        spec = self.spec
        n = spec.controllers
        ctrl_hosts = [f"10.0.0.{k + 1}" for k in range(n)]
        peers = ";".join(f"n{k}-{ip}:{CTRL_PORT}" for k, ip in enumerate(ctrl_hosts))
        self.ctrl_addrs = [f"{ip}:{CTRL_PORT}" for ip in ctrl_hosts]
        ns_hosts = ctrl_hosts if spec.embedded else ["10.0.1.1"]
        self.ns_addrs = [f"{ip}:{NS_PORT}" for ip in ns_hosts]
        for k, ip in enumerate(ctrl_hosts):
            ctrl = ControllerConfig(
                controllerDLegerGroup="g",
                controllerDLegerPeers=peers,
                controllerDLegerSelfId=f"n{k}",
                controllerStorePath="/controller",
                scanNotActiveBrokerInterval=1000,
                scanInactiveMasterInterval=1000,
            )
            ns = self._namesrv_config(ip) if spec.embedded else None
            self.controls.append(self._control(f"ctrl-{k}", ip, ns, ctrl))
        if not spec.embedded:
            self.controls.append(self._control("namesrv", "10.0.1.1", self._namesrv_config(
                "10.0.1.1"), None))  # fmt: skip
        for s, (set_name, size) in enumerate(zip(SETS, spec.set_sizes, strict=True)):
            for k in range(size):
                ip = f"10.0.{s + 2}.{k + 1}"
                self.brokers[set_name].append(
                    BrokerProc(
                        f"{set_name}-{k}",
                        self._host(ip),
                        self.net,
                        self.nursery,
                        config=self._broker_config(set_name, ip),
                        rng=random.Random(self.rng.getrandbits(32)),
                        tap=self.tap.install,
                        set_name=set_name,
                    )
                )

    def _namesrv_config(self, ip: str) -> NamesrvConfig:
        return NamesrvConfig(
            listenHost=ip,
            listenPort=NS_PORT,
            enableControllerInNamesrv=self.spec.embedded,
            kvConfigPath="",  # no KV file: the NameServer would load it in a real thread
            scanNotActiveBrokerInterval=1000,
        )

    def _control(
        self, name: str, ip: str, ns: NamesrvConfig | None, ctrl: ControllerConfig | None
    ) -> ControlProc:
        return ControlProc(
            name,
            self._host(ip),
            self.net,
            self.nursery,
            namesrv=ns,
            controller=ctrl,
            rng=random.Random(self.rng.getrandbits(32)),
        )

    def _broker_config(self, set_name: str, ip: str) -> Callable[[], BrokerConfig]:
        spec = self.spec

        def make() -> BrokerConfig:
            return BrokerConfig(
                brokerName=set_name,
                brokerIP1=ip,
                listenPort=10911,
                namesrvAddr=";".join(self.ns_addrs),
                storePathRootDir=STORE,
                enableControllerMode=True,
                controllerAddr=";".join(self.ctrl_addrs),
                flushDiskType=FlushDiskType.SYNC_FLUSH
                if spec.sync_flush
                else FlushDiskType.ASYNC_FLUSH,
                mappedFileSizeCommitLog=spec.segment_size,
                mappedFileSizeConsumeQueue=spec.cq_entries * 20,
                messageIndexEnable=spec.index,
                defaultTopicQueueNums=spec.queues,
                registerNameServerPeriod=5000,
                brokerHeartbeatInterval=500,
                brokerNotActiveTimeoutMillis=4000,
                controllerHeartBeatTimeoutMills=2000,
                syncBrokerMetadataPeriod=1000,
                checkSyncStateSetPeriod=1000,
                syncControllerMetadataPeriod=2000,
                haMaxTimeSlaveNotCatchup=3000,
                haSendHeartbeatInterval=1000,
                haHousekeepingInterval=4000,
                syncFlushTimeout=3000,
            )

        return make

    # ------------------------------------------------------------------ views

    @property
    def processes(self) -> list[Process]:
        return [*self.controls, *(p for procs in self.brokers.values() for p in procs)]

    def all_brokers(self) -> list[BrokerProc]:
        return [p for procs in self.brokers.values() for p in procs]

    def master_of(self, set_name: str) -> BrokerProc | None:
        """The running broker of the set that is master at the highest masterEpoch."""
        best: tuple[int, BrokerProc] | None = None
        for p in self.brokers[set_name]:
            b = p.live_broker
            if b is None or b.replicas is None or not b.replicas.is_master:
                continue
            epoch = b.replicas.master_epoch
            if best is None or epoch > best[0]:
                best = (epoch, p)
        return None if best is None else best[1]

    def controller_leader(self) -> ControlProc | None:
        best: tuple[int, ControlProc] | None = None
        for p in self.controls:
            c = p.live_controller
            if c is None or not c.node.started or not c.node.is_leader:
                continue
            if best is None or c.node.term > best[0]:
                best = (c.node.term, p)
        return None if best is None else best[1]

    def controller_procs(self) -> list[ControlProc]:
        return [p for p in self.controls if p.controller_config is not None]

    def replica(self, p: BrokerProc) -> tuple[ReplicaState, Callable[[int, int], bytes]] | None:
        b = p.live_broker
        if b is None or b.recovery is None:
            return None  # not running, or still recovering its store
        store = b.store
        state = ReplicaState(
            key=f"{p.name}#{p.incarnation}",
            set_name=p.set_name,
            min_offset=store.get_commitlog_min_offset(),
            max_offset=store.get_commitlog_max_offset(),
            confirm_offset=store.confirm_offset,
            epochs=store.epoch_records(),
        )
        return state, store.commitlog.read

    # ------------------------------------------------------------------ faults (also scripted)

    async def kill(self, proc: Process, *, machine: bool = False, lose: bool = False) -> None:
        await proc.kill(machine=machine, lose_unsynced=lose)

    async def restart(self, proc: Process) -> None:
        if not proc.up:
            await proc.start()

    async def restart_down(self) -> None:
        """After healing: a process that died since (e.g. still dying of an fsync failure
        when everything was restarted) comes back too."""
        for p in self.processes:
            if not p.up:
                await p.start()

    def partition(self, a: list[str], b: list[str]) -> None:
        self.net.partition(a, b)

    def heal_network(self) -> None:
        self.net.heal()

    # ------------------------------------------------------------------ start-up

    async def start(self) -> None:
        for p in self.controls:
            await p.start()
        for p in self.all_brokers():
            await p.start()
        deadline = trio.current_time() + START_BOUND_S
        while not all(self.master_of(s) for s in SETS) or not all(
            p.live_broker is not None
            and p.live_broker.replicas is not None
            and p.live_broker.replicas.role is not None
            for p in self.all_brokers()
        ):
            if trio.current_time() > deadline:
                self.checker.fail(f"the cluster did not start within {START_BOUND_S}s")
            self.check_processes()
            await trio.sleep(0.1)
        await self.create_topic()

    async def create_topic(self) -> None:
        """The topic on every broker (a slave promoted later must know it)."""
        q = self.spec.queues
        async with MQAdmin(";".join(self.ns_addrs), self.net.transport(self.client_ip)) as admin:
            for p in self.all_brokers():
                for _ in range(50):
                    try:
                        await admin.update_topic(
                            TOPIC, broker_addr=p.addr, read_queues=q, write_queues=q
                        )
                        break
                    except (RemotingError, MQClientError):
                        await trio.sleep(0.2)
                else:
                    self.checker.fail(f"could not create the topic on {p.name}")

    def check_processes(self) -> None:
        self.checker.raise_problems()
        self.checker.check_processes(e for p in self.processes for e in p.errors)

    # ------------------------------------------------------------------ checks

    def check_step(self) -> None:
        self.check_processes()
        for p in self.processes:
            while p.deaths:
                self.checker.trace.append(f"died: {p.deaths.pop(0)}")
        self.checker.check_raft_leaders(
            (c.node.term, c.node.self_id)
            for p in self.controls
            if (c := p.live_controller) is not None and c.node.started and c.node.is_leader
        )
        replicas = []
        for p in self.all_brokers():
            got = self.replica(p)
            if got is None:
                continue
            state, read = got
            self.checker.check_replica(state, read)
            replicas.append(state)
        self.checker.check_epochs(replicas)
        for s in SETS:
            master = self.master_of(s)
            b = None if master is None else master.live_broker
            if b is not None and b.recovery is not None:
                key = f"{master.name}#{master.incarnation}"  # type: ignore[union-attr]
                self.checker.check_dispatched(key, s, partial(_body_at, b.store))


def _body_at(store: MessageStore, topic: str, queue_id: int, offset: int) -> bytes | None:
    """The body at a queue offset of a store's ConsumeQueue (None: not dispatched there)."""
    if offset >= store.get_max_offset(topic, queue_id):
        return None
    res = store.get_messages(topic, queue_id, offset, 1, 1 << 20)
    if not res.buffers:
        return None
    return decode_stored(res.buffers[0])[0].body


# ---------------------------------------------------------------------------- the run


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


async def run_seed(
    seed: int,
    *,
    spec: SimSpec | None = None,
    chaos: Callable[[World], Awaitable[None]] | None = None,
    replay: str | None = None,
) -> RunStats:
    """One whole run (see module docstring); ``chaos`` replaces the seeded fault steps (the
    scenario tests script theirs)."""
    from tests.sim.cluster_faults import seeded_chaos  # the fault schedule needs the World

    seed_trio_scheduler(seed)
    spec = spec or SimSpec.draw(seed)
    checker = ClusterChecker(seed)
    if replay is not None:
        checker.replay = replay
    checker.note(f"spec: {spec.describe()}")
    tail = LogTail()
    old_config = structlog.get_config()
    structlog.configure(processors=[tail])
    failure: BaseException | None = None
    liveness: dict[str, float] = {}
    watchdog: Watchdog | None = None
    try:
        async with trio.open_nursery() as nursery:
            watchdog = Watchdog(nursery.cancel_scope)
            trio.lowlevel.add_instrument(watchdog)
            world = World(spec, nursery, checker)
            try:
                await _drive(world, chaos or seeded_chaos, liveness)
            except ClusterFailure as e:
                failure = e
            nursery.cancel_scope.cancel()
    except Exception as e:  # a failure inside a task group, or a test-side task crashed
        failure = failure or _cluster_failure(e) or e
    finally:
        structlog.configure(**old_config)
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
    from tests.sim.cluster_faults import heal_everything

    checker = world.checker
    await world.start()
    checker.note("started")
    world.check_step()
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
        seen: set[bytes] = set()
        for qid in range(world.spec.queues):
            bodies = await read_queue(client, master.addr, qid)
            if bodies is None:
                checker.fail(f"could not read {s} queue {qid} from the master {master.name}")
            checker.check_final_queue(s, TOPIC, qid, bodies)
            for body in bodies.values():  # a retried send may be stored twice: allowed
                if body in seen:
                    checker.count("duplicates")
                seen.add(body)
    checker.raise_problems()
