"""Pure mapping between RocketMQ 5's gRPC messages (apache.rocketmq.v2) and rocketrio's remoting
world: status codes, routes -> MessageQueues, queue choice for a send (FIFO by message group),
a protobuf Message -> the properties of a remoting send, a stored MessageExt -> a protobuf
Message with its body digest. No I/O, no clock: times come in as arguments.

Facts from upstream's proxy (GrpcConverter, ResponseBuilder, RouteActivity, SendMessageActivity):
remoting SUCCESS -> OK, SYSTEM_BUSY -> TOO_MANY_REQUESTS, SUBSCRIPTION_GROUP_NOT_EXIST ->
CONSUMER_GROUP_NOT_FOUND, REQUEST_CODE_NOT_SUPPORTED -> NOT_IMPLEMENTED, anything else
INTERNAL_SERVER_ERROR; a send's FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE
-> MASTER_PERSISTENCE_TIMEOUT / SLAVE_PERSISTENCE_TIMEOUT / HA_NOT_AVAILABLE; a FIFO message's
group is its sharding key and picks the queue by hash; delivery_timestamp becomes
TIMER_DELIVER_MS; a transactional message is a half (TRAN_MSG, PGROUP).
rocketrio topics carry no message.type attribute, so every queue accepts the four types
(upstream's MIXED).
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping, Sequence

import attrs
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from rocketrio.protocol import message_format
from rocketrio.protocol.bodies import PERM_READ, PERM_WRITE, TopicRouteData
from rocketrio.protocol.codes import ResponseCode
from rocketrio.protocol.grpc_v2 import definition_pb2 as pb
from rocketrio.protocol.message import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    UNIQ_KEY,
    MessageExt,
)

Code = pb.Code
MASTER_ID = 0
# the half message's producer group when the gRPC producer names none (upstream's proxy uses
# the topic-derived group too: a transactional producer's checks come back through the proxy)
PROXY_PRODUCER_GROUP = "PROXY_SEND_GROUP"
ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)
# user properties may not shadow these (upstream's MessageConst.STRING_HASH_SET, the ones we set)
RESERVED_KEYS = frozenset(
    {
        PROPERTY_TAGS,
        PROPERTY_KEYS,
        UNIQ_KEY,
        PROPERTY_SHARDING_KEY,
        PROPERTY_TIMER_DELIVER_MS,
        PROPERTY_TRANSACTION_PREPARED,
        PROPERTY_PRODUCER_GROUP,
        "WAIT",
        "DELAY",
    }
)

_REMOTING_TO_CODE = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
}
_SEND_TO_CODE = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}


class BadRequest(ValueError):
    """A request the proxy refuses with ``code`` (upstream's GrpcProxyException)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def status(code: int, message: str = "OK") -> pb.Status:
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


def code_of_remoting(response_code: int) -> int:
    """The gRPC Code of a broker's remoting response code (upstream's ResponseBuilder)."""
    return _REMOTING_TO_CODE.get(response_code, Code.INTERNAL_SERVER_ERROR)


def code_of_send(response_code: int) -> int:
    """The gRPC Code of a SEND_MESSAGE response (stored results first, then the general map)."""
    return _SEND_TO_CODE.get(response_code) or code_of_remoting(response_code)


def permission_of(perm: int) -> int:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return pb.READ_WRITE
    if readable:
        return pb.READ
    if writable:
        return pb.WRITE
    return pb.NONE


def endpoints_of(host: str, port: int) -> pb.Endpoints:
    scheme = pb.IPv4 if host.replace(".", "").isdigit() else pb.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])  # type: ignore[arg-type]


