"""Sending: one message, a batch, and CONSUMER_SEND_MSG_BACK (upstream SendMessageProcessor).

The send path is the broker's hot path: check topic / permission / queue / size, stamp
UNIQ_KEY (when the client did not) and CLUSTER, hand the message(s) to the store writer without
waiting and return None; the writer's callback delivers a typed outcome (`SendStored` /
`PutFailed`) to the caller's ``on_done`` once the data is written (and fsynced with
SYNC_FLUSH). A check that fails returns a `Refusal` at once. No per-message logging, no task
per message; when the store inbox is full the send awaits (backpressure reaches the caller and
so the producer). The request arrives as the protocol's typed header (the V1
`SendMessageRequestHeader`, which the gRPC proxy can build too), never as a wire frame.

Collaborators: the topic and group tables, the store writer (puts) and the store view (the
send-back look-up), the rebalance lock manager (orderly consumers go straight to the DLQ), the
UNIQ_KEY generator, stats, the write gate (controller mode: a slave refuses writes), `SendConfig`.

Response ids follow upstream: the outcome's ``msg_id`` is the offset message id (store host +
commitlog offset; comma-joined for a batch) and ``uniq_key`` the UNIQ_KEY. Clients report the
UNIQ_KEY as SendResult.msgId and the offset id as offsetMsgId.

Retry and DLQ: a producer-side send to %RETRY%<group> goes to %DLQ%<group> once reconsumeTimes
exceeds maxReconsumeTimes; CONSUMER_SEND_MSG_BACK re-reads the consumed message by its
commitlog offset and writes it to %RETRY%<group> (reconsumeTimes + 1, RETRY_TOPIC and
ORIGIN_MESSAGE_ID set) or, from maxReconsumeTimes on or with delayLevel < 0, to
%DLQ%<group>.

Transactions: a send with TRAN_MSG=true is stored as a half message in RMQ_SYS_TRANS_HALF_TOPIC
(transaction_policy.half_message); the answer names the real queue and the half's queue offset,
which END_TRANSACTION later quotes as tranStateTableOffset.

Delay and timer messages (schedule_policy.py decides, schedule_service.py re-puts): a send with
DELAY=n>0 is stored in SCHEDULE_TOPIC_XXXX queue n-1 (n clamped to the highest level) with
REAL_TOPIC / REAL_QID; one with TIMER_DELAY_SEC / TIMER_DELAY_MS / TIMER_DELIVER_MS in the
future goes to rmq_sys_wheel_timer with TIMER_OUT_MS (refused beyond timerMaxDelaySec). A
send-back that is not for the DLQ waits at level delayLevel, or 3 + reconsumeTimes when the
consumer sent 0, before it reaches %RETRY%<group>.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Protocol

import attrs
import structlog
import trio

from rocketrio.actors.broker.boot.config import BrokerConfig
from rocketrio.actors.broker.clients.lock_manager import RebalanceLockManager
from rocketrio.actors.broker.dispatch.answers import BornHost, host_tuple
from rocketrio.actors.broker.dispatch.outcomes import (
    SENT_BACK,
    PutFailed,
    PutStatus,
    Refusal,
    SendBackOutcome,
    SentBack,
)
from rocketrio.actors.broker.schedule.policy import schedule_queue, send_back_level
from rocketrio.actors.broker.send.completions import (
    DirectAnswer,
    OnSent,
    PendingSend,
    batch_done,
    is_stored,
)
from rocketrio.actors.broker.send.config import SEND_KEYS, SendConfig
from rocketrio.actors.broker.send.message_props import (
    TIMER_KEYS,
    delay_route,
    prop_value,
    stamp_props,
)
from rocketrio.actors.broker.stats.broker_stats import BrokerStats
from rocketrio.actors.broker.store.messages import (
    PutBatchBody,
    PutCallback,
    StoreWriter,
)
from rocketrio.actors.broker.store.view import StoreView
from rocketrio.actors.broker.tables.tables import GroupTable, TopicTable
from rocketrio.actors.broker.tables.topic_config import (
    DLQ_GROUP_TOPIC_PREFIX,
    DLQ_NUMS_PER_GROUP,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    TOPIC_MAX_LENGTH,
    dlq_topic,
    retry_topic,
)
from rocketrio.actors.broker.transaction.policy import half_message
from rocketrio.actors.kernel.clock import wallclock_ms
from rocketrio.actors.kernel.runtime import ActorStopped
from rocketrio.actors.observe import events
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE, TopicConfig, perm_to_string
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.headers import ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader
from rocketrio.protocol.message import (
    MULTI_TAGS_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    UNIQ_KEY,
    decode_properties,
)
from rocketrio.storage.message_store import (
    SCHEDULE_TOPIC,
    MessageToStore,
    PutResult,
)

_PREPARED_TAG = PROPERTY_TRANSACTION_PREPARED + "\x01"
_PUT_OK = PutStatus.PUT_OK
_RW = PERM_READ | PERM_WRITE
_RETRY = RETRY_GROUP_TOPIC_PREFIX


@attrs.frozen(slots=True)
class BlockedSend:
    """A send the store's inbox had no room for: ``await processor.put_blocked(it)``."""

    msgs: list[MessageToStore]
    done: PutCallback


