"""Consumer offset stores (upstream RemoteBrokerOffsetStore and LocalFileOffsetStore).

Both keep the offsets in an `OffsetTable` in memory; ``persist`` writes them out. Clustering
groups store offsets on the broker set that hosts the queue (UPDATE_CONSUMER_OFFSET to write,
QUERY_CONSUMER_OFFSET to read), at its master, or at a slave while the route has no master
(upstream findBrokerAddressInAdmin: the slave keeps them; syncing them back is the brokers'
business); only offsets that changed since the last persist are sent.
Broadcasting consumers keep their own offsets in a local JSON file, written atomically (temp
file, fsync, rename) in a worker thread. Upstream writes MessageQueue objects as map keys,
which is not JSON; our file lists entries instead:
``{"offsetTable": [{"topic", "brokerName", "queueId", "offset"}, ...]}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import structlog

from rocketrio.actors.client import backend as aio
from rocketrio.actors.client.errors import MQBrokerError, MQClientError
from rocketrio.actors.client.mq_client import MQClientInstance
from rocketrio.actors.client.process_queue import OffsetTable
from rocketrio.actors.client.rebalance import OFFSET_ERROR
from rocketrio.actors.kernel.remoting import RemotingError
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import MessageQueue
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.serde import HeaderError

log = structlog.get_logger("offset_store")


class OffsetStore(Protocol):
    table: OffsetTable

    async def load(self) -> None: ...

    async def fetch(self, mq: MessageQueue) -> int: ...

    async def read_from_store(self, mq: MessageQueue) -> int: ...

    async def persist(self, mqs: Iterable[MessageQueue]) -> None: ...

    def forget(self, mq: MessageQueue) -> None: ...


class RemoteBrokerOffsetStore:
    """Offsets of a clustering group, kept on the brokers."""

    def __init__(self, client: MQClientInstance, group: str) -> None:
        self.client = client
        self.group = group
        self.table = OffsetTable()
        self._persisted: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        return None

    async def fetch(self, mq: MessageQueue) -> int:
        """The broker's offset, -1 if it has none, -2 if unreachable (memory untouched)."""
        try:
            addr = await self.client.find_broker_addr_refreshing(
                self.client.broker_name_of(mq), mq.topic
            )
            if addr is None:
                return OFFSET_ERROR
            return await self.client.api.query_consumer_offset(addr, self.group, mq)
        except (RemotingError, MQClientError, HeaderError) as e:
            events.emit(
                log, events.QueryConsumerOffsetFailed(group=self.group, mq=str(mq), error=str(e))
            )
            return OFFSET_ERROR

    async def read_from_store(self, mq: MessageQueue) -> int:
        """`fetch`, and a found offset becomes the one held in memory (a queue starting)."""
        offset = await self.fetch(mq)
        if offset >= 0:
            self.table.update(mq, offset, increase_only=False)
            self._persisted[mq] = offset
        return offset

    async def persist(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in list(mqs):
            offset = self.table.read(mq)
            if offset < 0 or self._persisted.get(mq) == offset:
                continue
            try:
                addr = self.client.find_broker_addr(
                    self.client.broker_name_of(mq)
                )  # master, else a slave
                if addr is None:
                    raise MQClientError(f"no address for broker {mq.brokerName}")
                await self.client.api.update_consumer_offset(addr, self.group, mq, offset)
            except (RemotingError, MQClientError) as e:
                events.emit(
                    log, events.PersistOffsetFailed(group=self.group, mq=str(mq), error=str(e))
                )
                # gone, or a static topic's logic queue moved: the next persist finds the new one
                if not isinstance(e, MQBrokerError) or e.code == ResponseCode.NOT_LEADER_FOR_QUEUE:
                    self.client.request_route_refresh(mq.topic)
                continue
            self._persisted[mq] = offset

    def forget(self, mq: MessageQueue) -> None:
        self.table.remove(mq)
        self._persisted.pop(mq, None)


def default_offsets_path(client_id: str, group: str) -> str:
    """Upstream's default: ~/.rocketmq_offsets/<clientId>/<group>/offsets.json."""
    base = os.path.join(os.path.expanduser("~"), ".rocketmq_offsets")
    return os.path.join(base, client_id.replace(":", "_"), group, "offsets.json")


def write_file_atomic(path: str, data: bytes) -> None:
    """Temp file in the same directory, fsync, rename over, fsync the directory."""
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def encode_offsets(table: OffsetTable) -> bytes:
    entries = [
        {"topic": mq.topic, "brokerName": mq.brokerName, "queueId": mq.queueId, "offset": off}
        for mq, off in sorted(
            table.items(), key=lambda e: (e[0].topic, e[0].brokerName, e[0].queueId)
        )
    ]
    return json.dumps({"offsetTable": entries}, indent=1).encode()


def decode_offsets(data: bytes, source: str) -> dict[MessageQueue, int]:
    try:
        doc = json.loads(data)
        return {
            MessageQueue(e["topic"], e["brokerName"], int(e["queueId"])): int(e["offset"])
            for e in doc["offsetTable"]
        }
    except (ValueError, KeyError, TypeError) as e:
        raise MQClientError(f"offset file {source} is not valid: {e}") from None


RunBlocking = Callable[[Callable[[], Any]], Awaitable[Any]]


async def run_in_thread(fn: Callable[[], Any]) -> Any:
    """The default way to run blocking file work: a Trio worker thread."""
    return await aio.run_sync_in_thread(fn)


class LocalFileOffsetStore:
    """Offsets of a broadcasting consumer, in a local JSON file.

    File work goes through ``run_blocking`` (a worker thread by default; simulations run it
    inline so a MockClock does not jump while a real fsync is in progress).
    """

    def __init__(self, path: str, run_blocking: RunBlocking = run_in_thread) -> None:
        self.path = path
        self.run_blocking = run_blocking
        self.table = OffsetTable()
        self._stored: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        def read() -> bytes | None:
            try:
                with open(self.path, "rb") as f:
                    return f.read()
            except FileNotFoundError:
                return None

        data = await self.run_blocking(read)
        if data is not None:
            self._stored = decode_offsets(data, self.path)
            for mq, off in self._stored.items():
                self.table.update(mq, off, increase_only=False)

    async def fetch(self, mq: MessageQueue) -> int:
        return self._stored.get(mq, -1)

    async def read_from_store(self, mq: MessageQueue) -> int:
        offset = self._stored.get(mq, -1)
        if offset >= 0:
            self.table.update(mq, offset, increase_only=False)
        return offset

    async def persist(self, mqs: Iterable[MessageQueue]) -> None:
        wanted = set(mqs)
        changed = False
        for mq, off in self.table.items():
            if mq in wanted and self._stored.get(mq) != off:
                self._stored[mq] = off
                changed = True
        if not changed:
            return
        snapshot = OffsetTable()
        for mq, off in self._stored.items():
            snapshot.update(mq, off, increase_only=False)
        data = encode_offsets(snapshot)
        await self.run_blocking(lambda: write_file_atomic(self.path, data))

    def forget(self, mq: MessageQueue) -> None:
        self.table.remove(mq)
