"""The broker's three tables as the running broker holds them: each owns its JSON file.

`TopicTable` (topics.json), `GroupTable` (subscriptionGroup.json) and `OffsetTable`
(consumerOffset.json) are the pure managers of topic_config.py, subscription_group.py and
consumer_offset.py on the one file base of every table (json_table.py):

- a change made on a hot path (a topic auto-created by a send, a group auto-created by a pull)
  only marks the file dirty; the file's writer task writes it soon after, bursts coalesced;
- an admin change is followed by ``await table.persist()``, so the admin's answer means "on
  disk";
- consumer offsets are written every flushConsumerOffsetInterval (`ConfigFile.run_periodic`)
  and at shutdown.

A topic change also calls ``on_change``: the broker re-registers with the NameServers at once.
Processors take these tables, never the broker. Reads and changes happen on the Trio thread
without awaiting in between, so no request sees a half-made change.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.broker.tables.consumer_offset import ConsumerOffsetManager
from rocketrio.actors.broker.tables.json_table import OneFileTable
from rocketrio.actors.broker.tables.meta_log import (
    GroupGone,
    GroupSet,
    MetaChange,
    TopicGone,
    TopicSet,
)
from rocketrio.actors.broker.tables.subscription_group import SubscriptionGroupManager
from rocketrio.actors.broker.tables.topic_config import TopicConfigManager
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import (
    ConsumerOffsetSerializeWrapper,
    DataVersion,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketrio.storage.fs import OS_FS, FileSystem

TOPICS_FILE = "topics.json"
GROUPS_FILE = "subscriptionGroup.json"
OFFSETS_FILE = "consumerOffset.json"


class TopicTable(TopicConfigManager, OneFileTable):
    """The topic table: every change marks topics.json dirty and triggers re-registration."""

    def __init__(
        self,
        config: BrokerConfig,
        now_ms: Callable[[], int],
        *,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        on_change: Callable[[], None] = lambda: None,
        fs: FileSystem = OS_FS,
    ) -> None:
        super().__init__(config, now_ms)
        self.on_change = on_change
        # the metadata journal (meta_journal.py): every change, in the order made
        self.journal: Callable[[MetaChange], None] = lambda _change: None
        self.open_file(
            config.brokerName,
            config.storePathRootDir,
            TOPICS_FILE,
            TopicConfigSerializeWrapper,
            self.snapshot,
            run_blocking,
            fs=fs,
        )

    def _adopt(self, value: TopicConfigSerializeWrapper | None) -> None:
        self.load(value or TopicConfigSerializeWrapper())

    def _changed(self, tc: TopicConfig | None) -> None:
        self.file.mark_dirty()
        self.on_change()
        if tc is not None:
            self.journal(TopicSet(attrs.evolve(tc)))
            events.emit(
                self.log,
                events.TopicUpdated(
                    topic=tc.topicName,
                    read_queues=tc.readQueueNums,
                    write_queues=tc.writeQueueNums,
                    perm=tc.perm,
                ),
            )

    def create_in_send(
        self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int = 0
    ) -> TopicConfig | None:
        existed = topic in self.table
        tc = super().create_in_send(topic, default_topic, client_queue_nums, topic_sys_flag)
        if tc is not None and not existed:
            self._changed(tc)
        return tc

    def create_in_send_back(
        self, topic: str, queue_nums: int, perm: int, topic_sys_flag: int = 0
    ) -> tuple[TopicConfig, bool]:
        tc, created = super().create_in_send_back(topic, queue_nums, perm, topic_sys_flag)
        if created:
            self._changed(tc)
        return tc, created

    def update(self, tc: TopicConfig) -> bool:
        changed = super().update(tc)
        if changed:
            self._changed(tc)
        return changed

    def delete(self, topic: str) -> bool:
        existed = super().delete(topic)
        if existed:
            self._changed(None)
            self.journal(TopicGone(topic))
            events.emit(self.log, events.TopicDeleted(topic=topic))
        return existed

    def set_state_version(self, state_version: int) -> None:
        """A role change: the DataVersion's stateVersion becomes the masterEpoch (upstream
        nextVersion(newMasterEpoch)), so a NameServer prefers the newer master."""
        v = self.data_version
        self.data_version = DataVersion(state_version, self.now_ms(), v.counter + 1)
        self.file.mark_dirty()
        self.on_change()


class GroupTable(SubscriptionGroupManager, OneFileTable):
    """The subscription-group table: auto-created groups mark the file dirty."""

    def __init__(
        self,
        config: BrokerConfig,
        now_ms: Callable[[], int],
        *,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        fs: FileSystem = OS_FS,
    ) -> None:
        super().__init__(config.autoCreateSubscriptionGroup, now_ms)
        # the metadata journal: operator changes only (an auto-created group re-creates itself)
        self.journal: Callable[[MetaChange], None] = lambda _change: None
        self.open_file(
            config.brokerName,
            config.storePathRootDir,
            GROUPS_FILE,
            SubscriptionGroupWrapper,
            self.snapshot,
            run_blocking,
            fs=fs,
        )

    def _adopt(self, value: SubscriptionGroupWrapper | None) -> None:
        self.load(value or SubscriptionGroupWrapper())

    def update(self, sgc: SubscriptionGroupConfig) -> bool:
        changed = super().update(sgc)
        if changed:
            self.journal(GroupSet(attrs.evolve(sgc)))
        return changed

    def delete(self, group: str) -> bool:
        existed = super().delete(group)
        if existed:
            self.journal(GroupGone(group))
        return existed

    def find_group(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-created when allowed (upstream
        findSubscriptionGroupConfig); None when it does not exist and may not be created."""
        sgc, created = self.find(group)
        if created:
            self.file.mark_dirty()
        return sgc

    def notify_enabled(self, group: str) -> bool:
        """Whether members hear NOTIFY_CONSUMER_IDS_CHANGED (true for an unknown group)."""
        sgc = self.table.get(group)
        return sgc is None or sgc.notifyConsumerIdsChangedEnable


class OffsetTable(ConsumerOffsetManager, OneFileTable):
    """Committed consumer offsets; written periodically (only when something changed)."""

    def __init__(
        self,
        config: BrokerConfig,
        now_ms: Callable[[], int],
        *,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        fs: FileSystem = OS_FS,
    ) -> None:
        super().__init__(now_ms)
        self.open_file(
            config.brokerName,
            config.storePathRootDir,
            OFFSETS_FILE,
            ConsumerOffsetSerializeWrapper,
            self.snapshot_for_persist,
            run_blocking,
            fs=fs,
        )

    def _adopt(self, value: ConsumerOffsetSerializeWrapper | None) -> None:
        self.load(value or ConsumerOffsetSerializeWrapper())
