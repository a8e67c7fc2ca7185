"""The clients package as the broker builds it: who is connected (producer and consumer
managers), their queue locks, the bookkeeping processor, and the calls the broker passes on to
a consumer (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, through `Broker2Client`).

Silent clients are dropped every `CLIENT_SCAN_INTERVAL_S`.
"""

from __future__ import annotations

import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.clients.client_manager import ConsumerManager, ProducerManager
from rocketrio.actors.broker.clients.consume_directly import consume_directly_handlers
from rocketrio.actors.broker.clients.consumer_calls import Broker2Client, consumer_call_handlers
from rocketrio.actors.broker.clients.handlers import RemotingNotifier, client_handlers
from rocketrio.actors.broker.clients.lock_manager import RebalanceLockManager
from rocketrio.actors.broker.clients.processor import ClientProcessor
from rocketrio.actors.broker.clients.producer_info import producer_info_handlers
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.kernel.runtime import every_sync

CLIENT_SCAN_INTERVAL_S = 10.0


class ClientsFeature:
    """The connected clients of one broker (module docstring)."""

    def __init__(self, io: BrokerIO, *, tables: BrokerTables, store: StoreView) -> None:
        config = self.config = io.config
        self.consumers = ConsumerManager()
        self.producers = ProducerManager()
        self.locks = RebalanceLockManager(config.rebalanceLockMaxLiveTime / 1000)
        self.processor = ClientProcessor(
            config.brokerName,
            topics=tables.topics,
            groups=tables.groups,
            offsets=tables.offsets,
            consumers=self.consumers,
            producers=self.producers,
            locks=self.locks,
            store=store,
            notifier=RemotingNotifier(),
            leads_logic_queue=tables.mappings.leads_logic_queue,
        )
        self.b2c = Broker2Client()  # the calls 307 and 309 pass on to a consumer
        self._call_handlers = consumer_call_handlers(
            lambda: config.brokerName,
            consumers=self.consumers,
            b2c=self.b2c,
            topics=tables.topics,
            offsets=tables.offsets,
            store=store,
            now_ms=io.now_ms,
        )
        # 328: every producer connected here, by group (producer_info.py)
        self._call_handlers.update(producer_info_handlers(self.producers, io.now_ms))
        self._call_handlers.update(  # 309: a stored message to one consumer (consume_directly.py)
            consume_directly_handlers(
                lambda: config.brokerName,
                consumers=self.consumers,
                b2c=self.b2c,
                topics=tables.topics,
                groups=tables.groups,
                store=store,
            )
        )

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        """UPDATE_BROKER_CONFIG: the queue locks' expiry, from the next lock check."""
        if "rebalanceLockMaxLiveTime" in changed:
            self.locks.max_live_s = config.rebalanceLockMaxLiveTime / 1000

    def handlers(self) -> Handlers:
        return {**client_handlers(self.processor), **self._call_handlers}

    def scan(self) -> None:
        self.processor.scan_expired(trio.current_time())

    async def run_services(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with trio.open_nursery() as n:
            await n.start(self.b2c.run)
            n.start_soon(every_sync, CLIENT_SCAN_INTERVAL_S, self.scan)
            task_status.started()
