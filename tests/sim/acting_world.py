"""The classic-mode world of the whole-cluster simulation: slave acting master (RIP-32, A1-A5).

`SimSpec(mode="acting")` builds this instead of the controller-mode `World` (cluster_sim.py):
no controller, one NameServer with ``supportActingMaster`` (and ``notifyMinBrokerIdChanged``
when the spec says so), and the same two broker sets, now classic groups: brokerId 0 is a
SYNC_MASTER, ids 1.. are SLAVEs, every broker with ``enableSlaveActingMaster`` and
``enableRemoteEscape`` (broker-b is where broker-a's acting slave escapes to, and the reverse).
Same hosts, seeded network, simulated disks, MockClock and checker as controller mode; the
controller-mode views are answered the classic way (the master of a set is its brokerId 0 once
it is online, i.e. out of pre-online; an acting slave is never "the master": it takes no write).

Timings (small, as in controller mode; `ACTING_BOUND_S` is the bound they give):
brokerNotActiveTimeoutMillis 4 s, the NameServer's scanNotActiveBrokerInterval 1 s,
syncBrokerMemberGroupPeriod 1 s (the poll is jittered up to 1.2x), transactionCheckInterval 2 s,
registerNameServerPeriod 5 s.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import trio

from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole, FlushDiskType
from rocketrio.actors.namesrv.config import NamesrvConfig
from tests.sim.cluster_checks import ClusterChecker
from tests.sim.cluster_nodes import BrokerProc
from tests.sim.cluster_sim import NS_PORT, SETS, START_BOUND_S, STORE, SimSpec, World

NS_HOST = "10.0.1.1"
NOT_ACTIVE_TIMEOUT_MS = 4000
NS_SCAN_MS = 1000
MEMBER_POLL_MS = 1000
# a silent master: the NameServer drops it after brokerNotActiveTimeoutMillis + one scan, the
# slave sees its group without id 0 at its next member poll (jittered up to 1.2x the period)
ACTING_BOUND_S = (NOT_ACTIVE_TIMEOUT_MS + NS_SCAN_MS + 1.2 * MEMBER_POLL_MS) / 1000
# a client's route (pollNameServerInterval of the scenario's client) adds its refresh
CLIENT_ROUTE_POLL_MS = 2000


def is_acting(spec: SimSpec) -> bool:
    return spec.mode == "acting"


class ActingWorld(World):
    """A `World` of classic groups with acting master on (see module docstring).
    ``step_checks`` run after every step with the shared invariants (the scenarios' checkers,
    acting_checks.py)."""

    def __init__(self, spec: SimSpec, nursery: trio.Nursery, checker: ClusterChecker) -> None:
        self.step_checks: list[Callable[[], None]] = []
        super().__init__(spec, nursery, checker)

    def check_step(self) -> None:
        super().check_step()
        self.check_acting_safety()
        for check in self.step_checks:
            check()

    def check_acting_safety(self) -> None:
        """Under any fault (the seeded runs too): an acting slave's store never writes as a
        master, and a broker in pre-online neither acts nor runs a special service."""
        for p in self.all_brokers():
            b = p.live_broker
            if b is None or b.roles is None or b.recovery is None:
                continue
            if b.roles.acting_master():
                self.checker.count("acting_slave_steps")  # how much of the run had one
            if b.roles.acting_master() and b.store.actor.writes_as_master():
                self.checker.fail(f"{p.name}#{p.incarnation} acts and its store writes as master")
            if not b.roles.role_known and (
                b.roles.acting_master() or b.roles.special_services_on()
            ):
                self.checker.fail(f"{p.name}#{p.incarnation} acts while in pre-online")

    def _build(self) -> None:
        spec = self.spec
        self.ctrl_addrs = []
        self.ns_addrs = [f"{NS_HOST}:{NS_PORT}"]
        ns = NamesrvConfig(
            listenHost=NS_HOST,
            listenPort=NS_PORT,
            kvConfigPath="",
            scanNotActiveBrokerInterval=NS_SCAN_MS,
            supportActingMaster=True,
            notifyMinBrokerIdChanged=spec.notify_min_id,
        )
        self.controls.append(self._control("namesrv", NS_HOST, ns, None))
        for s, (set_name, size) in enumerate(zip(SETS, spec.set_sizes, strict=True)):
            for k in range(size):
                ip = f"10.0.{s + 2}.{k + 1}"
                self.brokers[set_name].append(
                    BrokerProc(
                        f"{set_name}-{k}",
                        self._host(ip),
                        self.net,
                        self.nursery,
                        config=self._classic_config(set_name, ip, k),
                        rng=self._rng(),
                        tap=self.tap.install,
                        set_name=set_name,
                    )
                )

    def _rng(self) -> random.Random:
        return random.Random(self.rng.getrandbits(32))

    def _classic_config(self, set_name: str, ip: str, broker_id: int) -> Callable[[], BrokerConfig]:
        spec = self.spec
        overrides = dict(dict(spec.broker_overrides).get(f"{set_name}-{broker_id}", ()))

        def make() -> BrokerConfig:
            keys: dict[str, object] = dict(
                brokerName=set_name,
                brokerId=broker_id,
                brokerRole=BrokerRole.SYNC_MASTER if broker_id == 0 else BrokerRole.SLAVE,
                brokerIP1=ip,
                listenPort=10911,
                namesrvAddr=";".join(self.ns_addrs),
                storePathRootDir=STORE,
                flushDiskType=FlushDiskType.SYNC_FLUSH
                if spec.sync_flush
                else FlushDiskType.ASYNC_FLUSH,
                mappedFileSizeCommitLog=spec.segment_size,
                mappedFileSizeConsumeQueue=spec.cq_entries * 20,
                messageIndexEnable=spec.index,
                maxHashSlotNum=256,
                maxIndexNum=1024,
                defaultTopicQueueNums=spec.queues,
                registerNameServerPeriod=5000,
                brokerNotActiveTimeoutMillis=NOT_ACTIVE_TIMEOUT_MS,
                syncBrokerMemberGroupPeriod=MEMBER_POLL_MS,
                compatibleWithOldNameSrv=False,
                enableSlaveActingMaster=True,
                enableRemoteEscape=True,
                transactionCheckInterval=2000,
                flushConsumerOffsetInterval=1000,
                haSendHeartbeatInterval=1000,
                haHousekeepingInterval=4000,
                syncFlushTimeout=3000,
            )
            return BrokerConfig(**{**keys, **overrides})  # type: ignore[arg-type]

        return make

    # ------------------------------------------------------------------ views

    def master_of(self, set_name: str) -> BrokerProc | None:
        """The set's brokerId 0 once it is online (out of pre-online)."""
        p = self.brokers[set_name][0]
        b = p.live_broker
        if b is None or b.roles is None or not b.roles.role_known:
            return None
        return p if b.roles.serving_as_master() else None

    def acting_of(self, set_name: str) -> list[BrokerProc]:
        """The set's slaves acting as master now (at most one, but for one poll)."""
        return [
            p
            for p in self.brokers[set_name][1:]
            if (b := p.live_broker) is not None and b.roles is not None and b.roles.acting_master()
        ]

    # ------------------------------------------------------------------ start-up

    async def start(self) -> None:
        for p in self.controls:
            await p.start()
        for p in self.all_brokers():
            await p.start()
        deadline = trio.current_time() + START_BOUND_S
        while not all(self.master_of(s) for s in SETS) or not all(
            (b := p.live_broker) is not None and b.roles is not None and b.roles.role_known
            for p in self.all_brokers()
        ):
            if trio.current_time() > deadline:
                self.checker.fail(f"the classic cluster did not start within {START_BOUND_S}s")
            self.check_processes()
            await trio.sleep(0.1)
        await self.create_topic()
