"""The world of the whole-cluster deterministic simulation (SPEC F1): what one seed builds.

`SimSpec.draw(seed)` turns a seed into the cluster (one seed in ten, drawn apart, is a classic
acting-master cluster instead: acting_world.py): a controller group of 1 or 3 replicas,
embedded in the NameServers or standalone (then with one NameServer of its own), two broker sets
of 2 or 3 replicas in controller mode, SYNC_FLUSH or ASYNC_FLUSH, CommitLog segments of 16-64
KiB and ConsumeQueue files of 32-100 entries (both roll), the index on or off, how many
producers send how many messages, how many chaos steps run and which faults they favour; from
an RNG of their own, the replication options and the consumers' mix (replication_draw.py:
allAckInSyncStateSet or inSyncReplicas, an asyncLearner, a share of batch sends, the
PushConsumer's failure share, an orderly group).
`World` holds it: every process is the production class (`NameServer`, `Controller` with its
real `RaftNode`, `Broker` with its ReplicasManager, AutoSwitchHAService, HA master service and
slave client, store actor) on the seeded network and its host's own `SimFileSystem`
(cluster_nodes.py), plus the views the checker and the fault schedule use (the master of a set,
the controller leader, a replica's state) and `check_step`, which runs every per-step
invariant (cluster_checks.py). cluster_run.py runs a World; cluster_faults.py breaks it.

Timings are small so that one run covers many failovers in tens of simulated seconds:
brokerHeartbeatInterval 500 ms, controllerHeartBeatTimeoutMills 2 s, syncBrokerMetadataPeriod
and checkSyncStateSetPeriod 1 s, haMaxTimeSlaveNotCatchup 3 s, haSendHeartbeatInterval 1 s,
haHousekeepingInterval 4 s, syncFlushTimeout 3 s, messageDelayLevel 1-3 s (a consumer's retry
comes back within seconds); the ack mode is the seed's draw (scripted scenarios: allAck).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from functools import partial

import attrs
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig, FlushDiskType
from rocketrio.actors.client.admin import MQAdmin
from rocketrio.actors.client.errors import MQClientError
from rocketrio.actors.controller.config import ControllerConfig
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.namesrv.config import NamesrvConfig
from rocketrio.protocol.bodies import TopicConfig
from rocketrio.protocol.message import decode_stored
from rocketrio.storage.message_store import MessageStore
from tests.harness.sim_disk import SimFileSystem
from tests.harness.sim_network import SimNetwork
from tests.sim.cluster_checks import ClusterChecker, ReplicaState
from tests.sim.cluster_clients import TOPIC, AckTap
from tests.sim.cluster_nodes import BrokerProc, ControlProc, Host, Process, SlowDisk
from tests.sim.metadata_checks import MetadataChecker
from tests.sim.replication_draw import ReplicationDraw

SETS = ("broker-a", "broker-b")
NS_PORT, CTRL_PORT = 9876, 9878
STORE = "/store"
START_BOUND_S = 60.0  # every set has a master after the cold start
ACTING_SHARE = 0.1  # of the drawn seeds: classic acting-master mode (SimSpec._maybe_acting)
SIM_DELAY_LEVELS = " ".join(["1s"] * 6 + ["2s"] * 6 + ["3s"] * 6)


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
    # scripted scenarios only (never drawn, so every seed keeps its run): broker process name
    # -> BrokerConfig keys it overrides (asyncLearner, allAckInSyncStateSet, inSyncReplicas ...)
    broker_overrides: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()
    batch_sends: bool = False  # producers send SEND_BATCH_MESSAGE batches of 1-4 messages
    # scripted only: scanNotActiveBrokerInterval / scanInactiveMasterInterval of the controllers
    controller_scan_ms: int = 1000
    # "controller" (RIP-44, drawn) or "acting": classic groups with slave acting master
    # (acting_world.py); notify_min_id: the NameServer pushes NOTIFY_MIN_BROKER_ID_CHANGE
    mode: str = "controller"
    notify_min_id: bool = False
    # drawn from the seed's own RNG (replication_draw.py): ack mode, learner, batch and
    # push-failure shares; the default is the product's default and no push consumer
    options: ReplicationDraw = attrs.field(factory=ReplicationDraw)
    push: bool = False  # a PushConsumer group consumes during the run (cluster_push.py)

    @classmethod
    def draw(cls, seed: int) -> SimSpec:
        rng = random.Random(seed)
        spec = cls(
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
        options = ReplicationDraw.draw(seed, spec.set_sizes)
        return attrs.evolve(spec, options=options, push=True)._maybe_acting(seed)

    def _maybe_acting(self, seed: int) -> SimSpec:
        """A small share of seeds run classic acting-master mode (acting_world.py), drawn from
        a stream of their own so every controller-mode seed keeps its run: SYNC_FLUSH (an
        ASYNC_FLUSH classic master loses acknowledged messages in a power cut, by design), no
        controller-focused faults (there is no controller), and neither the controller-mode
        replication options nor the push groups (replication_draw.py, cluster_push.py: their
        checkers speak of SyncStateSets and master epochs)."""
        rng = random.Random(f"acting-{seed}")
        if rng.random() >= ACTING_SHARE:
            return self
        focus = "replication" if self.focus == "controllers" else self.focus
        return attrs.evolve(
            self, mode="acting", controllers=0, embedded=False, sync_flush=True, focus=focus,
            notify_min_id=rng.random() < 0.5, options=ReplicationDraw(), push=False,
        )  # fmt: skip

    def describe(self) -> str:
        mode = "embedded" if self.embedded else "standalone"
        head = f"{self.controllers} controller(s) {mode}"
        if self.mode == "acting":
            head = f"classic acting master (notify {self.notify_min_id})"
        flush = "SYNC_FLUSH" if self.sync_flush else "ASYNC_FLUSH"
        return (
            f"{head}, sets {self.set_sizes}, {flush}, "
            f"segment {self.segment_size // 1024} KiB, cq {self.cq_entries}, "
            f"index {self.index}, {self.queues} queues, {self.producers}x{self.senders} "
            f"senders, <= {self.max_messages} msgs, {self.steps} steps, focus {self.focus}; "
            f"{self.options.describe()}, push consumer {self.push}"
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
        self.meta = MetadataChecker(checker.fail, checker.count)
        self.controls: list[ControlProc] = []
        self.brokers: dict[str, list[BrokerProc]] = {s: [] for s in SETS}
        self._build()
        self.client_ip = "10.0.9.60"
        self.clients: trio.Nursery | None = None
        self.probe_seq = 0
        # set -> the first masterEpoch a non-learner served in (_check_learners)
        self.voter_mastered: dict[str, int] = {}
        self.step_hooks: list[Callable[[], None]] = []  # more per-step checks (cluster_run)

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
                scanNotActiveBrokerInterval=spec.controller_scan_ms,
                scanInactiveMasterInterval=spec.controller_scan_ms,
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
                        config=self._broker_config(set_name, ip, f"{set_name}-{k}", k, size),
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

    def _broker_config(
        self, set_name: str, ip: str, name: str, k: int, size: int
    ) -> Callable[[], BrokerConfig]:
        spec = self.spec
        overrides = {
            **dict(spec.options.overrides(set_name, k, size)),
            **dict(dict(spec.broker_overrides).get(name, ())),
        }

        def make() -> BrokerConfig:
            keys: dict[str, object] = dict(
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
                # small index files (the default's 20 MB slot table is slow on the sim disk)
                maxHashSlotNum=256,
                maxIndexNum=1024,
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
                # a consumer's retry (delay level 3 + reconsumes) comes back in 1-3 s, not 10 s+
                messageDelayLevel=SIM_DELAY_LEVELS,
            )
            return BrokerConfig(**{**keys, **overrides})  # type: ignore[arg-type]

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
            if b is None or b.roles is None or not b.roles.serving_as_master():
                continue
            epoch = b.roles.master_epoch
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
        store = b.store.message_store
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
            and p.live_broker.roles is not None
            and p.live_broker.roles.role is not None
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
        for s in SETS:
            self.meta.topic_command(s, TopicConfig(TOPIC, q, q))
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
        for s in SETS:
            self.meta.topic_answered(s, TopicConfig(TOPIC, q, q))

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
        self._check_learners()
        for hook in self.step_hooks:
            hook()
        for s in SETS:
            master = self.master_of(s)
            b = None if master is None else master.live_broker
            if b is not None and b.recovery is not None:
                key = f"{master.name}#{master.incarnation}"  # type: ignore[union-attr]
                self.checker.check_dispatched(key, s, partial(_body_at, b.store.message_store))
                self.meta.check_master(
                    s,
                    key,
                    b.tables.topics.table,
                    b.tables.groups.table,
                    b.store.message_store.queues_with_records(),
                )

    def _check_learners(self) -> None:
        """An asyncLearner never joins the SyncStateSet, so once another broker of its set has
        been master it is never elected again: it never serves in a masterEpoch above the first
        one another broker served in (it may be the first master of a cold start, upstream's
        flag only keeps a slave out of the set; and a deposed learner may still think itself
        master of its old epoch until it hears of the new one)."""
        for s, size in zip(SETS, self.spec.set_sizes, strict=True):
            name = self.spec.options.learner(s, size)
            if name is None:
                continue
            for p in self.brokers[s]:
                b = p.live_broker
                if b is None or b.roles is None or not b.roles.serving_as_master():
                    continue
                epoch = b.roles.master_epoch
                first = self.voter_mastered.get(s)
                if p.name != name:
                    self.voter_mastered[s] = epoch if first is None else min(first, epoch)
                elif first is not None and epoch > first:
                    self.checker.fail(
                        f"the asyncLearner {p.name} serves as master of {s} in masterEpoch "
                        f"{epoch}, after another broker of the set was master in {first} (it "
                        f"must never join the SyncStateSet)"
                    )


def _body_at(store: MessageStore, topic: str, queue_id: int, offset: int) -> bytes | None:
    """The body at a queue offset of a store's ConsumeQueue (None: not dispatched there)."""
    if offset >= store.get_max_offset(topic, queue_id):
        return None
    res = store.get_messages(topic, queue_id, offset, 1, 1 << 20)
    if not res.buffers:
        return None
    return decode_stored(res.buffers[0])[0].body
