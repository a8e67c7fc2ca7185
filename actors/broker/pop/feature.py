"""POP consumption as the broker builds it: the held pops (hold.py), ordered POP's state and its
file (order.py, order_service.py), POP_MESSAGE (processor.py), the acks (ack.py) and the
master's revive task (revive.py, revive_service.py, fed what the POP and ACK paths store:
revive_feed.py), with ``enablePopBufferMerge`` the buffer of CKs kept in memory while acknowledged
(buffer_merge.py, buffer_service.py); their request codes in handlers.py. The
probes PEEK_MESSAGE, NOTIFICATION and POLLING_INFO (probe.py, probe_handlers.py) read the same
tables; held NOTIFICATIONs wait in ``notifications``, a hold service of their own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.dispatch.message_filter import FilterSelectors
from rocketrio.actors.broker.dispatch.table import Handlers
from rocketrio.actors.broker.pop.ack import PopAckProcessor
from rocketrio.actors.broker.pop.attempt import PopConfig
from rocketrio.actors.broker.pop.buffer_merge import BufferConfig, PopBuffer
from rocketrio.actors.broker.pop.buffer_service import PopBufferService
from rocketrio.actors.broker.pop.direct_ack import Stopping, direct_handlers
from rocketrio.actors.broker.pop.handlers import pop_handlers
from rocketrio.actors.broker.pop.hold import PopLongPollingService
from rocketrio.actors.broker.pop.order_service import PopOrderService
from rocketrio.actors.broker.pop.pop_nowait import PopNowait
from rocketrio.actors.broker.pop.probe import PopProbe
from rocketrio.actors.broker.pop.probe_handlers import probe_handlers
from rocketrio.actors.broker.pop.processor import PopMessageProcessor
from rocketrio.actors.broker.pop.revive_feed import ReviveFeedWriter
from rocketrio.actors.broker.pop.revive_service import PopReviveService, ReviveConfig
from rocketrio.actors.broker.store.actor import StoreActor
from rocketrio.actors.broker.store.escape_bridge import (
    EscapeBridge,
    ForeignRead,
    PopRecordEscape,
)
from rocketrio.actors.broker.store.queue_reader import QueueReader
from rocketrio.actors.broker.tables.broker_tables import BrokerTables
from rocketrio.actors.kernel.remoting import DirectHandler
from rocketrio.protocol.codes import RequestCode


def _buffer(io: BrokerIO, t: BrokerTables) -> PopBuffer:
    c = io.config
    config = BufferConfig(
        c.popCkStayBufferTime,
        c.popCkStayBufferTimeOut,
        c.popCkMaxBufferSize,
        c.popCkOffsetMaxQueueSize,
    )
    return PopBuffer(config, t.offsets)


def _revive(
    io: BrokerIO,
    t: BrokerTables,
    view: QueueReader,
    writer: StoreActor,
    is_master: Callable[[], bool],
    store_host: tuple[bytes, int],
    escape: Callable[[], EscapeBridge | None],
) -> PopReviveService:
    return PopReviveService(
        ReviveConfig.of(io.config),
        topics=t.topics,
        groups=t.groups,
        offsets=t.offsets,
        store=view,
        writer=writer,
        is_master=is_master,
        now_ms=io.now_ms,
        store_host=store_host,
        log=io.log.bind(actor="pop_revive"),
        escape=escape,
    )


def _order_service(io: BrokerIO, t: BrokerTables, hold: PopLongPollingService) -> PopOrderService:
    config = io.config
    return PopOrderService(
        config.storePathRootDir,
        offsets=t.offsets,
        topics=t.topics,
        groups=t.groups,
        hold=hold,
        now_ms=io.now_ms,
        persist_interval_s=config.flushConsumerOffsetInterval / 1000,
        run_blocking=io.run_blocking,
        fs=io.fs,
        log=io.log.bind(actor="pop_order"),
    )


class PopFeature:
    """POP of one broker (module docstring)."""

    def __init__(
        self,
        io: BrokerIO,
        *,
        tables: BrokerTables,
        view: QueueReader,
        writer: StoreActor,
        is_master: Callable[[], bool],
        store_host: tuple[bytes, int],
        escape: Callable[[], EscapeBridge | None] = lambda: None,
        acting: Callable[[], bool] = lambda: False,
        filters: FilterSelectors | None = None,
        record_escape: Callable[[], PopRecordEscape | None] = lambda: None,
    ) -> None:
        config, now_ms, t = io.config, io.now_ms, tables
        pop_config = PopConfig.of(config)
        # the CK and ACK records' puts: the revive task is given what they stored (revive_feed.py)
        records = ReviveFeedWriter(writer, lambda qid, at, r: self.revive.written(qid, at, r))
        self.hold = PopLongPollingService(config.maxPopPollingSize)
        self.buffer = _buffer(io, t) if config.enablePopBufferMerge else None
        self.order = _order_service(io, t, self.hold)
        self.pop = PopMessageProcessor(
            pop_config,
            topics=t.topics,
            groups=t.groups,
            offsets=t.offsets,
            store=view,
            writer=records,
            hold=self.hold,
            order=self.order,
            now_ms=now_ms,
            store_host=store_host,
            rng=io.rng,
            filters=filters,
            record_escape=record_escape,
            buffer=self.buffer,
        )
        self.pop.nowait = PopNowait(self.pop).try_serve
        self.notifications = PopLongPollingService(config.maxPopPollingSize)
        self.order.also_wake = self.notifications  # an ordered block's end wakes them too
        self.probe = self._probe(io, t, view, pop_config)
        self.acks = PopAckProcessor(
            pop_config,
            topics=t.topics,
            order=self.order,
            store=view,
            writer=records,
            now_ms=now_ms,
            store_host=store_host,
            next_revive_qid=self.pop.next_revive_qid,
            acting_ack=lambda qid, ack: acting() and self.revive.apply_ack(qid, ack),
            record_escape=record_escape,
            acting=acting,
            may_act=config.enableSlaveActingMaster,
            buffer=self.buffer,
        )
        self.buffer_service = self._buffer_service(
            records, pop_config, store_host, now_ms,
            lambda: is_master() and not acting() and record_escape() is None,
        )  # fmt: skip
        self.revive = _revive(io, t, view, writer, is_master, store_host, escape)

    def _buffer_service(
        self,
        records: ReviveFeedWriter,
        pop_config: PopConfig,
        store_host: tuple[bytes, int],
        now_ms: Callable[[], int],
        serving: Callable[[], bool],
    ) -> PopBufferService | None:
        """The buffer's task (buffer_service.py), serving on the master only; None when off."""
        if self.buffer is None:
            return None
        topic = pop_config.revive_topic
        return PopBufferService(self.buffer, records, topic, store_host, now_ms, serving)

    def _probe(
        self, io: BrokerIO, t: BrokerTables, view: QueueReader, pop_config: PopConfig
    ) -> PopProbe:
        return PopProbe(
            pop_config,
            topics=t.topics,
            groups=t.groups,
            offsets=t.offsets,
            store=view,
            pops=self.hold,
            notifications=self.notifications,
            order=self.order,
            now_ms=io.now_ms,
            rng=io.rng,
            buffer=self.buffer,
        )

    def read_foreign_with(self, read: ForeignRead | None) -> None:
        """How the revive reads a CK's messages that another group's acting slave popped
        (RIP-32: failover/pop_escape.py)."""
        self.revive.read_foreign = read

    @functools.cached_property
    def _handlers(self) -> Handlers:
        """The request handlers, made once: the direct path checks the table holds this ACK's."""
        return pop_handlers(self.pop, self.acks, self.revive, self.buffer) | probe_handlers(
            self.probe
        )

    def handlers(self) -> Handlers:
        return self._handlers

    def direct_handlers(
        self, table: Mapping[int, object], *, gated: bool, requests: Stopping
    ) -> dict[int, DirectHandler]:
        """ACK_MESSAGE's direct path from the decoded frame (direct_ack.py), when ``table``
        (the built request table) serves it with this package's handler and no ACL gate
        judges requests (``gated``)."""
        ack = self._handlers[RequestCode.ACK_MESSAGE]
        return direct_handlers(self.acks, table, ack, gated=gated, requests=requests)

    def on_arrivals(self, arrived: Mapping[tuple[str, int], int]) -> None:
        self.hold.notify_arrivals(arrived)
        self.notifications.notify_arrivals(arrived)

    def stop_holding(self) -> None:
        """Shutdown begins: pops and notifications that find nothing are answered at once."""
        self.hold.stop_holding()
        self.notifications.stop_holding()

    async def answer_all(self) -> None:
        """Shutdown: every held pop and notification answered now."""
        await self.hold.answer_all()
        await self.notifications.answer_all()

    async def drain_buffer(self) -> None:
        """Shutdown, before the offsets are persisted: the POP buffer written out."""
        if self.buffer_service is not None:
            await self.buffer_service.drain()

    async def load(self) -> None:
        await self.order.load_file()

    async def run_services(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with trio.open_nursery() as n:
            await n.start(self.hold.run)
            await n.start(self.notifications.run)
            await n.start(self.revive.run)
            await n.start(self.acks.batcher.run)
            await n.start(self.order.run)
            if self.buffer_service is not None:
                await n.start(self.buffer_service.run)
            task_status.started()
