"""The revive task (upstream PopReviveService): the shell of pop_revive.py, master only.

Every round, on the master only (a slave, or a broker without a role, keeps no state and
writes nothing: the seed's "secondary messages are the master's job"):

1. read each revive queue of ``rmq_sys_REVIVE_LOG_<cluster>`` from where it stopped and feed
   the CK / ACK records to the queue's `ReviveCore`; the records this broker's own POP and
   ACK paths stored since the last round are fed as they were given (`written`, from
   revive_feed.py: no read and no decode), the store read only for the rest;
2. ask each core what is due at ``now_ms()``; for each due CK re-read the unacknowledged
   messages and put them (one store request per CK, awaited) to the group's pop retry topic
   ``%RETRY%<group>_<topic>`` (queue 0, reconsumeTimes + 1, 1ST_POP_TIME kept or set to the
   CK's pop time), or to ``%DLQ%<group>`` once reconsumeTimes reached the group's
   retryMaxTimes (the rule of CONSUMER_SEND_MSG_BACK); a CK is forgotten only once its put
   is as durable as an acknowledged send (store/confirmed_put.py: one only the master holds
   waits for confirmOffset), so a failed put is tried again next round;
3. commit each queue's revive offset (the oldest pending CK) as the consumer offset of
   ``CID_RMQ_SYS_REVIVE_GROUP`` on the revive queue, persisted with consumerOffset.json.

The task then sleeps until the earliest pending revive time or reviveInterval, whichever comes
first, so a message becomes visible again right at popTime + invisibleTime when its CK was read
by then (a CK written less than reviveInterval before its revive time waits for the next
scan). Reads all happen just before the decision with no await in between that could let an
ACK the store has not answered yet be lost: an ACK stored before the round is always seen.

On a classic slave acting for its dead master (RIP-32) the rounds run too, over the revive log
it replicated, and the re-puts go through ``escape()`` to a live master of another group (the
slave's store takes no writes); a failed escape keeps the CK, tried again next round.

A CK that a slave acting for its dead master escaped here (pinned: failover/pop_escape.py)
names that group as its brokerName; its messages are read from that group (`read_foreign`: a
pull from its routed id 0) and revived into this broker's retry topic; a failed read keeps the
CK for the next round.

When the broker stops being master the cores are dropped; a broker that becomes master starts
again from the persisted revive offsets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, assert_never

import attrs
import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.pop.revive import Revival, ReviveCore
from rocketrio.actors.broker.pop.revive_log import (
    AckRecord,
    CkRecord,
    Host,
    OtherRecord,
    read_record,
)
from rocketrio.actors.broker.store.confirmed_put import ConfirmingWriter, put_confirmed
from rocketrio.actors.broker.store.escape_bridge import EscapeBridge, ForeignRead
from rocketrio.actors.broker.store.queue_reader import QueueReader, QueueReadUnavailable
from rocketrio.actors.broker.tables.tables import GroupTable, OffsetTable, TopicTable
from rocketrio.actors.broker.tables.topic_config import (
    DLQ_NUMS_PER_GROUP,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
)
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE, TopicConfig
from rocketrio.protocol.message import (
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    PROPERTY_DLQ_ORIGIN_TOPIC,
    MessageDecodeError,
    decode_stored,
    parse_host,
)
from rocketrio.protocol.pop_checkpoint import AckMsg, PopCheckPoint
from rocketrio.protocol.pop_extra_info import (
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    REVIVE_GROUP,
    pop_retry_topic,
    revive_topic,
)
from rocketrio.protocol.static_topic import is_logic_broker_name
from rocketrio.storage.message_store import GetMessageStatus, MessageToStore

_RW = PERM_READ | PERM_WRITE
SCAN_BATCH = 32
MAX_SCAN_BATCHES = 1024  # per queue and round: a long backlog is read over several rounds
_S = GetMessageStatus


@attrs.frozen
class ReviveConfig:
    cluster: str
    revive_queue_num: int = 8
    revive_interval_ms: int = 1000
    enable_retry_topic_v2: bool = False
    max_transfer_bytes: int = 256 * 1024
    broker_name: str = ""

    @property
    def revive_topic(self) -> str:
        return revive_topic(self.cluster)

    @classmethod
    def of(cls, c: BrokerConfig) -> ReviveConfig:
        return cls(
            c.brokerClusterName,
            c.reviveQueueNum,
            c.reviveInterval,
            c.enableRetryTopicV2,
            c.maxTransferBytesOnMessageInMemory,
            c.brokerName,
        )


class PopReviveService:
    def __init__(
        self,
        config: ReviveConfig,
        *,
        topics: TopicTable,
        groups: GroupTable,
        offsets: OffsetTable,
        store: QueueReader,
        writer: ConfirmingWriter,
        is_master: Callable[[], bool],
        now_ms: Callable[[], int],
        store_host: Host,
        log: Any = None,
        escape: Callable[[], EscapeBridge | None] = lambda: None,
        read_foreign: ForeignRead | None = None,
    ) -> None:
        self.config = config
        self.read_foreign = read_foreign
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.store = store
        self.writer = writer
        self.is_master = is_master
        self.now_ms = now_ms
        self.store_host = store_host
        self.escape = escape
        self.log = log or structlog.get_logger("pop_revive")
        self.cores: list[ReviveCore] | None = None
        self.rounds = 0

    def ensure_revive_topic(self) -> None:
        """The revive topic with reviveQueueNum queues (upstream creates it at start)."""
        c = self.config
        tc = self.topics.select(c.revive_topic)
        if tc is None or tc.readQueueNums < c.revive_queue_num:
            n = c.revive_queue_num
            self.topics.update(TopicConfig(c.revive_topic, n, n, _RW))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.ensure_revive_topic()
        task_status.started()
        while True:
            await trio.sleep(await self.revive_round())

    # ------------------------------------------------------------------ one round

    async def revive_round(self) -> float:
        """Scan, revive, commit; returns how long to sleep (seconds)."""
        interval = self.config.revive_interval_ms / 1000
        if not self.is_master():
            self.cores = None
            return interval
        self.rounds += 1
        cores = self.cores
        if cores is None:
            topic = self.config.revive_topic
            cores = self.cores = [
                ReviveCore(q, max(0, self.offsets.query(REVIVE_GROUP, topic, q)))
                for q in range(self.config.revive_queue_num)
            ]
        for core in cores:
            await self._scan(core)
        now = self.now_ms()
        for core in cores:
            for revival in core.due(now):
                try:
                    revived = await self._revive(revival)
                except QueueReadUnavailable:
                    # its messages could not be read (another broker's: a static topic's older
                    # generation, or an acting group now gone): that CK is tried next round, the
                    # others are not held up behind it
                    continue
                if not revived:
                    break  # the store refused: the rest waits for the next round
                core.revived(revival.key)
            topic = self.config.revive_topic
            offset = core.revive_offset()
            if offset != max(0, self.offsets.query(REVIVE_GROUP, topic, core.queue_id)):
                # only a move: an idle broker's consumerOffset.json gains no revive entries
                self.offsets.commit(REVIVE_GROUP, topic, core.queue_id, offset)
        dues = [d for d in (c.next_due_ms() for c in cores) if d is not None]
        if not dues:
            return interval
        wait = (min(dues) - self.now_ms()) / 1000
        return interval if wait <= 0 else min(interval, wait)

    def written(self, queue_id: int, offset: int, record: PopCheckPoint | AckMsg) -> None:
        """``record`` was stored at ``offset`` of revive queue ``queue_id`` by this broker: fed
        at the next round without reading it back (`ReviveCore.written`); nothing while this
        broker keeps no revive state (not master, or before its first round)."""
        cores = self.cores
        if cores is not None and 0 <= queue_id < len(cores):
            cores[queue_id].written(offset, record)

    async def _scan(self, core: ReviveCore) -> None:
        core.catch_up()  # what this broker wrote, in order; the store for anything else
        topic = self.config.revive_topic
        for _ in range(MAX_SCAN_BATCHES):
            result = await self.store.read_messages(
                topic, core.queue_id, core.read_offset, SCAN_BATCH, self.config.max_transfer_bytes
            )
            if result.status in (_S.OFFSET_TOO_SMALL, _S.OFFSET_OVERFLOW_BADLY):
                core.read_offset = result.next_begin_offset  # the queue was cleaned or reset
                continue
            for buf in result.buffers:
                self._feed(core, buf)
            core.advance_read(result.next_begin_offset)
            if not result.message_count:
                return

    def _feed(self, core: ReviveCore, buf: bytes) -> None:
        try:
            msg, _ = decode_stored(buf)
        except MessageDecodeError as e:
            self._skipped(core, core.read_offset, str(e))
            return
        record = read_record(msg)
        match record:
            case CkRecord():
                core.on_ck(record.ck, record.offset)
            case AckRecord():
                core.on_ack(record.ack)
            case OtherRecord():
                self._skipped(core, record.offset, record.why)
            case _:
                assert_never(record)

    def _skipped(self, core: ReviveCore, offset: int, why: str) -> None:
        events.emit(
            self.log,
            events.PopReviveRecordSkipped(
                topic=self.config.revive_topic,
                queue_id=core.queue_id,
                queue_offset=offset,
                why=why,
            ),
        )

    # ------------------------------------------------------------------ re-put

    def _target(self, ck_topic: str, group: str, reconsume_times: int) -> tuple[str, bool]:
        """(topic to put to, is it the DLQ) for a message consumed ``reconsume_times`` times."""
        sgc = self.groups.find_group(group)
        max_times = 16 if sgc is None else sgc.retryMaxTimes
        if reconsume_times >= max_times:
            topic = dlq_topic(group)
            self.topics.create_in_send_back(topic, DLQ_NUMS_PER_GROUP, _RW)
            return topic, True
        if ck_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            topic = ck_topic
        else:
            topic = pop_retry_topic(ck_topic, group, self.config.enable_retry_topic_v2)
        self.topics.create_in_send_back(topic, 1, _RW)
        return topic, False

    async def _revive(self, r: Revival) -> bool:
        """Put the CK's unacknowledged messages back; True once stored (or nothing to put)."""
        ck = r.ck
        msgs: list[MessageToStore] = []
        targets: Counter[str] = Counter()
        for offset in r.offsets:
            buffers = await self._read(ck, offset)
            if not buffers:
                continue  # gone from the store (retention): nothing to deliver again
            msg, _ = decode_stored(buffers[0])
            topic, to_dlq = self._target(ck.topic, ck.cid, msg.reconsume_times)
            props = dict(msg.properties)
            props.pop(PROPERTY_POP_CK, None)
            if msg.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in props:
                props[PROPERTY_FIRST_POP_TIME] = str(ck.pop_time)
            if to_dlq:
                props.setdefault(PROPERTY_DLQ_ORIGIN_TOPIC, ck.topic)
                props.setdefault(PROPERTY_DLQ_ORIGIN_MESSAGE_ID, msg.msg_id)
            msgs.append(
                MessageToStore(
                    topic=topic,
                    queue_id=0,
                    body=msg.body,
                    flag=msg.flag,
                    properties=props,
                    sys_flag=msg.sys_flag,
                    born_timestamp=msg.born_timestamp,
                    born_host=parse_host(msg.born_host),
                    reconsume_times=msg.reconsume_times + 1,
                )
            )
            targets[topic] += 1
        if not msgs:
            return True
        bridge = self.escape()
        if bridge is not None:
            if await bridge.put_to_live_master(msgs) is not None:
                return False
        elif isinstance(await put_confirmed(self.writer, msgs, give_up=self._giving_up), str):
            return False  # not as durable as an ack: the revive offset stays (confirmed_put.py)
        for topic, n in targets.items():
            events.emit(
                self.log,
                events.PopRevived(
                    topic=ck.topic,
                    group=ck.cid,
                    queue_id=ck.queue_id,
                    revived_count=n,
                    to_topic=topic,
                ),
            )
        return True

    def _giving_up(self) -> bool:
        return not self.is_master()

    async def _read(self, ck: PopCheckPoint, offset: int) -> list[bytes]:
        """The popped message: from this store, or, for a CK an acting slave of another group
        escaped here (its brokerName is that group's), from that group (module docstring)."""
        max_bytes = self.config.max_transfer_bytes
        bn = ck.broker_name
        if self.read_foreign is not None and bn != self.config.broker_name:
            if bn and not is_logic_broker_name(bn):
                return await self.read_foreign(bn, ck.topic, ck.queue_id, offset, max_bytes)
        result = await self.store.read_messages(ck.topic, ck.queue_id, offset, 1, max_bytes)
        return result.buffers

    def apply_ack(self, revive_qid: int, ack: AckMsg) -> bool:
        """An ACK taken by an acting slave, which cannot write it (RIP-32): applied to the
        pending CK in memory; True when it acknowledged something. Lost if this broker stops
        before the CK is done (the message is then revived: at-least-once); once the CK is done
        the revive offset moves past it and a returning master takes that offset in pre-online."""
        cores = self.cores
        if cores is None or not 0 <= revive_qid < len(cores):
            return False
        match = cores[revive_qid].on_ack(ack)
        return match.matched > 0 or match.done

    # ------------------------------------------------------------------ views

    def inflight(self, group: str) -> dict[tuple[str, int], int] | None:
        """Unacknowledged popped messages of ``group`` per (topic, queueId) as of the last
        round; None when this broker does not run the revive service (not master)."""
        if self.cores is None:
            return None
        total: Counter[tuple[str, str, int]] = Counter()
        for core in self.cores:
            total.update(core.inflight())
        return {(t, q): n for (g, t, q), n in total.items() if g == group}
