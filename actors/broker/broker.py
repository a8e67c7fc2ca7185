"""The Broker: wiring only (upstream BrokerController; L4, M3, M4).

`Broker.__init__` builds each package's parts with the few collaborators they use and the one
request table from their ``handlers()`` (dispatch/table.py); `run` opens the store (boot/),
starts every service, serves until cancelled, then stops gracefully (boot/shutdown.py). `crash`
is the fault-injection twin of kill -9: everything stops with no flush and no close.

The packages, in the order they are built: tables/ (the JSON-file tables), store/ (the store,
its one writer, its read view and disks), roles/ (controller mode or classic: the one answer to
"am I master"), clients/, pull/, send/, pop/, schedule/, transaction/, admin/, static_topic/,
stats/, auth/, ha/ (replication), boot/ (config, registration, live config, shutdown).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import structlog
import trio

from rocketrio.actors.broker.admin.feature import AdminFeature
from rocketrio.actors.broker.assign.feature import AssignFeature
from rocketrio.actors.broker.auth.feature import AuthFeature
from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig, BrokerRole
from rocketrio.actors.broker.boot.fault_sites import NO_FAULTS, FaultSites
from rocketrio.actors.broker.boot.lifecycle import Lifecycle, Service, Stages, announce_boot
from rocketrio.actors.broker.boot.live_config import LiveConfig, Reconfigurable
from rocketrio.actors.broker.boot.registration import Registration, broker_client
from rocketrio.actors.broker.boot.shutdown import drain_connections
from rocketrio.actors.broker.boot.store_open import open_store
from rocketrio.actors.broker.clients.feature import ClientsFeature
from rocketrio.actors.broker.clients.handlers import on_connect
from rocketrio.actors.broker.dispatch.table import RequestTable, build_table
from rocketrio.actors.broker.failover.escape import LocalTarget
from rocketrio.actors.broker.failover.feature import FailoverFeature
from rocketrio.actors.broker.filter.feature import FilterFeature
from rocketrio.actors.broker.ha.master_service import HAMasterService
from rocketrio.actors.broker.ha.status_service import HAStatusService
from rocketrio.actors.broker.pop.feature import PopFeature
from rocketrio.actors.broker.pull.feature import PullFeature
from rocketrio.actors.broker.query.feature import QueryFeature
from rocketrio.actors.broker.reply.feature import ReplyFeature
from rocketrio.actors.broker.roles.role_service import RoleChange, RoleDeps, make_role_service
from rocketrio.actors.broker.roles.slave_sync import SlaveSynchronize
from rocketrio.actors.broker.schedule.service import build_schedule_service
from rocketrio.actors.broker.send.direct import direct_send_handlers
from rocketrio.actors.broker.send.feature import SendFeature
from rocketrio.actors.broker.static_topic.feature import StaticTopicFeature
from rocketrio.actors.broker.static_topic.forward import StaticTopicForwarder
from rocketrio.actors.broker.static_topic.logic_store import LogicQueueStore
from rocketrio.actors.broker.static_topic.remote import RemoteBrokers
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.stats.feature import StatsFeature
from rocketrio.actors.broker.store.broker_store import BrokerStore, store_host_of
from rocketrio.actors.broker.store.disk_guard import first_refusal
from rocketrio.actors.broker.store.disk_usage import DiskSpace, disk_space
from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.broker.tables.meta_journal import MetaJournal
from rocketrio.actors.broker.transaction.resume import resume_handlers
from rocketrio.actors.broker.transaction.service import build_transaction_service
from rocketrio.actors.client.message import UniqIdGenerator
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.kernel.remoting import RemotingClient, RemotingServer
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.storage.fs import OS_FS, FileSystem
from rocketrio.storage.message_store import RecoveryReport
from rocketrio.storage.store_lock import StoreLock


class Broker:
    """One broker: its parts, their wiring, boot, serving and shutdown."""

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
        log = self.log = structlog.get_logger("broker").bind(broker=config.brokerName)
        self.io = BrokerIO(
            config,
            transport,
            now_ms,
            rng or random.Random(),
            run_blocking,
            fs,
            log,
            disk or disk_space,
        )
        self.addr = config.broker_addr
        self.store_host = store_host_of(self.addr)
        self._client: RemotingClient | None = None
        self.recovery: RecoveryReport | None = None
        self.store_lock: StoreLock | None = None
        self._build_store_and_roles(faults)
        self._build_messaging()
        self._build_management()
        self._build_dispatch()
        self.lifecycle = Lifecycle(self._stages(), log)

    def _build_store_and_roles(self, faults: FaultSites) -> None:
        """The tables, the store and its writer, the HA listener and the role service."""
        io, c = self.io, self.config
        self.tables = BrokerTables(io, on_topic_change=self._request_register)
        self.counters = BrokerStats(c.brokerClusterName, self.tables.topics.is_system_topic)
        self.store = BrokerStore(
            io,
            store_host=self.store_host,
            stats=self.counters,
            on_arrival=self._on_arrivals,
            replica_floor=self._replica_floor,
        )
        self.ha_master = HAMasterService.of(io, self.store.actor)
        self.failover = FailoverFeature(
            c,
            offsets=self.tables.offsets,
            delay=self.tables.delay_offsets.table,
            max_offset=self.store.actor.commitlog_max_offset,
            ha_links=self._ha_links,
            addr=lambda: self.addr,
            topics=self.tables.topics,
            writer=self.store.actor,
            acting=lambda: self.roles.acting_master(),
            log=self.log,
        )
        self.roles = make_role_service(
            RoleDeps(
                io,
                self.store.actor,
                self.ha_master,
                addr=lambda: self.addr,
                on_role_change=self.on_role_change,
                faults=faults,
                on_acting_change=self.on_acting_change,
                pre_online=self.failover.pre_online,
                on_online=self.on_online,
            )
        )
        actor, roles = self.store.actor, self.roles
        self.journal = MetaJournal(
            actor,
            lambda: roles.serving_as_master() and actor.writes_as_master(),
            io.now_ms,
            log=self.log,
        )
        self.tables.topics.journal = self.tables.groups.journal = self.journal.record

    def _build_filters(self) -> FilterFeature:
        """SQL92 filters over the consumer table; their bit-maps computed at dispatch."""
        consumers, store = self.clients.consumers, self.store.message_store
        filters = FilterFeature(
            self.io,
            subscription=lambda group, topic: (
                None if (g := consumers.get(group)) is None else g.find_subscription(topic)
            ),
            live=lambda: [
                (name, sub)
                for name, g in consumers.groups.items()
                for sub in g.subscriptions.values()
            ],
            calc_floor=lambda: store.filter_bitmap_floor_ms,
        )
        if filters.selectors.config.use_bitmap:  # CommitLogDispatcherCalcBitMap
            store.set_filter_bitmaps(filters.manager)
        return filters

    def _build_messaging(self) -> None:
        """Clients, pull, send, POP, delays and transactions."""
        io, t, s, is_master = self.io, self.tables, self.store, self.roles.serving_as_master
        new_uniq_key = UniqIdGenerator(io.config.brokerIP1, clock_ms=io.now_ms).next_id
        self.clients = ClientsFeature(io, tables=t, store=s.view)
        self.filters = self._build_filters()
        self.pull = PullFeature(
            io,
            tables=t,
            view=s.view,
            consumers=self.clients.consumers,
            stats=self.counters,
            is_master=is_master,
            filters=self.filters.selectors,
        )
        self.send = SendFeature(
            io,
            tables=t,
            store=s,
            locks=self.clients.locks,
            stats=self.counters,
            write_gate=first_refusal([s.guard, *self.roles.write_gates()]),
            new_uniq_key=new_uniq_key,
        )
        self.reply = ReplyFeature(io, send=self.send.processor, producers=self.clients.producers)
        # static topics' logic queues as the POP path and the offset tools read them
        remote = RemoteBrokers(lambda: self._client, lambda: io.config.namesrv_addrs)
        self.logic_queues = LogicQueueStore(s.view, t.mappings, remote, io.log)
        # a delayed or committed message whose logic queue moved goes to the new leader
        self.static_forward = StaticTopicForwarder(t.mappings, remote, io.log)
        self.pop = PopFeature(
            io,
            tables=t,
            view=self.logic_queues,
            writer=s.actor,
            is_master=self.roles.special_services_on,
            store_host=self.store_host,
            escape=self.failover.escape_if_acting,
            acting=self.roles.acting_master,
            filters=self.filters.selectors,
            record_escape=self.failover.pop_escape_if_acting,
        )
        self.pop.read_foreign_with(self.failover.foreign_reader(remote.call_or_reason))
        self.schedule = build_schedule_service(
            io,
            tables=t,
            store=s,
            is_master=self.roles.special_services_on,
            escape=self.failover.escape_if_acting,
            reroute=self.static_forward.reroute,
        )
        self.transactions = build_transaction_service(
            io,
            tables=t,
            store=s,
            producers=self.clients.producers,
            is_master=self._master_online,
            new_uniq_key=new_uniq_key,
            store_host=self.addr,
            escape=self.failover.escape_if_acting,
            reroute=self.static_forward.reroute,
        )
        self.send.processor.half_stored = self.transactions.halves.on_put  # END reads it there

    def _build_management(self) -> None:
        """Admin, static topics, figures, ACL, replication status, slave sync, live config."""
        io, t, s, is_master = self.io, self.tables, self.store, self.roles.serving_as_master
        self.admin = AdminFeature(
            io,
            tables=t,
            store=s,
            consumers=self.clients.consumers,
            stats=self.counters,
            is_master=is_master,
            journal_settled=self.journal.settled,
        )
        self.static = StaticTopicFeature(
            io,
            tables=t,
            admin=self.admin.processor,
            send=self.send.processor,
            pull=self.pull.processor,
            client=lambda: self._client,
            is_master=is_master,
            on_change=self._request_register,
            store_barrier=s.actor.commitlog_max_offset,
            apply_reset=self.admin.offset_reset.apply,
            reader=self.logic_queues,
        )
        self.stats = StatsFeature(
            io,
            self.counters,
            store=s,
            tables=t,
            consumers=self.clients.consumers,
            producers=self.clients.producers,
            ha_master=self.ha_master,
            held_pulls=lambda: self.pull.hold.count,
            is_master=is_master,
            role_extras=self.roles.runtime_extras,
            addr=lambda: self.addr,
        )
        self.auth = AuthFeature(io.config, t.auth)
        self.assign = AssignFeature(
            io, tables=t, consumers=self._consumer_ids, client=lambda: self._client
        )
        self.query = QueryFeature(
            tables=t,
            view=s.view,
            consumers=self.clients.consumers,
            b2c=self.clients.b2c,
            filter_data=self.filters.manager.get,
            bit_num=self.filters.manager.bloom.m,
            addr=lambda: self.addr,
        )
        self.ha_status = HAStatusService(
            serving_as_master=is_master,
            master=self.ha_master,
            ha=lambda: self.roles.ha,
            store=s.actor,
            wall_now_ms=io.now_ms,
        )
        self.slave_sync = SlaveSynchronize.of(
            io, t, s.view, self.roles.master_to_sync, self.roles.may_follow(),
            release_held=self.pull.hold.release_queues,
        )  # fmt: skip
        self.registration = Registration(self.config, t, lambda: self.roles.role_known)
        parts: list[Reconfigurable] = [self.send, self.reply, self.pull, self.clients, self.filters]
        parts += [t, s]
        parts += [self.transactions.check_timer, self.registration]
        self.live_config = LiveConfig(io, parts)

    def _consumer_ids(self, group: str) -> list[str] | None:
        """The client ids of ``group``'s heartbeats here (None: no such group)."""
        info = self.clients.consumers.get(group)
        return None if info is None else info.client_ids()

    def _build_dispatch(self) -> None:
        """The one request table, the remoting server and the NameServer registration."""
        declared = [
            ("send", self.send.handlers()),
            ("reply", self.reply.handlers()),
            ("pull", self.pull.handlers()),
            ("clients", self.clients.handlers()),
            ("filter", self.filters.handlers()),
            ("admin", self.admin.handlers()),
            ("stats", self.stats.handlers()),
            ("pop", self.pop.handlers()),
            ("transaction", self.transactions.handlers()),
            ("transaction_resume", resume_handlers(self.transactions)),
            ("schedule", self.schedule.handlers()),
            ("static_topic", self.static.handlers()),
            ("roles", self.roles.handlers()),
            ("ha", self.ha_status.handlers()),
            ("store", self.store.handlers()),
            ("auth", self.auth.handlers()),
            ("assign", self.assign.handlers()),
            ("query", self.query.handlers()),
            ("boot", self.live_config.handlers()),
        ]
        strict_locks = self.failover.lock_wrapper(self.clients.processor, self.roles.group_members)
        wrappers = [
            ("static_topic", self.static.wrap),
            ("failover", strict_locks),
            ("pull", self.pull.wrap_lite_pull),
        ]
        table = build_table(declared, wrappers=wrappers)
        self.requests = requests = RequestTable(self.config.brokerName, table, gate=self.auth.gate)
        gated = self.auth.gate is not None
        direct = {
            **self.pop.direct_handlers(table, gated=gated, requests=requests),
            **direct_send_handlers(table, gated=gated, requests=requests),
        }
        self.server = RemotingServer(
            self.io.transport,
            self.addr,
            requests.process_nowait,
            on_connect=partial(on_connect, self.clients.processor),
            limits=self.config.server_limits(),
            rpc_latency=self.stats.rpc_latency,
            direct=direct,
        )

    # ------------------------------------------------------------------ listeners

    def _on_arrivals(self, arrived: Mapping[tuple[str, int], int]) -> None:
        """The store actor's arrival listener, once per turn: held pulls, held pops, the
        schedule service."""
        self.pull.on_arrivals(arrived)
        self.pop.on_arrivals(arrived)
        self.schedule.notify_arrivals(arrived)

    def on_role_change(self, change: RoleChange) -> None:
        """A role taken (controller mode): a new master rebuilds its transactions from the store
        and, before its first write, makes its topic and group tables what its metadata journal
        says (tables/meta_journal.py: a promoted slave serves the topics exactly as the old
        master configured them, deleted ones stay deleted); the NameServers hear it at once,
        with the masterEpoch as DataVersion stateVersion (upstream nextVersion(newMasterEpoch))."""
        self.transactions.role_changed()
        if change.role is not BrokerRole.SLAVE:
            view = self.store.view
            self.journal.replay(
                view, self.tables.topics, self.tables.groups, view.queues_with_records()
            )
        self.tables.topics.set_state_version(change.state_version)
        self.schedule.role_changed()

    def on_acting_change(self, acting: bool) -> None:
        """A classic slave started or stopped acting as master (RIP-32): the special services
        look at their role again now, not at their next idle poll."""
        self.schedule.role_changed()
        self.transactions.role_changed()

    def _ha_links(self) -> list[tuple[str, int | None, int]]:
        return [(x.addr, x.slave_id, x.transfer_from) for x in self.ha_master.view().links]

    def on_online(self) -> None:
        """A returning master finished pre-online: register now, start the special services."""
        self.registration.request()
        self.schedule.role_changed()
        self.transactions.role_changed()

    def _master_online(self) -> bool:
        """A master past pre-online: checks transactions and takes END_TRANSACTION."""
        return self.roles.serving_as_master() and self.roles.special_services_on()

    @property
    def escape_target(self) -> LocalTarget:
        """This broker's entry for the in-process escape of its container's other brokers."""
        return self.failover.escape_target

    def use_local_escape(self, masters: Callable[[], list[LocalTarget]]) -> None:
        """In a container: escape to its masters of other groups first (failover/feature.py)."""
        self.failover.use_local_escape(masters)

    def _replica_floor(self, in_sync_only: bool) -> int | None:
        """What the slaves still need of this master's log (None while not master)."""
        if not self.roles.serving_as_master():
            return None
        return self.ha_master.replica_floor(in_sync_only)

    def _request_register(self) -> None:
        self.registration.request()

    # ------------------------------------------------------------------ lifecycle

    def _stages(self) -> Stages:
        return Stages(
            open=self.open,
            client=partial(broker_client, self.io),
            services=self._services,
            serving=self._announce_boot,
            stop_first=self._stop_taking_requests,
            stop_steps=[
                ("unregister", self.registration.unregister),
                ("stop_schedule", self.schedule.stop),
                ("drain_store", self._drain_store),
                ("answer_held_pulls", self._answer_held),
                ("drain_connections", partial(drain_connections, lambda: self.server.connections)),
                ("drain_pop_buffer", self.pop.drain_buffer),
                ("persist_configs", self._persist_configs),
            ],
            close=partial(self.io.run_blocking, self.store.message_store.close),
            release=self.release_store_lock,
        )

    async def open(self) -> None:
        """Lock and recover the store (boot/store_open.py), then load every file."""
        io = self.io
        self.store_lock, self.recovery = await open_store(
            self.config,
            self.store.message_store,
            fs=io.fs,
            run_blocking=io.run_blocking,
            wall_now_ms=io.now_ms,
            log=self.log,
        )
        self.store.actor.written.reset(self.store.message_store.get_commitlog_max_offset())
        await self.tables.load()
        await self.pop.load()
        await self.static.load()  # after topics.json: repairs it
        await self.stats.load()
        if self.config.authenticationEnabled and not self.tables.auth.users:
            hint = "authenticationEnabled with no user: set initAuthenticationUser"
            events.emit(self.log, events.AuthNoUsers(hint=hint))
        await self.tables.topics.persist()
        await self.tables.groups.persist()
        self.stats.start_clock()

    def release_store_lock(self) -> None:
        if self.store_lock is not None:
            self.store_lock.release()

    async def run(self, *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        """Open, serve until cancelled (or `crash`), then shut down gracefully."""
        await self.lifecycle.run(started=lambda: task_status.started(self))

    def crash(self) -> None:
        """Fault injection: stop at once, no flush, no close, no unregister (like kill -9)."""
        self.lifecycle.crash()

    def _services(self, client: RemotingClient) -> list[Service]:
        self._client = client
        self.failover.connect(client)
        return [
            Service("store", self.store.run_services),  # the writer first; disks sampled once
            Service("pull", self.pull.run_services),
            Service("pop", self.pop.run_services),
            Service("pop_escape", self.failover.run_pop_escape),
            Service("clients", self.clients.run_services),
            Service("filter", self.filters.run_services),
            Service("reply", self.reply.run_services),
            Service("tables", self.tables.run_writers, waits=False),
            Service("transaction", self.transactions.run),
            Service("server", self.server.run, on_started=self._bound),
            Service("stats", partial(self.stats.run_services, self.io.transport)),
            Service("ha_master", self.ha_master.run),
            # listening first: the controller may push a role change right after we
            # register; NameServer registration waits for the role (`role_known`)
            Service("roles", partial(self.roles.run, client)),
            Service("slave_sync", partial(self.slave_sync.run, client), waits=False),
            Service("static_topic", self.static.run_services, waits=False),
            Service("schedule", self.schedule.run),
            Service("registration", partial(self.registration.run, client)),
        ]

    def _bound(self, addr: str) -> None:
        self.addr = addr

    def _announce_boot(self) -> None:
        announce_boot(self.config, self.addr, self.roles.boot_broker_id, self.log)

    def _stop_taking_requests(self) -> None:
        self.requests.stop_taking_requests()
        self.pull.hold.stop_holding()
        self.pop.stop_holding()

    async def _drain_store(self) -> None:
        # a call runs after every put queued before it has been committed and answered
        await self.store.actor.commitlog_max_offset()

    async def _answer_held(self) -> None:
        await self.pull.hold.answer_all()
        await self.pop.answer_all()

    async def _persist_configs(self) -> None:
        await self.tables.persist()
        await self.pop.order.persist()
        await self.stats.persist()


async def run_broker(
    config: BrokerConfig,
    transport: Transport,
    *,
    task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    now_ms: Callable[[], int] = wallclock_ms,
) -> None:
    """Start a broker and serve until cancelled; ``task_status.started(broker)``."""
    await Broker(config, transport, now_ms=now_ms).run(task_status=task_status)
