"""Admin and query calls (upstream AdminBrokerProcessor / QueryMessageProcessor, reduced).

Topics: create/update, delete, all configs, one config. Groups: create/update, all configs,
one config, delete (consumption figures: consume_stats.py). Broker: config (runtime info and
statistics: runtime_info.py, stats_remoting.py). Offsets: max, min, search by timestamp,
earliest store time. Messages: by CommitLog offset (the stored record) and by key or by
UNIQ_KEY (the stored records). Each call takes the protocol's typed header or body and returns
a typed value (a protocol body class, an offset, records), `Done` or a `Refusal`; the protocol
adapter serializes. Remarks follow upstream
where it has one, and otherwise say what to change.

Admin changes persist their table before answering (tables.py). Deleting a topic removes it from
the table first (sends see TOPIC_NOT_EXIST from then on), then asks the store actor, the
store's one writer, to drop its queues, then forgets its consumer offsets.

Collaborators: the live broker config (role and id change at runtime), the topic, group and
offset tables, the consumer manager, the store view, the store's topic deletion
(the store actor), stats and the clock.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs

from rocketrio.actors.auth.config import mask_secrets
from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.clients.client_manager import ConsumerManager
from rocketrio.actors.broker.dispatch.outcomes import DONE, Done, Refusal
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.subscription_group import PERM_INDEX_READ
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.broker.tables.topic_config import (
    check_group_name,
    check_perm,
    check_queue_nums,
    check_topic_name,
)
from rocketrio.protocol.bodies import (
    GroupForbidden,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.config import dump_config
from rocketrio.protocol.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    QueryMessageRequestHeader,
    SearchOffsetRequestHeader,
    UpdateGroupForbiddenRequestHeader,
    ViewMessageRequestHeader,
)

MAX_QUERY_MESSAGES = 64


class TopicDeleter(Protocol):
    """The store's one writer, for dropping a topic's queues."""

    async def delete_topic(self, topic: str) -> int: ...


@attrs.frozen
class QueriedMessages:
    """QUERY_MESSAGE's answer: the stored records found (maybe none) and the index state."""

    records: list[bytes]
    index_last_update_timestamp: int
    index_last_update_phy_offset: int


def alter_attributes(current: dict[str, str], change: dict[str, str]) -> dict[str, str] | str:
    """A group's attributes after an update (upstream AttributeUtil.alterCurrentAttributes):
    ``+key`` sets, ``-key`` removes; keys without a sign replace the whole set (what a client
    that sends plain attributes means). A bad change is returned as the remark."""
    signed = [k for k in change if k[:1] in ("+", "-")]
    if not signed:
        return dict(change)
    if len(signed) != len(change):
        return "attributes must all be +key=value / -key, or none of them"
    out = dict(current)
    for key, value in change.items():
        name = key[1:]
        if not name:
            return f"attribute {key!r} has no name"
        if key[0] == "+":
            out[name] = value
        elif name not in out:
            return f"attribute {name} to remove is not set"
        else:
            del out[name]
    return out


