"""The Broker: boot and wiring only (upstream BrokerController; L4, M3, M4).

`Broker.__init__` builds the collaborators and connects them; nothing else here handles a
request. What each part owns:

- tables.py: the topic, group and offset tables with their config files;
- store_actor.py: the MessageStore's one writer; store_view.py: the read-only view and the read
  gate; pull_hold.py: long polling;
- send_processor.py, pull_processor.py, client_processor.py, admin_processor.py: the request
  handlers, each given only the collaborators it uses, returning typed outcomes (outcomes.py);
- remoting_adapter.py: RemotingCommand in, processors called, RemotingCommand out;
- replicas_manager.py (controller mode): brokerId, role and epoch from the controller.

`run_broker` locks the store (``storePathRootDir/lock``, storage/store_lock.py: a second broker
on the same store is refused naming the first), opens the MessageStore (recovery in a worker
thread, logged as ``commitlog_recovered``; a cut tail is also a WARN ``commitlog_truncated``
naming segment, offset and bytes cut; damage recovery must not cut is an ERROR
events.StoreCorrupt.NAME and the start fails), loads topics.json /
subscriptionGroup.json / consumerOffset.json from ``storePathRootDir/config``, serves the
remoting port on brokerIP1:listenPort, registers with every NameServer at start, every
registerNameServerPeriod and right after a topic change, sends BROKER_HEARTBEAT every
brokerHeartbeatInterval, then prints upstream's boot line and logs events.BrokerBoot.NAME.

Shutdown (cancellation): stop taking requests (SYSTEM_BUSY), unregister from the NameServers,
let the store actor answer every queued put, answer held pulls, give the connections a moment
to write those answers, persist consumer offsets and configs, stop the services, then flush and
close the store. `crash` is the fault-injection twin: it stops everything with no flush and no
close, like kill -9, so tests can check recovery.

Controller mode (enableControllerMode=true): a `ReplicasManager` obtains the persistent brokerId
and the role from the controller before the broker registers to any NameServer; until then and
while it is a slave the send path refuses writes (SERVICE_NOT_AVAILABLE, naming the master: the
manager is the send processor's write gate), and every role change re-registers at once
(brokerId 0 for the master, its own id for a slave).
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import attrs
import structlog
import trio

from rocketrio.actors.auth.config import parse_credentials
from rocketrio.actors.broker.admin.offset_reset import (
    OffsetResetProcessor,
    RemotingResetPusher,
    offset_reset_handlers,
)
from rocketrio.actors.broker.admin.processor import AdminProcessor
from rocketrio.actors.broker.auth.processor import AuthProcessor
from rocketrio.actors.broker.auth.remoting_gate import AuthGate, auth_handlers, gate_settings
from rocketrio.actors.broker.boot.config import (
    BrokerConfig,
    BrokerRole,
    FlushDiskType,
    MetricsExporterType,
)
from rocketrio.actors.broker.boot.fault_sites import NO_FAULTS, FaultSites
from rocketrio.actors.broker.boot.live_config import (
    BROKER_POLICY,
    apply_broker_changes,
    registered_topics,
)
from rocketrio.actors.broker.boot.outer_api import BrokerOuterAPI, retry_delay
from rocketrio.actors.broker.clients.client_manager import ConsumerManager, ProducerManager
from rocketrio.actors.broker.clients.consumer_calls import Broker2Client, consumer_call_handlers
from rocketrio.actors.broker.clients.lock_manager import RebalanceLockManager
from rocketrio.actors.broker.clients.processor import ClientProcessor
from rocketrio.actors.broker.dispatch.adapter import RemotingAdapter, RemotingNotifier
from rocketrio.actors.broker.ha.master_service import HAMasterService
from rocketrio.actors.broker.ha.service import AutoSwitchHAService, resolve_ha_addr
from rocketrio.actors.broker.ha.status_service import HAStatusService
from rocketrio.actors.broker.pop.ack import PopAckProcessor
from rocketrio.actors.broker.pop.handlers import pop_handlers
from rocketrio.actors.broker.pop.hold import PopLongPollingService
from rocketrio.actors.broker.pop.order_service import PopOrderService
from rocketrio.actors.broker.pop.processor import PopConfig, PopMessageProcessor
from rocketrio.actors.broker.pop.revive_service import PopReviveService, ReviveConfig
from rocketrio.actors.broker.pull.hold import HoldLimits, PullRequestHoldService
from rocketrio.actors.broker.pull.processor import PullConfig, PullMessageProcessor
from rocketrio.actors.broker.roles.classic import ClassicRoleService
from rocketrio.actors.broker.roles.replicas_manager import ReplicasManager
from rocketrio.actors.broker.roles.slave_sync import SlaveSynchronize
from rocketrio.actors.broker.schedule.policy import parse_message_delay_level
from rocketrio.actors.broker.schedule.service import ScheduleService
from rocketrio.actors.broker.send.processor import SendConfig, SendMessageProcessor, host_tuple
from rocketrio.actors.broker.static_topic.admin import StaticTopicProcessor
from rocketrio.actors.broker.static_topic.clean import StaticTopicCleanService
from rocketrio.actors.broker.static_topic.guard import guard_handlers
from rocketrio.actors.broker.static_topic.offsets import StaticTopicOffsets
from rocketrio.actors.broker.static_topic.pull import leads_logic_queue, pull_handlers
from rocketrio.actors.broker.static_topic.remote import RemoteBrokers
from rocketrio.actors.broker.static_topic.send import send_handlers
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.stats.consume_stats import ConsumeStatsProcessor
from rocketrio.actors.broker.stats.day_counters import FILE_NAME as DAY_FILE
from rocketrio.actors.broker.stats.day_counters import PERSIST_INTERVAL_S, DayCountersFile
from rocketrio.actors.broker.stats.handlers import stats_handlers
from rocketrio.actors.broker.stats.items import GROUP_GET_NUMS
from rocketrio.actors.broker.stats.metrics import BrokerCollector, StoreCollector
from rocketrio.actors.broker.stats.runtime_info import (
    DiskSpace,
    RuntimeInfo,
    disk_space,
    used_ratio,
)
from rocketrio.actors.broker.store.actor import StoreActor, StoreRole
from rocketrio.actors.broker.store.clean_policy import ReplicaLink, replica_floor
from rocketrio.actors.broker.store.clean_service import CleanService
from rocketrio.actors.broker.store.disk_guard import DiskGuard, DiskUsage, FirstRefusal
from rocketrio.actors.broker.store.view import ReadGate, RunBlocking, StoreView
from rocketrio.actors.broker.tables.auth import AuthTable
from rocketrio.actors.broker.tables.config_file import ConfigFile
from rocketrio.actors.broker.tables.delay_offset import (
    DELAY_OFFSET_FILE,
    DelayOffsetFile,
    DelayOffsetTable,
    delay_offset_handlers,
)
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable, config_path
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingTable
from rocketrio.actors.broker.transaction.service import TransactionService
from rocketrio.actors.client.message import UniqIdGenerator
from rocketrio.actors.kernel.clock import monotonic_ms as trio_now_ms
from rocketrio.actors.kernel.live_update_service import ConfigUpdater
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingServer
from rocketrio.actors.kernel.transport import Transport, split_addr
from rocketrio.actors.observe import events
from rocketrio.actors.observe.logs import wallclock_ms
from rocketrio.actors.observe.metrics_exporter import exporter_addr, serve_metrics
from rocketrio.actors.observe.rpc_metrics import RpcLatency, RpcLatencyCollector
from rocketrio.protocol.acl_signature import RequestSigner
from rocketrio.protocol.bodies import TopicConfig, with_mapping
from rocketrio.protocol.codes import RequestCode
from rocketrio.storage.commitlog import CorruptionError
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.index_file import INDEX_DIR
from rocketrio.storage.message_store import (
    COMMITLOG_DIR,
    CONSUME_QUEUE_DIR,
    MessageStore,
    RecoveryReport,
    StoreConfig,
)
from rocketrio.storage.store_lock import LockOwner, StoreLock

STORE_CORRUPT_REMARK = (
    "the store is damaged where recovery must not cut (acknowledged data would be lost); nothing "
    "was changed on disk. List every problem with `rocketrio admin checkStore --store {store}`. "
    "Then rebuild this broker's store from a healthy replica (stop it, move {store} aside, start "
    "it again as a slave of its master so it copies the CommitLog) or restore {store} from a "
    "backup"
)
CLIENT_SCAN_INTERVAL_S = 10.0
STATS_SAMPLE_INTERVAL_S = 1.0
SHUTDOWN_STEP_TIMEOUT_S = 5.0
_NO_IP = (b"\x00\x00\x00\x00", 0)


def store_host_of(addr: str) -> tuple[bytes, int]:
    """The broker's own address for offset message ids; a host name is resolved once, at
    start, because clients decode the ip from every offset message id."""
    host = host_tuple(addr)
    if host != _NO_IP:
        return host
    name, port = split_addr(addr)
    try:
        return socket.inet_aton(socket.gethostbyname(name)), port
    except OSError:
        raise ValueError(f"brokerIP1 {name!r} is neither an ip address nor resolvable") from None


class Broker:
    """One broker: its collaborators, their wiring, boot, registration and shutdown."""

    def __init__(
        self,
        config: BrokerConfig,
        transport: Transport,
        *,
        now_ms: Callable[[], int] = wallclock_ms,
        rng: random.Random | None = None,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        faults: FaultSites = NO_FAULTS,
        fs: FileSystem = OS_FS,
        disk: Callable[[str], DiskSpace | None] | None = None,
    ) -> None:
        self.config = config
        # the space of a path's file system (statvfs; a test may inject another)
        self.disk = disk or disk_space
        self.disk_guard = DiskGuard(config.diskSpaceWarningLevelRatio)
        self.fs = fs  # every file of the broker: store, configs, identity (simulated in sims)
        self.run_blocking = run_blocking
        self.transport = transport
        self.now_ms = now_ms
        self.rng = rng or random.Random()
        self.log = structlog.get_logger("broker").bind(broker=config.brokerName)
        self.addr = config.broker_addr
        self.metrics_addr = ""  # where /metrics is served (metricsExporterType=PROM)
        self.store_host = store_host_of(self.addr)
        self._register_now = trio.Event()
        # state: the store and its views, the tables, the client registries
        self.store = self._make_store()
        self.read_gate = ReadGate(run_blocking)
        self.store_view = StoreView(
            self.store, self.read_gate, off_loop_read_bytes=config.pullReadOffLoopBytes
        )
        self.topics = TopicTable(
            config, now_ms, run_blocking=run_blocking, on_change=self._request_register, fs=fs
        )
        self.groups = GroupTable(config, now_ms, run_blocking=run_blocking, fs=fs)
        self.offsets = OffsetTable(config, now_ms, run_blocking=run_blocking, fs=fs)
        self.auth = AuthTable(config, now_ms, run_blocking=run_blocking, fs=fs)
        self.consumers = ConsumerManager()
        self.producers = ProducerManager()
        self.locks = RebalanceLockManager(config.rebalanceLockMaxLiveTime / 1000)
        self.stats = BrokerStats(config.brokerClusterName, self.topics.is_system_topic)
        # the day counters' file (day_counters.py): restored at open, written periodically
        self.day_file = ConfigFile(
            config_path(config.storePathRootDir, DAY_FILE),
            DayCountersFile,
            self.stats.days.snapshot,
            run_blocking,
            fs=fs,
        )
        self.uniq_ids = UniqIdGenerator(config.brokerIP1, clock_ms=now_ms)
        # services
        self.pull_hold = PullRequestHoldService(
            HoldLimits(config.maxHeldPullsPerConnection, config.maxHeldPulls)
        )
        self.pop_hold = PopLongPollingService(config.maxPopPollingSize)
        self.store_actor = StoreActor(
            self.store,
            sync_flush=config.flushDiskType == FlushDiskType.SYNC_FLUSH,
            flush_interval_ms=config.flushIntervalCommitLog,
            sync_flush_timeout_ms=config.syncFlushTimeout,
            now_ms=now_ms,
            on_arrival=self._on_arrival,
            stats=self.stats,
            run_blocking=run_blocking,
            read_gate=self.read_gate,
            # a replicated broker writes nothing until its role is known
            role=StoreRole.FENCED if config.enableControllerMode else StoreRole.STANDALONE,
            # a write the disk refused: probed (repair, then a scratch write) at the same period
            probe_interval_ms=config.cleanResourceInterval,
            on_write_fault=self.store_write_fault,
        )
        # replication: the HA listener runs in every role; who may use it is decided per role
        self.ha_master = HAMasterService(
            transport,
            config.ha_addr,
            self.store_actor,
            segment_size=config.mappedFileSizeCommitLog,
            batch_size=config.haTransferBatchSize,
            heartbeat_interval_ms=config.haSendHeartbeatInterval,
            housekeeping_interval_ms=config.haHousekeepingInterval,
        )
        self.replicas = ReplicasManager(self, faults) if config.enableControllerMode else None
        self.clean = CleanService(
            config,
            self.store_actor,
            usage=self._store_disk_usage,
            replica_floor=self._replica_floor,
            now_ms=now_ms,
            log=self.log.bind(actor="clean_service"),
        )
        self.classic: ClassicRoleService | None = None
        self.slave_sync: SlaveSynchronize | None = None
        # delay and timer messages: delayOffset.json and the master-only re-put service
        self.delay_offsets = DelayOffsetFile(
            config_path(config.storePathRootDir, DELAY_OFFSET_FILE),
            DelayOffsetTable(now_ms, config.delayOffsetUpdateVersionStep),
            run_blocking=run_blocking,
            fs=fs,
        )
        self.schedule = ScheduleService(
            levels=len(parse_message_delay_level(config.messageDelayLevel)),
            offsets=self.delay_offsets.table,
            reader=self.store_view,
            writer=self.store_actor,
            is_master=self.serving_as_master,
            now_ms=now_ms,
            log=self.log.bind(actor="schedule_service"),
        )
        # request handling
        self.send = SendMessageProcessor(
            SendConfig.of(config),
            topics=self.topics,
            groups=self.groups,
            writer=self.store_actor,
            reader=self.store_view,
            locks=self.locks,
            new_uniq_key=self.uniq_ids.next_id,
            stats=self.stats,
            write_gate=FirstRefusal(
                [self.disk_guard] if self.replicas is None else [self.disk_guard, self.replicas]
            ),
            rng=self.rng,
            now_ms=now_ms,
        )
        self.pull = PullMessageProcessor(
            PullConfig.of(config),
            topics=self.topics,
            groups=self.groups,
            consumers=self.consumers,
            offsets=self.offsets,
            store=self.store_view,
            hold=self.pull_hold,
            stats=self.stats,
            role=self,
        )
        self._init_pop(config)
        self.clients = ClientProcessor(
            config.brokerName,
            topics=self.topics,
            groups=self.groups,
            offsets=self.offsets,
            consumers=self.consumers,
            producers=self.producers,
            locks=self.locks,
            store=self.store_view,
            notifier=RemotingNotifier(),
        )
        self.admin = AdminProcessor(
            config,
            topics=self.topics,
            groups=self.groups,
            offsets=self.offsets,
            consumers=self.consumers,
            producers=self.producers,
            store=self.store_view,
            deleter=self.store_actor,
            stats=self.stats,
            hold=self.pull_hold,
            now_ms=now_ms,
        )
        # static topics: topicQueueMapping.json and the calls that use it
        self.static_topics = StaticTopicProcessor(
            topics=self.topics,
            mappings=TopicQueueMappingTable(config, now_ms, run_blocking=run_blocking, fs=fs),
            admin=self.admin,
            on_change=self._request_register,
            store_barrier=self.store_actor.commitlog_max_offset,
        )
        self.consume_stats = ConsumeStatsProcessor(
            lambda: self.config.brokerName,
            lambda: self.addr,
            topics=self.topics,
            offsets=self.offsets,
            consumers=self.consumers,
            groups=self.groups,
            store=self.store_view,
            group_tps=self._group_get_tps,
        )
        self.runtime_info = RuntimeInfo(
            config,
            stats=self.stats,
            store=self.store_view,
            send_queue=self.store_actor,
            pull_queue=self.read_gate,
            held_pulls=lambda: self.pull_hold.count,
            is_master=self.serving_as_master,
            now_ms=now_ms,
            extra=self._runtime_counts,
            disk=self.disk,
        )
        self.broker2client = Broker2Client()  # the calls 307 passes on to a consumer
        # transactional messages: END_TRANSACTION and the check service (master only)
        self.transactions = TransactionService(
            config,
            writer=self.store_actor,
            view=self.store_view,
            offsets=self.offsets,
            producers=self.producers,
            topics=self.topics,
            is_master=self.serving_as_master,
            now_ms=now_ms,
            new_uniq_key=self.uniq_ids.next_id,
            store_host=self.addr,
            log=self.log.bind(actor="transaction"),
        )
        # UPDATE_BROKER_CONFIG: live keys only, written to brokerConfigPath (live_config.py)
        self.config_updater = ConfigUpdater(
            config,
            BROKER_POLICY,
            config_path=lambda: self.config.brokerConfigPath or None,
            apply=lambda changes: apply_broker_changes(self, changes),
            io_runner=run_blocking,
            fs=fs,
            log=self.log.bind(actor="config"),
        )
        self.ha_status = HAStatusService(
            serving_as_master=self.serving_as_master,
            master=self.ha_master,
            ha=self._ha_service,
            store=self.store_actor,
            wall_now_ms=now_ms,
        )
        self.offset_reset = OffsetResetProcessor(
            lambda: self.config.brokerName,
            role=self,
            topics=self.topics,
            offsets=self.offsets,
            consumers=self.consumers,
            store=self.store_view,
            pusher=RemotingResetPusher(),
        )
        self.adapter = RemotingAdapter(
            config.brokerName,
            send=self.send,
            pull=self.pull,
            clients=self.clients,
            admin=self.admin,
            stats=self.consume_stats,
            replicas=self.replicas,
            gate=self._auth_gate(),
            extra_handlers={
                **auth_handlers(AuthProcessor(self.auth)),
                **self.ha_status.handlers(),
                **stats_handlers(self.runtime_info, self.stats.items),
                RequestCode.UPDATE_BROKER_CONFIG: self.config_updater.handle,
                RequestCode.DELETE_EXPIRED_COMMITLOG: self.clean.handle_delete_expired,
                **consumer_call_handlers(
                    lambda: self.config.brokerName,
                    consumers=self.consumers,
                    b2c=self.broker2client,
                    topics=self.topics,
                    offsets=self.offsets,
                    store=self.store_view,
                    now_ms=now_ms,
                ),
                **offset_reset_handlers(self.offset_reset),
                **pop_handlers(self.pop, self.pop_acks, self.pop_revive),
                **self.transactions.handlers(),
                **delay_offset_handlers(self.delay_offsets.table),
                **self.static_topics.handlers(),
            },
        )
        self._wire_static_topics()
        # metricsExporterType=PROM: the server times its answers (rocketmq_rpc_latency)
        self.rpc_latency = (
            RpcLatency() if config.metricsExporterType is MetricsExporterType.PROM else None
        )
        self.server = RemotingServer(
            transport,
            self.addr,
            self.adapter.process,
            on_connect=self.adapter.on_connect,
            limits=config.server_limits(),
            rpc_latency=self.rpc_latency,
        )
        self.outer_api: BrokerOuterAPI | None = None
        self.recovery: RecoveryReport | None = None
        self.store_lock: StoreLock | None = None
        self._services_scope = trio.CancelScope(shield=True)
        self._run_scope: trio.CancelScope | None = None
        self._crashed = False

    def _init_pop(self, config: BrokerConfig) -> None:
        """POP consumption: the processors and the revive service (actors/broker/pop_*.py)."""
        pop_config = PopConfig.of(config)
        self.pop_order = PopOrderService(
            config.storePathRootDir,
            offsets=self.offsets,
            topics=self.topics,
            groups=self.groups,
            hold=self.pop_hold,
            now_ms=self.now_ms,
            persist_interval_s=config.flushConsumerOffsetInterval / 1000,
            run_blocking=self.run_blocking,
            fs=self.fs,
            log=self.log.bind(actor="pop_order"),
        )
        self.pop = PopMessageProcessor(
            pop_config,
            topics=self.topics,
            groups=self.groups,
            offsets=self.offsets,
            store=self.store_view,
            writer=self.store_actor,
            hold=self.pop_hold,
            order=self.pop_order,
            now_ms=self.now_ms,
            store_host=self.store_host,
            rng=self.rng,
        )
        self.pop_acks = PopAckProcessor(
            pop_config,
            topics=self.topics,
            order=self.pop_order,
            store=self.store_view,
            writer=self.store_actor,
            now_ms=self.now_ms,
            store_host=self.store_host,
            next_revive_qid=self.pop.next_revive_qid,
        )
        self.pop_revive = PopReviveService(
            ReviveConfig.of(config),
            topics=self.topics,
            groups=self.groups,
            offsets=self.offsets,
            store=self.store_view,
            writer=self.store_actor,
            role=self,
            now_ms=self.now_ms,
            store_host=self.store_host,
            log=self.log.bind(actor="pop_revive"),
        )

    def _on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """The store actor's arrival listener: held pulls, held pops, the schedule service."""
        self.pull_hold.notify_message_arriving(topic, queue_id, max_offset)
        self.pop_hold.notify_message_arriving(topic, queue_id, max_offset)
        self.schedule.notify_arrival(topic, queue_id, max_offset)

    def _make_store(self) -> MessageStore:
        c = self.config
        store_config = StoreConfig(
            mappedFileSizeCommitLog=c.mappedFileSizeCommitLog,
            mappedFileSizeConsumeQueue=c.mappedFileSizeConsumeQueue,
            maxMessageSize=c.maxMessageSize,
            messageIndexEnable=c.messageIndexEnable,
            maxHashSlotNum=c.maxHashSlotNum,
            maxIndexNum=c.maxIndexNum,
            messageDelayLevel=c.messageDelayLevel,
            checkCRCOnRecover=c.checkCRCOnRecover,
            checkCRCOnPull=c.checkCRCOnPull,
        )
        return MessageStore(
            c.storePathRootDir,
            store_config,
            store_host=self.store_host,
            fs=self.fs,
            # controller mode: consume queues only up to confirmOffset (failovers truncate)
            replicated=c.enableControllerMode,
            epoch_file_path=c.epoch_file_path,
        )

    def check_disk(self) -> None:
        """Sample the store's disks for the disk guard (disk_guard.py); log a change."""
        root = self.config.storePathRootDir
        usage = DiskUsage(
            commitlog=used_ratio(self.disk(os.path.join(root, COMMITLOG_DIR))),
            consume_queue=used_ratio(self.disk(os.path.join(root, CONSUME_QUEUE_DIR))),
            index=used_ratio(self.disk(os.path.join(root, INDEX_DIR))),
        )
        changed = self.disk_guard.observe(usage)
        if changed is not None:
            record = events.DiskFull if changed else events.DiskSpaceRecovered
            events.emit(
                self.log,
                record(disk_usage=usage.describe(), warning_ratio=self.disk_guard.limit),
            )

    def _store_disk_usage(self) -> float | None:
        """The fuller of the CommitLog's and the ConsumeQueues' disks, as last sampled."""
        usage = self.disk_guard.usage
        if usage is None:
            return None
        if usage.commitlog < 0 or usage.consume_queue < 0:
            return -1.0
        return max(usage.commitlog, usage.consume_queue)

    def _replica_floor(self, in_sync_only: bool) -> int | None:
        """What a slave fetching from this master still needs (clean_policy.replica_floor);
        None while this broker is not serving as master."""
        if not self.serving_as_master():
            return None
        view = self.ha_master.view()
        links = [ReplicaLink(x.slave_id, x.ack_offset, x.transfer_from) for x in view.links]
        return replica_floor(links, view.sync_state_set, in_sync_only=in_sync_only)

    def store_write_fault(self, cause: str | None) -> None:
        """The store actor refuses writes because a write or fsync failed on a full disk
        (None: its probe wrote again): the disk guard refuses sends the same way."""
        changed = self.disk_guard.store_failed(cause)
        if changed is None:
            return
        usage = self.disk_guard.usage
        described = usage.describe() if usage is not None else ""
        limit = self.disk_guard.limit
        if changed:
            ev: events.LogEvent = events.DiskFull(
                disk_usage=described, warning_ratio=limit, reason=cause
            )
        else:
            ev = events.DiskSpaceRecovered(disk_usage=described, warning_ratio=limit)
        events.emit(self.log, ev)

    def _runtime_counts(self) -> dict[str, str]:
        """rocketrio's extra runtime-info keys: what the broker's tables hold, and in controller
        mode the masterEpoch and confirmOffset."""
        out = {
            "consumerGroups": str(len(self.consumers.groups)),
            "producerGroups": str(len(self.producers.groups)),
            "topicCount": str(len(self.topics.table)),
        }
        if self.replicas is not None:  # controller mode: what the web console shows per replica
            out["masterEpoch"] = str(self.replicas.master_epoch)
            out["confirmOffset"] = str(self.store.confirm_offset)
        return out

    def _group_get_tps(self, group: str, topic: str) -> float:
        """GET_CONSUME_STATS's consumeTps: GROUP_GET_NUMS over the last minute (upstream
        BrokerStatsManager.tpsGroupGetNums)."""
        view = self.stats.items.stats_item(GROUP_GET_NUMS, f"{topic}@{group}")
        return 0.0 if view is None else view.minute.tps

    def _auth_gate(self) -> AuthGate | None:
        """The ACL gate, when authentication or authorization is on."""
        c = self.config
        if not (c.authenticationEnabled or c.authorizationEnabled):
            return None
        return AuthGate(gate_settings(c), self.auth)

    def _outgoing_signer(self) -> RequestSigner | None:
        """innerClientAuthenticationCredentials sign the broker's own remoting calls."""
        creds = parse_credentials(self.config.innerClientAuthenticationCredentials)
        return None if creds is None else RequestSigner(creds)

    def _wire_static_topics(self) -> None:
        """Static topics' logic queues (S4): their own handlers for sends, pulls and offsets,
        which hand every other request to the plain ones."""
        mappings, plain = self.static_topics.mappings, dict(self.adapter.handlers)
        remote = RemoteBrokers(
            lambda: self.outer_api.client if self.outer_api is not None else None,
            lambda: self.config.namesrv_addrs,
        )
        log = structlog.get_logger("broker").bind(
            broker=self.config.brokerName, actor="static_topic"
        )
        offsets = StaticTopicOffsets(
            mappings=mappings, offsets=self.offsets, admin=self.admin, remote=remote, log=log
        )
        self.static_clean = StaticTopicCleanService(
            mappings=mappings,
            offsets=self.offsets,
            static_offsets=offsets,
            remote=remote,
            interval_ms=lambda: self.config.topicQueueMappingCleanInterval,
            is_master=lambda: self.config.brokerRole is not BrokerRole.SLAVE,
            on_change=self._request_register,
            log=log,
        )
        self.clients.leads_logic_queue = lambda mq: leads_logic_queue(mappings, mq)
        self.adapter.handlers.update(
            {
                **send_handlers(mappings, self.send, plain, RemotingAdapter.born_host),
                **pull_handlers(mappings, self.pull, self.offsets, remote, plain, log),
                **offsets.handlers(plain),
                **guard_handlers(mappings.is_static, plain),
            }
        )

    def _request_register(self) -> None:
        """Re-register with the NameServers now (a topic or the role changed)."""
        self._register_now.set()

    # ------------------------------------------------------------------ controller mode

    def apply_role(self, role: BrokerRole, broker_id: int, state_version: int) -> None:
        """The ReplicasManager took a role: the NameServers hear it at once, with a DataVersion
        whose stateVersion is the masterEpoch (upstream nextVersion(newMasterEpoch))."""
        self.config.brokerRole = role
        self.config.brokerId = broker_id
        self.transactions.role_changed()  # a new master rebuilds its state from the store
        if role is not BrokerRole.SLAVE:
            self._adopt_topics_of_queues()
        self.topics.set_state_version(state_version)
        self.schedule.role_changed()

    def _adopt_topics_of_queues(self) -> None:
        """A new master must serve every queue its log holds records of. Its slave sync may
        not have copied a topic (the master created it moments before dying; the sync runs
        one round trip after a new queue's first record arrives, so the window is short) or
        its latest queue count (the topic grew). A missing topic is created as a send would
        auto-create it (defaultTopicQueueNums queues), widened to cover the queues that hold
        records, so every queue a producer may have written stays readable; a known topic
        narrower than those queues is widened; nothing is ever narrowed (slave_sync drops a
        late answer from the old master, which would narrow it)."""
        for topic, n in self.store_view.queues_with_records().items():
            have = self.topics.select(topic)
            if have is None:
                q = max(n, self.config.defaultTopicQueueNums)
                self.topics.update(TopicConfig(topic, q, q))
            elif have.readQueueNums < n or have.writeQueueNums < n:
                self.topics.update(
                    attrs.evolve(
                        have,
                        readQueueNums=max(have.readQueueNums, n),
                        writeQueueNums=max(have.writeQueueNums, n),
                    )
                )
            else:
                continue
            events.emit(self.log, events.TopicAdoptedFromQueues(topic=topic, queue_count=n))

    def master_to_sync(self) -> str | None:
        """The master a slave copies metadata from (None: not a slave, or master unknown)."""
        if self.replicas is not None:
            if self.replicas.role is BrokerRole.SLAVE:
                return self.replicas.master_address
            return None
        if self.classic is not None and not self.classic.is_master:
            return self.classic.master_addr
        return None

    def _ha_service(self) -> AutoSwitchHAService | None:
        """The replication service of the current mode (None before it started)."""
        if self.replicas is not None:
            return self.replicas.ha
        return None if self.classic is None else self.classic.ha

    def serving_as_master(self) -> bool:
        """The pull path's `ReadRole`: a slave (or a broker without a role yet) lags."""
        if self.replicas is not None:
            return self.replicas.is_master
        return self.config.brokerRole is not BrokerRole.SLAVE

    async def commitlog_max_offset(self) -> int:
        """The CommitLog end once every put queued before this call is written."""
        return await self.store_actor.commitlog_max_offset()

    @property
    def role_known(self) -> bool:
        """False while a controller-mode broker has no role: it stays off the NameServers."""
        return self.replicas is None or self.replicas.role is not None

    def scan_clients(self) -> None:
        self.clients.scan_expired(trio.current_time())

    # ------------------------------------------------------------------ boot

    async def open(self) -> None:
        """Lock and recover the store (worker thread), then load the config files.

        StoreLocked when another broker holds the store; CorruptionError (after an ERROR line)
        when recovery found damage it must not cut. Either way nothing stays open."""
        started_at = datetime.fromtimestamp(self.now_ms() / 1000, UTC)
        owner = LockOwner(
            os.getpid(), self.config.brokerName, started_at.isoformat(timespec="milliseconds")
        )
        self.store_lock = StoreLock.acquire(self.config.storePathRootDir, owner, fs=self.fs)
        try:
            await self._recover_store()
        except BaseException:
            self.release_store_lock()
            raise

    def release_store_lock(self) -> None:
        if self.store_lock is not None:
            self.store_lock.release()

    async def _recover_store(self) -> None:
        started = trio.current_time()
        log = self.log

        def progress(phase: str, done: int, total: int) -> None:
            percent = 100 * done // total if total else 100
            events.emit(
                log,
                events.StoreRecoveryProgress(
                    phase=phase, done_bytes=done, total_bytes=total, percent=percent
                ),
            )

        self.store.on_progress = progress
        try:
            self.recovery = report = await self.run_blocking(self.store.open)
        except CorruptionError as e:
            events.emit(
                self.log,
                events.StoreCorrupt(
                    store=self.config.storePathRootDir,
                    error=str(e),
                    remark=STORE_CORRUPT_REMARK.format(store=self.config.storePathRootDir),
                ),
            )
            raise
        clog = report.commitlog
        events.emit(
            self.log,
            events.CommitlogRecovered(
                max_offset=clog.max_offset,
                truncated_at=clog.truncated_at,
                dropped_bytes=clog.bytes_dropped,
                segment=clog.segment,
                reason=clog.reason or None,
                redispatched=report.redispatched,
                cq_entries_dropped=report.cq_entries_dropped,
                took_ms=round((trio.current_time() - started) * 1000),
                confirm_offset=report.confirm_offset,
                epochs=[f"{r.epoch}-{r.start_offset}" for r in self.store.epoch_records()],
                unclean_shutdown=report.unclean_shutdown,
                scanned_from=clog.scanned_from,
                bytes_scanned=clog.bytes_scanned,
                checkpoint=clog.checkpoint_state,
            ),
        )
        if clog.truncated_at is not None:
            events.emit(
                self.log,
                events.CommitlogTruncated(
                    segment=clog.segment,
                    offset=clog.truncated_at,
                    dropped_bytes=clog.bytes_dropped,
                    reason=clog.reason,
                    deleted_segments=list(clog.deleted_segments),
                ),
            )
        if clog.checkpoint_state == "corrupt":
            events.emit(
                self.log,
                events.CheckpointCorrupt(
                    path=os.path.join(
                        self.config.storePathRootDir, "commitlog", "flushed.checkpoint"
                    ),
                    remark="every CommitLog segment was checked instead",
                ),
            )
        if self.store.epochs is not None and self.store.epochs.loaded_from_backup:
            events.emit(self.log, events.EpochFileLoadedFromBackup(path=self.store.epochs.path))
        self.store_actor.written.reset(self.store.get_commitlog_max_offset())
        for table in (self.topics, self.groups, self.offsets, self.pop_order):
            if await table.load_file():
                events.emit(self.log, events.ConfigLoadedFromBackup(file=table.file.path))
        if await self.static_topics.load():  # after topics.json: repairs it
            events.emit(
                self.log, events.ConfigLoadedFromBackup(file=self.static_topics.mappings.file.path)
            )
        await self.auth.load_files()
        if await self.delay_offsets.load_file():
            events.emit(self.log, events.ConfigLoadedFromBackup(file=self.delay_offsets.file.path))
        saved = await self.run_blocking(self.day_file.load)
        if self.day_file.loaded_from_backup:
            events.emit(self.log, events.ConfigLoadedFromBackup(file=self.day_file.path))
        self.stats.days.restore(saved, self.now_ms())
        if self.config.authenticationEnabled and not self.auth.users:
            events.emit(
                self.log,
                events.AuthNoUsers(
                    hint="authenticationEnabled with no user: set initAuthenticationUser"
                ),
            )
        await self.topics.persist()
        await self.groups.persist()

    def _boot_line(self) -> str:
        c = self.config
        line = f"The broker[{c.brokerName}, {self.addr}] boot success. serializeType=JSON"
        if c.namesrvAddr:
            line += f" and name server is {c.namesrvAddr}"
        return line

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        """Open, serve until cancelled (or `crash`), then shut down gracefully."""
        await self.open()
        try:
            with trio.CancelScope() as self._run_scope:
                async with trio.open_nursery() as nursery:
                    # the statistics' schedules start before the first request (upstream: at
                    # the broker's start), so traffic lands in the windows' first periods
                    self.stats.boot_ms = self.now_ms()
                    self._sample_stats()
                    await nursery.start(self._services)
                    print(self._boot_line(), flush=True)
                    events.emit(
                        self.log,
                        events.BrokerBoot(
                            addr=self.addr,
                            cluster=self.config.brokerClusterName,
                            broker_id=None if self.replicas is not None else self.config.brokerId,
                            namesrv=self.config.namesrvAddr,
                        ),
                    )
                    task_status.started(self)
                    try:
                        await trio.sleep_forever()
                    finally:
                        if not self._crashed:
                            with trio.CancelScope(shield=True):
                                await self._graceful_stop()
                        self._services_scope.cancel()
        finally:
            try:
                if not self._crashed:
                    with trio.CancelScope(shield=True):
                        await self.run_blocking(self.store.close)
                    events.emit(self.log, events.ProcessShutdown(reason="cancelled"))
            finally:
                # a crash (like kill -9) loses the lock too: the kernel closes a dead
                # process's fds
                self.release_store_lock()

    def crash(self) -> None:
        """Fault injection: stop at once, no flush, no close, no unregister (like kill -9)."""
        self._crashed = True
        self._services_scope.cancel()
        if self._run_scope is not None:
            self._run_scope.cancel()

    async def _services(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        with self._services_scope:
            async with (
                RemotingClient(self.transport, request_hook=self._outgoing_signer()) as client,
                trio.open_nursery() as n,
            ):
                self.outer_api = BrokerOuterAPI(self.config, client)
                await n.start(self.store_actor.run)
                await n.start(self.pull_hold.run)
                await n.start(self.pop_hold.run)
                await n.start(self.pop_revive.run)
                await n.start(self.pop_order.run)
                await n.start(self.broker2client.run)
                n.start_soon(self.topics.file.run_writer)
                n.start_soon(self.groups.file.run_writer)
                n.start_soon(
                    self.offsets.file.run_periodic, self.config.flushConsumerOffsetInterval / 1000
                )
                n.start_soon(self._every, CLIENT_SCAN_INTERVAL_S, self.scan_clients)
                n.start_soon(self._every, STATS_SAMPLE_INTERVAL_S, self._sample_stats)
                self.check_disk()  # before the first send is taken
                n.start_soon(self._every, self.config.cleanResourceInterval / 1000, self.check_disk)
                n.start_soon(self.clean.run)
                await n.start(self.transactions.run)
                n.start_soon(self.day_file.run_writer)
                n.start_soon(self.day_file.run_periodic, PERSIST_INTERVAL_S)
                bound = await n.start(self.server.run)
                self.addr = bound
                if self.config.metricsExporterType is MetricsExporterType.PROM:
                    await n.start(self._serve_metrics)
                await n.start(self.ha_master.run)
                if self.replicas is not None:
                    # listening first: the controller may push a role change right after we
                    # register; NameServer registration waits for the role (`role_known`)
                    await n.start(self.replicas.run, client)
                else:
                    self.classic = ClassicRoleService(
                        self.config,
                        store=self.store_actor,
                        master_service=self.ha_master,
                        transport=self.transport,
                        resolve_ha_addr=lambda addr: resolve_ha_addr(client, addr),
                        rng=self.rng,
                    )
                    await n.start(self.classic.run, client)
                self.slave_sync = SlaveSynchronize(
                    topics=self.topics,
                    groups=self.groups,
                    offsets=self.offsets,
                    auth=self.auth,
                    master_addr=self.master_to_sync,
                    queue_count=self.store_view.queue_count,
                    log=self.log.bind(actor="slave_sync"),
                    delay_offsets=self.delay_offsets.table,
                    mappings=self.static_topics.mappings,
                )
                n.start_soon(self.slave_sync.run, client)
                n.start_soon(self.static_clean.run)
                await n.start(self.schedule.run)
                n.start_soon(
                    self.delay_offsets.file.run_periodic,
                    self.config.flushDelayOffsetInterval / 1000,
                )
                await self.register_all()
                n.start_soon(self._register_loop)
                n.start_soon(self._heartbeat_loop)
                task_status.started()

    async def _serve_metrics(self, *, task_status: trio.TaskStatus[None]) -> None:
        c = self.config
        assert self.rpc_latency is not None
        node = {"cluster": c.brokerClusterName, "node_type": "broker", "node_id": c.brokerName}
        store = self.store_actor
        collectors = [
            BrokerCollector(
                cluster=c.brokerClusterName,
                broker_name=c.brokerName,
                items=self.stats.items,
                is_system_topic=self.topics.is_system_topic,
                topic_count=lambda: len(self.topics.table),
                group_count=lambda: len(self.groups.table),
                lags=self.consume_stats.lags,
            ),
            StoreCollector(
                cluster=c.brokerClusterName,
                broker_name=c.brokerName,
                store_bytes=lambda: store.log_end_offset() - store.log_min_offset(),
                flush_behind_bytes=lambda: (
                    self.store.get_commitlog_max_offset() - self.store.flushed_offset
                ),
                confirm_offset=store.confirm_offset,
                master_view=lambda: self.ha_master.view() if self.serving_as_master() else None,
                caught_up_ms=self._slaves_caught_up_ms,
                now_ms=trio_now_ms,
            ),
            RpcLatencyCollector([(node, self.rpc_latency)]),
        ]
        async with trio.open_nursery() as n:
            addr = exporter_addr(c.metricsPromExporterHost, c.metricsPromExporterPort, c.brokerIP1)
            self.metrics_addr = await n.start(
                serve_metrics, self.transport, addr, collectors, self.log
            )
            task_status.started()

    def _slaves_caught_up_ms(self) -> dict[int, int]:
        """When each slave was last caught up (Trio ms), from the master's SyncStateSet core."""
        gate = self.ha_master.gate
        if gate is None or gate.closed:
            return {}
        core = gate.core
        return {b: r.caught_up_ms or core.started_ms for b, r in core.replicas.items()}

    async def _every(self, period_s: float, fn: Callable[[], None]) -> None:
        while True:
            await trio.sleep(period_s)
            fn()

    def _sample_stats(self) -> None:
        if self.stats.sample(round(trio.current_time() * 1000), self.now_ms()):
            self.day_file.mark_dirty()  # a new day: its mornings are on disk at once

    # ------------------------------------------------------------------ name servers

    async def register_all(self) -> None:
        if self.outer_api is None or not self.config.namesrv_addrs or not self.role_known:
            return
        wrapper = with_mapping(
            registered_topics(self.topics.snapshot(), self.config.brokerPermission)
        )
        wrapper.topicQueueMappingInfoMap = self.static_topics.mappings.mapping_infos()
        wrapper.mappingDataVersion = self.static_topics.mappings.data_version
        await self.outer_api.register_all(wrapper)

    async def _register_loop(self) -> None:
        if not self.config.namesrv_addrs:
            return
        retry_s: float | None = None  # the last short wait while a NameServer is missing
        while True:
            # read at each period: UPDATE_BROKER_CONFIG may change it
            period_s = self.config.registerNameServerPeriod / 1000
            if self.outer_api is not None and not self.outer_api.all_registered():
                retry_s = retry_delay(period_s, retry_s)
            else:
                retry_s = None
            with trio.move_on_after(period_s if retry_s is None else retry_s):
                await self._register_now.wait()
            # a topic change during the registration below sets the new event: re-register
            self._register_now = trio.Event()
            await self.register_all()

    async def _heartbeat_loop(self) -> None:
        if not self.config.namesrv_addrs:
            return
        period_s = self.config.brokerHeartbeatInterval / 1000
        assert self.outer_api is not None
        while True:
            await trio.sleep(period_s)
            if self.role_known:
                await self.outer_api.heartbeat_all()

    # ------------------------------------------------------------------ shutdown

    async def _graceful_stop(self) -> None:
        self.adapter.stop_taking_requests()
        self.pull_hold.stop_holding()
        self.pop_hold.stop_holding()
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("unregister", self._unregister),
            ("stop_schedule", self.schedule.stop),
            ("drain_store", self._drain_store),
            ("answer_held_pulls", self._answer_held_pulls),
            ("drain_connections", self._drain_connections),
            ("persist_configs", self._persist_configs),
        ]
        for name, step in steps:
            with trio.move_on_after(SHUTDOWN_STEP_TIMEOUT_S) as scope:
                try:
                    await step()
                except Exception as e:
                    events.emit(self.log, events.ShutdownStepFailed(step=name), exc_info=e)
            if scope.cancelled_caught:
                events.emit(self.log, events.ShutdownStepTimeout(step=name))

    async def _unregister(self) -> None:
        if self.outer_api is not None and self.config.namesrv_addrs and self.role_known:
            await self.outer_api.unregister_all()

    async def _drain_store(self) -> None:
        # a call runs after every put queued before it has been committed and answered
        await self.store_actor.commitlog_max_offset()

    async def _answer_held_pulls(self) -> None:
        await self.pull_hold.answer_all()
        await self.pop_hold.answer_all()

    async def _drain_connections(self) -> None:
        for _ in range(100):
            if all(not conn.pending_output_bytes for conn in self.server.connections):
                return
            await trio.sleep(0.01)

    async def _persist_configs(self) -> None:
        await self.offsets.persist()
        await self.pop_order.persist()
        await self.day_file.persist()
        await self.topics.persist()
        await self.groups.persist()
        await self.delay_offsets.persist()


async def run_broker(
    config: BrokerConfig,
    transport: Transport,
    *,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    now_ms: Callable[[], int] = wallclock_ms,
) -> None:
    """Start a broker and serve until cancelled; ``task_status.started(broker)``."""
    await Broker(config, transport, now_ms=now_ms).run(task_status=task_status)
