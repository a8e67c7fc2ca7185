"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320), CONSUMER_SEND_MSG_BACK (36).

The send path is the broker's hot path: parse the header, check topic / permission / queue /
size, stamp UNIQ_KEY (when the client did not) and CLUSTER, hand the message(s) to the store
actor without waiting, and return None; the store actor's callback answers through
``ctx.respond`` once the data is written (and fsynced with SYNC_FLUSH). No per-message logging,
no task per message; when the store inbox is full the send awaits (backpressure reaches the
connection's reader and so the producer).

Response ids follow upstream: ``msgId`` is the offset message id (store host + commitlog
offset; comma-joined for a batch) and ``transactionId`` carries the UNIQ_KEY. Clients report the
UNIQ_KEY as SendResult.msgId and the offset id as offsetMsgId.

Retry and DLQ: a producer-side send to %RETRY%<group> goes to %DLQ%<group> once reconsumeTimes
exceeds maxReconsumeTimes; CONSUMER_SEND_MSG_BACK re-reads the consumed message by its
commitlog offset and writes it to %RETRY%<group> (reconsumeTimes + 1, RETRY_TOPIC and
ORIGIN_MESSAGE_ID set) or, from maxReconsumeTimes on or with delayLevel < 0, to
%DLQ%<group>. Delay levels are not implemented yet (SPEC M5): a retry message is consumable at
once, and a DELAY property on a normal send is stored but not acted upon.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio

from rocketrio.actors import events
from rocketrio.actors.broker.store_actor import BatchPutCallback, PutBatchBody, PutCallback
from rocketrio.actors.broker.topic_config import (
    DLQ_NUMS_PER_GROUP,
    NOT_ALLOWED_SEND_TOPICS,
    RETRY_GROUP_TOPIC_PREFIX,
    TOPIC_MAX_LENGTH,
    dlq_topic,
    retry_topic,
)
from rocketrio.actors.remoting import RequestContext
from rocketrio.actors.runtime import ActorStopped
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE, TopicConfig, perm_to_string
from rocketrio.protocol.codes import RequestCode, ResponseCode
from rocketrio.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
)
from rocketrio.protocol.message import (
    MULTI_TAGS_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    UNIQ_KEY,
    decode_properties,
)
from rocketrio.protocol.remoting import RemotingCommand
from rocketrio.protocol.serde import from_ext, to_ext
from rocketrio.storage.message_store import BatchPutResult, MessageToStore, PutResult

if TYPE_CHECKING:
    from rocketrio.actors.broker.broker import Broker

log = structlog.get_logger("broker.send")

_UNIQ_PREFIX = UNIQ_KEY + "\x01"
_TRAN_PREFIX = PROPERTY_TRANSACTION_PREPARED + "\x01"


def prop_value(props: str, key: str) -> str | None:
    """One property of an encoded ``k\\x01v\\x02`` string without decoding all of it."""
    tag = key + "\x01"
    if props.startswith(tag):
        start = len(tag)
    else:
        i = props.find("\x02" + tag)
        if i < 0:
            return None
        start = i + 1 + len(tag)
    end = props.find("\x02", start)
    return props[start:] if end < 0 else props[start:end]


def _opt_int(v: str | None) -> int | None:
    return None if v is None else int(v)


def _opt_bool(v: str | None) -> bool | None:
    if v is None:
        return None
    s = v.strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0", ""):
        return False
    raise ValueError(v)


def parse_send_header_v2(ext: dict[str, str]) -> SendMessageRequestHeader:
    """SEND_MESSAGE_V2 extFields -> the V1 header, without cattrs on the hot path.

    Same result as ``from_ext(SendMessageRequestHeaderV2, ext).to_v1()`` (a test checks it)
    at a quarter of the cost; any missing or malformed field falls back to that call, which
    raises the HeaderError naming the field.
    """
    get = ext.get
    try:
        return SendMessageRequestHeader(
            producerGroup=ext["a"],
            topic=ext["b"],
            defaultTopic=ext["c"],
            defaultTopicQueueNums=int(ext["d"]),
            queueId=int(ext["e"]),
            sysFlag=int(ext["f"]),
            bornTimestamp=int(ext["g"]),
            flag=int(ext["h"]),
            properties=get("i"),
            reconsumeTimes=_opt_int(get("j")),
            unitMode=_opt_bool(get("k")),
            batch=_opt_bool(get("m")),
            maxReconsumeTimes=_opt_int(get("l")),
            bname=get("n"),
        )
    except (KeyError, ValueError):
        return from_ext(SendMessageRequestHeaderV2, ext).to_v1()