class AdminProcessor:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        topics: TopicTable,
        groups: GroupTable,
        offsets: OffsetTable,
        consumers: ConsumerManager,
        store: StoreView,
        deleter: TopicDeleter,
        stats: BrokerStats,
        now_ms: Callable[[], int],
        journal_settled: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self.config = config
        # the metadata journal (tables/meta_journal.py): an answer waits for its records
        self.journal_settled = journal_settled
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.consumers = consumers
        self.store = store
        self.deleter = deleter
        self.stats = stats
        self.now_ms = now_ms

    # ------------------------------------------------------------------ topics

    async def update_topic(self, h: CreateTopicRequestHeader) -> Done | Refusal:
        topic = h.topic
        bad = (
            check_topic_name(topic)
            or check_queue_nums(h.readQueueNums, h.writeQueueNums)
            or check_perm(h.perm)
        )
        if bad:
            return Refusal(ResponseCode.SYSTEM_ERROR, bad)
        if self.topics.is_system_topic(topic):
            return Refusal(
                ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
            )
        if topic == self.config.brokerClusterName:
            return Refusal(
                ResponseCode.SYSTEM_ERROR,
                f"Create topic [{topic}] failed: it conflicts with the cluster name",
            )
        filter_type = h.topicFilterType or "SINGLE_TAG"
        if filter_type not in ("SINGLE_TAG", "MULTI_TAG"):
            return Refusal(
                ResponseCode.SYSTEM_ERROR,
                f"topicFilterType must be SINGLE_TAG or MULTI_TAG, got {filter_type}",
            )
        tc = TopicConfig(
            topicName=topic,
            readQueueNums=h.readQueueNums,
            writeQueueNums=h.writeQueueNums,
            perm=h.perm,
            topicFilterType=filter_type,
            topicSysFlag=h.topicSysFlag or 0,
            order=h.order,
        )
        if self.topics.update(tc):  # persisted before the answer, registered right away
            await self.topics.persist()
        return await self._journaled()

    async def delete_topic(self, h: DeleteTopicRequestHeader) -> Done | Refusal:
        bad = check_topic_name(h.topic)
        if bad:
            return Refusal(ResponseCode.SYSTEM_ERROR, bad)
        if self.topics.is_system_topic(h.topic):
            return Refusal(
                ResponseCode.SYSTEM_ERROR, f"The topic[{h.topic}] is conflict with system topic."
            )
        existed = self.topics.delete(h.topic)
        await self.deleter.delete_topic(h.topic)
        self.stats.items.on_topic_deleted(h.topic)
        if self.offsets.remove_topic(h.topic):
            await self.offsets.persist()
        if existed:
            await self.topics.persist()
        return await self._journaled()

    def all_topic_config(self) -> TopicConfigSerializeWrapper:
        return self.topics.snapshot()

    # ------------------------------------------------------------------ subscription groups

    async def update_group(self, sgc: SubscriptionGroupConfig) -> Done | Refusal:
        bad = check_group_name(sgc.groupName)
        if bad:
            return Refusal(ResponseCode.SYSTEM_ERROR, bad)
        if sgc.retryQueueNums < 0 or sgc.retryMaxTimes < -1:
            return Refusal(
                ResponseCode.SYSTEM_ERROR, "retryQueueNums must be >= 0 and retryMaxTimes >= -1"
            )
        old = self.groups.table.get(sgc.groupName)
        altered = alter_attributes(old.attributes if old else {}, sgc.attributes)
        if isinstance(altered, str):
            return Refusal(ResponseCode.INVALID_PARAMETER, altered)
        sgc.attributes = altered
        if self.groups.update(sgc):
            await self.groups.persist()
        return await self._journaled()

    def all_groups(self) -> SubscriptionGroupWrapper:
        return self.groups.snapshot()

    def group_config(
        self, h: GetSubscriptionGroupConfigRequestHeader
    ) -> SubscriptionGroupConfig | Refusal:
        sgc = self.groups.table.get(h.group)
        if sgc is None:
            return Refusal(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"The subscription group {h.group} not exist",
            )
        return sgc

    async def group_forbidden(self, h: UpdateGroupForbiddenRequestHeader) -> GroupForbidden:
        """UPDATE_AND_GET_GROUP_FORBIDDEN: set or clear the group's read-forbidden bit on the
        topic when ``readable`` is given (persisted before the answer), then answer it."""
        if h.readable is not None and self.groups.update_forbidden(
            h.group, h.topic, PERM_INDEX_READ, not h.readable
        ):
            await self.groups.persist()
        readable = not self.groups.is_forbidden(h.group, h.topic, PERM_INDEX_READ)
        return GroupForbidden(group=h.group, topic=h.topic, readable=readable)

    async def delete_group(self, h: DeleteSubscriptionGroupRequestHeader) -> Done | Refusal:
        self.stats.items.on_group_deleted(h.groupName)
        if self.groups.delete(h.groupName):
            await self.groups.persist()
        if h.cleanOffset and self.offsets.remove_group(h.groupName):
            await self.offsets.persist()
        return await self._journaled()

    async def _journaled(self) -> Done | Refusal:
        """After a change: wait until its metadata-journal records are acknowledged (on the
        SyncStateSet, like a sync send), so an answered change survives a failover."""
        if self.journal_settled is None:
            return DONE
        failed = await self.journal_settled()
        if failed is None:
            return DONE
        return Refusal(
            ResponseCode.SYSTEM_ERROR,
            f"applied on this broker, but its metadata journal record is not acknowledged "
            f"({failed}): a failover now may undo it; retry the command",
        )

    # ------------------------------------------------------------------ broker info

    def broker_config(self) -> str:
        """The broker's config as upstream's ``key=value`` lines (secrets masked)."""
        return mask_secrets(dump_config(self.config))

    # ------------------------------------------------------------------ offsets

    def _queue_refusal(self, queue_id: int) -> Refusal | None:
        if queue_id < 0:
            return Refusal(ResponseCode.INVALID_PARAMETER, f"queueId must be >= 0, got {queue_id}")
        return None

    def max_offset(self, h: GetMaxOffsetRequestHeader) -> int | Refusal:
        refusal = self._queue_refusal(h.queueId)
        if refusal is not None:
            return refusal
        return self.store.get_max_offset(h.topic, h.queueId)

    def min_offset(self, h: GetMinOffsetRequestHeader) -> int | Refusal:
        refusal = self._queue_refusal(h.queueId)
        if refusal is not None:
            return refusal
        return self.store.get_min_offset(h.topic, h.queueId)

    def search_offset(self, h: SearchOffsetRequestHeader) -> int | Refusal:
        refusal = self._queue_refusal(h.queueId)
        if refusal is not None:
            return refusal
        boundary = (h.boundaryType or "LOWER").upper()
        if boundary not in ("LOWER", "UPPER"):
            return Refusal(
                ResponseCode.INVALID_PARAMETER,
                f"boundaryType must be LOWER or UPPER, got {boundary}",
            )
        return self.store.search_offset_by_timestamp(
            h.topic,
            h.queueId,
            h.timestamp,
            boundary,  # type: ignore[arg-type]
        )

    def earliest_store_time(self, h: GetEarliestMsgStoretimeRequestHeader) -> int | Refusal:
        ts = self.store.get_earliest_msg_store_time(h.topic, h.queueId)
        if ts is None:
            return Refusal(
                ResponseCode.SYSTEM_ERROR, f"queue {h.topic}:{h.queueId} holds no message"
            )
        return ts

    # ------------------------------------------------------------------ messages

    def view_message(self, h: ViewMessageRequestHeader) -> bytes | Refusal:
        """The stored record at the CommitLog offset (a whole, CRC-checked message)."""
        record = None
        if self.store.look_message_by_offset(h.offset) is not None:
            record = self.store.read_record(h.offset)
        if record is None:
            return Refusal(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}"
            )
        return record

    def query_message(
        self, h: QueryMessageRequestHeader, *, by_uniq_key: bool
    ) -> QueriedMessages | Refusal:
        """By KEYS (within the time range) or, with ``by_uniq_key``, by UNIQ_KEY."""
        if h.maxNum <= 0:
            return Refusal(ResponseCode.INVALID_PARAMETER, f"maxNum must be > 0, got {h.maxNum}")
        store = self.store
        max_num = min(h.maxNum, MAX_QUERY_MESSAGES)
        if by_uniq_key:
            msgs = store.query_by_uniq_key(h.topic, h.key, max_num)
        else:
            end = h.endTimestamp if h.endTimestamp > 0 else 2**63 - 1
            msgs = store.query_by_key(h.topic, h.key, max_num, h.beginTimestamp, end)
        records = [store.read_record(m.commitlog_offset) for m in msgs]
        return QueriedMessages(
            [r for r in records if r is not None],
            index_last_update_timestamp=self.now_ms(),
            index_last_update_phy_offset=store.commitlog_max_offset(),
        )
