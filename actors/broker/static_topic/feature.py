"""Static topics (RIP-21) as the broker builds them: the admin calls that write the mappings
(admin.py), logic queues' sends, pulls, POPs and offsets (send.py, pull.py, pop.py with
logic_store.py, offsets.py, with remote reads of older generations through remote.py), the
admin offset tools on logic queues (offset_tools.py) and the clean-up of old generations (clean.py).

A static topic's logic queue changes how plain requests are served, so this package declares a
`wrap` for the request table (dispatch/table.py): it gets the plain handlers and returns the
ones it replaces. Each replacement looks the topic up once and hands any request that is not
for a logic queue to the plain handler; nothing else passes through it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from rocketrio.actors.broker.admin.processor import AdminProcessor
from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.pull.processor import PullMessageProcessor
from rocketrio.actors.broker.send.processor import SendMessageProcessor
from rocketrio.actors.broker.static_topic.admin import StaticTopicProcessor
from rocketrio.actors.broker.static_topic.clean import StaticTopicCleanService
from rocketrio.actors.broker.static_topic.logic_store import LogicQueueStore
from rocketrio.actors.broker.static_topic.offset_tools import ApplyReset, StaticOffsetTools
from rocketrio.actors.broker.static_topic.offsets import StaticTopicOffsets
from rocketrio.actors.broker.static_topic.pop import pop_handlers
from rocketrio.actors.broker.static_topic.pull import pull_handlers
from rocketrio.actors.broker.static_topic.remote import RemoteBrokers
from rocketrio.actors.broker.static_topic.send import send_handlers
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.kernel.remoting import RemotingClient
from rocketrio.actors.observe import events


class StaticTopicFeature:
    """Static topics of one broker (module docstring)."""

    def __init__(
        self,
        io: BrokerIO,
        *,
        tables: BrokerTables,
        admin: AdminProcessor,
        send: SendMessageProcessor,
        pull: PullMessageProcessor,
        client: Callable[[], RemotingClient | None],
        is_master: Callable[[], bool],
        on_change: Callable[[], None],
        store_barrier: Callable[[], Awaitable[int]],
        apply_reset: ApplyReset,
        reader: LogicQueueStore,
    ) -> None:
        config, log = io.config, io.log.bind(actor="static_topic")
        self.tables = tables
        self.is_master = is_master
        self.send = send
        self.pull = pull
        self.log = log
        mappings = tables.mappings
        self.admin = StaticTopicProcessor(
            topics=tables.topics,
            mappings=mappings,
            admin=admin,
            on_change=on_change,
            store_barrier=store_barrier,
            release_held=pull.hold.release_queues,
        )
        self.remote = RemoteBrokers(client, lambda: config.namesrv_addrs)
        self.offsets = StaticTopicOffsets(
            mappings=mappings, offsets=tables.offsets, admin=admin, remote=self.remote, log=log
        )
        self.tools = StaticOffsetTools(
            mappings=mappings,
            offsets=tables.offsets,
            static_offsets=self.offsets,
            apply_reset=apply_reset,
            reader=reader,
            now_ms=io.now_ms,
        )
        self.clean = StaticTopicCleanService(
            mappings=mappings,
            offsets=tables.offsets,
            static_offsets=self.offsets,
            remote=self.remote,
            interval_ms=lambda: config.topicQueueMappingCleanInterval,
            is_master=is_master,
            on_change=on_change,
            log=log,
        )

    def handlers(self) -> Handlers:
        """The static-topic admin calls (topic create/delete/config, mappings)."""
        return self.admin.handlers()

    def wrap(self, plain: Handlers) -> Handlers:
        """The plain handlers a static topic's logic queues change (module docstring)."""
        mappings, offsets = self.tables.mappings, self.tables.offsets
        return {
            **send_handlers(mappings, self.send, plain),
            **pull_handlers(
                mappings, self.pull, offsets, self.remote, plain, self.log, self.is_master
            ),
            **self.offsets.handlers(plain),
            **pop_handlers(mappings, self.offsets, plain),
            **self.tools.handlers(plain),
        }

    async def load(self) -> None:
        """After topics.json: the mappings, repairing the topic configs they imply."""
        if await self.admin.load():
            events.emit(
                self.log, events.ConfigLoadedFromBackup(file=self.tables.mappings.file.path)
            )

    async def run_services(self) -> None:
        async with trio.open_nursery() as n:
            n.start_soon(self.clean.run)