def append_props(props: str, extra: str) -> str:
    if props and not props.endswith("\x02"):
        props += "\x02"
    return props + extra


class SendMessageProcessor:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = broker.config
        self._cluster_prop = f"{PROPERTY_CLUSTER}\x01{broker.config.brokerClusterName}\x02"
        self._rr = 0

    # ------------------------------------------------------------------ common checks

    def parse_header(self, cmd: RemotingCommand) -> SendMessageRequestHeader:
        if cmd.code == RequestCode.SEND_MESSAGE:
            return from_ext(SendMessageRequestHeader, cmd.ext_fields)
        return parse_send_header_v2(cmd.ext_fields)

    def _check(
        self, ctx: RequestContext, h: SendMessageRequestHeader
    ) -> tuple[TopicConfig | None, RemotingCommand | None]:
        """Upstream msgCheck: returns (topic config, None) or (None, error response)."""
        cmd, b = ctx.cmd, self.broker
        if not self.config.brokerPermission & PERM_WRITE:
            return None, cmd.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.brokerIP1}] sending message is forbidden",
            )
        topic = h.topic
        if topic in NOT_ALLOWED_SEND_TOPICS:
            return None, cmd.make_response(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        if len(topic) > TOPIC_MAX_LENGTH:
            return None, cmd.make_response(
                ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(topic)}"
            )
        tc = b.topics.select(topic)
        if tc is None:
            tc = b.create_topic_in_send(topic, h.defaultTopic, h.defaultTopicQueueNums)
            if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                # a consumer's own retry send works even without auto-create (upstream)
                tc = b.create_topic_in_send_back(topic, 1, PERM_READ | PERM_WRITE)
            if tc is None:
                return None, cmd.make_response(
                    ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please! (autoCreateTopicEnable="
                    f"{str(self.config.autoCreateTopicEnable).lower()} on broker "
                    f"{self.config.brokerName})",
                )
        if not tc.perm & PERM_WRITE:
            return None, cmd.make_response(
                ResponseCode.NO_PERMISSION,
                f"the topic[{topic}] sending message is forbidden, perm={perm_to_string(tc.perm)}",
            )
        limit = max(tc.writeQueueNums, tc.readQueueNums)
        if h.queueId >= limit:
            return None, cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{h.queueId}] is illegal, topic {topic} has {limit} queues "
                f"(writeQueueNums={tc.writeQueueNums}) Producer: {ctx.remote}",
            )
        return tc, None

    def _pick_queue(self, tc: TopicConfig, queue_id: int) -> int:
        if queue_id >= 0:
            return queue_id
        self._rr += 1
        return self._rr % max(1, tc.writeQueueNums)

    async def _submit(
        self, ctx: RequestContext, msgs: list[MessageToStore], on_done: PutCallback
    ) -> RemotingCommand | None:
        """Hand the put to the store actor; None means the callback will answer."""
        actor = self.broker.store_actor
        try:
            try:
                actor.put_nowait(msgs, on_done)
            except trio.WouldBlock:
                # inbox full: wait for room while holding up this connection's reader, so the
                # backpressure reaches the producer
                await actor.put(msgs, on_done)
        except ActorStopped:
            return ctx.cmd.make_response(
                ResponseCode.SERVICE_NOT_AVAILABLE, "the message store is stopped"
            )
        return None

    def _illegal_size(self, ctx: RequestContext, size: int) -> RemotingCommand | None:
        limit = self.config.maxMessageSize
        if size > limit:
            return ctx.cmd.make_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message body size {size} bytes exceeds maxMessageSize {limit} bytes",
            )
        return None

    # ------------------------------------------------------------------ single message

    async def process_send(self, ctx: RequestContext) -> RemotingCommand | None:
        cmd = ctx.cmd
        h = self.parse_header(cmd)
        if h.batch or cmd.code == RequestCode.SEND_BATCH_MESSAGE:
            return await self.process_batch(ctx, h)
        tc, err = self._check(ctx, h)
        if err is not None:
            return err
        assert tc is not None
        err = self._illegal_size(ctx, len(cmd.body))
        if err is not None:
            return err
        props = h.properties or ""
        if prop_value(props, PROPERTY_TRANSACTION_PREPARED) == "true":
            return cmd.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.brokerIP1}] sending transaction message is forbidden: "
                "transactional messages are not supported by this broker yet",
            )
        uniq = prop_value(props, UNIQ_KEY)
        if not uniq:
            uniq = self.broker.uniq_ids.next_id()
            props = append_props(props, f"{_UNIQ_PREFIX}{uniq}\x02")
        props = append_props(props, self._cluster_prop)
        topic, queue_id = h.topic, self._pick_queue(tc, h.queueId)
        reconsume = h.reconsumeTimes or 0
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            routed = self._route_retry(cmd, h, reconsume, uniq)
            if isinstance(routed, RemotingCommand):
                return routed
            if routed is not None:
                topic, queue_id = routed
        sys_flag = h.sysFlag | (MULTI_TAGS_FLAG if tc.topicFilterType == "MULTI_TAG" else 0)
        msg = MessageToStore(
            topic=topic,
            queue_id=queue_id,
            body=cmd.body,
            flag=h.flag,
            properties=props,
            sys_flag=sys_flag,
            born_timestamp=h.bornTimestamp,
            born_host=self.broker.born_host(ctx.conn),
            reconsume_times=reconsume,
        )
        return await self._submit(ctx, [msg], self._answer_single(ctx, queue_id, uniq))

    def _answer_single(self, ctx: RequestContext, queue_id: int, uniq: str) -> PutCallback:
        cmd = ctx.cmd

        def on_done(results: list[PutResult], code: int, remark: str | None) -> None:
            if not results:
                ctx.respond(cmd.make_response(code, remark))
                return
            r = results[0]
            header = SendMessageResponseHeader(r.msg_id, queue_id, r.queue_offset, uniq)
            ctx.respond(cmd.make_response(code, remark, to_ext(header)))

        return on_done

    def _route_retry(
        self, cmd: RemotingCommand, h: SendMessageRequestHeader, reconsume: int, uniq: str
    ) -> tuple[str, int] | RemotingCommand | None:
        """Producer-side retry send (upstream handleRetryAndDLQ): None keeps the retry topic,
        (topic, queue) reroutes to the DLQ, a command is an error answer."""
        group = h.topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        sgc = self.broker.find_group(group)
        if sgc is None:
            return cmd.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}"
            )
        max_times = h.maxReconsumeTimes if h.maxReconsumeTimes is not None else sgc.retryMaxTimes
        # an orderly consumer (it holds queue locks) retries locally; what it sends back has
        # given up and goes straight to the DLQ, like upstream
        orderly = not self.broker.locks.all_expired(group, trio.current_time())
        if reconsume <= max_times and not orderly:
            return None
        dlq = dlq_topic(group)
        self.broker.create_topic_in_send_back(dlq, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
        self.broker.log.info(
            events.MESSAGE_TO_DLQ,
            group=group,
            topic=h.topic,
            msg_id=uniq,
            reconsume_times=reconsume,
        )
        return dlq, 0

    # ------------------------------------------------------------------ batch

    async def process_batch(
        self, ctx: RequestContext, h: SendMessageRequestHeader
    ) -> RemotingCommand | None:
        cmd = ctx.cmd
        tc, err = self._check(ctx, h)
        if err is not None:
            return err
        assert tc is not None
        if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return cmd.make_response(
                ResponseCode.MESSAGE_ILLEGAL,
                f"batch request does not support retry group {h.topic}",
            )
        if not cmd.body:
            return cmd.make_response(ResponseCode.MESSAGE_ILLEGAL, "the batch holds no message")
        queue_id = self._pick_queue(tc, h.queueId)
        batch_props = decode_properties(h.properties) if h.properties else {}
        batch_props[PROPERTY_CLUSTER] = self.config.brokerClusterName
        sys_flag = h.sysFlag | (MULTI_TAGS_FLAG if tc.topicFilterType == "MULTI_TAG" else 0)
        # the body is stored as the client encoded it: no per-message objects on this path
        put = PutBatchBody(
            h.topic,
            queue_id,
            cmd.body,
            {
                "properties": batch_props,
                "sys_flag": sys_flag,
                "born_timestamp": h.bornTimestamp,
                "born_host": self.broker.born_host(ctx.conn),
                "reconsume_times": h.reconsumeTimes or 0,
                "new_uniq_key": self.broker.uniq_ids.next_id,
            },
            self._answer_batch(ctx),
        )
        actor = self.broker.store_actor
        try:
            try:
                actor.put_batch_nowait(put)
            except trio.WouldBlock:
                await actor.tell(put)  # backpressure reaches the producer through this reader
        except ActorStopped:
            return cmd.make_response(
                ResponseCode.SERVICE_NOT_AVAILABLE, "the message store is stopped"
            )
        return None

    def _answer_batch(self, ctx: RequestContext) -> BatchPutCallback:
        cmd = ctx.cmd

        def on_done(stored: BatchPutResult | None, code: int, remark: str | None) -> None:
            if stored is None:
                ctx.respond(cmd.make_response(code, remark))
                return
            header = SendMessageResponseHeader(
                stored.msg_ids_csv(),
                stored.queue_id,
                stored.first_queue_offset,
                stored.uniq_keys_csv(),
            )
            ctx.respond(cmd.make_response(code, remark, to_ext(header)))

        return on_done

    # ------------------------------------------------------------------ send back

    async def process_send_back(self, ctx: RequestContext) -> RemotingCommand | None:
        cmd, b = ctx.cmd, self.broker
        h = from_ext(ConsumerSendMsgBackRequestHeader, cmd.ext_fields)
        sgc = b.find_group(h.group)
        if sgc is None:
            return cmd.make_response(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {h.group}",
            )
        if not self.config.brokerPermission & PERM_WRITE:
            return cmd.make_response(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.config.brokerIP1}] sending message is forbidden",
            )
        if sgc.retryQueueNums <= 0:
            return cmd.make_response(ResponseCode.SUCCESS)
        new_topic = retry_topic(h.group)
        tc = b.create_topic_in_send_back(new_topic, sgc.retryQueueNums, PERM_READ | PERM_WRITE)
        if not tc.perm & PERM_WRITE:
            return cmd.make_response(
                ResponseCode.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden"
            )
        msg = b.store.look_message_by_offset(h.offset)
        if msg is None:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}"
            )
        if h.originTopic is not None and msg.topic != h.originTopic:
            return cmd.make_response(
                ResponseCode.SYSTEM_ERROR,
                f"look message by offset failed to check the topic name: offset {h.offset} "
                f"holds a message of {msg.topic}, not {h.originTopic}",
            )
        props = msg.properties
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.topic)
        origin_id = props.get(PROPERTY_ORIGIN_MESSAGE_ID) or msg.offset_msg_id
        props[PROPERTY_ORIGIN_MESSAGE_ID] = origin_id
        max_times = h.maxReconsumeTimes if h.maxReconsumeTimes is not None else sgc.retryMaxTimes
        queue_id = b.rng.randrange(max(1, tc.writeQueueNums))
        to_dlq = msg.reconsume_times >= max_times or h.delayLevel < 0
        if to_dlq:
            new_topic = dlq_topic(h.group)
            b.create_topic_in_send_back(new_topic, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
            queue_id = 0
            props[PROPERTY_DLQ_ORIGIN_TOPIC] = props[PROPERTY_RETRY_TOPIC]
            props[PROPERTY_DLQ_ORIGIN_MESSAGE_ID] = props.get(UNIQ_KEY, origin_id)
        store_msg = MessageToStore(
            topic=new_topic,
            queue_id=queue_id,
            body=msg.body,
            flag=msg.flag,
            properties=props,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=b.host_tuple(msg.born_host),
            reconsume_times=msg.reconsume_times + 1,
        )
        on_done = self._answer_send_back(ctx, h, msg.reconsume_times, to_dlq)
        return await self._submit(ctx, [store_msg], on_done)

    def _answer_send_back(
        self,
        ctx: RequestContext,
        h: ConsumerSendMsgBackRequestHeader,
        reconsume_times: int,
        to_dlq: bool,
    ) -> PutCallback:
        b = self.broker

        def on_done(results: list[PutResult], code: int, remark: str | None) -> None:
            if not results:
                ctx.respond(ctx.cmd.make_response(ResponseCode.SYSTEM_ERROR, remark))
                return
            b.stats.send_back_total += 1
            if to_dlq:
                b.stats.dlq_total += 1
                b.log.info(
                    events.MESSAGE_TO_DLQ,
                    group=h.group,
                    topic=h.originTopic,
                    msg_id=h.originMsgId,
                    reconsume_times=reconsume_times,
                    dlq_msg_id=results[0].msg_id,
                )
            ctx.respond(ctx.cmd.make_response(ResponseCode.SUCCESS))

        return on_done
