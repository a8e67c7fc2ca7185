"""The admin package as the broker builds it: topic and group admin, offsets and message
queries (processor.py, handlers.py) and moving a group's offsets on a live broker
(offset_reset.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from rocketrio.actors.broker.admin.handlers import admin_handlers
from rocketrio.actors.broker.admin.offset_reset import (
    OffsetResetProcessor,
    RemotingResetPusher,
    offset_reset_handlers,
)
from rocketrio.actors.broker.admin.processor import AdminProcessor
from rocketrio.actors.broker.admin.unused_topics import unused_topic_handlers
from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.clients.client_manager import ConsumerManager
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.broker_store import BrokerStore
from rocketrio.actors.broker.tables.broker_tables import BrokerTables


class AdminFeature:
    """The admin calls of one broker (module docstring)."""

    def __init__(
        self,
        io: BrokerIO,
        *,
        tables: BrokerTables,
        store: BrokerStore,
        consumers: ConsumerManager,
        stats: BrokerStats,
        is_master: Callable[[], bool],
        journal_settled: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        config = io.config
        self.store_calls, self.is_master = store.actor, is_master
        self.processor = AdminProcessor(
            config,
            topics=tables.topics,
            groups=tables.groups,
            offsets=tables.offsets,
            consumers=consumers,
            store=store.view,
            deleter=store.actor,
            stats=stats,
            now_ms=io.now_ms,
            journal_settled=journal_settled,
        )
        self.offset_reset = OffsetResetProcessor(
            lambda: config.brokerName,
            is_master=is_master,
            topics=tables.topics,
            offsets=tables.offsets,
            consumers=consumers,
            store=store.view,
            pusher=RemotingResetPusher(),
        )

    def handlers(self) -> Handlers:
        return {
            **admin_handlers(self.processor),
            **offset_reset_handlers(self.offset_reset),
            **unused_topic_handlers(
                self.store_calls, self.processor.topics, lambda: self.is_master()
            ),
        }
