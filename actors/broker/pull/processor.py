"""Pulling: read a queue, long-poll when it is empty (upstream PullMessageProcessor).

Checks, in upstream's order: broker readable, subscription group (auto-created) and
consumeEnable, topic exists and readable, queueId in range, then the subscription: parsed from
the request when sysFlag has SUBSCRIPTION, otherwise the group's heartbeat subscription
(SUBSCRIPTION_NOT_EXIST / SUBSCRIPTION_NOT_LATEST like upstream). A failed check is a
`Refusal`. The store answers with whole stored records; the outcome `Pulled` carries them with
the `PullStatus` the consumer acts on (`pull_status`): FOUND; NO_MATCHED_MESSAGE and
MESSAGE_WAS_REMOVING -> NO_MATCHED_MSG (retry at once); OFFSET_OVERFLOW_ONE and an empty queue
pulled at 0 -> NO_NEW_MSG; OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL and an empty queue pulled
beyond 0 -> OFFSET_ILLEGAL.

NO_NEW_MSG with the SUSPEND flag parks the request in the PullRequestHoldService for
suspendTimeoutMillis (shortPollingTimeMills when longPollingEnable=false) and returns None;
the outcome goes to the request's `Waiter` (dispatch/held_reply.py) when a message arrives on
the queue or at the deadline. The commit offset (sysFlag COMMIT_OFFSET) is stored once, on the
first execution, like upstream. Reads go through the `StoreView`; a big one runs off the event loop.

Replicas (H7). A broker that is not master right now (a slave, or a controller-mode broker
whose role is not known yet) never answers OFFSET_ILLEGAL: its queues may lag its master's, so
an offset beyond them is "not yet", not "moved" (upstream offsetCheckInSlave=false); it answers
NO_MATCHED_MSG (retry at once) instead, and a consumer never resets its offset because it read
from a replica. suggestWhichBrokerId: a replica always suggests the master (0), so consumers
go back to the master once it is in the route again; a master suggests
whichBrokerWhenConsumeSlowly when slaveReadEnable is on and the consumer reads records further
behind the CommitLog end than accessMessageInMemoryMaxRatio percent of the machine's memory
(upstream's rule: such reads would come from disk, a slave can serve them).

Damaged records (issue 7). The store checks every record it serves that this process did not
write or check itself (checkCRCOnPull); one that fails is never sent: the pull is answered
SYSTEM_ERROR (what upstream answers when its store cannot read) with a remark naming the segment
file and offset and what to do, and an ERROR line (events.CommitlogRecordCorrupt.NAME) is logged.
The consumer retries the same offset, so it stops at the damage instead of skipping messages.

SQL92 (M8). The subscription becomes a `MessageSelector` (dispatch/message_filter.py): tag codes
for TAG, or a compiled selector judged on each record's properties (`read_selected`), with
upstream's refusals (SUBSCRIPTION_PARSE_FAILED, FILTER_DATA_NOT_EXIST / _NOT_LATEST, SYSTEM_ERROR
while enablePropertyFilter is off); a held pull keeps its selector. docs/sql92-filter.md.

Collaborators: the topic and group tables, the consumer manager (heartbeat subscriptions), the
offset table, the store view, the hold service, stats, a frozen `PullConfig`, ``is_master``
(is this broker the master now: roles/role_service.py) and the `FilterSelectors`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import assert_never

import attrs
import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.clients.client_manager import ConsumerManager
from rocketrio.actors.broker.dispatch.filtered_read import read_selected
from rocketrio.actors.broker.dispatch.long_poll import Held, Waiter
from rocketrio.actors.broker.dispatch.message_filter import (
    PARSE_FAILED,
    FilterSelectors,
    MessageSelector,
    no_filters,
)
from rocketrio.actors.broker.dispatch.outcomes import (
    Pulled,
    PullOutcome,
    PullStatus,
    Refusal,
)
from rocketrio.actors.broker.pull.hold import PullRequestHoldService, Suspended
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.subscription_group import PERM_INDEX_READ
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.broker.tables.topic_config import check_group_name
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import PERM_READ, SubscriptionData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.filter import SubscriptionParseError, build_subscription
from rocketrio.protocol.headers import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    PullMessageRequestHeader,
)
from rocketrio.protocol.message import PHY_POS_POSITION
from rocketrio.storage.message_store import GetMessageStatus, GetResult, RecordCorrupt

# the live keys (UPDATE_BROKER_CONFIG) the pull path reads, through `PullConfig`
PULL_KEYS = frozenset(
    {
        "longPollingEnable",
        "shortPollingTimeMills",
        "pullSuspendMaxTimeMillis",
        "maxTransferCountOnMessageInMemory",
        "maxTransferBytesOnMessageInMemory",
        "slaveReadEnable",
        "accessMessageInMemoryMaxRatio",
        "whichBrokerWhenConsumeSlowly",
    }
)
_S = GetMessageStatus
_P = PullStatus
_STATUS_BY_STORE = {
    _S.FOUND: _P.FOUND,
    _S.NO_MATCHED_MESSAGE: _P.NO_MATCHED_MSG,
    _S.MESSAGE_WAS_REMOVING: _P.NO_MATCHED_MSG,
    _S.OFFSET_FOUND_NULL: _P.NO_NEW_MSG,
    _S.OFFSET_OVERFLOW_ONE: _P.NO_NEW_MSG,
    _S.OFFSET_OVERFLOW_BADLY: _P.OFFSET_ILLEGAL,
    _S.OFFSET_TOO_SMALL: _P.OFFSET_ILLEGAL,
}
_EMPTY_QUEUE = (_S.NO_MESSAGE_IN_QUEUE, _S.NO_MATCHED_LOGIC_QUEUE)


def pull_status(status: GetMessageStatus, request_offset: int) -> PullStatus:
    """What a store answer means for the consumer (see the module docstring)."""
    if status is _S.FOUND:  # the common case, without hashing the enum
        return _P.FOUND
    if status in _EMPTY_QUEUE:
        return _P.OFFSET_ILLEGAL if request_offset else _P.NO_NEW_MSG
    return _STATUS_BY_STORE[status]


@attrs.frozen
class PullConfig:
    """The broker config values the pull path reads (rebuilt by `reconfigure`)."""

    broker_permission: int
    broker_ip: str
    long_polling_enable: bool
    short_polling_time_ms: int
    max_transfer_count: int
    max_transfer_bytes: int
    # slaveReadEnable: a master suggests this replica to consumers this far behind (bytes)
    slave_read_lag_bytes: int | None = None
    slave_read_broker_id: int = 1
    max_suspend_ms: int = 60_000  # pullSuspendMaxTimeMillis: no pull is held longer

    @classmethod
    def of(cls, c: BrokerConfig) -> PullConfig:
        lag = None
        if c.slaveReadEnable:
            lag = _physical_memory() * c.accessMessageInMemoryMaxRatio // 100
        return cls(
            c.brokerPermission,
            c.brokerIP1,
            c.longPollingEnable,
            c.shortPollingTimeMills,
            c.maxTransferCountOnMessageInMemory,
            c.maxTransferBytesOnMessageInMemory,
            lag,
            c.whichBrokerWhenConsumeSlowly,
            c.pullSuspendMaxTimeMillis,
        )


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


_PHY_OFFSET = struct.Struct(">q")


class PullMessageProcessor:
    def __init__(
        self,
        config: PullConfig,
        *,
        topics: TopicTable,
        groups: GroupTable,
        consumers: ConsumerManager,
        offsets: OffsetTable,
        store: StoreView,
        hold: PullRequestHoldService,
        stats: BrokerStats,
        is_master: Callable[[], bool] = lambda: True,
        filters: FilterSelectors | None = None,
    ) -> None:
        self.config = config
        self.filters = filters if filters is not None else no_filters()
        self.is_master = is_master  # a replica lags its master: see the module docstring
        self.topics = topics
        self.groups = groups
        self.consumers = consumers
        self.offsets = offsets
        self.store = store
        self.hold = hold
        self.stats = stats
        self.log = structlog.get_logger("pull")

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        """UPDATE_BROKER_CONFIG: the next pull reads the rebuilt `PullConfig`."""
        if changed & (PULL_KEYS | {"brokerPermission"}):
            self.config = PullConfig.of(config)

    async def pull(self, h: PullMessageRequestHeader, reply: Waiter) -> PullOutcome | None:
        """The outcome now, or None when the pull was held (``reply`` gets it later)."""
        sel = self._check(h)
        if isinstance(sel, Refusal):
            return sel
        tag_codes = sel.tag_codes
        max_count, max_bytes = self._limits(h)
        store = self.store
        started = trio.current_time()
        try:
            if sel.keep is not None:  # SQL92: judged on each record's properties
                result = await read_selected(
                    store, h.topic, h.queueId, h.queueOffset, max_count, max_bytes, sel
                )
            elif max_bytes <= store.off_loop_read_bytes:  # small: inline, no coroutine
                result = store.get_messages(
                    h.topic, h.queueId, h.queueOffset, max_count, max_bytes, tag_codes
                )
            else:
                result = await store.read_messages(
                    h.topic, h.queueId, h.queueOffset, max_count, max_bytes, tag_codes
                )
        except RecordCorrupt as e:
            return self._corrupt(h, h.queueOffset, e)
        self._count(h, result, started)
        status = pull_status(result.status, h.queueOffset)
        if h.sysFlag & PULL_FLAG_COMMIT_OFFSET and h.commitOffset >= 0:
            self.offsets.commit(h.consumerGroup, h.topic, h.queueId, h.commitOffset)
        if status is _P.FOUND:
            self.offsets.commit_pull(h.consumerGroup, h.topic, h.queueId, result.next_begin_offset)
        if status is _P.NO_NEW_MSG and h.sysFlag & PULL_FLAG_SUSPEND:
            timeout_ms = min(h.suspendTimeoutMillis, self.config.max_suspend_ms)
            if not self.config.long_polling_enable:
                timeout_ms = self.config.short_polling_time_ms
            deadline = trio.current_time() + max(0, timeout_ms) / 1000
            held = Held(
                reply,
                (h, sel),
                h.topic,
                ((h.topic, h.queueId),),
                deadline,
                self._rerun,
                _pull_failed,
                offset=h.queueOffset,
            )
            match self.hold.suspend(held):
                case Suspended.HELD:
                    return None
                case Suspended.NOT_HOLDING:
                    pass
                case Refusal() as refusal:
                    return refusal
                case unreachable:
                    assert_never(unreachable)
        return self._pulled(result, status)

    def _check(self, h: PullMessageRequestHeader) -> MessageSelector | Refusal:
        """Everything before the read; what the read keeps, or the refusal."""
        sub = self._subscription(h)
        if isinstance(sub, Refusal):
            return sub
        from_request = bool(h.sysFlag & PULL_FLAG_SUBSCRIPTION)
        return self.filters.for_pull(sub, h.consumerGroup, h.subVersion, from_request)

    def _subscription(self, h: PullMessageRequestHeader) -> SubscriptionData | Refusal:
        """The checks before the read; the subscription to filter with, or the refusal."""
        if not self.config.broker_permission & PERM_READ:
            return Refusal(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_ip}] pulling message is forbidden",
            )
        bad = check_group_name(h.consumerGroup)
        if bad:
            return Refusal(ResponseCode.INVALID_PARAMETER, bad)
        sgc = self.groups.find_group(h.consumerGroup)
        if sgc is None:
            return Refusal(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{h.consumerGroup}] does not exist "
                "(autoCreateSubscriptionGroup=false): create it first",
            )
        if not sgc.consumeEnable:
            return Refusal(
                ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumerGroup}"
            )
        tc = self.topics.select(h.topic)
        if tc is None:
            return Refusal(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!"
            )
        if not tc.perm & PERM_READ:
            return Refusal(
                ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden"
            )
        if not 0 <= h.queueId < tc.readQueueNums:
            return Refusal(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{h.queueId}] is illegal, topic:[{h.topic}] "
                f"topicConfig.readQueueNums:[{tc.readQueueNums}]",
            )
        if h.sysFlag & PULL_FLAG_SUBSCRIPTION:
            try:
                return build_subscription(h.topic, h.subscription, h.expressionType, h.subVersion)
            except SubscriptionParseError as e:
                return Refusal(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"{PARSE_FAILED}: {e}")
        group = self.consumers.get(h.consumerGroup)
        if group is None:
            return Refusal(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist: group {h.consumerGroup} has sent no "
                "heartbeat to this broker (send HEART_BEAT first or set the SUBSCRIPTION flag)",
            )
        if not sgc.consumeBroadcastEnable and group.message_model == "BROADCASTING":
            return Refusal(
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{h.consumerGroup}] can not consume by broadcast way",
            )
        if self.groups.is_forbidden(sgc.groupName, h.topic, PERM_INDEX_READ):
            return Refusal(
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{h.consumerGroup}] is forbidden for topic[{h.topic}]",
            )
        sub = group.find_subscription(h.topic)
        if sub is None:
            return Refusal(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist: group {h.consumerGroup} does not "
                f"subscribe to {h.topic}",
            )
        if sub.subVersion < h.subVersion:
            return Refusal(
                ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        return sub

    def _corrupt(self, h: PullMessageRequestHeader, offset: int, e: RecordCorrupt) -> Refusal:
        """A record of this pull failed its check: log it, answer SYSTEM_ERROR, send nothing."""
        events.emit(
            self.log,
            events.CommitlogRecordCorrupt(
                segment=e.segment,
                offset=e.offset,
                reason=e.reason,
                topic=h.topic,
                queue_id=h.queueId,
                queue_offset=offset,
                group=h.consumerGroup,
            ),
        )
        return Refusal(
            ResponseCode.SYSTEM_ERROR,
            f"the stored message at commitlog offset {e.offset} ({e.segment}) is damaged "
            f"({e.reason}) and was not delivered; topic {h.topic} queue {h.queueId} cannot be "
            f"read past queue offset {offset} on this broker. Operator: run `rocketrio admin "
            "checkStore --store <storePathRootDir>` with the broker stopped or running, then "
            "rebuild this store from a healthy replica or a backup",
        )

    def _limits(self, h: PullMessageRequestHeader) -> tuple[int, int]:
        """(max messages, max bytes) of one pull: the request's, capped by the broker's."""
        c = self.config
        max_count = max(1, min(h.maxMsgNums, c.max_transfer_count))
        max_bytes = c.max_transfer_bytes
        if h.maxMsgBytes is not None and h.maxMsgBytes > 0:
            max_bytes = min(max_bytes, h.maxMsgBytes)
        return max_count, max_bytes

    def _count(self, h: PullMessageRequestHeader, result: GetResult, started: float) -> None:
        """One store read (found or missed) for the statistics, with its time."""
        n = result.message_count
        self.stats.on_pull(
            h.topic,
            h.consumerGroup,
            n,
            sum(map(len, result.buffers)) if n else 0,
            int((trio.current_time() - started) * 1000),
        )

    def _pulled(self, result: GetResult, status: PullStatus) -> Pulled:
        master = self.is_master()
        if status is _P.FOUND:
            if master and self.config.slave_read_lag_bytes is not None:
                last = _PHY_OFFSET.unpack_from(result.buffers[-1], PHY_POS_POSITION)[0]
                behind = self.store.commitlog_max_offset() - last
                if behind > self.config.slave_read_lag_bytes:
                    return Pulled(status, result, self.config.slave_read_broker_id)
        elif status is _P.OFFSET_ILLEGAL and not master:
            status = _P.NO_MATCHED_MSG  # a replica lags: "not yet", never "moved"
        return Pulled(status, result)

    async def _rerun(self, held: Held, final: bool) -> PullOutcome | None:
        """Re-run a held pull (the hold service's callback); None keeps it held."""
        h, sel = held.request
        max_count, max_bytes = self._limits(h)
        started = trio.current_time()
        try:
            result = await read_selected(
                self.store, h.topic, h.queueId, held.offset, max_count, max_bytes, sel
            )
        except RecordCorrupt as e:
            return self._corrupt(h, held.offset, e)
        self._count(h, result, started)
        status = pull_status(result.status, held.offset)
        if not final and status is not _P.FOUND:
            if result.status == _S.NO_MATCHED_MESSAGE:
                # only messages the filter rejects arrived: skip them and keep waiting
                held.offset = result.next_begin_offset
            return None
        if status is _P.FOUND:
            self.offsets.commit_pull(h.consumerGroup, h.topic, h.queueId, result.next_begin_offset)
        return self._pulled(result, status)


def _pull_failed(e: Exception) -> Refusal:
    """A held pull whose re-run raised: answered SYSTEM_ERROR."""
    return Refusal(ResponseCode.SYSTEM_ERROR, f"pull failed: {type(e).__name__}: {e}")
