"""The Broker: boot, request dispatch, NameServer registration and graceful shutdown (L4, M3, M4).

`run_broker` opens the MessageStore (recovery in a worker thread, logged as
events.COMMITLOG_RECOVERED with what was truncated), loads topics.json /
subscriptionGroup.json / consumerOffset.json from ``storePathRootDir/config``, serves the
remoting port on brokerIP1:listenPort, registers with every NameServer at start, every
registerNameServerPeriod and right after a topic change, sends BROKER_HEARTBEAT every
brokerHeartbeatInterval, then prints upstream's boot line and logs events.BROKER_BOOT.

Request handlers run inline in each connection's reader task (no task per request) and touch
the broker's tables without awaiting in between, so Trio's single thread gives them exclusive
ownership; the MessageStore is written only by the store actor (see store_actor).

Shutdown (cancellation): stop taking requests (SYSTEM_BUSY), unregister from the NameServers,
let the store actor answer every queued put, answer held pulls, give the connections a moment
to write those answers, persist consumer offsets and configs, stop the services, then flush and
close the store. `crash` is the fault-injection twin: it stops everything with no flush and no
close, like kill -9, so tests can check recovery.

Controller mode (enableControllerMode=true): a `ReplicasManager` obtains the persistent brokerId
and the role from the controller before the broker registers to any NameServer; until then and
while it is a slave the broker refuses writes (SERVICE_NOT_AVAILABLE, naming the master), and
every role change re-registers at once (brokerId 0 for the master, its own id for a slave).
It also answers NOTIFY_BROKER_ROLE_CHANGED (controller push) and GET_BROKER_EPOCH_CACHE.
"""

from __future__ import annotations

import os
import random
import socket
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import structlog
import trio

from rocketrio.actors import events
from rocketrio.actors.broker.admin_processor import AdminProcessor
from rocketrio.actors.broker.client_manager import ConsumerManager, ProducerManager
from rocketrio.actors.broker.client_processor import ClientProcessor
from rocketrio.actors.broker.config import BrokerConfig, BrokerRole, FlushDiskType
from rocketrio.actors.broker.config_files import ConfigFile
from rocketrio.actors.broker.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.fault_sites import NO_FAULTS, FaultSites
from rocketrio.actors.broker.lock_manager import RebalanceLockManager
from rocketrio.actors.broker.outer_api import BrokerOuterAPI
from rocketrio.actors.broker.pull_hold import PullRequestHoldService
from rocketrio.actors.broker.pull_processor import PullMessageProcessor
from rocketrio.actors.broker.replicas_manager import ReplicasManager
from rocketrio.actors.broker.send_processor import SendMessageProcessor
from rocketrio.actors.broker.stats import BrokerStats
from rocketrio.actors.broker.store_actor import RunBlocking, StoreActor
from rocketrio.actors.broker.subscription_group import SubscriptionGroupManager
from rocketrio.actors.broker.topic_config import TopicConfigManager
from rocketrio.actors.client.message import UniqIdGenerator
from rocketrio.actors.logs import wallclock_ms
from rocketrio.actors.remoting import Connection, RemotingClient, RemotingServer, RequestContext
from rocketrio.actors.transport import Transport, split_addr
from rocketrio.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    DataVersion,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketrio.protocol.codes import RPC_ONEWAY, RequestCode, ResponseCode, request_name
from rocketrio.protocol.controller_headers import NotifyBrokerRoleChangedRequestHeader, SyncStateSet
from rocketrio.protocol.headers import NotifyConsumerIdsChangedRequestHeader
from rocketrio.protocol.message import parse_host
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, from_json, to_ext, to_json
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.message_store import MessageStore, RecoveryReport, StoreConfig

Handler = Callable[[RequestContext], Awaitable[RemotingCommand | None]]
T = TypeVar("T")