_STORE_STOPPED = Refusal(ResponseCode.SERVICE_NOT_AVAILABLE, "the message store is stopped")

# a send's completion: called once, from the store actor's turn
OnSentBack = Callable[[SendBackOutcome], None]


class WriteGate(Protocol):
    """Whether this broker takes writes now (controller mode: only the master does)."""

    def write_refusal(self) -> Refusal | None: ...


class SendMessageProcessor:
    def __init__(
        self,
        config: SendConfig,
        *,
        topics: TopicTable,
        groups: GroupTable,
        writer: StoreWriter,
        reader: StoreView,
        locks: RebalanceLockManager,
        new_uniq_key: Callable[[], str],
        stats: BrokerStats,
        write_gate: WriteGate | None = None,
        rng: random.Random | None = None,
        now_ms: Callable[[], int] = wallclock_ms,
    ) -> None:
        self.config = config
        self.now_ms = now_ms  # timer sends: TIMER_DELAY_SEC / _MS count from the broker's now
        self.topics = topics
        self.groups = groups
        self.writer = writer
        self.reader = reader
        self.locks = locks
        self.new_uniq_key = new_uniq_key
        self.stats = stats
        self.write_gate = write_gate  # None: always writable (not controller mode)
        self.rng = rng or random.Random()
        self.log = structlog.get_logger("broker").bind(broker=config.broker_name)
        self._cluster_prop = f"{PROPERTY_CLUSTER}\x01{config.cluster_name}\x02"
        self._rr = 0
        # a half's store callback wrapped (the broker wires the transaction's half cache)
        self.half_stored: Callable[[MessageToStore, PutCallback], PutCallback] | None = None

    def reconfigure(self, config: BrokerConfig, changed: frozenset[str]) -> None:
        """UPDATE_BROKER_CONFIG: the next send reads the rebuilt `SendConfig`."""
        if changed & SEND_KEYS:
            self.config = SendConfig.of(config)

    # ------------------------------------------------------------------ common checks

    def _gate_refusal(self) -> Refusal | None:
        return None if self.write_gate is None else self.write_gate.write_refusal()

    def _no_write_permission(self) -> Refusal:
        return Refusal(
            ResponseCode.NO_PERMISSION,
            f"the broker[{self.config.broker_ip}] sending message is forbidden",
        )

    def _check(self, h: SendMessageRequestHeader, producer: str) -> TopicConfig | Refusal:
        """Upstream msgCheck: the topic's config, or why the send is refused."""
        gate = self.write_gate
        if gate is not None:
            refusal = gate.write_refusal()
            if refusal is not None:
                return refusal
        if not self.config.broker_permission & PERM_WRITE:
            return self._no_write_permission()
        topic = h.topic
        if topic in NOT_ALLOWED_SEND_TOPICS:
            return Refusal(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        if len(topic) > TOPIC_MAX_LENGTH:
            return Refusal(
                ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(topic)}"
            )
        tc = self.topics.table.get(topic)  # `select` without its call (the send's hot path)
        if tc is None:
            tc = self.topics.create_in_send(topic, h.defaultTopic, h.defaultTopicQueueNums)
            if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                # a consumer's own retry send works even without auto-create (upstream)
                tc, _ = self.topics.create_in_send_back(topic, 1, _RW)
            if tc is None:
                c = self.config
                return Refusal(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please! (autoCreateTopicEnable="
                    f"{str(c.auto_create_topic_enable).lower()} on broker {c.broker_name})",
                )
        if not tc.perm & PERM_WRITE:
            return Refusal(
                ResponseCode.NO_PERMISSION,
                f"the topic[{topic}] sending message is forbidden, perm={perm_to_string(tc.perm)}",
            )
        limit = tc.writeQueueNums
        if tc.readQueueNums > limit:  # max(write, read) without the builtin's call
            limit = tc.readQueueNums
        if h.queueId >= limit:
            return Refusal(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{h.queueId}] is illegal, topic {topic} has {limit} queues "
                f"(writeQueueNums={tc.writeQueueNums}) Producer: {producer}",
            )
        return tc

    def check(self, h: SendMessageRequestHeader, producer: str) -> TopicConfig | Refusal:
        """Upstream msgCheck for other senders (request-reply: reply/processor.py)."""
        return self._check(h, producer)

    def _pick_queue(self, tc: TopicConfig, queue_id: int) -> int:
        if queue_id >= 0:
            return queue_id
        self._rr += 1
        return self._rr % max(1, tc.writeQueueNums)

    async def _submit(self, msgs: list[MessageToStore], on_done: PutCallback) -> Refusal | None:
        """Hand the put to the store writer; None means the callback will answer."""
        writer = self.writer
        try:
            try:
                writer.put_nowait(msgs, on_done)
            except trio.WouldBlock:
                await writer.put(msgs, on_done)  # backpressure, see `send`
        except ActorStopped:
            return _STORE_STOPPED
        return None

    # ------------------------------------------------------------------ single message

    async def send(
        self,
        h: SendMessageRequestHeader,
        body: bytes,
        born_host: BornHost,
        producer: str,
        on_done: OnSent | DirectAnswer,
    ) -> Refusal | None:
        """One message. None: accepted, ``on_done`` gets the outcome once the store answered.
        ``producer`` (the client's address) only names it in a remark."""
        r = self.send_nowait(h, body, born_host, producer, on_done)
        return await self.put_blocked(r) if isinstance(r, BlockedSend) else r

    async def put_blocked(self, blocked: BlockedSend) -> Refusal | None:
        """Wait for room in the store's inbox while holding up the caller (the connection's
        reader), so the backpressure reaches the producer."""
        try:
            await self.writer.put(blocked.msgs, blocked.done)
        except ActorStopped:
            return _STORE_STOPPED
        return None

    def send_nowait(
        self,
        h: SendMessageRequestHeader,
        body: bytes,
        born_host: BornHost,
        producer: str,
        on_done: OnSent | DirectAnswer,
    ) -> Refusal | BlockedSend | None:
        """`send` without a coroutine (the hot path): `BlockedSend` when the store's inbox is
        full, for the caller to await `put_blocked` with."""
        tc = self._check(h, producer)
        if isinstance(tc, Refusal):
            return tc
        limit = self.config.max_message_size
        if len(body) > limit:
            return Refusal(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {len(body)} bytes exceeds maxMessageSize {limit} bytes",
            )
        props = h.properties or ""
        # (the substring test keeps the common send from a call: prop_value checks exactly)
        prepared = (
            _PREPARED_TAG in props and prop_value(props, PROPERTY_TRANSACTION_PREPARED) == "true"
        )
        if prepared and self.config.reject_transaction_message:
            return Refusal(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.broker_ip}] sending transaction message is forbidden",
            )
        props, uniq = stamp_props(props, self._cluster_prop, self.new_uniq_key)
        reconsume = h.reconsumeTimes or 0
        topic, queue_id = h.topic, h.queueId
        # a queue to pick, a delay or timer, a retry topic: `_route` decides (else no call)
        if queue_id < 0 or "DELAY" in props or "TIMER_" in props or topic.startswith(_RETRY):
            routed = self._route(h, tc, props, uniq, reconsume, prepared)
            if isinstance(routed, Refusal):
                return routed
            topic, queue_id, reply_queue_id, props = routed
        else:
            reply_queue_id = queue_id
        sys_flag = h.sysFlag | (MULTI_TAGS_FLAG if tc.topicFilterType == "MULTI_TAG" else 0)
        # positional, in field order (topic, queue_id, body, flag, properties, sys_flag,
        # born_timestamp, born_host, reconsume_times): cheaper than keywords per send
        msg = MessageToStore(
            topic, queue_id, body, h.flag, props, sys_flag, h.bornTimestamp, born_host, reconsume
        )
        done: PutCallback
        # remoting's hot path, the callback itself (the MRO: no ABCMeta instancecheck call)
        if DirectAnswer in type(on_done).__mro__:
            on_done.queue_id, on_done.uniq = reply_queue_id, uniq  # type: ignore[union-attr]
            done = on_done  # type: ignore[assignment]
        else:
            done = PendingSend(on_done, reply_queue_id, uniq)
        if prepared:  # a half message (transaction_policy.py); the answer names the real queue
            msg = half_message(msg)
            self.topics.create_in_send_back(msg.topic, 1, _RW)
            if self.half_stored is not None:  # e.g. kept for its END (transaction/half_cache.py)
                done = self.half_stored(msg, done)
        msgs = [msg]
        try:
            self.writer.put_nowait(msgs, done)
        except trio.WouldBlock:
            return BlockedSend(msgs, done)
        except ActorStopped:
            return _STORE_STOPPED
        return None

    def _route(
        self,
        h: SendMessageRequestHeader,
        tc: TopicConfig,
        props: str,
        uniq: str,
        reconsume: int,
        prepared: bool,
    ) -> tuple[str, int, int, str] | Refusal:
        """Where the message is stored: (topic, queue, the queue the answer names, properties).
        A retry send may go to the DLQ; a delay or timer send waits in its schedule topic."""
        topic, queue_id = h.topic, self._pick_queue(tc, h.queueId)
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            routed = self._route_retry(h, reconsume, uniq)
            if isinstance(routed, Refusal):
                return routed
            if routed is not None:
                topic, queue_id = routed
        reply_queue_id = queue_id
        # a half message waits for END_TRANSACTION, not for a delay (upstream's hook skips
        # prepared messages)
        # (the substring test keeps the common send from a call: delay_route checks exactly)
        if (
            ("DELAY" in props or "TIMER_" in props)
            and not prepared
            and not topic.startswith(DLQ_GROUP_TOPIC_PREFIX)
        ):
            config = self.config
            delayed = delay_route(
                props, topic, queue_id, config.delay_levels, self.now_ms, config.timer_max_delay_ms
            )
            if isinstance(delayed, Refusal):
                return delayed
            if delayed is not None:
                topic, queue_id, props = delayed
        return topic, queue_id, reply_queue_id, props

    def _route_retry(
        self, h: SendMessageRequestHeader, reconsume: int, uniq: str
    ) -> tuple[str, int] | Refusal | None:
        """Producer-side retry send (upstream handleRetryAndDLQ): None keeps the retry topic,
        (topic, queue) reroutes to the DLQ."""
        group = h.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        sgc = self.groups.find_group(group)
        if sgc is None:
            return Refusal(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        max_times = h.maxReconsumeTimes if h.maxReconsumeTimes is not None else sgc.retryMaxTimes
        # an orderly consumer (it holds queue locks) retries locally; what it sends back has
        # given up and goes straight to the DLQ, like upstream
        orderly = not self.locks.all_expired(group, trio.current_time())
        if reconsume <= max_times and not orderly:
            return None
        dlq = dlq_topic(group)
        self.topics.create_in_send_back(dlq, DLQ_NUMS_PER_GROUP, _RW)
        events.emit(
            self.log,
            events.MessageToDlq(group=group, topic=h.topic, msg_id=uniq, reconsume_times=reconsume),
        )
        return dlq, 0

    # ------------------------------------------------------------------ batch

    async def send_batch(
        self,
        h: SendMessageRequestHeader,
        body: bytes,
        born_host: BornHost,
        producer: str,
        on_done: OnSent,
    ) -> Refusal | None:
        """A client's encoded batch body, stored as is; same contract as `send`."""
        tc = self._check(h, producer)
        if isinstance(tc, Refusal):
            return tc
        if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return Refusal(
                ResponseCode.MESSAGE_ILLEGAL,
                f"batch request does not support retry group {h.topic}",
            )
        if not body:
            return Refusal(ResponseCode.MESSAGE_ILLEGAL, "the batch holds no message")
        queue_id = self._pick_queue(tc, h.queueId)
        batch_props = decode_properties(h.properties) if h.properties else {}
        delay = batch_props.get(PROPERTY_DELAY_TIME_LEVEL, "0")
        if (delay.isdigit() and int(delay) > 0) or any(k in batch_props for k in TIMER_KEYS):
            # upstream CommitLog.asyncPutMessages: a batch cannot wait (MESSAGE_ILLEGAL)
            return Refusal(
                ResponseCode.MESSAGE_ILLEGAL,
                "a batch cannot be a delay or timer message (DELAY / TIMER_* properties)",
            )
        batch_props[PROPERTY_CLUSTER] = self.config.cluster_name
        sys_flag = h.sysFlag | (MULTI_TAGS_FLAG if tc.topicFilterType == "MULTI_TAG" else 0)
        # the body is stored as the client encoded it: no per-message objects on this path
        put = PutBatchBody(
            h.topic,
            queue_id,
            body,
            {
                "properties": batch_props,
                "sys_flag": sys_flag,
                "born_timestamp": h.bornTimestamp,
                "born_host": born_host,
                "reconsume_times": h.reconsumeTimes or 0,
                "new_uniq_key": self.new_uniq_key,
            },
            batch_done(on_done),
        )
        writer = self.writer
        try:
            try:
                writer.put_batch_nowait(put)
            except trio.WouldBlock:
                await writer.put_batch(put)  # backpressure reaches the producer
        except ActorStopped:
            return _STORE_STOPPED
        return None

    # ------------------------------------------------------------------ send back

    async def send_back(
        self, h: ConsumerSendMsgBackRequestHeader, on_done: OnSentBack
    ) -> SentBack | Refusal | None:
        """CONSUMER_SEND_MSG_BACK: None means ``on_done`` gets the outcome later."""
        refusal = self._gate_refusal()
        if refusal is not None:
            return refusal
        sgc = self.groups.find_group(h.group)
        if sgc is None:
            return Refusal(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {h.group}",
            )
        if not self.config.broker_permission & PERM_WRITE:
            return self._no_write_permission()
        if sgc.retryQueueNums <= 0:
            return SENT_BACK
        new_topic = retry_topic(h.group)
        tc, _ = self.topics.create_in_send_back(new_topic, sgc.retryQueueNums, _RW)
        if not tc.perm & PERM_WRITE:
            return Refusal(
                ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden"
            )
        msg = self.reader.look_message_by_offset(h.offset)
        if msg is None:
            return Refusal(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        if h.originTopic is not None and msg.topic != h.originTopic:
            return Refusal(
                ResponseCode.SYSTEM_ERROR,
                f"look message by offset failed to check the topic name: offset {h.offset} "
                f"holds a message of {msg.topic}, not {h.originTopic}",
            )
        props = msg.properties
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.topic)
        origin_id = props.get(PROPERTY_ORIGIN_MESSAGE_ID) or msg.offset_msg_id
        props[PROPERTY_ORIGIN_MESSAGE_ID] = origin_id
        max_times = h.maxReconsumeTimes if h.maxReconsumeTimes is not None else sgc.retryMaxTimes
        queue_id = self.rng.randrange(max(1, tc.writeQueueNums))
        to_dlq = msg.reconsume_times >= max_times or h.delayLevel < 0
        if to_dlq:
            new_topic = dlq_topic(h.group)
            self.topics.create_in_send_back(new_topic, DLQ_NUMS_PER_GROUP, _RW)
            queue_id = 0
            props[PROPERTY_DLQ_ORIGIN_TOPIC] = props[PROPERTY_RETRY_TOPIC]
            props[PROPERTY_DLQ_ORIGIN_MESSAGE_ID] = props.get(UNIQ_KEY, origin_id)
        else:  # wait at a delay level first (upstream: the store's delay hook)
            wanted = send_back_level(h.delayLevel, msg.reconsume_times)
            level, wait_queue = schedule_queue(wanted, self.config.delay_levels)
            props[PROPERTY_REAL_TOPIC] = new_topic
            props[PROPERTY_REAL_QUEUE_ID] = str(queue_id)
            props[PROPERTY_DELAY_TIME_LEVEL] = str(level)
            new_topic, queue_id = SCHEDULE_TOPIC, wait_queue
        store_msg = MessageToStore(
            topic=new_topic,
            queue_id=queue_id,
            body=msg.body,
            flag=msg.flag,
            properties=props,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=host_tuple(msg.born_host),
            reconsume_times=msg.reconsume_times + 1,
        )
        # upstream counts SNDBCK_PUT_NUMS under the message's original topic
        back_topic = props[PROPERTY_RETRY_TOPIC]
        done = self._sent_back_done(on_done, h, back_topic, msg.reconsume_times, to_dlq)
        return await self._submit([store_msg], done)

    def _sent_back_done(
        self,
        on_done: OnSentBack,
        h: ConsumerSendMsgBackRequestHeader,
        back_topic: str,
        reconsume_times: int,
        to_dlq: bool,
    ) -> PutCallback:
        def done(results: list[PutResult], status: PutStatus, remark: str | None) -> None:
            if not is_stored(status, results):
                on_done(PutFailed(status, remark))
                return
            self.stats.on_send_back(back_topic, h.group, to_dlq)
            if to_dlq:
                events.emit(
                    self.log,
                    events.MessageToDlq(
                        group=h.group,
                        topic=h.originTopic,
                        msg_id=h.originMsgId,
                        reconsume_times=reconsume_times,
                        dlq_msg_id=results[0].msg_id,
                    ),
                )
            on_done(SENT_BACK)

        return done