def route_queues(
    route: TopicRouteData,
    topic: pb.Resource,
    endpoints: pb.Endpoints,
    per_broker: Mapping[str, pb.Endpoints] | None = None,
) -> list[pb.MessageQueue]:
    """QueryRoute's queues: per broker set with a master, its read-only, write-only, then
    read-write queues numbered from 0 (upstream's genMessageQueueFromQueueData), each with the
    broker set's entry of ``per_broker`` as its endpoints (local mode: the proxy next to that
    set's master), else ``endpoints`` (cluster mode: the proxy's own)."""
    per_broker = per_broker or {}
    masters = {bd.brokerName for bd in route.brokerDatas if MASTER_ID in bd.brokerAddrs}
    out: list[pb.MessageQueue] = []
    for qd in sorted(route.queueDatas, key=lambda q: q.brokerName):
        if qd.brokerName not in masters:
            continue
        where = per_broker.get(qd.brokerName, endpoints)
        broker = pb.Broker(name=qd.brokerName, id=MASTER_ID, endpoints=where)
        readable, writable = bool(qd.perm & PERM_READ), bool(qd.perm & PERM_WRITE)
        r = w = rw = n = 0
        if readable and writable:
            rw = min(qd.readQueueNums, qd.writeQueueNums)
            r, w = qd.readQueueNums - rw, qd.writeQueueNums - rw
        elif writable:
            w = qd.writeQueueNums
        elif readable:
            r = qd.readQueueNums
        else:
            n = max(1, qd.readQueueNums, qd.writeQueueNums)
        perms = [pb.READ] * r + [pb.WRITE] * w + [pb.READ_WRITE] * rw + [pb.NONE] * n
        for qid, perm in enumerate(perms):
            out.append(
                pb.MessageQueue(
                    topic=topic,
                    id=qid,
                    permission=perm,  # type: ignore[arg-type]
                    broker=broker,
                    accept_message_types=ALL_TYPES,
                )
            )
    return out


def assignments(
    route: TopicRouteData,
    topic: pb.Resource,
    endpoints: pb.Endpoints,
    per_broker: Mapping[str, pb.Endpoints] | None = None,
    fifo: bool = False,
) -> list[pb.Assignment]:
    """QueryAssignment for a PushConsumer, as upstream's RouteActivity: one assignment per
    readable broker set with a master, queue id -1 (POP from any queue of it); for a FIFO
    group (consumeMessageOrderly) one per readable queue of those sets, ids 0..readQueueNums-1
    (the receives still POP the whole set: the broker orders each queue). Endpoints as in
    `route_queues`."""
    per_broker = per_broker or {}
    out: list[pb.Assignment] = []
    masters = {bd.brokerName for bd in route.brokerDatas if MASTER_ID in bd.brokerAddrs}
    for qd in sorted(route.queueDatas, key=lambda q: q.brokerName):
        if qd.brokerName not in masters or not qd.perm & PERM_READ or qd.readQueueNums <= 0:
            continue
        where = per_broker.get(qd.brokerName, endpoints)
        broker = pb.Broker(name=qd.brokerName, id=MASTER_ID, endpoints=where)
        perm = permission_of(qd.perm)
        for qid in range(qd.readQueueNums) if fifo else (-1,):
            mq = pb.MessageQueue(topic=topic, id=qid, permission=perm, broker=broker)  # type: ignore[arg-type]
            out.append(pb.Assignment(message_queue=mq))
    return out


@attrs.frozen
class TargetQueue:
    """Where a send goes: a broker set's master queue."""

    broker_name: str
    queue_id: int


def writable_queues(route: TopicRouteData) -> list[TargetQueue]:
    """The writable queues of the broker sets that have a master, in a stable order."""
    masters = {bd.brokerName for bd in route.brokerDatas if MASTER_ID in bd.brokerAddrs}
    return [
        TargetQueue(qd.brokerName, i)
        for qd in sorted(route.queueDatas, key=lambda q: q.brokerName)
        if qd.brokerName in masters and qd.perm & PERM_WRITE
        for i in range(qd.writeQueueNums)
    ]


def master_addrs(route: TopicRouteData) -> dict[str, str]:
    """Broker set name -> its master's remoting address, for the sets that have one."""
    return {
        bd.brokerName: bd.brokerAddrs[MASTER_ID]
        for bd in route.brokerDatas
        if MASTER_ID in bd.brokerAddrs
    }


def local_endpoints(
    route: TopicRouteData, grpc_ports: Mapping[str, int | None]
) -> dict[str, pb.Endpoints]:
    """Local mode: the endpoints of each broker set's queues are the proxy co-located with
    its master, at the master's host and that proxy's gRPC port (upstream's
    ProxyTopicRouteData: broker address host + grpcServerPort). ``grpc_ports`` maps a master
    address to its proxy's port; a set whose master runs no proxy (None or absent) is left out,
    so its queues get the asking proxy's own endpoints and that proxy forwards."""
    out: dict[str, pb.Endpoints] = {}
    for name, addr in master_addrs(route).items():
        port = grpc_ports.get(addr)
        if port is not None:
            host, _, _ = addr.rpartition(":")
            out[name] = endpoints_of(host, port)
    return out


