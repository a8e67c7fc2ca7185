"""Driving broker request processors without a broker: a `Sender` over real tables and an
in-memory store writer, with a fixed clock.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.clients.lock_manager import RebalanceLockManager
from rocketrio.actors.broker.dispatch.outcomes import (
    Refusal,
    SendOutcome,
)
from rocketrio.actors.broker.send.config import SendConfig
from rocketrio.actors.broker.send.processor import SendMessageProcessor
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.actor import PutBatchBody, PutCallback
from rocketrio.actors.broker.store.view import ReadGate, StoreView
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.kernel.runtime import ActorStopped
from rocketrio.protocol.bodies import (
    TopicConfigSerializeWrapper,
)
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import (
    SendMessageRequestHeader,
)
from rocketrio.storage.message_store import (
    MessageStore,
    MessageToStore,
    StoreConfig,
)

RC = ResponseCode


HOST = (b"\x0a\x00\x00\x09", 40000)


NOW_MS = 1_700_000_000_000


async def inline(fn: Callable[[], Any]) -> Any:
    return fn()


def broker_config(tmp_path: Path, **over: Any) -> BrokerConfig:
    return BrokerConfig(storePathRootDir=str(tmp_path), **over)


def tables(config: BrokerConfig) -> tuple[TopicTable, GroupTable, OffsetTable]:
    topics = TopicTable(config, lambda: NOW_MS, run_blocking=inline)
    topics.load(TopicConfigSerializeWrapper())
    groups = GroupTable(config, lambda: NOW_MS, run_blocking=inline)
    return topics, groups, OffsetTable(config, lambda: NOW_MS, run_blocking=inline)


def open_store(tmp_path: Path) -> MessageStore:
    store = MessageStore(
        str(tmp_path / "store"), StoreConfig(mappedFileSizeCommitLog=64 * 1024), store_host=HOST
    )
    store.open()
    return store


class MemoryWriter:
    """A StoreWriter that keeps the puts; the test answers them like the store actor would."""

    def __init__(self) -> None:
        self.puts: list[tuple[list[MessageToStore], PutCallback]] = []
        self.batches: list[PutBatchBody] = []
        self.full = False
        self.stopped = False
        self.awaited = 0

    def _check(self) -> None:
        if self.stopped:
            raise ActorStopped("store")
        if self.full:
            raise trio.WouldBlock

    def put_nowait(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self._check()
        self.puts.append((messages, on_done))

    async def put(self, messages: list[MessageToStore], on_done: PutCallback) -> None:
        self.awaited += 1
        self.puts.append((messages, on_done))

    def put_batch_nowait(self, put: PutBatchBody) -> None:
        self._check()
        self.batches.append(put)

    async def put_batch(self, put: PutBatchBody) -> None:
        self.awaited += 1
        self.batches.append(put)


class ClosedGate:
    def write_refusal(self) -> Refusal | None:
        return Refusal(RC.SERVICE_NOT_AVAILABLE, "broker-a is a SLAVE: send to the master")


class Sender:
    def __init__(self, tmp_path: Path, **config: Any) -> None:
        self.config = broker_config(tmp_path, **config)
        self.topics, self.groups, _ = tables(self.config)
        self.writer = MemoryWriter()
        self.store = open_store(tmp_path)
        self.stats = BrokerStats()
        self.outcomes: list[SendOutcome] = []
        self.gate: ClosedGate | None = None
        self.processor = self.make()

    def make(self) -> SendMessageProcessor:
        return SendMessageProcessor(
            SendConfig.of(self.config),
            topics=self.topics,
            groups=self.groups,
            writer=self.writer,
            reader=StoreView(self.store, ReadGate(inline)),
            locks=RebalanceLockManager(),
            new_uniq_key=lambda: "FRESHUNIQ",
            stats=self.stats,
            write_gate=self.gate,
        )

    async def send(self, topic: str = "Orders", queue_id: int = 1, **h: Any) -> Refusal | None:
        header = SendMessageRequestHeader(
            producerGroup="pg",
            topic=topic,
            defaultTopic="TBW102",
            defaultTopicQueueNums=4,
            queueId=queue_id,
            sysFlag=0,
            bornTimestamp=7,
            flag=0,
            **h,
        )
        return await self.processor.send(header, b"hello", HOST, "10.0.0.9:1", self.outcomes.append)
