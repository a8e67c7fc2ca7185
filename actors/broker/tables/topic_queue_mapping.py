"""The broker's static-topic mappings (upstream TopicQueueMappingManager): topicQueueMapping.json.

The mapping is the source of truth of a static topic (RIP-21 "SOT"), kept apart from
topics.json so that copying topics.json between brokers (a common habit) cannot copy it, and
every mapping names the broker it belongs to (``bname``), so one that was copied anyway is
recognised:

- `TopicQueueMappingManager` (no I/O) holds one `TopicQueueMappingDetail` per topic and its
  `DataVersion`. `update` takes a detail from the admin and refuses (`MappingError`) one naming
  another broker, an epoch older than the one held, another scope, broken item offsets, or a
  change to an existing generation (a decided logic offset never changes); a newer epoch that
  omits a logic queue keeps the old list. ``force`` (mqadmin's -fr) replaces, keeping the old
  lists the new detail omits. `adopt` takes the file's content and leaves out (returning them)
  the mappings naming another broker: they were copied from elsewhere and are refused, loudly,
  never used. `clean` drops the oldest generations the clean-up service decided to drop
  (static_topic_clean.py), at the same epoch.
- `TopicQueueMappingTable` adds the file (`ConfigFile`: atomic write with a ``.bak``, in
  ``storePathRootDir/config``, like upstream's BrokerPathConfigHelper). Admin changes are
  persisted before the admin gets its answer. The file is written as standard JSON; one a
  Java broker wrote (fastjson: bare Integer map keys) is read as well.

Ordering with topics.json (the caller's duty, static_topic_processor.py): the mapping is written
first, then the topic config; at start `topic_configs_to_repair` lists the topic configs a
crash between the two writes left missing or short, so the broker restores them from the
mapping before it registers.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.store.view import RunBlocking
from rocketrio.actors.broker.tables.json_table import OneFileTable
from rocketrio.actors.observe import events
from rocketrio.protocol import fastjson
from rocketrio.protocol.bodies import DataVersion, MessageQueue, TopicConfig, TopicQueueMappingInfo
from rocketrio.protocol.static_topic import (
    LogicQueueMappingItem,
    MappingError,
    TopicQueueMappingDetail,
    TopicQueueMappingSerializeWrapper,
    check_epoch,
    check_immutable,
    check_item_offsets,
    is_logic_broker_name,
)
from rocketrio.storage.fs import OS_FS, FileSystem

MAPPING_FILE = "topicQueueMapping.json"


def leader_items(detail: TopicQueueMappingDetail, gid: int) -> list[LogicQueueMappingItem] | None:
    """The logic queue's items when this broker leads it, else None."""
    items = detail.hostedQueues.get(gid)
    if not items or items[-1].bname != detail.bname:
        return None
    return items