CLIENT_SCAN_INTERVAL_S = 10.0
STATS_SAMPLE_INTERVAL_S = 1.0
SHUTDOWN_STEP_TIMEOUT_S = 5.0
_NO_IP = (b"\x00\x00\x00\x00", 0)
# while stopping, clients may still leave and save their progress (persisted last)
_ALLOWED_WHILE_STOPPING = frozenset(
    {
        RequestCode.UNREGISTER_CLIENT,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.HEART_BEAT,
    }
)
# requests that write the CommitLog: refused by a controller-mode broker that is not master
_WRITE_CODES = frozenset(
    {
        RequestCode.SEND_MESSAGE,
        RequestCode.SEND_MESSAGE_V2,
        RequestCode.SEND_BATCH_MESSAGE,
        RequestCode.CONSUMER_SEND_MSG_BACK,
    }
)


def host_tuple(text: str) -> tuple[bytes, int]:
    """``ip:port`` or a bare ip -> (packed ip, port); anything else -> 0.0.0.0:0."""
    for candidate in (text, text + ":0"):
        try:
            return parse_host(candidate)
        except ValueError:
            continue
    return _NO_IP


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
    """One broker's state and services (upstream BrokerController)."""

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
    ) -> None:
        self.config = config
        self.fs = fs  # every file of the broker: store, configs, identity (simulated in sims)
        self.run_blocking = run_blocking
        self.transport = transport
        self.now_ms = now_ms
        self.rng = rng or random.Random()
        self.log = structlog.get_logger("broker").bind(broker=config.brokerName)
        self.addr = config.broker_addr
        self.store_host = store_host_of(self.addr)
        self.store = self._make_store()
        self.topics = TopicConfigManager(config, now_ms)
        self.groups = SubscriptionGroupManager(config.autoCreateSubscriptionGroup, now_ms)
        self.offsets = ConsumerOffsetManager(now_ms)
        self.consumers = ConsumerManager()
        self.producers = ProducerManager()
        self.locks = RebalanceLockManager()
        self.stats = BrokerStats()
        self.uniq_ids = UniqIdGenerator(config.brokerIP1, clock_ms=now_ms)
        self.topics_file = self._config_file(
            "topics.json", TopicConfigSerializeWrapper, self.topics.snapshot
        )
        self.groups_file = self._config_file(
            "subscriptionGroup.json", SubscriptionGroupWrapper, self.groups.snapshot
        )
        self.offsets_file = self._config_file(
            "consumerOffset.json",
            ConsumerOffsetSerializeWrapper,
            self.offsets.snapshot_for_persist,
        )
        self.send = SendMessageProcessor(self)
        self.pull = PullMessageProcessor(self)
        self.clients = ClientProcessor(self)
        self.admin = AdminProcessor(self)
        self.pull_hold = PullRequestHoldService(self.pull.execute_held)
        self.store_actor = StoreActor(
            self.store,
            sync_flush=config.flushDiskType == FlushDiskType.SYNC_FLUSH,
            flush_interval_ms=config.flushIntervalCommitLog,
            sync_flush_timeout_ms=config.syncFlushTimeout,
            now_ms=now_ms,
            on_arrival=self.pull_hold.notify_message_arriving,
            on_put=self.stats.on_put,
            run_blocking=run_blocking,
        )
        self.replicas = ReplicasManager(self, faults) if config.enableControllerMode else None
        self.handlers = self._handler_table()
        self.server = RemotingServer(
            transport, self.addr, self.process, on_connect=self._on_connect
        )
        self.outer_api: BrokerOuterAPI | None = None
        self.recovery: RecoveryReport | None = None
        self.shutting_down = False
        self.boot_ms = 0
        self._register_now = trio.Event()
        self._services_scope = trio.CancelScope(shield=True)
        self._run_scope: trio.CancelScope | None = None
        self._crashed = False
        self._oneway_opaque = 0

    def _make_store(self) -> MessageStore:
        c = self.config
        store_config = StoreConfig(
            mappedFileSizeCommitLog=c.mappedFileSizeCommitLog,
            mappedFileSizeConsumeQueue=c.mappedFileSizeConsumeQueue,
            maxMessageSize=c.maxMessageSize,
            messageIndexEnable=c.messageIndexEnable,
            messageDelayLevel=c.messageDelayLevel,
        )
        return MessageStore(
            c.storePathRootDir, store_config, store_host=self.store_host, fs=self.fs
        )

    def _config_file(
        self, name: str, cls: type[T], snapshot: Callable[[], T | None]
    ) -> ConfigFile[T]:
        path = os.path.join(self.config.storePathRootDir, "config", name)
        return ConfigFile(path, cls, snapshot, self.run_blocking, fs=self.fs)

    def _handler_table(self) -> dict[int, Handler]:
        s, p, c, a = self.send, self.pull, self.clients, self.admin
        rc = RequestCode
        return {
            rc.SEND_MESSAGE: s.process_send,
            rc.SEND_MESSAGE_V2: s.process_send,
            rc.SEND_BATCH_MESSAGE: s.process_send,
            rc.CONSUMER_SEND_MSG_BACK: s.process_send_back,
            rc.PULL_MESSAGE: p.process_pull,
            rc.HEART_BEAT: c.heartbeat,
            rc.UNREGISTER_CLIENT: c.unregister_client,
            rc.GET_CONSUMER_LIST_BY_GROUP: c.consumer_list,
            rc.GET_CONSUMER_CONNECTION_LIST: c.consumer_connections,
            rc.LOCK_BATCH_MQ: c.lock_batch,
            rc.UNLOCK_BATCH_MQ: c.unlock_batch,
            rc.QUERY_CONSUMER_OFFSET: c.query_offset,
            rc.UPDATE_CONSUMER_OFFSET: c.update_offset,
            rc.GET_ALL_CONSUMER_OFFSET: c.all_offsets,
            rc.UPDATE_AND_CREATE_TOPIC: a.update_topic,
            rc.DELETE_TOPIC_IN_BROKER: a.delete_topic,
            rc.GET_ALL_TOPIC_CONFIG: a.all_topic_config,
            rc.GET_TOPIC_CONFIG: a.topic_config,
            rc.GET_TOPIC_STATS_INFO: a.topic_stats,
            rc.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: a.update_group,
            rc.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: a.all_groups,
            rc.GET_SUBSCRIPTIONGROUP_CONFIG: a.group_config,
            rc.DELETE_SUBSCRIPTIONGROUP: a.delete_group,
            rc.GET_CONSUME_STATS: a.consume_stats,
            rc.GET_BROKER_RUNTIME_INFO: a.runtime_info,
            rc.GET_BROKER_CONFIG: a.broker_config,
            rc.GET_MAX_OFFSET: a.max_offset,
            rc.GET_MIN_OFFSET: a.min_offset,
            rc.SEARCH_OFFSET_BY_TIMESTAMP: a.search_offset,
            rc.GET_EARLIEST_MSG_STORETIME: a.earliest_store_time,
            rc.VIEW_MESSAGE_BY_ID: a.view_message,
            rc.QUERY_MESSAGE: a.query_message,
            rc.NOTIFY_BROKER_ROLE_CHANGED: self._role_change_notified,
            rc.GET_BROKER_EPOCH_CACHE: self._broker_epoch_cache,
        }

    # ------------------------------------------------------------------ dispatch

    async def process(self, ctx: RequestContext) -> RemotingCommand | None:
        handler = self.handlers.get(ctx.cmd.code)
        if handler is None:
            return ctx.cmd.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                f"request type {ctx.cmd.code} ({request_name(ctx.cmd.code)}) not supported "
                f"by broker {self.config.brokerName}",
            )
        if self.shutting_down and ctx.cmd.code not in _ALLOWED_WHILE_STOPPING:
            return ctx.cmd.make_response(
                ResponseCode.SYSTEM_BUSY, f"broker {self.config.brokerName} is shutting down"
            )
        if self.replicas is not None and ctx.cmd.code in _WRITE_CODES:
            refusal = self.replicas.write_refusal()
            if refusal is not None:
                return ctx.cmd.make_response(ResponseCode.SERVICE_NOT_AVAILABLE, refusal)
        return await handler(ctx)

    # ------------------------------------------------------------------ controller mode

    async def _role_change_notified(self, ctx: RequestContext) -> RemotingCommand | None:
        """NOTIFY_BROKER_ROLE_CHANGED (1008), a oneway push from the controller leader."""
        h = from_ext(NotifyBrokerRoleChangedRequestHeader, ctx.cmd.ext_fields)
        if self.replicas is None:
            return ctx.cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"broker {self.config.brokerName} is not in controller mode",
            )
        sync = from_json(SyncStateSet, ctx.cmd.body) if ctx.cmd.body else None
        self.replicas.on_role_change_notified(h, sync)
        return ctx.cmd.make_response(ResponseCode.SUCCESS)

    async def _broker_epoch_cache(self, ctx: RequestContext) -> RemotingCommand | None:
        """GET_BROKER_EPOCH_CACHE (1007): the epoch file, for mqadmin getBrokerEpoch."""
        if self.replicas is None:
            return ctx.cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"broker {self.config.brokerName} is not in controller mode "
                f"(enableControllerMode=false): it keeps no epoch file",
            )
        return ctx.cmd.make_response(
            ResponseCode.SUCCESS, body=to_json(self.replicas.epoch_entry_cache())
        )

    def apply_role(self, role: BrokerRole, broker_id: int, state_version: int) -> None:
        """The ReplicasManager took a role: the NameServers hear it at once, with a DataVersion
        whose stateVersion is the masterEpoch (upstream nextVersion(newMasterEpoch))."""
        self.config.brokerRole = role
        self.config.brokerId = broker_id
        v = self.topics.data_version
        self.topics.data_version = DataVersion(state_version, self.now_ms(), v.counter + 1)
        self.topics_file.mark_dirty()
        self._register_now.set()

    async def commitlog_max_offset(self) -> int:
        """The CommitLog end once every put queued before this call is written."""
        offset: int = await self.store_actor.call(lambda store: store.get_commitlog_max_offset())
        return offset

    @property
    def role_known(self) -> bool:
        """False while a controller-mode broker has no role: it stays off the NameServers."""
        return self.replicas is None or self.replicas.role is not None

    # ------------------------------------------------------------------ helpers for processors

    def born_host(self, conn: Connection) -> tuple[bytes, int]:
        host = conn.attrs.get("born_host")
        if host is None:
            host = conn.attrs["born_host"] = host_tuple(conn.remote)
        return host

    host_tuple = staticmethod(host_tuple)

    def find_group(self, group: str) -> SubscriptionGroupConfig | None:
        sgc, created = self.groups.find(group)
        if created:
            self.groups_file.mark_dirty()
        return sgc

    def create_topic_in_send(
        self, topic: str, default_topic: str, client_queue_nums: int
    ) -> TopicConfig | None:
        tc = self.topics.create_in_send(topic, default_topic, client_queue_nums)
        if tc is not None:
            self._topics_changed(tc)
        return tc

    def create_topic_in_send_back(self, topic: str, queue_nums: int, perm: int) -> TopicConfig:
        tc, created = self.topics.create_in_send_back(topic, queue_nums, perm)
        if created:
            self._topics_changed(tc)
        return tc

    def _topics_changed(self, tc: TopicConfig | None) -> None:
        self.topics_file.mark_dirty()
        self._register_now.set()
        if tc is not None:
            self.log.info(
                events.TOPIC_UPDATED,
                topic=tc.topicName,
                read_queues=tc.readQueueNums,
                write_queues=tc.writeQueueNums,
                perm=tc.perm,
            )

    async def update_topic(self, tc: TopicConfig) -> None:
        """Admin create/update: persisted before the answer, then registered right away."""
        if self.topics.update(tc):
            self._topics_changed(tc)
            await self.topics_file.persist()

    async def delete_topic(self, topic: str) -> None:
        existed = self.topics.delete(topic)
        await self.store_actor.call(lambda store: store.delete_topic(topic))
        if self.offsets.remove_topic(topic):
            await self.offsets_file.persist()
        if existed:
            self._topics_changed(None)
            self.log.info(events.TOPIC_DELETED, topic=topic)
            await self.topics_file.persist()

    async def update_group(self, sgc: SubscriptionGroupConfig) -> None:
        if self.groups.update(sgc):
            await self.groups_file.persist()

    async def delete_group(self, group: str, clean_offset: bool) -> None:
        if self.groups.delete(group):
            await self.groups_file.persist()
        if clean_offset and self.offsets.remove_group(group):
            await self.offsets_file.persist()

    # ------------------------------------------------------------------ clients

    def _on_connect(self, conn: Connection) -> None:
        conn.on_close.append(self._on_connection_closed)

    def _on_connection_closed(self, conn: Connection) -> None:
        self.producers.connection_closed(conn)
        for group in self.consumers.connection_closed(conn):
            sgc = self.groups.table.get(group)
            self.consumer_group_changed(group, sgc is None or sgc.notifyConsumerIdsChangedEnable)

    def consumer_group_changed(self, group: str, notify: bool) -> None:
        """A group's member set changed: log it and push NOTIFY_CONSUMER_IDS_CHANGED (oneway)."""
        info = self.consumers.get(group)
        members = info.client_ids() if info else []
        self.log.info(events.CONSUMER_GROUP_CHANGED, group=group, members=members)
        if not notify or info is None:
            return
        ext = to_ext(NotifyConsumerIdsChangedRequestHeader(group))
        for conn in list(info.channels):
            assert isinstance(conn, Connection)
            self._oneway_opaque += 1
            cmd = RemotingCommand(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                opaque=self._oneway_opaque,
                flag=RPC_ONEWAY,
                ext_fields=dict(ext),
            )
            conn.send_nowait(cmd)

    def scan_clients(self) -> None:
        now = trio.current_time()
        self.producers.scan_expired(now)
        changed = {group for group, _ in self.consumers.scan_expired(now)}
        for group in changed:
            sgc = self.groups.table.get(group)
            self.consumer_group_changed(group, sgc is None or sgc.notifyConsumerIdsChangedEnable)

    # ------------------------------------------------------------------ boot

    async def open(self) -> None:
        """Recover the store (worker thread) and load the config files."""
        started = trio.current_time()
        self.recovery = report = await self.run_blocking(self.store.open)
        clog = report.commitlog
        self.log.info(
            events.COMMITLOG_RECOVERED,
            max_offset=clog.max_offset,
            truncated_at=clog.truncated_at,
            dropped_bytes=clog.bytes_dropped,
            segment=clog.segment,
            reason=clog.reason or None,
            redispatched=report.redispatched,
            cq_entries_dropped=report.cq_entries_dropped,
            took_ms=round((trio.current_time() - started) * 1000),
        )
        if self.replicas is not None:
            await self.replicas.open()
        topics = await self.run_blocking(self.topics_file.load)
        self.topics.load(topics or TopicConfigSerializeWrapper())
        groups = await self.run_blocking(self.groups_file.load)
        self.groups.load(groups or SubscriptionGroupWrapper())
        offsets = await self.run_blocking(self.offsets_file.load)
        self.offsets.load(offsets or ConsumerOffsetSerializeWrapper())
        for f in (self.topics_file, self.groups_file, self.offsets_file):
            if f.loaded_from_backup:
                self.log.warning("config_loaded_from_backup", file=f.path)
        await self.topics_file.persist()
        await self.groups_file.persist()

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
                    await nursery.start(self._services)
                    self.boot_ms = self.now_ms()
                    print(self._boot_line(), flush=True)
                    self.log.info(
                        events.BROKER_BOOT,
                        addr=self.addr,
                        cluster=self.config.brokerClusterName,
                        # in controller mode the id comes later (events.BROKER_ROLE_CHANGED)
                        broker_id=None if self.replicas is not None else self.config.brokerId,
                        namesrv=self.config.namesrvAddr,
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
            if not self._crashed:
                with trio.CancelScope(shield=True):
                    await self.run_blocking(self.store.close)
                self.log.info(events.PROCESS_SHUTDOWN, reason="cancelled")

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
            async with RemotingClient(self.transport) as client, trio.open_nursery() as n:
                self.outer_api = BrokerOuterAPI(self.config, client)
                await n.start(self.store_actor.run)
                await n.start(self.pull_hold.run)
                n.start_soon(self.topics_file.run_writer)
                n.start_soon(self.groups_file.run_writer)
                n.start_soon(
                    self.offsets_file.run_periodic, self.config.flushConsumerOffsetInterval / 1000
                )
                n.start_soon(self._every, CLIENT_SCAN_INTERVAL_S, self.scan_clients)
                n.start_soon(self._every, STATS_SAMPLE_INTERVAL_S, self._sample_stats)
                bound = await n.start(self.server.run)
                self.addr = bound
                if self.replicas is not None:
                    # listening first: the controller may push a role change right after we
                    # register; NameServer registration waits for the role (`role_known`)
                    await n.start(self.replicas.run, client)
                await self.register_all()
                n.start_soon(self._register_loop)
                n.start_soon(self._heartbeat_loop)
                task_status.started()

    async def _every(self, period_s: float, fn: Callable[[], None]) -> None:
        while True:
            await trio.sleep(period_s)
            fn()

    def _sample_stats(self) -> None:
        self.stats.sample(trio.current_time(), self.now_ms())

    # ------------------------------------------------------------------ name servers

    async def register_all(self) -> None:
        if self.outer_api is None or not self.config.namesrv_addrs or not self.role_known:
            return
        await self.outer_api.register_all(self.topics.snapshot())

    async def _register_loop(self) -> None:
        if not self.config.namesrv_addrs:
            return
        period_s = self.config.registerNameServerPeriod / 1000
        while True:
            with trio.move_on_after(period_s):
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
        self.shutting_down = True
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("unregister", self._unregister),
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
                    self.log.error("shutdown_step_failed", step=name, exc_info=e)
            if scope.cancelled_caught:
                self.log.warning("shutdown_step_timeout", step=name)

    async def _unregister(self) -> None:
        if self.outer_api is not None and self.config.namesrv_addrs and self.role_known:
            await self.outer_api.unregister_all()

    async def _drain_store(self) -> None:
        # a call runs after every put queued before it has been committed and answered
        await self.store_actor.call(lambda store: store.get_commitlog_max_offset())

    async def _answer_held_pulls(self) -> None:
        self.pull_hold.answer_all()

    async def _drain_connections(self) -> None:
        for _ in range(100):
            if all(not conn.pending_output_bytes for conn in self.server.connections):
                return
            await trio.sleep(0.01)

    async def _persist_configs(self) -> None:
        await self.offsets_file.persist()
        await self.topics_file.persist()
        await self.groups_file.persist()


async def run_broker(
    config: BrokerConfig,
    transport: Transport,
    *,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    now_ms: Callable[[], int] = wallclock_ms,
) -> None:
    """Start a broker and serve until cancelled; ``task_status.started(broker)``."""
    await Broker(config, transport, now_ms=now_ms).run(task_status=task_status)
