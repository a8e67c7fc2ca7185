"""The broker's JSON-file tables, built and loaded together: topics, subscription groups,
consumer offsets, users and ACLs, static-topic mappings, delay offsets and message request
modes.

Each table owns its file in ``storePathRootDir/config`` (config_file.py: atomic writes with a
``.bak``); this class only builds them with the broker's I/O, loads them at open (logging a file
that came from its ``.bak``), runs their background writers and persists them at shutdown.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from rocketrio.actors.broker.boot.broker_io import BrokerIO
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.tables.auth import AuthTable
from rocketrio.actors.broker.tables.delay_offset import (
    DELAY_OFFSET_FILE,
    DelayOffsetFile,
    DelayOffsetTable,
)
from rocketrio.actors.broker.tables.json_table import JsonFileTable, config_path
from rocketrio.actors.broker.tables.request_mode import RequestModeTable
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.broker.tables.topic_queue_mapping import TopicQueueMappingTable


class BrokerTables:
    """The tables of one broker (module docstring)."""

    def __init__(self, io: BrokerIO, *, on_topic_change: Callable[[], None]) -> None:
        config, now_ms, run_blocking, fs = io.config, io.now_ms, io.run_blocking, io.fs
        self.config = config
        self.log = io.log
        self.topics = TopicTable(
            config, now_ms, run_blocking=run_blocking, on_change=on_topic_change, fs=fs
        )
        self.groups = GroupTable(config, now_ms, run_blocking=run_blocking, fs=fs)
        self.offsets = OffsetTable(config, now_ms, run_blocking=run_blocking, fs=fs)
        self.auth = AuthTable(config, now_ms, run_blocking=run_blocking, fs=fs)
        self.mappings = TopicQueueMappingTable(config, now_ms, run_blocking=run_blocking, fs=fs)
        self.request_modes = RequestModeTable(
            config.brokerName, config.storePathRootDir, run_blocking=run_blocking, fs=fs
        )
        self.delay_offsets = DelayOffsetFile(
            config_path(config.storePathRootDir, DELAY_OFFSET_FILE),
            DelayOffsetTable(now_ms, config.delayOffsetUpdateVersionStep),
            run_blocking=run_blocking,
            fs=fs,
        )

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        """UPDATE_BROKER_CONFIG: the auto-create switches; a new brokerPermission makes the
        NameServers take the masked topic perms (a new DataVersion, upstream
        nextVersion(stateMachineVersion)), re-registering at once."""
        if "autoCreateSubscriptionGroup" in changed:
            self.groups.auto_create = config.autoCreateSubscriptionGroup
        if "autoCreateTopicEnable" in changed:
            self.topics.set_auto_create_topic(config.autoCreateTopicEnable)
        if "brokerPermission" in changed:
            self.topics.set_state_version(self.topics.data_version.stateVersion)

    async def load(self) -> None:
        """Read every file (worker threads); a file read from its .bak is logged."""
        for table in self.all():
            await table.load_file()

    def all(self) -> tuple[JsonFileTable, ...]:
        return (
            self.topics,
            self.groups,
            self.offsets,
            self.auth,
            self.delay_offsets,
            self.request_modes,
        )

    async def run_writers(self) -> None:
        """The files' background writers: changes made on hot paths, periodic offsets."""
        c = self.config
        async with trio.open_nursery() as n:
            n.start_soon(self.topics.file.run_writer)
            n.start_soon(self.groups.file.run_writer)
            n.start_soon(self.offsets.file.run_periodic, c.flushConsumerOffsetInterval / 1000)
            n.start_soon(self.delay_offsets.file.run_periodic, c.flushDelayOffsetInterval / 1000)

    async def persist(self) -> None:
        """Shutdown: every table written now."""
        await self.offsets.persist()
        await self.topics.persist()
        await self.groups.persist()
        await self.delay_offsets.persist()
