"""Pulling as the broker builds it: the processor (processor.py), its held pulls (hold.py) and
its request code (handlers.py)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.clients.client_manager import ConsumerManager
from rocketrio.actors.broker.dispatch.message_filter import FilterSelectors
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.pull.handlers import lite_pull_wrapper, pull_handlers
from rocketrio.actors.broker.pull.hold import HoldLimits, PullRequestHoldService
from rocketrio.actors.broker.pull.processor import PullConfig, PullMessageProcessor
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.broker_tables import BrokerTables


class PullFeature:
    """The pull path of one broker (module docstring)."""

    def __init__(
        self,
        io: BrokerIO,
        *,
        tables: BrokerTables,
        view: StoreView,
        consumers: ConsumerManager,
        stats: BrokerStats,
        is_master: Callable[[], bool],
        filters: FilterSelectors | None = None,
    ) -> None:
        self.config = io.config
        self.hold = PullRequestHoldService(HoldLimits.of(io.config))
        self.processor = PullMessageProcessor(
            PullConfig.of(io.config),
            topics=tables.topics,
            groups=tables.groups,
            consumers=consumers,
            offsets=tables.offsets,
            store=view,
            hold=self.hold,
            stats=stats,
            is_master=is_master,
            filters=filters,
        )

    def handlers(self) -> Handlers:
        return pull_handlers(self.processor)

    def wrap_lite_pull(self, plain: Handlers) -> Handlers:
        """LITE_PULL_MESSAGE (361) served by the final PULL_MESSAGE handler (handlers.py)."""
        return lite_pull_wrapper(
            lambda: self.config.litePullMessageEnable, lambda: self.config.brokerIP1
        )(plain)

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        self.config = config
        self.processor.reconfigure(config, changed)
        self.hold.reconfigure(config, changed)

    def on_arrivals(self, arrived: Mapping[tuple[str, int], int]) -> None:
        self.hold.notify_arrivals(arrived)

    async def run_services(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await self.hold.run(task_status=task_status)
