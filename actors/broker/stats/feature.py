"""The broker's figures as it reports them: GET_BROKER_RUNTIME_INFO (runtime_info.py), the
day counters and their file (day_counters.py), VIEW_BROKER_STATS_DATA (items.py), the
consumption figures admin tools read (consume_stats.py) and, with metricsExporterType=PROM, the
Prometheus exporter (metrics.py).

The counters themselves (`BrokerStats`, broker_stats.py) are built first and handed to the hot
paths (the store actor counts puts, the pull path gets); this object reads them. Its windows are
sampled every `STATS_SAMPLE_INTERVAL_S`; a new day writes the day counters at once.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import MetricsExporterType
from rocketrio.actors.broker.clients.client_manager import ConsumerManager, ProducerManager
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.ha.master_service import HAMasterService
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.stats.consume_stats import ConsumeStatsProcessor
from rocketrio.actors.broker.stats.day_counters import FILE_NAME as DAY_FILE
from rocketrio.actors.broker.stats.day_counters import PERSIST_INTERVAL_S, DayCountersFile
from rocketrio.actors.broker.stats.handlers import stats_handlers
from rocketrio.actors.broker.stats.items import GROUP_GET_NUMS
from rocketrio.actors.broker.stats.metrics import BrokerCollector, StoreCollector
from rocketrio.actors.broker.stats.runtime_info import RuntimeInfo
from rocketrio.actors.broker.store.broker_store import BrokerStore
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.broker.tables.config_file import ConfigFile
from rocketrio.actors.broker.tables.json_table import config_path
from rocketrio.actors.kernel.clock import monotonic_ms
from rocketrio.actors.kernel.runtime import every_sync
from rocketrio.actors.kernel.transport import Transport
from rocketrio.actors.observe import events
from rocketrio.actors.observe.metrics_exporter import exporter_addr, serve_metrics
from rocketrio.actors.observe.rpc_metrics import RpcLatency, RpcLatencyCollector

STATS_SAMPLE_INTERVAL_S = 1.0


class StatsFeature:
    """What one broker reports (module docstring)."""

    def __init__(
        self,
        io: BrokerIO,
        stats: BrokerStats,
        *,
        store: BrokerStore,
        tables: BrokerTables,
        consumers: ConsumerManager,
        producers: ProducerManager,
        ha_master: HAMasterService,
        held_pulls: Callable[[], int],
        is_master: Callable[[], bool],
        role_extras: Callable[[], dict[str, str]],
        addr: Callable[[], str],
    ) -> None:
        config, now_ms = io.config, io.now_ms
        self.config = config
        self.stats = stats
        self.store = store
        self.tables = tables
        self.consumers = consumers
        self.producers = producers
        self.ha_master = ha_master
        self.is_master = is_master
        self.role_extras = role_extras
        self.now_ms = now_ms
        self.log = io.log
        self.metrics_addr = ""  # where /metrics is served (metricsExporterType=PROM)
        # the day counters' file (day_counters.py): restored at open, written periodically
        self.day_file = ConfigFile(
            config_path(config.storePathRootDir, DAY_FILE),
            DayCountersFile,
            stats.days.snapshot,
            io.run_blocking,
            fs=io.fs,
        )
        self.runtime_info = RuntimeInfo(
            config,
            stats=stats,
            store=store.view,
            send_queue=store.actor,
            pull_queue=store.read_gate,
            held_pulls=held_pulls,
            is_master=is_master,
            now_ms=now_ms,
            extra=self._runtime_counts,
            disk=io.disk,
        )
        self.consume_stats = ConsumeStatsProcessor(
            lambda: config.brokerName,
            addr,
            topics=tables.topics,
            offsets=tables.offsets,
            consumers=consumers,
            groups=tables.groups,
            store=store.view,
            group_tps=self._group_get_tps,
        )
        # metricsExporterType=PROM: the server times its answers (rocketmq_rpc_latency)
        prom = config.metricsExporterType is MetricsExporterType.PROM
        self.rpc_latency = RpcLatency() if prom else None

    def handlers(self) -> Handlers:
        return stats_handlers(self.runtime_info, self.stats.items, self.consume_stats)

    def _runtime_counts(self) -> dict[str, str]:
        """rocketrio's extra runtime-info keys: what the broker's tables hold, and the role's
        own (controller mode: the masterEpoch and confirmOffset), and the background scrub's."""
        return {
            "consumerGroups": str(len(self.consumers.groups)),
            "producerGroups": str(len(self.producers.groups)),
            "topicCount": str(len(self.tables.topics.table)),
            **self.role_extras(),
            **self.store.scrub.runtime_keys(),
        }

    def _group_get_tps(self, group: str, topic: str) -> float:
        """GET_CONSUME_STATS's consumeTps: GROUP_GET_NUMS over the last minute (upstream
        BrokerStatsManager.tpsGroupGetNums)."""
        view = self.stats.items.stats_item(GROUP_GET_NUMS, f"{topic}@{group}")
        return 0.0 if view is None else view.minute.tps

    def sample(self) -> None:
        if self.stats.sample(monotonic_ms(), self.now_ms()):
            self.day_file.mark_dirty()  # a new day: its mornings are on disk at once

    def start_clock(self) -> None:
        """The statistics' schedules start before the first request (upstream: at the broker's
        start), so traffic lands in the windows' first periods."""
        self.stats.boot_ms = self.now_ms()
        self.sample()

    async def load(self) -> None:
        saved = await self.day_file.run_blocking(self.day_file.load)
        if self.day_file.loaded_from_backup:
            events.emit(self.log, events.ConfigLoadedFromBackup(file=self.day_file.path))
        self.stats.days.restore(saved, self.now_ms())

    async def run_services(
        self, transport: Transport, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with trio.open_nursery() as n:
            n.start_soon(every_sync, STATS_SAMPLE_INTERVAL_S, self.sample)
            n.start_soon(self.day_file.run_writer)
            n.start_soon(self.day_file.run_periodic, PERSIST_INTERVAL_S)
            if self.rpc_latency is not None:
                await n.start(self._serve_metrics, transport)
            task_status.started()

    async def _serve_metrics(
        self, transport: Transport, *, task_status: trio.TaskStatus[None]
    ) -> None:
        c, store = self.config, self.store
        assert self.rpc_latency is not None
        node = {"cluster": c.brokerClusterName, "node_type": "broker", "node_id": c.brokerName}
        actor, message_store = store.actor, store.message_store
        collectors = [
            BrokerCollector(
                cluster=c.brokerClusterName,
                broker_name=c.brokerName,
                items=self.stats.items,
                is_system_topic=self.tables.topics.is_system_topic,
                topic_count=lambda: len(self.tables.topics.table),
                group_count=lambda: len(self.tables.groups.table),
                lags=self.consume_stats.lags,
            ),
            StoreCollector(
                cluster=c.brokerClusterName,
                broker_name=c.brokerName,
                store_bytes=lambda: actor.log_end_offset() - actor.log_min_offset(),
                flush_behind_bytes=lambda: (
                    message_store.get_commitlog_max_offset() - message_store.flushed_offset
                ),
                confirm_offset=actor.confirm_offset,
                master_view=lambda: self.ha_master.view() if self.is_master() else None,
                caught_up_ms=self.ha_master.slaves_caught_up_ms,
                now_ms=monotonic_ms,
            ),
            RpcLatencyCollector([(node, self.rpc_latency)]),
        ]
        addr = exporter_addr(c.metricsPromExporterHost, c.metricsPromExporterPort, c.brokerIP1)
        async with trio.open_nursery() as n:
            self.metrics_addr = await n.start(serve_metrics, transport, addr, collectors, self.log)
            task_status.started()

    async def persist(self) -> None:
        await self.day_file.persist()