class TopicQueueMappingManager:
    """Static-topic mappings of one broker (``bname``) and their DataVersion."""

    def __init__(self, bname: str, now_ms: Callable[[], int]) -> None:
        self.bname = bname
        self.now_ms = now_ms
        self.table: dict[str, TopicQueueMappingDetail] = {}
        self.data_version = DataVersion()

    def get(self, topic: str) -> TopicQueueMappingDetail | None:
        return self.table.get(topic)

    def leads_logic_queue(self, mq: MessageQueue) -> bool:
        """``mq`` is a logic queue this broker leads (its orderly-consumer locks are kept here)."""
        if not is_logic_broker_name(mq.brokerName):
            return False
        detail = self.table.get(mq.topic)
        return detail is not None and leader_items(detail, mq.queueId) is not None

    def is_static(self, topic: str) -> bool:
        return topic in self.table

    def mapping_infos(self) -> dict[str, TopicQueueMappingInfo]:
        """Every static topic's registration info (S3: the logic queues led here)."""
        return {topic: d.to_info() for topic, d in sorted(self.table.items())}

    def adopt(self, wrapper: TopicQueueMappingSerializeWrapper) -> list[TopicQueueMappingDetail]:
        """Take the file's content; returns the mappings refused because they name another
        broker (or another topic than their key), which are not kept."""
        self.table = {}
        refused = []
        for topic, detail in wrapper.topicQueueMappingInfoMap.items():
            if detail.bname != self.bname or detail.topic != topic:
                refused.append(detail)
                continue
            self.table[topic] = detail
        self.data_version = wrapper.dataVersion
        return refused

    def snapshot(self) -> TopicQueueMappingSerializeWrapper:
        v = self.data_version
        return TopicQueueMappingSerializeWrapper(
            {t: d.copy() for t, d in self.table.items()},
            DataVersion(v.stateVersion, v.timestamp, v.counter),
        )

    def check_own(self, detail: TopicQueueMappingDetail) -> None:
        if detail.bname != self.bname:
            raise MappingError(
                f"the mapping of topic {detail.topic} belongs to broker {detail.bname}, not to "
                f"this broker {self.bname}: a mapping copied from another broker is refused"
            )

    def update(self, new: TopicQueueMappingDetail, force: bool = False) -> bool:
        """Accept ``new`` (see the module docstring); True when the table changed."""
        self.check_own(new)
        check_epoch(new.epoch, f"the mapping of topic {new.topic}")
        for items in new.hostedQueues.values():
            check_item_offsets(items)
        new = new.copy()
        old = self.table.get(new.topic)
        if old is not None and force:
            for gid, items in old.hostedQueues.items():
                new.hostedQueues.setdefault(gid, list(items))
        elif old is not None:
            if new.epoch < old.epoch:
                raise MappingError(
                    f"topic {new.topic}: epoch {new.epoch} is older than the epoch {old.epoch} "
                    "held here; read the current mapping and compute again"
                )
            if new.scope != old.scope:
                raise MappingError(f"topic {new.topic}: scope {new.scope} != {old.scope}")
            epoch_equal = new.epoch == old.epoch
            for gid, old_items in old.hostedQueues.items():
                new_items = new.hostedQueues.get(gid)
                if new_items is None:
                    if epoch_equal:
                        raise MappingError(
                            f"topic {new.topic}: logic queue {gid} is missing at the same epoch"
                        )
                    new.hostedQueues[gid] = list(old_items)
                else:
                    check_immutable(old_items, new_items, epoch_equal)
        new.hostedQueues = dict(sorted(new.hostedQueues.items()))
        if old == new:
            return False
        self.table[new.topic] = new
        self.data_version = self.data_version.next_version(self.now_ms())
        return True

    def clean(self, topic: str, epoch: int, keep_from: dict[int, int | None]) -> bool:
        """Apply a clean-up decided on the detail of ``epoch`` (upstream updateTopicQueueMapping
        with isClean: the epoch stays, only the oldest generations go): per logic queue the
        first generation kept, None to drop the queue's list. Nothing is applied when the
        detail is of another epoch now (a remapping came in meanwhile); a list is never cut
        past its last item. True when the table changed."""
        old = self.table.get(topic)
        if old is None or old.epoch != epoch:
            return False
        new = old.copy()
        for gid, first in keep_from.items():
            items = new.hostedQueues.get(gid)
            if not items:
                continue
            if first is None:
                del new.hostedQueues[gid]
            elif items[-1].gen >= first:
                new.hostedQueues[gid] = [i for i in items if i.gen >= first]
        if new == old:
            return False
        self.table[topic] = new
        self.data_version = self.data_version.next_version(self.now_ms())
        return True

    def delete(self, topic: str) -> bool:
        if self.table.pop(topic, None) is None:
            return False
        self.data_version = self.data_version.next_version(self.now_ms())
        return True

    def topic_configs_to_repair(self, existing: dict[str, TopicConfig]) -> list[TopicConfig]:
        """Topic configs that must grow to hold the physical queues this broker's mappings
        name (missing, or fewer queues): what a crash between the two writes leaves."""
        out = []
        for topic, detail in sorted(self.table.items()):
            own = [
                item.queueId
                for items in detail.hostedQueues.values()
                for item in items
                if item.bname == self.bname
            ]
            need = max(own, default=-1) + 1
            tc = existing.get(topic)
            if tc is None:
                out.append(TopicConfig(topic, max(need, 1), max(need, 1)))
            elif tc.writeQueueNums < need or tc.readQueueNums < need:
                out.append(
                    TopicConfig(
                        topic,
                        max(tc.readQueueNums, need),
                        max(tc.writeQueueNums, need),
                        tc.perm,
                        tc.topicFilterType,
                        tc.topicSysFlag,
                        tc.order,
                        dict(tc.attributes),
                    )
                )
        return out


class TopicQueueMappingTable(TopicQueueMappingManager, OneFileTable):
    """The mappings with their file (topicQueueMapping.json)."""

    def __init__(
        self,
        config: BrokerConfig,
        now_ms: Callable[[], int],
        *,
        run_blocking: RunBlocking = trio.to_thread.run_sync,
        fs: FileSystem = OS_FS,
    ) -> None:
        super().__init__(config.brokerName, now_ms)
        self.open_file(
            config.brokerName,
            config.storePathRootDir,
            MAPPING_FILE,
            TopicQueueMappingSerializeWrapper,
            self.snapshot,
            run_blocking,
            fs=fs,
            loads=fastjson.loads,  # upstream's file has bare Integer keys ({0:[...]})
            actor="topic_queue_mapping",
        )

    def _adopt(self, value: TopicQueueMappingSerializeWrapper | None) -> None:
        """Adopt the file, refused copies logged (they name another broker)."""
        refused = self.adopt(value or TopicQueueMappingSerializeWrapper())
        for detail in refused:
            events.emit(
                self.log,
                events.StaticTopicMappingRefused(
                    topic=detail.topic,
                    mapping_bname=detail.bname,
                    reason=f"found in {self.file.path} but belongs to broker {detail.bname}",
                ),
            )