def local_proxy_port(broker_config: Mapping[str, str]) -> int | None:
    """The gRPC port of the proxy a broker runs in its process, from its config
    (GET_BROKER_CONFIG's key=value answer): grpcServerPort when enableProxy=true, else None."""
    if broker_config.get("enableProxy", "false").strip().lower() != "true":
        return None
    port = broker_config.get("grpcServerPort", "8081").strip()
    return int(port) if port.isdigit() and 0 < int(port) < 65536 else None


def prefer_broker(queues: Sequence[TargetQueue], broker_name: str) -> list[TargetQueue]:
    """Local mode sends to its own broker set's queues when the topic has any there
    (upstream's LocalTopicRouteService: the co-located broker's queue view); otherwise to all."""
    own = [q for q in queues if q.broker_name == broker_name]
    return own or list(queues)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units), so a group maps as upstream's does."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


_MASK64 = (1 << 64) - 1


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's Hashing.consistentHash(long, int) (jump consistent hashing with its 64-bit linear
    congruential generator): upstream's proxy maps a message group's hashCode to a write queue
    with it, so adding a queue moves only the groups that land on the new one."""
    if buckets <= 0:
        raise ValueError(f"buckets must be positive: {buckets}")
    state = key & _MASK64
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & _MASK64
        next_double = ((state >> 33) + 1) / float(1 << 31)
        nxt = int((candidate + 1) / next_double)
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


def choose_queue(
    queues: Sequence[TargetQueue], message_group: str | None, turn: int
) -> TargetQueue:
    """A FIFO message's queue is fixed by its group (upstream's SendMessageQueueSelector:
    consistentHash(group.hashCode(), write queue count)); others go round robin by ``turn``."""
    if not queues:
        raise BadRequest(Code.FORBIDDEN, "no writable queue in the topic's route")
    if message_group:
        return queues[consistent_hash(java_string_hash(message_group), len(queues))]
    return queues[turn % len(queues)]


def message_type_of(msg: pb.Message) -> int:
    sp = msg.system_properties
    if sp.message_type != pb.MESSAGE_TYPE_UNSPECIFIED:
        return sp.message_type
    if sp.HasField("message_group"):
        return pb.FIFO
    if sp.HasField("delivery_timestamp"):
        return pb.DELAY
    return pb.NORMAL


# a delivery time at most this far ahead (upstream timerMaxDelaySec: 3 days)
MAX_DELAY_MS = 3 * 24 * 3600 * 1000
# google.protobuf.Timestamp's largest valid seconds (9999-12-31T23:59:59Z)
MAX_TIMESTAMP_SECONDS = 253_402_300_799


def delivery_ms(ts: Timestamp) -> int:
    """A delivery_timestamp in ms. rocketmq-python-client 5.1.x writes its milliseconds into
    the ``seconds`` field; such a value is no valid Timestamp (past year 9999), so it is read
    as the milliseconds it is."""
    if ts.seconds > MAX_TIMESTAMP_SECONDS:
        return ts.seconds
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def send_properties(
    msg: pb.Message,
    max_body_size: int,
    producer_group: str,
    now_ms: int,
    max_delay_ms: int = MAX_DELAY_MS,
) -> dict[str, str]:
    """The remoting properties of a message sent over gRPC (upstream GrpcConverter's
    buildMessage): user properties, then tag, keys, the client's message id as UNIQ_KEY,
    message group -> sharding key, delivery timestamp -> TIMER_DELIVER_MS, transaction -> half.
    Refused with the status upstream gives (a delivery time more than ``max_delay_ms`` after
    ``now_ms``: ILLEGAL_DELIVERY_TIME)."""
    sp = msg.system_properties
    if not msg.topic.name:
        raise BadRequest(Code.ILLEGAL_TOPIC, "topic name is empty")
    if not sp.message_id:
        raise BadRequest(Code.ILLEGAL_MESSAGE_ID, "message id is empty")
    if len(msg.body) > max_body_size:
        raise BadRequest(
            Code.MESSAGE_BODY_TOO_LARGE,
            f"message body size {len(msg.body)} exceeds the maximum {max_body_size}",
        )
    clash = RESERVED_KEYS.intersection(msg.user_properties)
    if clash:
        raise BadRequest(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"reserved keys {sorted(clash)}")
    props = dict(msg.user_properties)
    if sp.HasField("tag"):
        if not sp.tag.strip() or "|" in sp.tag:
            raise BadRequest(Code.ILLEGAL_MESSAGE_TAG, f"illegal tag {sp.tag!r}")
        props[PROPERTY_TAGS] = sp.tag
    if sp.keys:
        props[PROPERTY_KEYS] = KEY_SEPARATOR.join(sp.keys)
    props[UNIQ_KEY] = sp.message_id
    kind = message_type_of(msg)
    if kind == pb.FIFO:
        if not sp.message_group:
            raise BadRequest(Code.ILLEGAL_MESSAGE_GROUP, "a FIFO message needs a message group")
        props[PROPERTY_SHARDING_KEY] = sp.message_group
    if sp.HasField("delivery_timestamp"):
        deliver_ms = delivery_ms(sp.delivery_timestamp)
        if deliver_ms - now_ms > max_delay_ms:
            raise BadRequest(
                Code.ILLEGAL_DELIVERY_TIME,
                f"delivery time {deliver_ms} is more than {max_delay_ms} ms after now",
            )
        props[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    if kind == pb.TRANSACTION:
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
        props[PROPERTY_PRODUCER_GROUP] = producer_group
    return props


# upstream's default consumer retry policy: the delay levels after the first (1s .. 2h)
CONSUMER_BACKOFF_S = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200,
                      1800, 3600, 7200)  # fmt: skip
CONSUMER_MAX_ATTEMPTS = 17  # retryMaxTimes 16 + 1
PRODUCER_MAX_ATTEMPTS = 3
LONG_POLLING_S = 30  # upstream grpcClientConsumerMaxLongPollingTimeoutMillis
RECEIVE_BATCH = 32  # upstream grpcClientConsumerLongPollingBatchSize


def settings_answer(
    client: pb.Settings, endpoints: pb.Endpoints, max_body_size: int, fifo: bool = False
) -> pb.Settings:
    """Telemetry's answer to a client's settings (upstream GrpcClientSettingsManager): its own
    settings, with the proxy as access point and metrics off; a producer gets the proxy's
    publishing limits and an exponential backoff (10 ms .. 1 s, 3 attempts), a consumer the
    long polling timeout and batch size when it named none, upstream's customized backoff
    (1 s, 5 s, 10 s, ..., 2 h; 17 attempts) and ``subscription.fifo``: whether its group
    consumes in order (the group's consumeMessageOrderly, which the caller looked up)."""
    out = pb.Settings()
    out.CopyFrom(client)
    out.access_point.CopyFrom(endpoints)
    out.metric.CopyFrom(pb.Metric(on=False))
    out.ClearField("backoff_policy")
    if client.WhichOneof("pub_sub") == "publishing":
        out.publishing.max_body_size = max_body_size
        out.publishing.validate_message_type = True
        out.backoff_policy.max_attempts = PRODUCER_MAX_ATTEMPTS
        out.backoff_policy.exponential_backoff.initial.CopyFrom(duration_ms(10))
        out.backoff_policy.exponential_backoff.max.CopyFrom(duration_ms(1000))
        out.backoff_policy.exponential_backoff.multiplier = 2.0
        return out
    sub = out.subscription
    if not sub.HasField("long_polling_timeout") or ms_of_duration(sub.long_polling_timeout) <= 0:
        sub.long_polling_timeout.CopyFrom(duration_ms(LONG_POLLING_S * 1000))
    if not sub.receive_batch_size:
        sub.receive_batch_size = RECEIVE_BATCH
    sub.fifo = fifo
    out.backoff_policy.max_attempts = CONSUMER_MAX_ATTEMPTS
    out.backoff_policy.customized_backoff.next.extend(
        duration_ms(s * 1000) for s in CONSUMER_BACKOFF_S
    )
    return out


def crc32_hex(body: bytes) -> str:
    return format(zlib.crc32(body) & 0xFFFFFFFF, "08X")


def digest_of(body: bytes, kind: int) -> pb.Digest:
    """The body digest the SDKs verify (uppercase hex)."""
    if kind == pb.MD5:
        checksum = hashlib.md5(body).hexdigest().upper()
    elif kind == pb.SHA1:
        checksum = hashlib.sha1(body).hexdigest().upper()
    else:
        kind, checksum = pb.CRC32, crc32_hex(body)
    return pb.Digest(type=kind, checksum=checksum)  # type: ignore[arg-type]


def timestamp_ms(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_ms(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def ms_of_duration(d: Duration) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


def received_message(
    m: MessageExt, topic: str, receipt_handle: str | None, invisible_ms: int
) -> pb.Message:
    """A popped message as the SDK reads it (upstream GrpcConverter.buildMessage): system
    properties from the stored message, the receipt handle, a CRC32 body digest, the user
    properties without the system ones."""
    out = pb.Message()
    fill_received(out, m, topic, receipt_handle, invisible_ms)
    return out


def fill_received(
    out: pb.Message, m: MessageExt, topic: str, receipt_handle: str | None, invisible_ms: int
) -> None:
    """`received_message` written into ``out`` (say, the ``message`` of the ReceiveMessage
    answer that carries it): the message, its system properties and body are not built
    apart and then copied in."""
    props = m.properties
    out.topic.name = topic
    sp = out.system_properties
    sp.message_id = props.get(UNIQ_KEY) or m.msg_id
    sp.body_digest.type = pb.CRC32
    sp.body_digest.checksum = crc32_hex(m.body)
    sp.body_encoding = pb.IDENTITY
    _set_ms(sp.born_timestamp, m.born_timestamp)
    sp.born_host = str(m.born_host).split(":")[0]
    _set_ms(sp.store_timestamp, m.store_timestamp)
    sp.store_host = str(m.store_host)
    sp.queue_id = m.queue_id
    sp.queue_offset = m.queue_offset
    sp.delivery_attempt = m.reconsume_times + 1
    if receipt_handle is not None:  # a popped message (not a transaction check's)
        sp.receipt_handle = receipt_handle
        _set_ms(sp.invisible_duration, invisible_ms)
    if PROPERTY_TAGS in props:
        sp.tag = props[PROPERTY_TAGS]
    if props.get(PROPERTY_KEYS):
        sp.keys.extend(props[PROPERTY_KEYS].split(KEY_SEPARATOR))
    if PROPERTY_SHARDING_KEY in props:
        sp.message_group = props[PROPERTY_SHARDING_KEY]
        sp.message_type = pb.FIFO
    elif (deliver := props.get(PROPERTY_TIMER_DELIVER_MS) or props.get(TIMER_OUT_MS)) is not None:
        # a timer message keeps its (tick-rounded) fire time as TIMER_OUT_MS once delivered
        _set_ms(sp.delivery_timestamp, int(deliver))
        sp.message_type = pb.DELAY
    elif props.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        sp.message_type = pb.TRANSACTION
    else:
        sp.message_type = pb.NORMAL
    user = {k: v for k, v in props.items() if k not in SYSTEM_KEYS}
    if user:
        out.user_properties.update(user)
    out.body = m.body


def _set_ms(field: Timestamp | Duration, ms: int) -> None:
    """A Timestamp or Duration field set to ``ms`` in place (`timestamp_ms`, `duration_ms`)."""
    field.seconds = ms // 1000
    field.nanos = (ms % 1000) * 1_000_000


def _all_system_keys() -> frozenset[str]:
    """Every property name rocketrio's message format defines (upstream's
    MessageConst.STRING_HASH_SET): never shown to a gRPC client as a user property."""
    names = {
        v
        for k, v in vars(message_format).items()
        if isinstance(v, str)
        and v.isprintable()
        and (k.startswith("PROPERTY_") or k in _OTHER_KEY_NAMES)
    }
    return frozenset(names | RESERVED_KEYS | _UPSTREAM_ONLY)


_OTHER_KEY_NAMES = frozenset({"UNIQ_KEY", "WAIT", "DELAY", "TRAN_MSG"})
TIMER_OUT_MS = "TIMER_OUT_MS"  # upstream's PROPERTY_TIMER_OUT_MS: when a timer message fired
# upstream names a broker may set that rocketrio's format does not define (yet): timer wheel
_UPSTREAM_ONLY = frozenset(
    {
        "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES",
        "TIMER_DEL_UNIQKEY", "__STARTDELIVERTIME", "INNER_NUM", "INNER_BASE",
    }
)  # fmt: skip
SYSTEM_KEYS = _all_system_keys()
